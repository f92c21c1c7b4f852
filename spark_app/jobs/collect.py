"""The snapshot: every node's admin JSON read on its host and turned into lake rows.

Issue "The main job", item 6. A barrier stage with a task per host asks each node on its
machine for the show commands of SOURCES (manual "The Show Commands"; the rows of
raims_node.console, served by the web transport), turns them into rows of the lake's
tables (data/schemas/*.json), each with `snapshot_id`, `collected_at` (when the task read
the node) and `node`, and writes them itself as data files of the lake's tables
(`stage_reads`, spark_app.parts); the driver receives the files' metadata and commits
them, one Delta commit per table (`Lake.commit_parts`). In a rollout the reads happen in
the traffic check's tasks (jobs/traffic.py), which stage them the same way.

Reconciling the console's rows with the schemas (decisions):
- Columns keep the console's names. Durations (peers lat/max/avg, routes lat, ports
  lat/idle) are integer nanoseconds in the rows and seconds (double) in the lake; time
  stamps stay integer nanoseconds, which the schema converts (schemas.py).
- An empty cell ("" or null) is null.
- links: `show adjacency` rows of users without links (no tport) are dropped; cost2..cost4
  are the JSON-only columns of the other paths' costs.
- routes, forward: `adj` names the link's neighbour (a mesh's links share one label).
- routes: a peer without a route (no tport) has no row.
- subs: the console's `type` (`sub`, or the pattern syntax) becomes `pattern` and
  `syntax`; its `count` of local subscriptions has no column.
- names: the console's `node` (the publishing node) becomes `publisher`, since `node` is
  the observer in every table.
- blooms: `prefix` and `detail` bit masks are stored as the console prints them
  (`format_mask`: "0x04000108", "0"); the filter bytes and parameters are taken when a
  row carries them (`filter` as base64, `size_bits`, `num_hashes`, `seed`) and are null
  otherwise: `show blooms` does not print them. Its own-filter row (dest `ipc`) has no
  transport; `show blooms copies` adds a row per peer (dest the peer, no transport) with
  this node's copy of that peer's filter.
- Observer sampling (setting `observers`, for large networks): the views of the whole
  network (peers, links, routes, forward, the peers' filter copies) grow with the square
  of the nodes per table and the cube in all, so only `observers` nodes (`observers_of`:
  the lowest CRC-32 of their names) report them; every node reports its own
  subscriptions (`show subs <node>`) and filters. The audits take the observers as they
  come: membership by majority of observers, tree coverage only when every node reported.
- A row without a column the console promises is a CollectError naming the node, the
  command and the column: console and schema drifting apart must not pass silently.
"""

from __future__ import annotations

import base64
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from pyspark import BarrierTaskContext

from spark_app.jobs import admin
from spark_app.jobs.deploy import NodeRecord
from spark_app.jobs.errors import CollectError
from spark_app.jobs.hosts import TaskHost, run_per_host
from spark_app.parts import Part, Target, write_parts

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NS_PER_S: Final = 1_000_000_000

# table -> (console command, the console columns it takes)
SOURCES: Final[Mapping[str, tuple[str, tuple[str, ...]]]] = {
    "peers": ("show peers", ("user", "bridge", "sub", "seq", "link", "lat", "max", "avg", "time", "tport", "cost")),
    "links": ("show adjacency", ("user", "adj", "tport", "type", "cost", "cost2", "cost3", "cost4")),
    "routes": ("show routes", ("user", "tport", "adj", "state", "cost", "path", "lat", "fd", "route")),
    "subs": ("show subs", ("user", "subject", "type")),
    "blooms": ("show blooms", ("fd", "dest", "tport", "bloom", "prefix", "detail", "subs", "total")),
    "ports": ("show ports", ("tport", "type", "cost", "fd", "bs", "br", "ms", "mr", "lat", "idle", "fl", "address")),
    "counters": ("show counters", ("user", "start", "hb_seqno", "hb_time", "snd_ibx", "rcv_ibx", "ping_snd",
                                   "ping_stime", "pong_rcv", "ping_rcv")),
    "loss": ("show loss", ("user", "repeat", "rep_time", "not_sub", "not_time", "msg_loss", "loss_time",
                           "ibx_loss", "ibx_time")),
    "events": ("show events", ("stamp", "tport", "user", "peer", "event", "data")),
    "forward": ("show forward", ("path", "source", "tport", "adj", "cost")),
    "names": ("show names", ("type", "lower", "upper", "scope", "node", "port")),
}
DURATIONS: Final[Mapping[str, frozenset[str]]] = {
    "peers": frozenset({"lat", "max", "avg"}),
    "routes": frozenset({"lat"}),
    "ports": frozenset({"lat", "idle"}),
}
NEEDS_TPORT: Final = frozenset({"links", "routes"})
SUBJECT_TYPE: Final = "sub"
BLOOM_EXTRAS: Final = ("size_bits", "num_hashes", "seed")


def _cell(value: Any, duration: bool) -> Any:
    if value is None or value == "":
        return None
    if duration:
        return value / NS_PER_S
    return value


def _fixup(table: str, row: dict[str, Any], raw: Mapping[str, Any]) -> dict[str, Any]:
    if table == "subs":
        kind = row.pop("type")
        row.update(pattern=kind != SUBJECT_TYPE, syntax=None if kind == SUBJECT_TYPE else kind)
    elif table == "names":
        row["publisher"] = row.pop("node")  # `node` is the observer in every table
    elif table == "blooms":
        from raims_node.console.render import format_mask

        row["prefix"] = None if row["prefix"] is None else format_mask(int(row["prefix"]))
        row["detail"] = None if row["detail"] is None else format_mask(int(row["detail"]))
        row["filter"] = base64.b64decode(raw["filter"]) if raw.get("filter") else None
        row.update({k: raw.get(k) for k in BLOOM_EXTRAS})
    return row


def table_rows(table: str, rows: Sequence[Mapping[str, Any]], head: Mapping[str, Any]) -> list[dict[str, Any]]:
    """`rows` of the table's show command as rows of `table`, each starting with `head`
    (snapshot_id, collected_at, node)."""
    command, columns = SOURCES[table]
    durations = DURATIONS.get(table, frozenset())
    out = []
    for raw in rows:
        missing = [c for c in columns if c not in raw]
        if missing:
            raise CollectError(f"node {head.get('node')}: `{command}` rows lack column(s) {missing} "
                               f"of table {table} (row {dict(raw)!r:.200})")
        if table in NEEDS_TPORT and raw["tport"] is None:
            continue
        row = {c: _cell(raw[c], c in durations) for c in columns}
        out.append({**head, **_fixup(table, row, raw)})
    return out


# tables that take a second command's rows too: the peers' filter copies, for the bloom audit
MORE: Final[Mapping[str, str]] = {"blooms": "show blooms copies"}
PER_PATH: Final = frozenset({"forward"})  # read once per multicast path, rows tagged with it
NUM_PATHS: Final = 4


# What a node that is not a sampled observer reads: its own rows only (its subscriptions,
# its filter and links' filters), not its view of every peer
VIEW_TABLES: Final = frozenset({"peers", "links", "routes", "forward"})


def observers_of(nodes: Sequence[str], count: int | None) -> frozenset[str]:
    """The nodes that report the network views: all (count None or >= the nodes), else
    the `count` with the lowest CRC-32 of their names (the same sample in every process
    and run; the audits' `labels.chunk_of` hash)."""
    if count is None or count >= len(nodes):
        return frozenset(nodes)
    return frozenset(sorted(nodes, key=lambda n: (zlib.crc32(n.encode()), n))[:max(count, 1)])


def read_node(node: NodeRecord, observer: bool = True) -> dict[str, tuple[datetime, list[dict[str, Any]]]]:
    """Every source's rows from one node, with when they were read (on its host); a node
    that is not an observer reads its own subscriptions and filters only."""
    out: dict[str, tuple[datetime, list[dict[str, Any]]]] = {}
    for table, (command, _) in SOURCES.items():
        if not observer and table in VIEW_TABLES:
            continue
        if not observer and table == "subs":
            out[table] = (datetime.now(UTC), admin.show(node.admin, f"{command} {node.node}"))
            continue
        if table in PER_PATH:
            rows = [{**r, "path": p} for p in range(NUM_PATHS) for r in admin.show(node.admin, f"{command} {p}")]
        else:
            rows = admin.show(node.admin, command)
        if table in MORE and observer:
            rows = [*rows, *admin.show(node.admin, MORE[table])]
        out[table] = (datetime.now(UTC), rows)
    return out


def tables_of(read: Mapping[str, Mapping[str, tuple[datetime, list[dict[str, Any]]]]],
              snapshot_id: str) -> dict[str, list[dict[str, Any]]]:
    """The rows of every table from what `read_node` read (node -> its sources)."""
    tables: dict[str, list[dict[str, Any]]] = {t: [] for t in SOURCES}
    for node, sources in sorted(read.items()):
        for table, (at, rows) in sources.items():
            tables[table] += table_rows(table, rows, {"snapshot_id": snapshot_id, "collected_at": at, "node": node})
    return tables


def stage_reads(read: Mapping[str, Mapping[str, tuple[datetime, list[dict[str, Any]]]]], target: Target,
                tag: str) -> dict[str, Any]:
    """On the executor: the rows of the nodes read here written as lake parts
    (spark_app.parts); what goes back to the driver is their metadata and the nodes."""
    staged = {t: write_parts(target, t, rows, tag) for t, rows in tables_of(read, target.snapshot_id).items()}
    return {"parts": staged, "nodes": sorted(read)}


def task_tag(host: TaskHost, ctx: BarrierTaskContext) -> str:
    """Names a task attempt's files: its host slot and attempt (a retry writes new ones)."""
    return f"{host.partition}-{ctx.attemptNumber()}"


@dataclass(frozen=True)
class Snapshot:
    """A snapshot written by the tasks: per table, its parts (file metadata only)."""

    snapshot_id: str
    parts: Mapping[str, list[Part]]
    nodes: tuple[str, ...]  # the nodes read

    def rows(self, table: str) -> int:
        return sum(p.rows for p in self.parts.get(table, ()))


def staged_snapshot(results: Sequence[Mapping[str, Any]], nodes: Sequence[NodeRecord], snapshot_id: str,
                    errors: Sequence[str] = ()) -> Snapshot:
    """The tasks' staged parts as one Snapshot; CollectError naming the nodes not read."""
    read = {n for r in results for n in r.get("nodes", ())}
    errors = [*errors]
    errors += [f"node {n.node}: no task ran on its host {n.machine}" for n in nodes if n.node not in read and not errors]
    if errors:
        raise CollectError("collect failed:\n  " + "\n  ".join(errors))
    parts: dict[str, list[Part]] = {t: [] for t in SOURCES}
    for r in results:
        for table, got in r.get("parts", {}).items():
            parts[table] += got
    return Snapshot(snapshot_id, parts, tuple(sorted(read)))


def collect(spark: SparkSession, nodes: Sequence[NodeRecord], hosts: int, target: Target,
            observers: int | None = None) -> Snapshot:
    """Read every node on its host and write its rows there as lake parts (nothing but
    file metadata reaches the driver); CollectError naming the nodes that could not be
    read. `observers`: how many nodes report the network views (`observers_of`; None: all)."""
    sample = observers_of([n.node for n in nodes], observers)

    def task(host: TaskHost, ctx: BarrierTaskContext, _: list[Any]) -> Iterator[dict[str, Any]]:
        read: dict[str, Any] = {}
        errors = []
        for n in host.share([n for n in nodes if n.machine == host.machine]):
            try:
                read[n.node] = read_node(n, n.node in sample)
            except CollectError as exc:
                errors.append(f"node {n.node} on host {host.machine}: {exc}")
        yield {**stage_reads(read, target, task_tag(host, ctx)), "errors": errors}

    results = run_per_host(spark, [[] for _ in range(hosts)], task)
    return staged_snapshot(results, nodes, target.snapshot_id, [e for r in results for e in r["errors"]])
