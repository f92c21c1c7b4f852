"""The Redis bridge's batch path: a pipeline's data commands and PUBLISHes run with
their replies joined into one write (issues 24 and 27).

RedisSession hands each parsed batch here while `fast_ok` holds (no transaction,
blocked pop, held commands, CLIENT REPLY setting, capture for EXEC, or subscription: a
subscriber's own messages must interleave with its replies as redis-server writes
them); `run_fast` runs commands until one needs the session's general dispatch
(connection, pub/sub and transaction commands, INFO), which the session then runs.
Data commands try their fast form first (kv/fast.py) and fall back to
`Engine.execute`; replies are encoded as redis_data.DataSide encodes them. Over maxmemory
(`Engine.oom`, read once per run: only the node's tick and CONFIG SET change it, never a
command of the run) the denyoom commands have no fast form, so Engine.execute refuses them.

A run is timed once for SLOWLOG and LATENCY (redis_ops.py: a run over the threshold is
one entry, attributed to its first command that went through `Engine.execute`); with
`slowlog-log-slower-than` 0, or a CLIENT PAUSE in force, there are no runs.

INFO commandstats (redis_stats.py): consecutive commands of one name that answered no
error are counted with one addition, when the run ends; one with an error (or a
container's subcommand) is counted alone. The run's time is split evenly among its
commands (no clock read per command).

A run of PUBLISHes to one channel is routed once (`Bus.publish_run`, one delivery of
the whole run to a local subscriber); each is answered with the run's receivers divided
by its length (decision: exact unless a delivery of the run drops a subscriber, a slow
consumer cut mid-run, where redis-server's later replies would count one fewer).
"""

from __future__ import annotations

from operator import itemgetter
from time import perf_counter_ns
from typing import Protocol

from raims_node.bridges.bus import Bus, ClientHandle
from raims_node.bridges.redis_admin import RedisHost
from raims_node.bridges.redis_data import DataSide
from raims_node.bridges.redis_monitor import Client, feed
from raims_node.bridges.redis_stats import Stats, bucket, data_name, data_refused
from raims_node.kv.commands import BLOCKED, COMMANDS, Cmd, load_families
from raims_node.kv.fast import FAST, FastHandler
from raims_node.kv.reply import Err, encode

PUBLISH = object()  # the table's mark for PUBLISH
SESSION_OWN = (b"info", b"config", b"multi", b"exec", b"discard", b"watch", b"unwatch")  # never batched here

Entry = tuple[FastHandler | None, Cmd | object, str]  # (fast form, command, commandstats name)


class Limits(Protocol):
    """What the batch path uses of redis_config.RedisConfig."""

    @property
    def max_bulk(self) -> int: ...

    @property
    def max_payload(self) -> int: ...


class RedisSession(ClientHandle, Client, Protocol):
    """What the batch path uses of redis_session.RedisSession."""

    resp: int
    reply_off: bool
    reply_skip_next: bool
    _reply_skip: bool
    _capture: list[bytes] | None
    _pause_held: list[list[bytes]]
    _data: DataSide | None
    msgs_in: int
    msgs_out: int
    last_cmd: str
    bus: Bus
    host: RedisHost

    @property
    def config(self) -> Limits: ...

    @property
    def subscribed(self) -> bool: ...

    def _command(self, args: list[bytes]) -> None: ...

    def _send(self, data: bytes) -> bool: ...


def _tables() -> tuple[dict[bytes, Entry], dict[bytes, Entry]]:
    """(with the key-value engine, without): spelled name -> (fast form, command). Names
    are looked up as sent, in lower and upper case; other spellings are lowered first."""
    load_families()
    entry: Entry = (None, PUBLISH, "publish")
    publish: dict[bytes, Entry] = {b"publish": entry, b"PUBLISH": entry}
    data = dict(publish)
    for name, cmd in COMMANDS.items():
        if name not in SESSION_OWN:
            data[name] = data[name.upper()] = (FAST.get(name), cmd, cmd.name)
    return data, publish


_DATA, _PUBLISH_ONLY = _tables()


def _oom_table() -> dict[bytes, Entry]:
    """_DATA over maxmemory: the denyoom commands without their fast form (one entry per
    command still, spellings sharing it: runs compare entries by identity)."""
    entries = {id(e): (None, e[1], e[2]) if isinstance(e[1], Cmd) and e[1].denyoom else e for e in _DATA.values()}
    return {name: entries[id(e)] for name, e in _DATA.items()}


_DATA_OOM = _oom_table()
_SCRIPTING = "raims_node.kv.scripting"


MESSAGE = {2: b"*3\r\n$7\r\nmessage\r\n", 3: b">3\r\n$7\r\nmessage\r\n"}


def run_batch(s: RedisSession, commands: list[list[bytes]]) -> None:
    """Run a parsed batch: the fast runs while `fast_ok`, the others one by one."""
    i, n = 0, len(commands)
    while i < n and not s.closing:
        if fast_ok(s):
            i = run_fast(s, commands, i)
            if i >= n or s.closing:
                return
        s.host.commands += 1
        s._command(commands[i])
        i += 1


def deliver_channel_run(s: RedisSession, channel: bytes | None, payloads: list[bytes]) -> bool:
    """Messages of a subscribed channel (`channel` as the client wrote it) in one write;
    False when `channel` is None (not a plain channel subscription, or unsubscribed)."""
    if channel is None:
        return False
    if not payloads:
        return True
    head = b"%s$%d\r\n%s\r\n" % (MESSAGE[s.resp], len(channel), channel)
    s.msgs_out += len(payloads)
    sizes = list(map(len, payloads))
    if sizes.count(sizes[0]) == len(sizes):  # one size (a producer's records): one join in C
        size = b"$%d\r\n" % sizes[0]
        s._push(head + size + (b"\r\n" + head + size).join(payloads) + b"\r\n")
    else:
        s._push(b"".join([b"%s$%d\r\n%s\r\n" % (head, len(p), p) for p in payloads]))
    return True


_NAME, _CHANNEL, _PAYLOAD = itemgetter(0), itemgetter(1), itemgetter(2)


def _run_end(commands: list[list[bytes]], i: int, table: dict[bytes, Entry], entry: Entry) -> int:
    """The end of the run of PUBLISHes to one channel starting at commands[i] (a
    PUBLISH of 3 arguments): the whole rest checked at once in C when it is one run,
    else command by command."""
    rest = commands[i:]
    first = rest[0]
    if list(map(len, rest)).count(3) == len(rest) and list(map(_CHANNEL, rest)).count(first[1]) == len(rest) \
            and list(map(_NAME, rest)).count(first[0]) == len(rest):
        return len(commands)
    j, n, channel = i + 1, len(commands), first[1]
    while j < n and len(commands[j]) == 3 and commands[j][1] == channel and table.get(commands[j][0]) is entry:
        j += 1
    return j


def _fitting(commands: list[list[bytes]], i: int, j: int, max_payload: int) -> int:
    """The end of the PUBLISHes commands[i:j] before the first message over max_payload."""
    sizes = list(map(len, map(_PAYLOAD, commands[i:j])))
    if max(sizes) <= max_payload:
        return j
    return i + next(n for n, size in enumerate(sizes) if size > max_payload)


def _alone(s: RedisSession, cmd: Cmd, args: list[bytes], reply: object, counted: list[tuple[str, int]]) -> None:
    """Count data command `args` that answered `reply` by itself: an error, or a subcommand."""
    stats = s.host.stats
    if type(reply) is Err:
        stats.error(b"-" + reply.text)
    name = data_name(args, cmd)
    if name is None:
        return  # an unknown subcommand: errorstats only
    if data_refused(cmd, args, reply):
        stats.reject(name)
        return
    if type(reply) is Err:
        stats.stat(name).failed += 1
    counted.append((name, 1))


def _count(stats: Stats, counted: list[tuple[str, int]], run: int, elapsed: int) -> None:
    """The calls of a batch's run of `run` commands that took `elapsed`, split evenly."""
    cmds = stats.cmds
    each = elapsed // run
    b = bucket(each)
    for name, k in counted:
        st = cmds.get(name) or stats.stat(name)
        st.calls += k
        st.ns += each * k
        hist = st.hist
        hist[b] = hist.get(b, 0) + k


def fast_ok(s: RedisSession) -> bool:
    ops = s.host.ops
    if s._capture is not None or s.reply_off or s.reply_skip_next or s.subscribed or ops.every \
            or ops.pause_end or s._pause_held:
        return False
    data = s._data
    return data is None or (data.client.blocked is None and not data.held and data.multi is None)


def run_fast(s: RedisSession, commands: list[list[bytes]], i: int) -> int:
    """Run commands[i:] while they are data commands or PUBLISH, replies joined into one
    write; the index of the first one left to the session's general dispatch."""
    data = s._data
    resp = s.resp
    if data is not None:
        client, engine = data.client, data.engine
        client.db = s.db
        client.resp = resp
        table = _DATA_OOM if engine.oom else _DATA
    else:
        table = _PUBLISH_ONLY
    s._reply_skip = False
    slow: list[bytes] | None = None  # the run's first command run by Engine.execute
    stats = s.host.stats
    counted: list[tuple[str, int]] = []  # commandstats: (name, calls), a run of one name each
    same: Entry | None = None  # the entry of commands[since:i], all answered without error
    since = i
    t0 = perf_counter_ns()
    parts: list[bytes] = []
    start, n = i, len(commands)
    while i < n:
        args = commands[i]
        entry = table.get(args[0])
        if entry is None:
            entry = table.get(args[0].lower())
            if entry is None:
                break
        if entry is not same:
            if same is not None and i > since:
                counted.append((same[2], i - since))
            same, since = entry, i
        fast, cmd, _ = entry
        if fast is not None:
            out = fast(engine, client, args)
            if out is not None:
                parts.append(out)
                i += 1
                continue
        if cmd is PUBLISH:
            if len(args) != 3:
                break
            j = _run_end(commands, i, table, entry)
            if s.config.max_bulk > s.config.max_payload:  # a map's bulks: a message may be too large
                j = _fitting(commands, i, j, s.config.max_payload)
                if j == i:
                    break  # the general dispatch refuses it
            k = j - i
            s.msgs_in += k
            channel = args[1]
            subject = channel.decode("utf-8", "surrogateescape")
            if k == 1:
                parts.append(b":%d\r\n" % s.bus.publish(s, subject, None, None, args[2]))
            else:
                total = s.bus.publish_run(s, subject, list(map(_PAYLOAD, commands[i:j])))
                parts.append(b":%d\r\n" % (total // k) * k)
            i = j
            continue
        assert isinstance(cmd, Cmd)
        if s.host.monitors and cmd.handler.__module__ == _SCRIPTING:
            break  # MONITOR shows a script before the commands it runs: the general dispatch
        reply = engine.execute(client, args, cmd)
        if reply is BLOCKED:
            assert data is not None
            if i > since:
                counted.append((cmd.name, i - since))
            same = None
            data.blocked(cmd.name, 0)  # counted when it answers
            i += 1
            break  # the pop answers later; what follows is held (redis_data.DataSide)
        if type(reply) is Err or cmd.subcommands:  # counted alone
            if i > since:
                counted.append((cmd.name, i - since))
            same = None
            _alone(s, cmd, args, reply, counted)
        if slow is None:
            slow = args
        i += 1
        parts.append(encode(reply, resp))
    if i > start:
        elapsed = perf_counter_ns() - t0
        if same is not None and i > since:
            counted.append((same[2], i - since))
        run = i - start
        _count(stats, counted, run, elapsed)
        if elapsed >= s.host.ops.record_ns:  # the run is timed once (redis_ops.py)
            s.host.ops.record(s, slow if slow is not None else commands[start], elapsed)
        if s.host.monitors:
            feed(s, commands[start:i])
        s.host.commands += run
        s.last_cmd = commands[i - 1][0].lower().decode("utf-8", "replace")
        if parts:
            s._send(b"".join(parts))  # its errors counted above
    return i
