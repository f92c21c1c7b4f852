"""`ms_server`: run one Rai MS node (manual: "Running the MS server", "Startup").

    ms_server -d CONFIG -u USER[.SVC] -t TPORT.listen TPORT.connect ... [-c] [-l LOG] [-b] [-v]

-d is a config directory, a single YAML/JSON file, or `-` for stdin; -t starts
transports (listeners before connectors); without -t the config's `startup` section
does. A transport of type `web` starts the admin/JSON server. -c reads console
commands from stdin. -b detaches (own session, `pid_file`, `working_directory`).

Errors a person must see (a config that does not load, an unknown user, a port in
use) go to stderr and to the log, even with -l, and exit non-zero: 2 for the
configuration, 3 for a transport that cannot start; each names the file and the fix.

Started as `rvd`, or with an rvd argument (`-listen`, `-cfg`, ...), it runs in rvd
compatibility mode instead (raims_node/rvd.py).

Signals: the first SIGTERM/SIGINT sends `_X.BYE` on every link, flushes and exits 0;
a second exits at once (unless within SAME_SIGNAL_S of the first: `timeout` and a process
group's kill deliver one stop twice); SIGHUP reloads the parameters (heartbeat, windows).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import gc
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raims_node import __version__, diag
from raims_node.bridges.capacity import raise_open_files
from raims_node.config.errors import ConfigError
from raims_node.config.records import TransportConfig
from raims_node.config.tree import ConfigTree, load
from raims_node.console_ports import CONSOLE_TYPES
from raims_node.crypto import CryptoError

if TYPE_CHECKING:
    from raims_node.console.telnet import TelnetProtocol
    from raims_node.daemon import Daemon

log = logging.getLogger("raims.server")

EXIT_CONFIG = 2
EXIT_START = 3
STOP_GRACE_S = 2.0
SAME_SIGNAL_S = 0.2  # a second SIGTERM/SIGINT sooner than this after the first is the same one


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="ms_server", description="Rai MS node")
    ap.add_argument("-d", dest="config", default="config", help="config dir, file, or - for stdin")
    ap.add_argument("-u", dest="user", default=None, help="user[.service] to run as")
    ap.add_argument("-t", dest="tports", nargs="*", default=None, help="TPORT.listen / TPORT.connect ...")
    ap.add_argument("-c", dest="console", action="store_true", help="console on stdin/stdout")
    ap.add_argument("-l", dest="logfile", default=None, help="log file")
    ap.add_argument("-b", dest="background", action="store_true", help="detach and run in the background")
    ap.add_argument("-m", dest="map_file", default=None, help="key-value map file (ms_kv init PATH creates one)")
    ap.add_argument("-v", dest="verbose", action="store_true", help="verbose logging")
    ap.add_argument("--version", action="version", version=f"ms_server (raims) {__version__}")
    args = ap.parse_args(argv)
    if args.console and args.config == "-":  # the node started, read EOF as its console's quit, exit 0
        ap.error("-c reads console commands from stdin, which -d - reads the configuration from")
    if args.console and args.background:  # the manual's daemon mode is "without a console"
        ap.error("-c and -b: a detached daemon has no console (use the telnet transport)")
    return args


def _setup_logging(logfile: str | None, verbose: bool) -> None:
    """The log on stderr, or in `logfile`; a log file that cannot be opened is a ConfigError."""
    try:
        handler: logging.Handler = logging.FileHandler(logfile) if logfile else logging.StreamHandler(sys.stderr)
    except OSError as exc:
        raise ConfigError(f"log file {logfile!r} cannot be opened: {exc.strerror}") from None
    handler.setFormatter(logging.Formatter("%(asctime)s.%(msecs)03d  %(message)s", "%H:%M:%S"))
    root = logging.getLogger("raims")
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    root.propagate = False


def _set_timestamp(tree: ConfigTree) -> None:
    """`timestamp: GMT`: the log lines' stamps in UTC (manual: not offset by the local zone)."""
    from raims_node.config.params import gmt_logs

    if gmt_logs(tree.parameters):
        for handler in logging.getLogger("raims").handlers:
            if handler.formatter is not None:
                handler.formatter.converter = time.gmtime


def _split_tports(tree: ConfigTree, tports: list[str] | None) -> tuple[list[str], list[str]]:
    if tports is None:
        return list(tree.startup.listen), list(tree.startup.connect)
    listen, connect = [], []
    for spec in tports:
        name, _, how = spec.rpartition(".")
        if how == "listen" and name:
            listen.append(name)
        elif how == "connect" and name:
            connect.append(name)
        else:
            raise ConfigError(f"-t {spec!r}: expected TPORT.listen or TPORT.connect")
    return listen, connect


def _default_user(tree: ConfigTree, user: str | None) -> tuple[str, str | None]:
    if user:
        name, _, svc = user.partition(".")
        return name, svc or None
    keyed = [u for u in tree.users if u.pri]
    if len(keyed) == 1:
        return keyed[0].user, keyed[0].svc
    import socket

    return socket.gethostname(), None


class _Starter:
    """The pipe from a detached daemon back to the process that ran `ms_server -b` (or
    rvd), which waits on it and exits with what the daemon tells it: 0 once every
    transport is listening, or the daemon's exit code when it could not start (a port in
    use, a pid_file that cannot be written). Until then the daemon keeps the terminal's
    stdout and stderr, so its one-line error reaches the person who started it (the
    manual: an rvd that finds its port taken "will fail to start and exit"); after it,
    they point at /dev/null. A daemon that dies without a word (killed, a crash) closes
    the pipe empty, and the starter says so and exits EXIT_START. The report is the code
    and the daemon's pid."""

    def __init__(self, fd: int | None) -> None:
        self.fd = fd  # None: running in the foreground, no one waits

    def tell(self, code: int) -> None:
        """Report `code` once (later calls do nothing); 0 also detaches stdio."""
        if self.fd is None:
            return
        fd, self.fd = self.fd, None
        with contextlib.suppress(OSError):
            os.write(fd, b"%d %d" % (code, os.getpid()))
        os.close(fd)
        if code == 0:
            sys.stdout.flush()
            devnull = os.open(os.devnull, os.O_RDWR)
            for std in (0, 1, 2):
                os.dup2(devnull, std)
            os.close(devnull)


def _await_daemon(fd: int, prog: str, announce: bool) -> int:
    """In the starting process: the daemon's report (see _Starter), as an exit code;
    `announce` (rvd) prints the manual's "moving to background daemon" and the daemon's
    pid once it serves."""
    with os.fdopen(fd, "rb") as pipe:
        said = pipe.read(64).split()
    if len(said) != 2 or not all(word.isdigit() for word in said):
        print(f"{prog}: the daemon exited before it was serving (see its log)", file=sys.stderr, flush=True)
        return EXIT_START
    code, pid = int(said[0]), int(said[1])
    if code == 0 and announce:
        print(f"moving to background daemon\nrunning in the background, pid {pid}", flush=True)
    return code


def _daemonize(tree: ConfigTree, announce: bool = False, prog: str = "ms_server") -> _Starter:
    """Detach (double fork, own session) after moving to `working_directory`; the first
    process waits for the daemon's start (see _Starter, _await_daemon). OSError: the
    working directory or the fork failed, before detaching."""
    wd = tree.parameters.text("working_directory")
    if wd:
        os.chdir(wd)
    sys.stdout.flush()
    read_fd, write_fd = os.pipe()
    if os.fork() > 0:
        os.close(write_fd)
        os._exit(_await_daemon(read_fd, prog, announce))
    os.close(read_fd)
    os.setsid()
    if os.fork() > 0:
        os._exit(0)
    return _Starter(write_fd)


def _absolute(tree: ConfigTree, map_file: str | None) -> tuple[ConfigTree, str | None]:
    """The config directory (its key files) and the -m map made absolute, so that they
    are still found after -b moves to `working_directory`."""
    if tree.base_dir is not None:
        tree = dataclasses.replace(tree, base_dir=tree.base_dir.absolute())
    return tree, os.path.abspath(map_file) if map_file else map_file


def _write_pid(tree: ConfigTree) -> Path | None:
    """`pid_file`, when set; one that cannot be written is a ConfigError."""
    pid_file = tree.parameters.text("pid_file")
    if not pid_file:
        return None
    path = Path(pid_file)
    try:
        path.write_text(f"{os.getpid()}\n")
    except OSError as exc:
        raise ConfigError(f"pid_file {pid_file!r} cannot be written: {exc.strerror}") from None
    return path


async def _serve(tree: ConfigTree, args: argparse.Namespace) -> int:
    from raims_node.daemon import Daemon, DaemonError

    user, svc = _default_user(tree, args.user)
    listen, connect = _split_tports(tree, args.tports)
    daemon = Daemon(tree, user, svc, map_file=args.map_file)
    ports = daemon.console_ports = _ConsolePorts(daemon, args.config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    signals = {"count": 0, "first": 0.0}

    def on_stop() -> None:
        now = time.monotonic()
        if signals["count"] and now - signals["first"] < SAME_SIGNAL_S:
            return  # the same stop delivered twice (`timeout` signals the child and its group)
        signals["count"] += 1
        if signals["count"] > 1:
            os._exit(1)
        signals["first"] = now
        stop.set()

    def on_hup() -> None:
        if getattr(args, "hup_exits", False):  # rvd mode: a HUP ends it
            on_stop()
            return
        from raims_node.daemon import params_from

        try:
            fresh = load(args.config_abs) if args.config != "-" else tree
            old = daemon.tree.parameters.to_dict()
            daemon.node.set_heartbeat(params_from(fresh).heartbeat_ns)
            daemon.tree = dataclasses.replace(daemon.tree, parameters=fresh.parameters)  # show running parameter
            new = fresh.parameters.to_dict()
            changed = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
            log.info("parameters reloaded: %s (heartbeat and the ones read at use apply now, "
                     "the others at the next start)", ", ".join(changed) or "none changed")
        except ConfigError as exc:
            log.error("reload failed: %s", exc)

    async def lame_duck() -> None:
        """SIGUSR2, as nats-server: stop accepting clients, tell NATS clients (`ldm`),
        close them spread over lame_duck_duration after lame_duck_grace_period, then
        shut down cleanly (BYE on every link) and exit 0."""
        p = daemon.tree.parameters
        grace, duration = p.time("lame_duck_grace_period"), p.time("lame_duck_duration")
        daemon.say(f"lame duck mode: clients closed over {duration:g} s after {grace:g} s")
        bridges = [run.bridge for run in daemon.running.values() if run.bridge is not None]
        await asyncio.gather(*(b.lame_duck(grace, duration) for b in bridges if hasattr(b, "lame_duck")))
        for b in bridges:
            b.close()
        stop.set()

    def on_usr2() -> None:
        if not signals.get("lame"):
            signals["lame"] = 1
            loop.create_task(lame_duck())

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_stop)
    loop.add_signal_handler(signal.SIGHUP, on_hup)
    loop.add_signal_handler(signal.SIGUSR2, on_usr2)
    diag.install(loop)  # SIGUSR1: a leak snapshot, only with $RAIMS_DIAG_DUMP
    try:
        here = {t.tport for t in tree.transports if t.type in CONSOLE_TYPES}  # served above the daemon
        await daemon.start([n for n in listen if n not in here], [n for n in connect if n not in here])
        for run in daemon.running.values():  # RV `no_permanent`: stop when the last client goes
            if run.bridge is not None and hasattr(run.bridge, "on_idle"):
                run.bridge.on_idle = stop.set
        for name in [n for n in listen if n in here] + [n for n in connect if n in here and n not in listen]:
            await ports.start(name)  # a telnet or web transport only listens
        ports.changed()
        if getattr(args, "hup_exits", False):  # rvd mode: the manual's start lines
            from raims_node.rvd import RV_TPORT

            rv = daemon.running.get(RV_TPORT)
            for line in [f"rvd running at {a}" for a in (rv.bound if rv else [])] + \
                    [f"web running at {a}" for a in ports.web_bound()]:
                print(line, flush=True)
        args.starter.tell(0)
    except DaemonError as exc:
        _fail(args, f"{exc} (config {args.config})")
        await daemon.stop()
        return EXIT_START
    console_task = asyncio.create_task(_console(daemon, stop, args.config)) if args.console else None
    await stop.wait()
    from raims_node.client import endpoints

    endpoints.remove(daemon.node.user, daemon.node.service)
    await asyncio.wait_for(daemon.stop(), STOP_GRACE_S)
    for name in ports.running():
        with contextlib.suppress(Exception):
            await asyncio.wait_for(ports.stop(name), STOP_GRACE_S)
    if console_task is not None:
        console_task.cancel()
    return 0


def _write_endpoints(daemon: Daemon, web: list[str]) -> None:
    """This host's endpoints file for clients (raims_node.client.endpoints)."""
    from raims_node.client import endpoints

    bound: dict[str, list[str]] = {"ipc": [], "nats": [], "redis": []}
    for run in daemon.running.values():
        if run.cfg.type in bound:
            bound[run.cfg.type] += run.bound
    try:
        endpoints.write(endpoints.Endpoints(daemon.node.user, daemon.node.service, os.getpid(), bound["ipc"],
                                            bound["nats"], bound["redis"], web))
    except OSError as exc:
        log.warning("endpoints file not written: %s", exc)


class _Closer:
    """A started telnet listener, stopped like a web admin."""

    def __init__(self, server: asyncio.Server, sessions: set[TelnetProtocol]) -> None:
        self.server = server
        self.bound: list[str] = []
        self.sessions = sessions  # the connected consoles (show fds)

    async def stop(self) -> None:
        self.server.close()


def _console_port(daemon: Daemon, name: str, kind: str, bound: list[str], sockets: list[object],
                  sessions: Callable[[], list[object]]) -> Callable[[], list[dict[str, object]]]:
    """A telnet or web transport's row in `show ports` (and so `running` in show tport);
    its listening `sockets` and its connected `sessions` for show fds (transports/fds.py)."""
    row: dict[str, object] = {"tport": name, "type": kind, "cost": "", "fd": "", "bs": "", "br": "",
                              "ms": "", "mr": "", "lat": "", "idle": "", "fl": "L", "address": ", ".join(bound),
                              "sockets": sockets, "sessions": sessions}
    def rows() -> list[dict[str, object]]:
        return [row]

    daemon.extra_ports.append(rows)
    return rows


class _ConsolePorts:
    """The telnet and web transports of a daemon, by name (console_ports.py): started
    at startup and by the console's `listen T`, stopped by `shutdown T` and at exit."""

    def __init__(self, daemon: Daemon, config: str) -> None:
        self.daemon = daemon
        self.config = config
        self._on: dict[str, tuple[Any, Callable[[], list[dict[str, object]]], list[str]]] = {}

    def running(self) -> list[str]:
        return list(self._on)

    def web_bound(self) -> list[str]:
        """The addresses of the running web transports."""
        return [a for name, (server, _, bound) in self._on.items() if not isinstance(server, _Closer) for a in bound]

    def changed(self) -> None:
        _write_endpoints(self.daemon, self.web_bound())

    async def start(self, name: str) -> list[str]:
        from raims_node.daemon import DaemonError

        if name in self._on:
            return self._on[name][2]
        try:
            cfg = self.daemon.tree.transport(name)
        except ConfigError as exc:
            raise DaemonError(str(exc)) from None
        if cfg.type == "telnet":
            telnet = await _start_telnet(self.daemon, cfg, self.config)
            rows = _console_port(self.daemon, name, "telnet", telnet.bound, list(telnet.server.sockets),
                                 functools.partial(list, telnet.sessions))
            self._on[name] = (telnet, rows, telnet.bound)
            return telnet.bound
        from raims_node.web.admin import WebAdmin

        admin = WebAdmin(self.daemon, cfg)
        host = (cfg.listen or ["127.0.0.1"])[0]
        try:
            bound = await admin.start("127.0.0.1" if host in ("*", "") else host, cfg.port or 0)
        except OSError as exc:
            raise DaemonError(f"transport {name!r} listen {host}:{cfg.port} failed: {exc.strerror}") from None
        for addr in bound:
            log.info("web listening on %s", addr)
            self.daemon.say(f"listening on {addr}")
        self._on[name] = (admin, _console_port(self.daemon, name, "web", bound, admin.sockets, admin.connections),
                          bound)
        return bound

    async def stop(self, name: str) -> bool:
        on = self._on.pop(name, None)
        if on is None:
            return False
        server, rows, _ = on
        self.daemon.extra_ports.remove(rows)
        await server.stop()
        self.daemon.say(f"shutdown {name}")
        return True


async def _start_telnet(daemon: Daemon, cfg: TransportConfig, config: str) -> _Closer:
    from raims_node.console.telnet import start_telnet
    from raims_node.daemon import DaemonError
    from raims_node.operator import OperatorHost

    host = (cfg.listen or ["127.0.0.1"])[0]
    operator = OperatorHost(daemon, config if config != "-" and Path(config).is_dir() else None)
    sessions: set[TelnetProtocol] = set()
    try:
        server = await start_telnet(operator, daemon.on_log, None if host in ("*", "") else host, cfg.port or 0,
                                    sessions, daemon.tree.parameters.time("tcp_keepalive"))
    except OSError as exc:
        raise DaemonError(f"transport {cfg.tport!r} listen {host}:{cfg.port} failed: {exc.strerror}") from None
    closer = _Closer(server, sessions)
    for sock in server.sockets:
        name = sock.getsockname()
        daemon.say(f"telnet listening on {name[0]}:{name[1]}")
        closer.bound.append(f"{name[0]}:{name[1]}")
    return closer


async def _console(daemon: Daemon, stop: asyncio.Event, config: str) -> None:
    """`-c`: the console on stdin/stdout; on a terminal with prompt_toolkit's line
    editing, completion and history (console/terminal.py)."""
    from raims_node.console.session import ConsoleSession
    from raims_node.operator import OperatorHost

    host = OperatorHost(daemon, config if config != "-" and Path(config).is_dir() else None)
    if sys.stdin.isatty() and sys.stdout.isatty():
        from raims_node.console.terminal import run_terminal

        await run_terminal(host, daemon, stop)
        return
    session = ConsoleSession(host, lambda text: print(text, flush=True))
    loop = asyncio.get_running_loop()
    try:
        while not stop.is_set() and not session.quit:
            line = await loop.run_in_executor(None, sys.stdin.readline)
            if not line:
                break
            await session.run(line.strip())
    finally:
        session.close()
        stop.set()


def _fail(args: argparse.Namespace, text: str, prog: str = "ms_server") -> None:
    """A start-up error: on stderr always, and in the log file when there is one."""
    print(f"{prog}: {text}", file=sys.stderr, flush=True)
    if args.logfile:
        log.error("%s", text)


def _check_user(tree: ConfigTree, config: str, user: str, svc: str | None) -> None:
    """Refuse a -u user the configuration does not know (a typo would otherwise run a
    node under a name no one configured, signed by the service key)."""
    users = sorted({u.user for u in tree.users if svc is None or u.svc == svc})
    if users and user not in users:
        service = svc or next((u.svc for u in tree.users), "SVC")
        raise ConfigError(f"user {user!r} is not in the configuration {config} (its users: {', '.join(users)}): "
                          f"run with -u one of them, or add it with `ms_gen_key -u {user} -s {service} -d DIR`")


def main(argv: list[str] | None = None) -> int:
    from raims_node.rvd import wants_rvd

    raw = sys.argv[1:] if argv is None else argv
    if wants_rvd(sys.argv[0] if argv is None else "", raw):  # rvd compatibility mode (rvd.py)
        return _rvd(raw, sys.argv[0] if argv is None else "rvd")
    args = parse_args(argv)
    try:
        _setup_logging(args.logfile, args.verbose)
    except ConfigError as exc:
        print(f"ms_server: {exc}: fix the -l argument and start again", file=sys.stderr, flush=True)
        return EXIT_CONFIG
    try:
        tree = load(args.config, stdin=sys.stdin) if args.config == "-" else load(args.config)
        _split_tports(tree, args.tports)
        from raims_node.config.keyset import check_name, credentials

        user, svc = _default_user(tree, args.user)
        if args.user:
            check_name(user, "-u user")
            _check_user(tree, args.config, user, svc)
        credentials(tree, user, svc)
        _set_timestamp(tree)
    except (ConfigError, CryptoError) as exc:
        text = str(exc)
        if args.config not in text:
            text += f" (config {args.config})"
        _fail(args, f"{text}: fix the configuration and start again")
        return EXIT_CONFIG
    args.config_abs = args.config if args.config == "-" else os.path.abspath(args.config)  # SIGHUP, after -b's chdir
    return _start(tree, args, args.background, False, "ms_server")


def _start(tree: ConfigTree, args: argparse.Namespace, background: bool, announce: bool, prog: str) -> int:
    """Detach when asked, write the pid file, serve; the exit code (reported to the
    starting process too when detached)."""
    args.starter = _Starter(None)
    code = EXIT_CONFIG
    pid_path = None
    try:
        if background:
            tree, args.map_file = _absolute(tree, getattr(args, "map_file", None))
            try:
                args.starter = _daemonize(tree, announce, prog)
            except OSError as exc:
                wd = tree.parameters.text("working_directory")
                raise ConfigError(f"cannot detach (working_directory {wd!r}): {exc.strerror}") from None
        pid_path = _write_pid(tree)
        code = _run(_serve(tree, args))
    except ConfigError as exc:
        _fail(args, f"{exc}: fix the configuration and start again", prog)
    finally:
        args.starter.tell(code)
        if pid_path is not None:
            with contextlib.suppress(OSError):
                pid_path.unlink()
    return code


def rvd_main() -> int:
    """The `rvd` console script: ms_server in rvd compatibility mode."""
    return _rvd(sys.argv[1:], sys.argv[0])


def _rvd(argv: list[str], prog: str) -> int:
    from raims_node import rvd

    args = rvd.parse_args(argv)
    try:
        _setup_logging(args.log, False)
        rvd.rotate_log(args)
        tree, ns = rvd.prepare(args, prog)
        _set_timestamp(tree)
    except (ConfigError, CryptoError) as exc:
        print(f"rvd: {exc}: fix the configuration and start again", file=sys.stderr, flush=True)
        return EXIT_CONFIG
    background = not args.foreground and not args.console
    return _start(tree, ns, background, True, "rvd")


GC_GEN0 = 50_000  # allocations between young collections (CPython's default: 700)
GC_GEN1 = 1  # young collections between gen-1 collections (CPython's default: 10)
GC_GEN2 = 200  # gen-1 collections between full ones: every 20M allocations kept, as with 20 x 20


def _tune_gc() -> None:
    """Fewer, cheaper collections on the message path (issue 24): a pipelined run makes
    thousands of short-lived objects at once, and with the default gen-0 threshold of
    700 each run set off several collections that also promoted the run's objects and
    soon scanned the whole heap. The objects made while starting (config, modules) are
    frozen out of every later collection; a larger gen 0 lets a run die young. Cycles
    are still collected. Gen 1 is collected every other young collection (GC_GEN1): it
    holds what survived them, the long-lived objects of a burst of subscriptions (some
    5 a subscription), and at 20 young collections a gen-1 collection scanned up to a
    million of them, 180-250 ms in one loop turn (branch close-stall); full collections
    stay as rare as they were (GC_GEN2)."""
    gc.collect()
    gc.freeze()
    if os.environ.get("RAIMS_GC_DEFAULT") is None:
        gc.set_threshold(GC_GEN0, GC_GEN1, GC_GEN2)


def _run(coro: Coroutine[object, object, int]) -> int:
    """Run on uvloop when it is installed (CONVENTIONS 7), else the stock loop."""
    raise_open_files()  # before the bridges size their capacity (bridges/capacity.py)
    _tune_gc()
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


if __name__ == "__main__":
    sys.exit(main())
