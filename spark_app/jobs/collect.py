"""The snapshot: every node's admin JSON read on its host and turned into lake rows.

Issue "The main job", item 6. A barrier stage with a task per host asks each node on its
machine for the show commands of SOURCES (manual "The Show Commands"; the rows of
raims_node.console, served by the web transport) and returns them; the driver turns them
into rows of the lake's tables (data/schemas/*.json), each with `snapshot_id`,
`collected_at` (when the task read the node) and `node`.

Reconciling the console's rows with the schemas (decisions):
- Columns keep the console's names. Durations (peers lat/max/avg, routes lat, ports
  lat/idle) are integer nanoseconds in the rows and seconds (double) in the lake; time
  stamps stay integer nanoseconds, which the schema converts (schemas.py).
- An empty cell ("" or null) is null.
- links: `show adjacency` rows of users without links (no tport) are dropped; the
  console gives path 0's cost only, so cost2..cost4 are null.
- routes: a peer without a route (no tport) has no row.
- subs: the console's `type` (`sub`, or the pattern syntax) becomes `pattern` and
  `syntax`; its `count` of local subscriptions has no column.
- names: the console's `node` (the publishing node) becomes `publisher`, since `node` is
  the observer in every table.
- blooms: `prefix` and `detail` bit masks are stored as the console prints them
  (`format_mask`: "0x04000108", "0"); the filter bytes and parameters are taken when a
  row carries them (`filter` as base64, `size_bits`, `num_hashes`, `seed`) and are null
  otherwise: `show blooms` does not print them. Its own-filter row (dest `ipc`) has no
  transport.
- A row without a column the console promises is a CollectError naming the node, the
  command and the column: console and schema drifting apart must not pass silently.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from pyspark import BarrierTaskContext

from spark_app.jobs import admin
from spark_app.jobs.deploy import NodeRecord
from spark_app.jobs.errors import CollectError
from spark_app.jobs.hosts import TaskHost, run_per_host

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NS_PER_S: Final = 1_000_000_000

# table -> (console command, the console columns it takes)
SOURCES: Final[Mapping[str, tuple[str, tuple[str, ...]]]] = {
    "peers": ("show peers", ("user", "bridge", "sub", "seq", "link", "lat", "max", "avg", "time", "tport", "cost")),
    "links": ("show adjacency", ("user", "adj", "tport", "type", "cost")),
    "routes": ("show routes", ("user", "tport", "state", "cost", "path", "lat", "fd", "route")),
    "subs": ("show subs", ("user", "subject", "type")),
    "blooms": ("show blooms", ("fd", "dest", "tport", "bloom", "prefix", "detail", "subs", "total")),
    "ports": ("show ports", ("tport", "type", "cost", "fd", "bs", "br", "ms", "mr", "lat", "idle", "fl", "address")),
    "counters": ("show counters", ("user", "start", "hb_seqno", "hb_time", "snd_ibx", "rcv_ibx", "ping_snd",
                                   "ping_stime", "pong_rcv", "ping_rcv")),
    "loss": ("show loss", ("user", "repeat", "rep_time", "not_sub", "not_time", "msg_loss", "loss_time",
                           "ibx_loss", "ibx_time")),
    "events": ("show events", ("stamp", "tport", "user", "peer", "event", "data")),
    "forward": ("show forward", ("path", "source", "tport", "cost")),
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
    if table == "links":
        row.update(cost2=None, cost3=None, cost4=None)
    elif table == "subs":
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


PER_PATH: Final = frozenset({"forward"})  # read once per multicast path, rows tagged with it
NUM_PATHS: Final = 4


def read_node(node: NodeRecord) -> dict[str, tuple[datetime, list[dict[str, Any]]]]:
    """Every source's rows from one node, with when they were read (on its host)."""
    out: dict[str, tuple[datetime, list[dict[str, Any]]]] = {}
    for table, (command, _) in SOURCES.items():
        if table in PER_PATH:
            rows = [{**r, "path": p} for p in range(NUM_PATHS) for r in admin.show(node.admin, f"{command} {p}")]
        else:
            rows = admin.show(node.admin, command)
        out[table] = (datetime.now(UTC), rows)
    return out


@dataclass(frozen=True)
class Snapshot:
    snapshot_id: str
    tables: Mapping[str, list[dict[str, Any]]]
    nodes: tuple[str, ...]  # the nodes read


def collect(spark: SparkSession, nodes: Sequence[NodeRecord], hosts: int, snapshot_id: str) -> Snapshot:
    """Read every node on its host and map its rows onto the tables on the driver (the
    tasks stay light); CollectError naming the nodes that could not be read."""

    def task(host: TaskHost, ctx: BarrierTaskContext, _: list[Any]) -> Iterator[dict[str, Any]]:
        got: dict[str, Any] = {"read": {}, "errors": []}
        for n in host.share([n for n in nodes if n.machine == host.machine]):
            try:
                got["read"][n.node] = read_node(n)
            except CollectError as exc:
                got["errors"].append(f"node {n.node} on host {host.machine}: {exc}")
        yield got

    results = run_per_host(spark, [[] for _ in range(hosts)], task)
    read = {node: sources for r in results for node, sources in r["read"].items()}
    errors = [e for r in results for e in r["errors"]]
    errors += [f"node {n.node}: no task ran on its host {n.machine}" for n in nodes if n.node not in read and not errors]
    if errors:
        raise CollectError("collect failed:\n  " + "\n  ".join(errors))
    tables: dict[str, list[dict[str, Any]]] = {t: [] for t in SOURCES}
    for node, sources in sorted(read.items()):
        for table, (at, rows) in sources.items():
            tables[table] += table_rows(table, rows, {"snapshot_id": snapshot_id, "collected_at": at, "node": node})
    return Snapshot(snapshot_id, tables, tuple(sorted(read)))
