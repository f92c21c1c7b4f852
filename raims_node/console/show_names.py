"""Show commands of the service name table (issue 21, seed 002 2.2 and 2.3): `show names
[T]` lists the publications this node sees (its own, every scope, and the cluster/zone
ones replicated from the other nodes), of name type T when given; `show topology` the
topology subscriptions and inquiries of this node's clients. Empty when the console has
no name service (the simulator, tests).
"""

from __future__ import annotations

from raims_node.console.context import ConsoleContext
from raims_node.console.errors import BadArguments
from raims_node.console.result import CommandResult, Row, as_cell

NAME_COLUMNS = ["type", "lower", "upper", "scope", "node", "port"]
TOPOLOGY_COLUMNS = ["id", "kind", "type", "lower", "upper", "timeout_ms", "events", "target"]


def show_names(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    svc = ctx.names
    rows: list[Row] = [{k: as_cell(v) for k, v in r.items()} for r in svc.name_rows()] if svc is not None else []
    if args:
        try:
            want = int(args[0])
        except ValueError:
            raise BadArguments(f"name type {args[0]!r} is not an integer") from None
        rows = [r for r in rows if r["type"] == want]
    return CommandResult(NAME_COLUMNS, rows)


def show_topology(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    svc = ctx.names
    rows: list[Row] = [{k: as_cell(v) for k, v in r.items()} for r in svc.topology_rows()] if svc is not None else []
    return CommandResult(TOPOLOGY_COLUMNS, rows)
