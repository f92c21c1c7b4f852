"""Operator commands of the Redis transport: SLOWLOG, LATENCY, CONFIG (the
transport's parameters beside the map's, RESETSTAT), CLIENT PAUSE / UNPAUSE, LOLWUT,
and the idle `timeout`, with redis-server 7.0.15's replies and errors.

One `OpsState` per transport (RedisHost.ops) holds the slow log, the latency events,
the pause and the parameters; the session (redis_session.py) times its commands and
asks `pauses()` before running one. Decisions:

- SLOWLOG: the general dispatch times every command (EXEC excepted, whose commands are
  logged one by one, as redis-server). The batch path (redis_batch.py) times each run of
  pipelined data commands once (a clock read per command cost ~7% on HSET): a run that
  took at least the threshold is logged as one entry with the run's time and the
  arguments of its first command that went through Engine.execute (its first command
  when all were fast forms or PUBLISH), so an entry may cover a run; with
  `slowlog-log-slower-than` 0 runs are off and every command is timed alone. A blocked
  pop and a command queued in MULTI are not logged. Arguments as redis-server: at most
  32 (the last "... (N more arguments)"), each at most 128 bytes ("... (N more bytes)");
  AUTH's and HELLO AUTH's are redacted.
- LATENCY: with `latency-monitor-threshold` (ms) set, a command that took at least that
  long is a sample of the event "command"; one sample per second per event (the
  largest), 160 kept, as redis-server. HISTOGRAM answers an empty map (no per-command
  histograms); GRAPH lists the samples as "time ms" lines rather than redis' ASCII art.
- MEMORY and LOLWUT are in redis_ops_mem.py.
- CLIENT PAUSE ms [WRITE|ALL]: as redis-server 7.0.15, a pause holds every client's
  commands, the pausing client's and CLIENT UNPAUSE included (ALL), or only the write
  commands and those that may replicate (PUBLISH, PFCOUNT..., EXEC of a non-empty
  transaction; WRITE); a later pause
  keeps the later end and the stricter mode. Held commands run in order when the pause
  ends; a client's held input is bounded by the transport's query limit (past it the
  connection closes, as redis-server closes a client over its query buffer limit).
- CONFIG maxmemory and maxmemory-policy are the map's (kv/server.py; enforced as
  noeviction, kv/__init__.py).
- tcp-keepalive (0..INT_MAX, as redis-server) is the transport's TCP keepalive, the
  `tcp_keepalive` parameter when it starts; a change applies to the clients accepted
  after it, as redis-server's (past Linux's 32767 s limit the idle time is 32767 s).
- timeout: every second, a client idle longer than `timeout` seconds is closed, unless
  it is subscribed, blocked in a pop, held by a pause or a MONITOR.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from raims_node.bridges.resp import OK, encode_error, parse_ll
from raims_node.kv.commands import COMMANDS, Engine
from raims_node.kv.errors import CommandError
from raims_node.kv.reply import Map, Simple, Verbatim, encode
from raims_node.kv.server import SETTABLE, config_matches, config_params, config_setter, reset_stats

SLOWLOG_MAX_ARGS = 32
SLOWLOG_MAX_STRING = 128
LATENCY_SAMPLES = 160
LLONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1
# commands that pause in WRITE mode without the write flag (redis' may-replicate)
MAY_REPLICATE = frozenset((b"publish", b"spublish", b"pfcount", b"eval", b"evalsha", b"fcall", b"function",
                           b"script", b"save", b"bgsave"))


@dataclass(frozen=True, slots=True)
class SlowEntry:
    id: int
    time: int
    duration_us: int
    args: list[bytes]
    addr: bytes
    name: bytes


class OpsClient(Protocol):
    """What these commands read of a Redis session (redis_session.py)."""

    client_id: int
    name: bytes | None
    addr: str
    resp: int
    db: int
    last_active: float
    _pause_held: list[list[bytes]]
    _pause_bytes: int

    @property
    def config(self) -> Any: ...

    @property
    def host(self) -> Any: ...

    @property
    def subscribed(self) -> bool: ...

    @property
    def closing(self) -> bool: ...

    def engine(self) -> Engine | None: ...

    def multi_state(self) -> tuple[int, int, list[bytes] | None, list[list[bytes]]]: ...

    def kill(self) -> None: ...

    def _command(self, args: list[bytes]) -> None: ...

    def _write(self, data: bytes) -> bool: ...

    def _error(self, message: str | bytes, code: str = "ERR") -> None: ...


def _bounded(lo: int, hi: int) -> Callable[[bytes], int]:
    def parse(raw: bytes) -> int:
        v = parse_ll(raw)
        if v is None:
            raise ValueError("argument couldn't be parsed into an integer")
        if not lo <= v <= hi:
            raise ValueError(f"argument must be between {lo} and {hi} inclusive")
        return v
    return parse


_PARAMS: dict[bytes, tuple[str, Callable[[bytes], int]]] = {
    b"timeout": ("timeout", _bounded(0, INT_MAX)),
    b"slowlog-log-slower-than": ("slower_than", _bounded(-1, LLONG_MAX)),
    b"slowlog-max-len": ("max_len", _bounded(0, LLONG_MAX)),
    b"latency-monitor-threshold": ("latency_ms", _bounded(0, LLONG_MAX)),
    b"tcp-keepalive": ("tcp_keepalive", _bounded(0, INT_MAX)),
}


@dataclass(slots=True)
class OpsState:
    """One transport's slow log, latency events, pause and operator parameters."""

    clock: Callable[[], float] = time.time
    slower_than: int = 10000  # us; -1 off
    max_len: int = 128
    latency_ms: int = 0  # 0 off
    timeout: int = 0  # s; 0 never
    tcp_keepalive: int = 300  # s, of the clients accepted from now (raims_node/keepalive.py); 0 off
    slowlog: deque[SlowEntry] = field(default_factory=deque)
    next_id: int = 0
    latency: dict[bytes, deque[tuple[int, int]]] = field(default_factory=dict)  # event -> (time, ms)
    latency_max: dict[bytes, int] = field(default_factory=dict)
    pause_end: float = 0.0  # clock seconds; 0 not paused
    pause_all: bool = False
    waiting: set[OpsClient] = field(default_factory=set)  # sessions holding paused commands
    schedule: Callable[[float, Callable[[], None]], object] | None = None  # the loop's call_later
    peak: int = 0  # the largest RSS MEMORY STATS saw

    @property
    def every(self) -> bool:
        """Every command is logged: batches are off, each command is timed."""
        return self.slower_than == 0

    @property
    def record_ns(self) -> int:
        """The shortest command time `record` keeps (LLONG_MAX when neither log is on)."""
        limits = [self.slower_than * 1000] if self.slower_than >= 0 else []
        if self.latency_ms:
            limits.append(self.latency_ms * 1_000_000)
        return min(limits, default=LLONG_MAX)

    def record(self, s: Any, args: list[bytes], ns: int) -> None:
        """A command of session `s` took `ns`: the slow log and the latency monitor."""
        us = ns // 1000
        if 0 <= self.slower_than <= us and args[0].lower() != b"exec":
            self.slowlog.appendleft(SlowEntry(self.next_id, int(self.clock()), us, _log_args(args),
                                              s.addr.encode(), s.name or b""))
            self.next_id += 1
            while len(self.slowlog) > self.max_len:
                self.slowlog.pop()
        if self.latency_ms and us // 1000 >= self.latency_ms:
            self.latency_sample(b"command", us // 1000)

    def latency_sample(self, event: bytes, ms: int) -> None:
        now = int(self.clock())
        samples = self.latency.setdefault(event, deque(maxlen=LATENCY_SAMPLES))
        if samples and samples[-1][0] == now:
            ms = max(ms, samples[-1][1])
            samples.pop()
        samples.append((now, ms))
        self.latency_max[event] = max(ms, self.latency_max.get(event, 0))

    # ------------------------------------------------------------ pause

    def pauses(self, s: OpsClient, args: list[bytes]) -> bool:
        """Whether `args` of `s` waits for the pause's end (which may just have come)."""
        if not self.pause_end:
            return False
        if self.clock() >= self.pause_end:
            self.unpause()
            return False
        if self.pause_all:
            return True
        name = args[0].lower()
        multi = s.multi_state()[0]
        if multi >= 0 and name != b"exec":
            return False  # queued, as redis-server queues it
        cmd = COMMANDS.get(name)
        return (cmd is not None and cmd.write) or name in MAY_REPLICATE or (name == b"exec" and multi > 0)

    def pause(self, ms: int, all_: bool) -> None:
        end = self.clock() + ms / 1000
        if end > self.pause_end:
            self.pause_end = end
            if self.schedule is not None:
                self.schedule(ms / 1000, self._pause_timer)
        self.pause_all = self.pause_all or all_

    def _pause_timer(self) -> None:
        """The loop's timer at the pause's end (again when its clock ran ahead of ours)."""
        remaining = self.pause_end - self.clock()
        if self.pause_end and remaining > 0 and self.schedule is not None:
            self.schedule(remaining + 0.001, self._pause_timer)
        else:
            self.check_pause()

    def check_pause(self) -> None:
        if self.pause_end and self.clock() >= self.pause_end:
            self.unpause()

    def unpause(self) -> None:
        self.pause_end = 0.0
        self.pause_all = False
        waiting, self.waiting = self.waiting, set()
        for s in sorted(waiting, key=lambda c: c.client_id):
            if not s.closing:
                release(s)

    # ------------------------------------------------------------ timeout

    def tick(self, sessions: Iterable[OpsClient], monitors: set[Any]) -> None:
        """Once a second: the pause's end, idle clients past `timeout`."""
        self.check_pause()
        if not self.timeout:
            return
        now = self.clock()
        for s in list(sessions):
            if s.closing or s.subscribed or s in self.waiting or s in monitors or s.multi_state()[2]:
                continue
            if now - s.last_active > self.timeout:
                s.kill()


def _log_args(args: list[bytes]) -> list[bytes]:
    """redis-server's slow log form of a command's arguments."""
    if args[0].lower() == b"auth":
        args = [args[0]] + [b"(redacted)"] * (len(args) - 1)
    elif args[0].lower() == b"hello":
        args = list(args)
        for i in range(2, len(args) - 2):
            if args[i].lower() == b"auth":
                args[i + 1] = args[i + 2] = b"(redacted)"
    n = min(len(args), SLOWLOG_MAX_ARGS)
    out = []
    for j in range(n):
        if j == n - 1 and n < len(args):
            out.append(b"... (%d more arguments)" % (len(args) - n + 1))
            break
        a = args[j]
        out.append(a if len(a) <= SLOWLOG_MAX_STRING else
                   a[:SLOWLOG_MAX_STRING] + b"... (%d more bytes)" % (len(a) - SLOWLOG_MAX_STRING))
    return out


def help_reply(s: OpsClient, lines: tuple[str, ...]) -> None:
    s._write(encode([Simple(line.encode()) for line in lines], s.resp))


def _args_error(s: OpsClient, sub: bytes, container: str) -> None:
    s._error(b"unknown subcommand or wrong number of arguments for '%s'. Try %s HELP." % (sub, container.encode()))


# ------------------------------------------------------------ SLOWLOG

def slowlog_get(s: OpsClient, args: list[bytes]) -> None:
    if len(args) > 3:
        _args_error(s, args[1], "SLOWLOG")
        return
    ops: OpsState = s.host.ops
    count = 10
    if len(args) == 3:
        v = parse_ll(args[2])
        if v is None or v < -1:
            s._error("count should be greater than or equal to -1")
            return
        count = len(ops.slowlog) if v == -1 else v
    entries = list(ops.slowlog)[:count]
    s._write(encode([[e.id, e.time, e.duration_us, e.args, e.addr, e.name] for e in entries], s.resp))


def slowlog_len(s: OpsClient, args: list[bytes]) -> None:
    s._write(b":%d\r\n" % len(s.host.ops.slowlog))


def slowlog_reset(s: OpsClient, args: list[bytes]) -> None:
    s.host.ops.slowlog.clear()
    s._write(OK)


def slowlog_help(s: OpsClient, args: list[bytes]) -> None:
    help_reply(s, (
        "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", "GET [<count>]",
        "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
        "    Entries are made of:",
        "    id, timestamp, time in microseconds, arguments array, client IP and port,",
        "    client name", "LEN", "    Return the length of the slowlog.", "RESET", "    Reset the slowlog.",
        "HELP", "    Prints this help."))


# ------------------------------------------------------------ LATENCY

def latency_latest(s: OpsClient, args: list[bytes]) -> None:
    ops: OpsState = s.host.ops
    s._write(encode([[event, samples[-1][0], samples[-1][1], ops.latency_max.get(event, 0)]
                     for event, samples in ops.latency.items() if samples], s.resp))


def latency_history(s: OpsClient, args: list[bytes]) -> None:
    samples = s.host.ops.latency.get(args[2].lower(), ())
    s._write(encode([[t, ms] for t, ms in samples], s.resp))


def latency_reset(s: OpsClient, args: list[bytes]) -> None:
    ops: OpsState = s.host.ops
    events = [a.lower() for a in args[2:]] or list(ops.latency)
    done = 0
    for event in set(events):
        if ops.latency.pop(event, None) is not None:
            ops.latency_max.pop(event, None)
            done += 1
    s._write(b":%d\r\n" % done)


def latency_doctor(s: OpsClient, args: list[bytes]) -> None:
    ops: OpsState = s.host.ops
    if not ops.latency_ms:
        text = (b"I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis instance. "
                b"You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it. "
                b"If we weren't in a deep space mission I'd suggest to take a look at "
                b"https://redis.io/topics/latency-monitor.\n")
    elif not ops.latency:
        text = b"Dave, no latency spike was observed during the lifetime of this Redis instance, not in the " \
               b"slightest bit. I honestly think you ought to sleep as much as you can now.\n"
    else:
        text = b"Dave, I have observed latency spikes in this Redis instance.\n" + b"".join(
            b"%s: %d latency spikes (the worst %d ms)\n" % (event, len(samples), ops.latency_max.get(event, 0))
            for event, samples in ops.latency.items())
    s._write(encode(Verbatim(text), s.resp))


def latency_graph(s: OpsClient, args: list[bytes]) -> None:
    samples = s.host.ops.latency.get(args[2].lower())
    if not samples:
        s._error(b"No samples available for event '%s'" % args[2])
        return
    s._write(encode(Verbatim(b"".join(b"%d %d\n" % sample for sample in samples)), s.resp))


def latency_histogram(s: OpsClient, args: list[bytes]) -> None:
    s._write(encode(Map([]), s.resp))


def latency_help(s: OpsClient, args: list[bytes]) -> None:
    help_reply(s, (
        "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", "DOCTOR",
        "    Return a human readable latency analysis report.", "GRAPH <event>",
        "    Return an ASCII latency graph for the <event> class.", "HISTORY <event>",
        "    Return time-latency samples for the <event> class.", "LATEST",
        "    Return the latest latency samples for all events.", "RESET [<event> ...]",
        "    Reset latency data of one or more <event> classes.",
        "    (default: reset all data for all event classes)", "HISTOGRAM [COMMAND ...]",
        "    Return a cumulative distribution of latencies in the format of a histogram for the specified "
        "command names.", "    If no commands are specified then all histograms are replied.",
        "HELP", "    Prints this help."))


# ------------------------------------------------------------ CONFIG

def host_params(ops: OpsState) -> dict[bytes, bytes]:
    return {name: b"%d" % getattr(ops, attr) for name, (attr, _) in _PARAMS.items()}


def config_get(s: OpsClient, args: list[bytes]) -> None:
    engine = s.engine()
    params = (config_params(engine) if engine is not None else {}) | host_params(s.host.ops)
    s._write(encode(Map(config_matches(params, args[2:])), s.resp))


def _setter(ops: OpsState, attr: str, value: int) -> Callable[[], None]:
    return lambda: setattr(ops, attr, value)


def config_set(s: OpsClient, args: list[bytes]) -> None:
    """All names are checked before any value, all values before any change, as redis-server."""
    if len(args) % 2:
        s._error("syntax error")
        return
    ops: OpsState = s.host.ops
    engine = s.engine()
    engine_params = config_params(engine) if engine is not None else {}
    seen: set[bytes] = set()
    for i in range(2, len(args), 2):
        name = args[i].lower()
        if name not in _PARAMS and name not in engine_params:
            s._error(b"Unknown option or number of arguments for CONFIG SET - '%s'" % args[i])
            return
        if name in engine_params and name not in _PARAMS and name not in SETTABLE:
            s._error(b"CONFIG SET failed (possibly related to argument '%s') - can't set immutable config" % args[i])
            return
        if name in seen:
            s._error(b"CONFIG SET failed (possibly related to argument '%s') - duplicate parameter" % args[i])
            return
        seen.add(name)
    changes: list[Callable[[], None]] = []
    for i in range(2, len(args), 2):
        name, raw = args[i].lower(), args[i + 1]
        try:
            if name in _PARAMS:
                attr, parse = _PARAMS[name]
                value = parse(raw)
                changes.append(_setter(ops, attr, value))
            else:
                assert engine is not None
                changes.append(config_setter(engine, args[i], raw))
        except ValueError as exc:
            s._error(b"CONFIG SET failed (possibly related to argument '%s') - %s" % (args[i], str(exc).encode()))
            return
        except CommandError as exc:
            s._write(encode_error(exc.text.removeprefix(b"ERR "), exc.text.partition(b" ")[0].decode()))
            return
    for change in changes:
        change()
    s._write(OK)


def config_resetstat(s: OpsClient, args: list[bytes]) -> None:
    """The transport's counters (connections, commands, commandstats, errorstats) and the map's (kv/server.py)."""
    host = s.host
    host.commands = 0
    host.connections = 0
    host.stats.reset()
    engine = s.engine()
    if engine is not None:
        reset_stats(engine)
    s._write(OK)


# ------------------------------------------------------------ CLIENT PAUSE / UNPAUSE

def hold(s: OpsClient, args: list[bytes]) -> None:
    """The pause holds `args` of `s`, bounded as a query is."""
    s._pause_held.append(args)
    s._pause_bytes += sum(map(len, args))
    s.host.ops.waiting.add(s)
    if s._pause_bytes > s.config.max_query:
        s.kill()


def release(s: OpsClient) -> None:
    """The pause ended: what it held of `s` runs, in order (unless a new pause holds it again)."""
    held, s._pause_held, s._pause_bytes = s._pause_held, [], 0
    for i, args in enumerate(held):
        if s.closing:
            return
        s._command(args)
        if s._pause_held:  # paused again: the rest waits behind it
            s._pause_held.extend(held[i + 1:])
            return


SUBSCRIBE_BUDGET_S = 0.002  # a (P|S)SUBSCRIBE stops subscribing for this loop turn after this long
SUBSCRIBE_MIN = 32  # ... but not before this many names: progress on a loaded machine
_CLOCK_EVERY = 16  # names between looks at the clock


class Continued(list[bytes]):
    """The rest of a command already begun (subscribe_slice), from `args[start]`: a
    MONITOR saw it whole. Made once per command; each slice moves `start`."""

    start = 1


def subscribe_slice(s: OpsClient, args: list[bytes], atomic: bool) -> Iterator[bytes]:
    """The names a (P|S)SUBSCRIBE subscribes in this loop turn, for SUBSCRIBE_BUDGET_S
    (at least SUBSCRIBE_MIN). Past that the rest is held as a command of its own, ahead of
    what the client sent after it, and runs on the next loop turn, as a pause's held
    commands do: one SUBSCRIBE of 100,000 channels held every client and link of the node
    1-4 s (redis-server 7.0.15: 0.1 s); a slice of 256 by count 5-50 ms a turn. Each name
    is confirmed once subscribed here, so a confirmation still means effective; `atomic`
    (inside EXEC, or a blocked pop's held commands replayed) takes all at once. No slice
    copies the names left (a copy each made 100,000 names quadratic)."""
    start = args.start if type(args) is Continued else 1
    schedule = s.host.ops.schedule
    n = len(args)
    if atomic or schedule is None or n - start <= SUBSCRIBE_MIN:
        yield from args[start:]
        return
    end = time.perf_counter() + SUBSCRIBE_BUDGET_S
    i = start
    while i < n:
        yield args[i]
        i += 1
        if i - start >= SUBSCRIBE_MIN and not i % _CLOCK_EVERY and i < n and time.perf_counter() > end:
            rest = args if type(args) is Continued else Continued(args)
            rest.start = i
            s._pause_held.insert(0, rest)
            schedule(0.0, lambda: None if s.closing else release(s))
            return


def client_pause(s: OpsClient, args: list[bytes]) -> None:
    if len(args) > 4:
        _args_error(s, args[1], "CLIENT")
        return
    ms = parse_ll(args[2])
    if ms is None:
        s._error("timeout is not an integer or out of range")
        return
    if ms < 0:
        s._error("timeout is negative")
        return
    if ms > LLONG_MAX - int(s.host.ops.clock() * 1000):
        s._error("timeout is out of range")
        return
    mode = args[3].lower() if len(args) == 4 else b"all"
    if mode not in (b"write", b"all"):
        s._error("CLIENT PAUSE mode must be WRITE or ALL")
        return
    s.host.ops.pause(ms, mode == b"all")
    s._write(OK)


def client_unpause(s: OpsClient, args: list[bytes]) -> None:
    s._write(OK)
    s.host.ops.unpause()


def command_table(make: Callable[..., Any], table: Callable[..., Any]) -> list[Any]:
    """The top-level commands of this module, as redis_session's `_Command`s."""
    return [
        make("slowlog", -2, None, subcommands=table(
            make("slowlog|get", -2, slowlog_get), make("slowlog|len", 2, slowlog_len),
            make("slowlog|reset", 2, slowlog_reset), make("slowlog|help", 2, slowlog_help))),
        make("latency", -2, None, subcommands=table(
            make("latency|latest", 2, latency_latest), make("latency|history", 3, latency_history),
            make("latency|reset", -2, latency_reset), make("latency|doctor", 2, latency_doctor),
            make("latency|graph", 3, latency_graph), make("latency|histogram", -2, latency_histogram),
            make("latency|help", 2, latency_help))),
        make("config", -2, None, subcommands=table(
            make("config|get", -3, config_get), make("config|set", -4, config_set),
            make("config|resetstat", 2, config_resetstat))),
    ]


def client_table(make: Callable[..., Any]) -> list[Any]:
    return [make("client|pause", -3, client_pause), make("client|unpause", 2, client_unpause)]
