"""The console's command table and `execute` (manual, "Console", "Help Screen"; the C++
keeps the same in its `console_cmd[]` / `show_cmd[]` tables).

The table holds every command of the manual's help screen, so that prefix matching and
`help` behave as the manual describes; the commands that act on the network (ping,
sub, pub, connect, configure, ...) need the daemon and have no handler here: running
one answers that it is not available in this console.
"""

from __future__ import annotations

from raims_node.console import show_config as cfg
from raims_node.console import show_fds
from raims_node.console import show_local as loc
from raims_node.console import show_more as more
from raims_node.console import show_names as nms
from raims_node.console import show_peers as prs
from raims_node.console import show_routes as rts
from raims_node.console import show_subs as sbs
from raims_node.console.context import ConsoleContext, Handler
from raims_node.console.errors import ConsoleError, NotAvailable
from raims_node.console.result import CommandResult, Row
from raims_node.console.table import Command, resolve
from raims_node.msglog import commands as msglog
from raims_node.msglog.errors import MsgLogError


def _help(ctx: ConsoleContext, args: list[str]) -> CommandResult:
    rows: list[Row] = [{"command": c.usage, "description": c.description} for c in COMMANDS]
    return CommandResult(["command", "description"], rows)


def _c(words: str, args: str, description: str, handler: Handler | None = None) -> Command:
    return Command(tuple(words.split()), args, description, handler)


def _message(cmd: msglog.ConsoleCommand) -> Command:
    """A NodeBrain `message.<verb>` command (msglog/commands.py) on the console: its
    words as typed, its lines of text as rows, its error as the result's error."""

    def handler(ctx: ConsoleContext, args: list[str]) -> CommandResult:
        try:
            return CommandResult.lines("message", "\n".join(cmd.run(" ".join(args).split())))
        except MsgLogError as exc:
            return CommandResult.failed(str(exc))

    return Command((cmd.words,), "[C]", f"{cmd.description}: {cmd.words} {cmd.args}", handler)


COMMANDS: tuple[Command, ...] = (
    _c("ping", "[U]", "Ping peers and display latency of return"),
    _c("tping", "[U]", "Ping peers with route trace flag"),
    _c("mping", "[P]", "Multicast ping all peers using path P"),
    _c("remote", "U C", "Run command C remotely on peer U"),
    _c("connect", "T", "Start tport connect"),
    _c("listen", "T", "Start tport listener"),
    _c("shutdown", "T", "Shutdown tport"),
    _c("network", "S N", "Configure service and join network"),
    _c("configure transport", "T [C]", "Configure tport T: fields K V ..., or one per line until exit"),
    _c("configure parameter", "P V", "Configure parameter P = V"),
    _c("save", "", "Save current config as startup"),
    _c("show subs", "[U] [W]", "Show subscriptions of peers", sbs.show_subs),
    _c("show seqno", "[W]", "Show subject seqno values for pub and sub", sbs.show_seqno),
    _c("show adjacency", "", "Show the adjacency links", rts.show_adjacency),
    _c("show peers", "[O]", "Show active peers", prs.show_peers),  # O: zombie, nonce, start, user, host, ip
    _c("show ports", "[T]", "Show the active ports", loc.show_ports),
    _c("show cost", "[T]", "Show the port costs", more.show_cost),
    _c("show status", "[T]", "Show the port status with any errors", more.show_status),
    _c("show routes", "[P]", "Show the route for each peer for path P (0-3)", rts.show_routes),
    _c("show urls", "", "Show urls of connected peers", show_fds.show_urls),
    _c("show pgm", "[T]", "Show PGM transport counters: data, repairs, NAKs, unrecoverable loss", more.show_pgm),
    _c("show tport", "[T]", "Show the configured tports", cfg.show_tport),
    _c("show users", "[U]", "Show the configured users", cfg.show_users),
    _c("show events", "", "Show event recorder", loc.show_events),
    _c("show logs", "", "Show current log buffer", loc.show_logs),
    _c("show counters", "[reject]", "Show system seqno and time values (reject: refused frames by cause)",
       prs.show_counters),
    _c("show sync", "", "Show system seqno and sums", prs.show_sync),
    _c("show pubtype", "", "Show system publish type received", sbs.show_pubtype),
    _c("show inbox", "[U]", "Show inbox sequences", prs.show_inbox),
    _c("show loss", "", "Show message loss counters and time", prs.show_loss),
    _c("show skew", "", "Show peer system clock skews", prs.show_skew),
    _c("show reachable", "", "Show reachable peers through active tports", more.show_reachable),
    _c("show tree", "[U] [P]", "Show multicast tree from me or U", rts.show_tree),
    _c("show path", "[P]", "Show multicast path P (0-3)", rts.show_path),
    _c("show forward", "[P]", "Show forwarding P (0-3)", rts.show_forward),
    _c("show fds", "", "Show fd statistics", show_fds.show_fds),
    _c("show buffers", "", "Show fd buffer memory usage", show_fds.show_buffers),
    _c("show windows", "", "Show pub and sub window memory usage", more.show_windows),
    _c("show blooms", "[P]", "Show bloom centric routes for path P (0-3)", rts.show_blooms),
    _c("show match", "S", "Show users which have a bloom that match sub", rts.show_match),
    _c("show graph", "", "Show network description for node graph", rts.show_graph),
    _c("show names", "[T]", "Show the service names seen here, of name type T or all", nms.show_names),
    _c("show topology", "", "Show the service name subscriptions of local clients", nms.show_topology),
    _c("show cache", "", "Show routing cache geom, hits and misses", more.show_cache),
    _c("show poll", "", "Show poll dispatch latency", more.show_poll),
    _c("show hosts", "", "Show rv hosts and services", more.show_hosts),
    _c("show rvsub", "", "Show rv subscriptions", more.show_rvsub),
    _c("show rpcs", "", "Show rpcs and subs running", more.show_rpcs),
    _c("show running", "", "Show current config running", cfg.show_running),
    _c("show running transport", "[T]", "Show transports running, T or all", cfg.show_running_transport),
    _c("show running service", "[S]", "Show services running config, S or all", cfg.show_running_service),
    _c("show running user", "[U]", "Show users running config, U or all", cfg.show_running_user),
    _c("show running group", "[G]", "Show groups running config, G or all", cfg.show_running_group),
    _c("show running parameter", "[P]", "Show parameters running config, P or all",
       cfg.show_running_parameter),
    _c("show startup", "", "Show startup config", cfg.show_startup),
    _c("show startup transport", "[T]", "Show transports startup, T or all", cfg.show_startup_transport),
    _c("show startup service", "[S]", "Show services startup config, S or all", cfg.show_startup_service),
    _c("show startup user", "[U]", "Show users startup config, U or all", cfg.show_startup_user),
    _c("show startup group", "[G]", "Show groups startup config, G or all", cfg.show_startup_group),
    _c("show startup parameter", "[P]", "Show parameters startup config, P or all", cfg.show_startup_parameter),
    _c("sub", "S [F]", "Subscribe subject S, output to file F"),
    _c("unsub", "[S] [F]", "Unsubscribe subject S (all subjects without S), stop output file F"),
    _c("psub", "W [F]", "Subscribe rv-wildcard W, output to file F"),
    _c("punsub", "[W] [F]", "Unsubscribe rv-wildcard W (all without W), stop output file F"),
    _c("gsub", "W [F]", "Subscribe glob-wildcard W, output to file F"),
    _c("gunsub", "[W] [F]", "Unsubscribe glob-wildcard W (all without W), stop output file F"),
    _c("snap", "S [F]", "Publish to subject S with inbox reply"),
    _c("pub", "S M", "Publish msg string M to subject S"),
    _c("trace", "S M", "Publish msg string M to subject S, with reply"),
    _c("ack", "S M", "Publish msg string M to subject S, with ack"),
    _c("rpc", "S M", "Publish msg string M to subject S, with return"),
    _c("any", "S M", "Publish msg string M to any subscriber of S"),
    _c("cancel", "", "Cancel and show incomplete (ping, show subs)"),
    _c("mute", "", "Mute the log output"),
    _c("unmute", "", "Unmute the log output"),
    _c("reseed", "", "Reseed bloom filter"),
    _c("debug", "I", "Set debug flags to ival I"),
    _c("wevents", "F", "Write events to file"),
    _c("die", "[I]", "Exit without cleanup, with status 1 or I"),
    _c("quit", "", "Exit console"),
    _c("exit", "", "Exit console"),
    _c("help", "", "Show this help", _help),
    *(_message(cmd) for cmd in msglog.CONSOLE),
)


def execute(ctx: ConsoleContext, line: str) -> CommandResult:
    """Run one command line; an unknown, ambiguous or malformed one gives `error`."""
    try:
        cmd, words = resolve(COMMANDS, line.split())
        args = cmd.bind(words)
        if cmd.handler is None:
            raise NotAvailable(f"{cmd.name} is not available in this console")
        return cmd.handler(ctx, args)
    except ConsoleError as exc:
        return CommandResult.failed(str(exc))
