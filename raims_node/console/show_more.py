"""The show commands over transports, buffers and caches (manual, "The Show Commands":
show cost, status, urls, reachable, fds, buffers, windows, cache, poll, startup, and the
RV tables hosts, rvsub; rpcs).

Decisions where the manual is vague, or raims has no such state:
- `show cost [T]`: one row per transport of this node with its four path costs, and the
  fd, fl and address of its port row (show ports).
- `show status [T]`: the port rows' tport, type, fd and fl, and a status: the address
  when all is well; a link transport none of whose links is up and whose last connect
  failed shows that failure as the system reported it (errno name and address,
  `ECONNREFUSED 127.0.0.1:5000`); a configured transport not running, "not running".
- `show urls`, `show fds`, `show buffers`: console/show_fds.py.
- `show reachable`: per peer, each transport that is the first hop of one of its four
  paths, with those paths ("0,1,2,3") and the transport's fd, as the manual's columns;
  a peer no path reaches has one empty row.
- `show windows`: the manual's rows and columns for the subscribe and publish sequence
  windows and their old generations (sizes are the entries' estimate the rotation uses),
  and the peers' bloom filters (count, bytes encoded); no inbox, route or rv rows (show
  cache has the route table's; raims keeps no inbox cache or rv table).
- `show cache`: one row per router cache (not per transport: raims has one route cache
  per node), the manual's hit and size columns where the cache counts them, and its
  entries now.
- `show poll`: one row, the event loop's timer, read, route and write times
  (transports/poll_stats.py): average ns in the JSON, printed with their unit.
- `show hosts` / `show rvsub`: one row per RV client session (its service, session,
  user, daemon port, start, the service's clients, bytes and messages each way,
  inbound loss; `odl` is 0: publishers lose nothing before the network) and per
  subject it listens to (`p` marks a wildcard), from the `rv` transports' port rows.
- `show rpcs`: the manual's columns (type, arg, recv, count): a console session's
  subscriptions (sub, psub, gsub: the messages received; console/session.py), then the
  node's sync and adjacency requests outstanding (`sync_req`/`adj_req`, the peer asked
  about, 1 reply expected).
- `show startup [section [N]]`: the startup section of the configuration (the transports
  started at launch), and `show startup transport|service|user|group|parameter` as the
  running ones (raims keeps the loaded configuration as the startup one).
"""

from __future__ import annotations

from raims_node.bloom import BloomFilter
from raims_node.config.tree import ConfigTree
from raims_node.console.context import ConsoleContext
from raims_node.console.names import Names
from raims_node.console.result import CommandResult, Kind, Row, as_cell
from raims_node.linkstate.records import NUM_PATHS
from raims_node.router.forward import cache_sizes as forward_cache_sizes
from raims_node.transports.poll_stats import POLL_COLUMNS

RPC_COLUMNS = ["type", "arg", "recv", "count"]
CACHE_COLUMNS = ["cache", "hit_pct", "hit", "miss", "max_cnt", "max_size", "entries"]
WINDOW_COLUMNS = ["tab", "count", "size", "win_size", "max_size", "rotate_time", "interval"]


def _match(t: object, args: list[str]) -> bool:
    return not args or str(t) == args[0] or str(t).startswith(args[0] + ".")


def show_cost(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    ports = {str(r.get("tport")): r for r in ctx.ports()}
    rows: list[Row] = []
    for t in ctx.node.tports:
        label = f"{t.name}.{t.tport_id}"
        if _match(label, args):
            port = ports.get(label, {})
            rows.append({"tport": label, "type": t.type, "cost": t.cost[0], "cost2": t.cost[1], "cost3": t.cost[2],
                         "cost4": t.cost[3], **{c: as_cell(port.get(c)) for c in ("fd", "fl", "address")}})
    return CommandResult(["tport", "type", "cost", "cost2", "cost3", "cost4", "fd", "fl", "address"], rows)


def show_status(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    cols = ["tport", "type", "fd", "fl", "status"]
    rows: list[Row] = [{"tport": as_cell(r.get("tport")), "type": as_cell(r.get("type")), "fd": as_cell(r.get("fd")),
                        "fl": as_cell(r.get("fl")), "status": as_cell(r.get("status") or r.get("address"))}
                       for r in ctx.ports()]
    running = {str(r["tport"]).rpartition(".")[0] or str(r["tport"]) for r in rows}
    if isinstance(ctx.config, ConfigTree):
        rows += [{"tport": t.tport, "type": t.type, "fd": None, "fl": None, "status": "not running"}
                 for t in ctx.config.transports if t.tport not in running]
    return CommandResult(cols, [r for r in rows if _match(r["tport"], args)])


PGM_COLUMNS = ["tport", "peers", "odata", "spm", "naks_sent", "naks_recv", "ncf", "rdata_sent", "rdata", "lost",
               "nak_out_of_window", "dup", "bad"]


def show_pgm(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    """`show pgm [T]`: the counters of each PGM transport (transports/pgm_core.py);
    `lost` counts the unrecoverable packets."""
    rows: list[Row] = []
    for r in ctx.ports():
        counts = r.get("pgm")
        if isinstance(counts, dict) and _match(str(r.get("tport", "")), args):
            urls = r.get("urls")
            rows.append({"tport": as_cell(r.get("tport")), "peers": len(urls) if isinstance(urls, dict) else 0,
                         **{c: as_cell(counts.get(c)) for c in PGM_COLUMNS[2:]}})
    return CommandResult(PGM_COLUMNS, rows)


def show_reachable(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    node = ctx.node
    names = Names(node)
    tports = {t.tport_id: f"{t.name}.{t.tport_id}" for t in node.tports}
    fds = {str(r.get("tport")): r.get("fd") for r in ctx.ports()}
    rows: list[Row] = []
    for b in node.peers:
        paths: dict[str, list[int]] = {}  # tport -> the paths whose first hop it is
        for path in range(NUM_PATHS):
            hops = node.routes.next_hops(b, path)
            if hops and hops[0].tport_id in tports:
                paths.setdefault(tports[hops[0].tport_id], []).append(path)
        if not paths:
            rows.append({"user": names.user(b), "path": None, "fd": None, "tport": None})
        for tport, on in sorted(paths.items()):
            rows.append({"user": names.user(b), "path": ",".join(map(str, on)), "fd": as_cell(fds.get(tport)),
                         "tport": tport})
    return CommandResult(["user", "path", "fd", "tport"], rows)


def show_windows(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    node = ctx.node
    rows: list[Row] = []
    for tab, window in (("sub", node.sub_window), ("pub", node.pub_window)):
        w = window.stats()
        rows.append({"tab": tab, "count": w.count, "size": w.size, "win_size": w.win_size, "max_size": w.max_size,
                     "rotate_time": w.rotate_ns, "interval": w.interval_ns // 1_000_000_000})
        rows.append({"tab": f"{tab}_old", "count": w.old_count, "size": w.old_size, "win_size": None,
                     "max_size": None, "rotate_time": w.old_rotate_ns or None, "interval": None})
    filters = [p.bloom for p in node.peers.values() if p.bloom is not None]
    rows.append(dict.fromkeys(WINDOW_COLUMNS) | {
        "tab": "bloom", "count": len(filters),
        "size": sum(len(f.to_bytes()) for f in filters if isinstance(f, BloomFilter))})
    return CommandResult(WINDOW_COLUMNS, rows, kinds={"rotate_time": Kind.TIME})


def show_cache(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    """The router's caches: the manual's hit_pct, hit, miss, max_cnt and max_size where
    the cache counts them (the forwarding decisions by source, path and subject: the
    route cache the manual describes), and the entries each holds now (route trees,
    next hops and forwarding sets of the link-state database's version, the subjects
    published here). raims keeps one route cache per node, not one per transport, so the
    first column names the cache."""
    node = ctx.node
    sizes = {**{k: (n, None) for k, n in node.routes.cache_sizes().items()}, **forward_cache_sizes(node.forward)}
    rows: list[Row] = []
    for name, (n, stats) in sizes.items():
        row: Row = dict.fromkeys(CACHE_COLUMNS) | {"cache": name, "entries": n}
        if stats is not None:
            row |= {"hit_pct": stats.hit_pct, "hit": stats.hits, "miss": stats.misses, "max_cnt": stats.max_cnt,
                    "max_size": stats.max_size}
        rows.append(row)
    return CommandResult(CACHE_COLUMNS, rows)


def show_poll(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    """The event loop's timers, reads, routing and writes (transports/poll_stats.py)."""
    rows: list[Row] = [{k: v for k, v in ctx.poll.row().items()}] if ctx.poll is not None else []
    return CommandResult(POLL_COLUMNS, rows, kinds={c: Kind.DURATION for c in POLL_COLUMNS if c.endswith("_lat")})


HOST_COLUMNS = ["svc", "session", "user", "port", "start", "cl", "bs", "br", "ms", "mr", "idl", "odl"]
RVSUB_COLUMNS = ["svc", "session", "user", "p", "subject"]


def _rv_rows(ctx: ConsoleContext, key: str, cols: list[str]) -> list[Row]:
    """The RV transports' session rows (`rv_hosts` / `rv_subs` of their port rows)."""
    rows: list[Row] = []
    for r in ctx.ports():
        found = r.get(key)
        if isinstance(found, list):
            rows += [{c: as_cell(h.get(c)) for c in cols} for h in found if isinstance(h, dict)]
    return rows


def show_hosts(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    return CommandResult(HOST_COLUMNS, _rv_rows(ctx, "rv_hosts", HOST_COLUMNS), kinds={"start": Kind.TIME})


def show_rvsub(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    return CommandResult(RVSUB_COLUMNS, _rv_rows(ctx, "rv_subs", RVSUB_COLUMNS))


def show_rpcs(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    node = ctx.node
    names = Names(node)
    rows: list[Row] = [{"type": f"{p.kind}_req", "arg": names.user(p.about), "recv": 0, "count": 1}
                       for p in node.state.sync.pending.values()]
    return CommandResult(RPC_COLUMNS, rows)
