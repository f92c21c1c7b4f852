"""Show commands over this process rather than the network: ports, events, logs
(manual, "The Show Commands").

Decision where the manual is vague: `show ports T` keeps the rows of transport T, given
by name (`link_ab`, every connection of it) or by label (`link_ab.0`).
"""

from __future__ import annotations

from raims_node.console.context import ConsoleContext
from raims_node.console.result import CommandResult, Kind, Row, as_cell

PORT_COLUMNS = ["tport", "type", "cost", "fd", "bs", "br", "ms", "mr", "lat", "idle", "fl", "address"]
# for JSON readers only: a name service's malformed and other-service datagrams (among mr)
# and the nodes it heard lately; the connections (links, clients) of a transport (fd is
# its endpoint's, transports/fds.py port_fds)
PORT_HIDDEN = ("bad", "ignored", "heard", "conns")


def show_ports(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    cols = PORT_COLUMNS + list(PORT_HIDDEN)
    rows: list[Row] = [{c: as_cell(r.get(c)) for c in cols} for r in ctx.ports()]
    if args:
        t = args[0]
        rows = [r for r in rows if str(r["tport"]) == t or str(r["tport"]).startswith(t + ".")]
    return CommandResult(cols, rows, kinds={"lat": Kind.DURATION, "idle": Kind.DURATION}, hidden=PORT_HIDDEN)


def show_events(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    rows: list[Row] = [{k: as_cell(v) for k, v in r.items()} for r in ctx.node.events.rows()]
    return CommandResult(["stamp", "tport", "user", "peer", "event", "data"], rows, kinds={"stamp": Kind.TIME})


def show_logs(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    return CommandResult.lines("log", "\n".join(ctx.log_lines()))
