"""Show commands over the configuration: running, tport, users (manual, "Update and
Show the Configuration", "show tport", "show user").

Decisions where the manual is vague:
- show running prints the loaded configuration tree as YAML, one row per line, without
  private keys (`pri`) or the secrets that seal them (`salt_data`, `pass_data`, which
  the manual says to remove to protect the keys): console output is read over telnet
  and the web. `show running
  transport|service|user|group|parameter X` prints that section, X being a name or
  `*` for all of it. `show startup` (and the same sub-forms) is the configuration the
  node was started from, read again from its files: `save` changes it, console changes
  not saved do not.
- show tport: `state` is `running` when the node has a transport of that name (or, for
  a `type: name` record, when the daemon's `show ports` has a name service of that
  device; for telnet and web, a listener of that name), else `-`.
- show users: the uid is filled for the users that are this node (0) or a live peer.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from raims_node.config.errors import ConfigError
from raims_node.config.records import TransportConfig
from raims_node.config.tree import ConfigTree, dump_yaml, load
from raims_node.console.context import ConsoleContext, Handler
from raims_node.console.errors import BadArguments
from raims_node.console.names import ALL_USERS, Names
from raims_node.console.result import CommandResult, Row

NOT_RUNNING = "-"
RUNNING = "running"


def _config(ctx: ConsoleContext) -> ConfigTree:
    if not isinstance(ctx.config, ConfigTree):
        raise BadArguments("no configuration is loaded")
    return ctx.config


def _startup(ctx: ConsoleContext) -> ConfigTree:
    """The startup configuration: the files the node was started from, read again (what
    `save` wrote since is in it, console changes not saved are not); the running tree
    when they cannot be read (stdin, a path relative to a directory left by `-b`)."""
    running = _config(ctx)
    source = Path(running.sources[0]) if running.sources else None
    if source is not None and source.is_file():
        try:
            return load(source)
        except ConfigError:
            pass
    return running


SECRET_PARAMETERS = ("salt_data", "pass_data")  # the secrets every key is sealed with


def _public(tree: ConfigTree) -> dict[str, Any]:
    data = tree.to_dict()
    params = data.get("parameters")
    if isinstance(params, dict) and any(k in params for k in SECRET_PARAMETERS):
        data["parameters"] = {k: v for k, v in params.items() if k not in SECRET_PARAMETERS}
    if tree.services:
        data["services"] = [s.to_dict(include_pri=False) for s in tree.services]
    if tree.users:
        data["users"] = [u.to_dict(include_pri=False) for u in tree.users]
    return data


def _wanted(name: str, args: list[str]) -> bool:
    return not args or args[0] in (ALL_USERS, name)


def show_running(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    return CommandResult.lines("running", dump_yaml(_public(_config(ctx))))


def show_startup(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    if not isinstance(ctx.config, ConfigTree):
        return CommandResult.lines("startup", "")  # (a node without a configuration, tests)
    return CommandResult.lines("startup", dump_yaml(_public(_startup(ctx))))


def _section(key: str, field: str, tree: Callable[[ConsoleContext], ConfigTree] = _config,
             column: str = "running") -> Handler:
    def handler(ctx: ConsoleContext, args: list[str]) -> CommandResult:
        data = _public(tree(ctx))
        if key == "parameters":
            chosen: Any = {k: v for k, v in data.get(key, {}).items() if _wanted(k, args)}
        else:
            chosen = [rec for rec in data.get(key, []) if _wanted(str(rec[field]), args)]
        if not chosen and args:
            raise BadArguments(f"no {field} {args[0]!r} in the configuration")
        return CommandResult.lines(column, dump_yaml({key: chosen}))
    return handler


show_running_transport = _section("transports", "tport")
show_running_service = _section("services", "svc")
show_running_user = _section("users", "user")
show_running_group = _section("groups", "group")
show_running_parameter = _section("parameters", "parameter")
show_startup_transport = _section("transports", "tport", _startup, "startup")
show_startup_service = _section("services", "svc", _startup, "startup")
show_startup_user = _section("users", "user", _startup, "startup")
show_startup_group = _section("groups", "group", _startup, "startup")
show_startup_parameter = _section("parameters", "parameter", _startup, "startup")


def show_tport(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    cols = ["tport", "type", "state", "listen", "connect", "device"]
    active = {t.name: t for t in ctx.node.tports}
    rows: list[Row] = []
    # running: what the daemon's `show ports` lists (a transport shut down is gone from
    # it, not from the node's tports); the simulator has no ports, only tports
    in_ports = {str(r.get("tport")).rpartition(".")[0] or str(r.get("tport")) for r in ctx.ports()}
    running = in_ports or set(active)
    active = {k: t for k, t in active.items() if k in running}
    if isinstance(ctx.config, ConfigTree):
        rows = [{"tport": t.tport, "type": t.type, "state": RUNNING if t.tport in running else NOT_RUNNING,
                 "listen": _urls(t, t.listen), "connect": _urls(t, t.connect), "device": t.device}
                for t in ctx.config.transports]
    known = {r["tport"] for r in rows}
    rows += [dict.fromkeys(cols) | {"tport": t.name, "type": t.type, "state": RUNNING}
             for t in active.values() if t.name not in known]
    rows = [r for r in rows if _wanted(str(r["tport"]), args)]
    return CommandResult(cols, rows)


def _urls(t: TransportConfig, hosts: list[str]) -> list[str] | None:
    """The manual's `type://host:port` of each listen or connect host (as configured)."""
    return [f"{t.type}://{h}" + (f":{t.port}" if t.port and ":" not in h else "") for h in hosts] or None


def show_users(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    node = ctx.node
    names = Names(node)
    uids: dict[str, int | None] = {}
    for b in reversed(names.users()):  # the lowest uid of a repeated name wins
        uids[names.name(b)] = names.uid(b)
    cols = ["uid", "user", "svc", "create", "expires"]
    if isinstance(ctx.config, ConfigTree):
        rows: list[Row] = [{"uid": uids.get(u.user), "user": u.user, "svc": u.svc, "create": u.create,
                            "expires": u.expires} for u in ctx.config.users]
    else:
        rows = [{"uid": uids.get(names.name(b)), "user": names.name(b), "svc": node.service, "create": None,
                 "expires": None} for b in names.users()]
    rows = [r for r in rows if _wanted(str(r["user"]), args)]
    return CommandResult(cols, rows)
