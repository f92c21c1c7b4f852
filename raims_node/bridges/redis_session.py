"""One Redis pub/sub client connection as a sans-IO state machine (issue 8 point 2).

Manual sections "Redis", "Redis subject rules", "Services and Networks"; replies as
redis-server 7 sends them, in RESP2 or RESP3 (switched by `HELLO 2|3`):

- Commands: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE (glob patterns),
  SSUBSCRIBE, SUNSUBSCRIBE, PUBLISH, SPUBLISH, PUBSUB CHANNELS | NUMSUB | NUMPAT |
  SHARDCHANNELS | SHARDNUMSUB, PING, ECHO, SELECT, HELLO, CLIENT ID | SETNAME | GETNAME
  | SETINFO (redis-py sends SETINFO on connect) | LIST | INFO | KILL | REPLY, COMMAND
  [COUNT | DOCS | INFO | LIST | GETKEYS | GETKEYSANDFLAGS], INFO (the introspection
  ones in redis_admin.py and redis_command_info.py), QUIT, RESET; SLOWLOG, LATENCY,
  CONFIG, CLIENT PAUSE | UNPAUSE (redis_ops.py), MEMORY, LOLWUT (redis_ops_mem.py),
  READONLY, READWRITE, ASKING, CLUSTER (cluster disabled: redis_cluster.py). Names are
  case-insensitive; arity is checked as redis-server does (`wrong number of arguments
  for 'client|setname' command`).
- With the node's key-value engine (`kv`), the data commands, MULTI / EXEC / DISCARD /
  WATCH and blocking pops go to redis_data.DataSide (one hook at the top of
  `_execute`; EXEC replays queued commands through `_captured`).
- A parsed batch goes to redis_batch.run_batch: data commands and PUBLISH run with their
  replies joined into one write while no state of the connection needs the general
  dispatch below (`_command`).
- Every command is counted for INFO commandstats / errorstats (redis_stats.py).
- Any other command gets `-ERR unknown command 'x', with args beginning with: 'a' 'b' `
  (at most 128 bytes of arguments, as redis-server) and the connection stays usable;
  an unknown subcommand gets `-ERR unknown subcommand 'x'. Try CLIENT HELP.`.
- (Un)subscribe confirmations are `[kind, channel, count]`, one per channel, where count
  is channels + patterns of this client (shard channels counted apart); an
  UNSUBSCRIBE of nothing confirms with a null channel. Messages are
  `[message, channel, payload]`, `[pmessage, pattern, channel, payload]` and
  `[smessage, channel, payload]`; all are pushes (`>`) in RESP3, arrays in RESP2.
- RESP2 subscribed mode allows only (P|S)SUBSCRIBE, (P|S)UNSUBSCRIBE, PING, QUIT,
  RESET; anything else gets redis-server's "Can't execute ..." error. PING there
  answers `["pong", arg or ""]`. RESP3 has no such mode.
- PUBLISH/SPUBLISH (redis_pubsub.py) answer the bus's count of receivers reached (local plus remote).
  PUBLISH takes an optional third argument, raims' extension: the message's reply
  subject (NATS subscribers see it; `_ACK.<inbox>` / `_TRACE.<inbox>` ask for acks or a
  trace, bridges/acks.py).
- RESET drops every subscription without confirmations, returns to RESP2, db 0, no
  name, and answers `+RESET`. QUIT answers `+OK` and closes.
- RESET, and an unsubscribe of all when it is all the client holds, drop the
  subscriptions at once (`Bus.unsubscribe_all`: the node announces the withdrawals a
  slice per loop turn, router/interest.py).

Decisions: SELECT accepts 0..15 (redis-server's default 16 databases) and changes
nothing else, pub/sub being database-independent in Redis too. HELLO AUTH accepts the
`default` user with any password (the bridge has no users, like a redis-server without
ACLs whose default user is `nopass`) and refuses others with WRONGPASS. HELP subcommands
are not provided. A slow consumer is closed without an error reply, as redis-server does.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from time import perf_counter_ns
from types import MappingProxyType

from raims_node.bridges import redis_admin as admin
from raims_node.bridges import redis_cluster as cluster
from raims_node.bridges import redis_command_info as cmdinfo
from raims_node.bridges import redis_monitor as monitor
from raims_node.bridges import redis_ops as ops
from raims_node.bridges import redis_ops_mem as ops_mem
from raims_node.bridges import redis_pubsub as pubsub
from raims_node.bridges.bus import Bus, shard_subject
from raims_node.bridges.flow import SessionOutput
from raims_node.bridges.redis_batch import deliver_channel_run, run_batch
from raims_node.bridges.redis_config import RedisConfig
from raims_node.bridges.redis_data import DataSide
from raims_node.bridges.redis_stats import data_name
from raims_node.bridges.resp import (
    OK,
    RespParser,
    RespProtocolError,
    encode_bulk,
    encode_countdown,
    encode_error,
    encode_int,
    encode_null,
    encode_push_header,
    encode_simple,
    encode_subscribed_refusal,
    parse_ll,
)
from raims_node.kv.commands import Engine, arity_error, is_data_command

_INT32 = 1 << 31

PONG = b"+PONG\r\n"

_CHANNEL, _PATTERN, _SHARD = "c:", "p:", "s:"  # sid prefixes: one sid space per kind
_MESSAGE = {2: b"*3\r\n$7\r\nmessage\r\n", 3: b">3\r\n$7\r\nmessage\r\n"}
_PMESSAGE = {2: b"*4\r\n$8\r\npmessage\r\n", 3: b">4\r\n$8\r\npmessage\r\n"}
_SMESSAGE = {2: b"*3\r\n$8\r\nsmessage\r\n", 3: b">3\r\n$8\r\nsmessage\r\n"}

ERR_NOT_INTEGER = "value is not an integer or out of range"


def _text(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


def _wire(s: str) -> bytes:
    return s.encode("utf-8", "surrogateescape")


class RedisSession(SessionOutput):
    """A Redis client as the node sees it: feed it bytes, drain `pending_output()`."""

    echo = True  # a Redis subscriber receives its own publishes

    def __init__(self, bus: Bus, client_id: int, config: RedisConfig | None = None, *,
                 wakeup: Callable[[], None] | None = None, kv: Engine | None = None,
                 host: admin.RedisHost | None = None, addr: str = "", laddr: str = "", fd: int = -1) -> None:
        config = config or RedisConfig()
        super().__init__(config.limits, wakeup, b"")
        self.bus = bus
        self.client_id = client_id
        self.config = config
        self.resp = 2
        self.db = 0
        self.name: bytes | None = None
        self.lib_name: bytes | None = None
        self.lib_ver: bytes | None = None
        self.msgs_in = 0
        self.msgs_out = 0
        self.oversized = 0  # PUBLISH messages refused for max_payload
        self.host = host if host is not None else admin.RedisHost(sessions=lambda: (self,))
        self.host.connections += 1
        self.addr, self.laddr, self.fd = addr, laddr, fd
        self.created = self.last_active = self.host.clock()
        self.last_cmd = "NULL"
        self.reply_off = False  # CLIENT REPLY OFF, until ON
        self.reply_skip_next = False  # CLIENT REPLY SKIP: the next command's reply is dropped
        self._reply_skip = False  # this command's
        self._parser = RespParser(config.max_bulk, config.max_args, config.max_query)
        # sid -> channel or pattern as the client sent it, in subscription order
        self._channels: dict[str, bytes] = {}
        self._patterns: dict[str, bytes] = {}
        self._shards: dict[str, bytes] = {}
        self._in_bus = True
        self._capture: list[bytes] | None = None
        self._pause_held: list[list[bytes]] = []  # commands held by CLIENT PAUSE (redis_ops.py)
        self._pause_bytes = 0  # and their size
        self._data = DataSide(self, kv) if kv is not None else None
        if self._data is not None:
            self.db = kv.store.default_db if kv is not None else 0

    @property
    def databases(self) -> int:
        return self.config.databases

    @property
    def input_buffered(self) -> int:
        return self._parser.buffered

    @property
    def subscribed(self) -> bool:
        return bool(self._channels or self._patterns or self._shards)

    # ------------------------------------------------------------ input

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        error: RespProtocolError | None = None
        try:
            commands = self._parser.feed(data)
        except RespProtocolError as exc:
            commands, error = exc.events, exc
        self.last_active = self.host.clock()  # input counts as activity, as a command
        run_batch(self, commands)
        if error is not None and not self._closing:
            self.host.stats.error(error.reply)  # an error reply, as redis-server counts it
            self._close(error.reply, error)

    def _command(self, args: list[bytes]) -> None:
        """A command, or one held while blocked or paused, replayed; timed for SLOWLOG (redis_ops.py)
        and INFO commandstats (redis_stats.py). CLIENT REPLY SKIP silences the next one run and a
        blocked pop's reply too (as redis-server 7.0.15)."""
        data, host_ops = self._data, self.host.ops
        if (host_ops.pause_end and host_ops.pauses(self, args)) or self._pause_held:
            ops.hold(self, args)
            return
        if data is not None and data.holding:
            self._execute(args)
            return
        self._reply_skip, self.reply_skip_next = self.reply_skip_next, False
        queued = data is not None and data.multi is not None
        stats = self.host.stats
        stats.mark = stats.total_errors
        t0 = perf_counter_ns()
        name = self._execute(args)
        ns = perf_counter_ns() - t0
        if name:
            stats.call(name, ns)
        if not queued and (data is None or data.client.blocked is None):
            host_ops.record(self, args, ns)
        elif not queued and data is not None:
            data.blocked_ns = ns  # counted when it answers

    def _execute(self, args: list[bytes]) -> str:
        """Run `args`: the name it is counted under as a call (redis_stats.py), or "" when it
        did not run (refused, queued, held, blocked, unknown)."""
        self.last_cmd = args[0].lower().decode("utf-8", "replace")
        data = self._data
        if data is not None and (outcome := data.intercept(args)) is not None:
            return outcome
        cmd = self._resolve(args)
        if isinstance(cmd, bytes):
            self._write(cmd)
            return ""
        if cmd is _DATA:
            assert data is not None
            return data.run(args)
        assert cmd.handler is not None  # containers are only reached with a subcommand
        self.last_cmd = cmd.fullname
        cmd.handler(self, args)
        if self.host.monitors and type(args) is not ops.Continued:  # after: in the db it leaves (SELECT)
            monitor.feed(self, (args,))
        return cmd.fullname

    def _resolve(self, args: list[bytes]) -> _Command | bytes:
        """The command `args` names, or the encoded error that refuses it (a known command's
        refusal counted as a rejected call)."""
        name = args[0].lower()
        cmd = _COMMANDS.get(name)
        if cmd is None and self._data is not None and is_data_command(name):
            cmd = _DATA
        if cmd is not None and cmd.subcommands is not None and len(args) > 1:
            sub = cmd.subcommands.get(args[1].lower())
            if sub is None:
                return encode_error(b"unknown subcommand '%s'. Try %s HELP." % (args[1][:128], args[0].upper()))
            cmd = sub
        if cmd is None:
            quoted = b""
            for arg in args[1:]:
                if len(quoted) >= 128:
                    break
                quoted += b"'%s' " % arg[:128 - len(quoted)]
            return encode_error(b"unknown command '%s', with args beginning with: %s" % (args[0][:128], quoted))
        fullname = data_name(args) if cmd is _DATA else cmd.fullname
        if cmd is _DATA:
            arity = arity_error(args)
            if arity is not None:
                self.host.stats.reject(fullname or name.decode())
                return arity
        elif (cmd.arity > 0 and cmd.arity != len(args)) or len(args) < -cmd.arity:
            self.host.stats.reject(cmd.fullname)
            return encode_error(f"wrong number of arguments for '{cmd.fullname}' command")
        if self.resp == 2 and not cmd.pubsub_ok and self.subscribed and self._capture is None:  # EXEC runs all
            if fullname:
                self.host.stats.reject(fullname)
            return encode_subscribed_refusal(name.decode("utf-8", "replace") if cmd is _DATA else cmd.fullname)
        return cmd

    def _captured(self, args: list[bytes]) -> bytes:
        """Run `args` and return its reply instead of sending it (EXEC); counted as a call of its own."""
        capture: list[bytes] = []
        self._capture = capture
        stats = self.host.stats
        stats.mark = stats.total_errors
        t0 = perf_counter_ns()
        try:
            name = self._execute(args)
        finally:
            self._capture = None
        ns = perf_counter_ns() - t0
        self.host.ops.record(self, args, ns)  # EXEC's commands one by one
        if name:
            stats.call(name, ns)
        stats.mark = stats.total_errors  # EXEC fails only of its own errors
        return b"".join(capture)

    def pending_output(self, max_bytes: int | None = None) -> bytes:
        if self._data is not None:
            self._data.engine.before_output()
        return super().pending_output(max_bytes)

    def _write(self, data: bytes) -> bool:
        """Queue a reply (none while CLIENT REPLY OFF or SKIP holds); an error counted (errorstats)."""
        if data[:1] == b"-":
            self.host.stats.error(data)
        if self._capture is not None:
            self._capture.append(data)
            return True
        if self.reply_off or self._reply_skip:
            return True
        return super()._write(data)

    _send = SessionOutput._write  # the batch path's replies: its errors already counted

    def _push(self, data: bytes) -> bool:
        """Queue a push: a message or (un)subscribe confirmation, sent whatever CLIENT REPLY says."""
        if self._capture is not None:
            self._capture.append(data)
            return True
        return super()._write(data)

    # ------------------------------------------------------------ introspection (redis_admin)

    def sub_names(self) -> tuple[Collection[bytes], Collection[bytes], Collection[bytes]]:
        return self._channels.values(), self._patterns.values(), self._shards.values()

    def multi_state(self) -> tuple[int, int, list[bytes] | None, list[list[bytes]]]:
        """(commands queued in MULTI or -1, keys watched, the command blocked in or None,
        the commands queued)."""
        data = self._data
        if data is None:
            return -1, 0, None, []
        blocked, queued = data.client.blocked, data.multi
        return (-1 if queued is None else len(queued), len(data.client.watched),
                None if blocked is None else blocked.args, queued or [])

    def engine(self) -> Engine | None:
        return None if self._data is None else self._data.engine

    def command_tree(self) -> dict[str, list[str]]:
        return session_command_tree()

    def kill(self) -> None:
        """CLIENT KILL: close after what is queued (after this reply, when killing oneself)."""
        self._close(b"", None)

    def unblock(self, error: bool) -> bool:
        """CLIENT UNBLOCK: a pop this session is blocked in answers now; False if none."""
        return self._data is not None and self._data.unblock(error)

    def _error(self, message: str | bytes, code: str = "ERR") -> None:
        self._write(encode_error(message, code))

    def _arity_error(self, fullname: str) -> None:
        self._error(f"wrong number of arguments for '{fullname}' command")

    # ------------------------------------------------------------ connection commands

    def _ping(self, args: list[bytes]) -> None:
        if len(args) > 2:
            self._arity_error("ping")
        elif self.resp == 2 and self.subscribed:
            self._write(b"*2\r\n$4\r\npong\r\n" + encode_bulk(args[1] if len(args) > 1 else b""))
        elif len(args) == 1:
            self._write(PONG)
        else:
            self._write(encode_bulk(args[1]))

    def _echo(self, args: list[bytes]) -> None:
        self._write(encode_bulk(args[1]))

    def _select(self, args: list[bytes]) -> None:
        db = parse_ll(args[1])
        if db is None:
            self._error(ERR_NOT_INTEGER)
        elif not -_INT32 <= db < _INT32:
            self._error(f"value is out of range, value must between {-_INT32} and {_INT32 - 1}")
        elif not 0 <= db < self.config.databases:
            self._error("DB index is out of range")
        else:
            self.db = db
            self._write(OK)

    def _quit(self, args: list[bytes]) -> None:
        self._write(OK)
        self._close(b"", None)

    def _reset(self, args: list[bytes]) -> None:
        self._drop_subscriptions()
        self.host.monitors.discard(self)
        self.resp = 2
        self.db = 0
        self.name = None
        self.reply_off = self.reply_skip_next = self._reply_skip = False
        self._write(encode_simple("RESET"))

    # ------------------------------------------------------------ pub/sub commands

    def _confirm(self, kind: bytes, name: bytes | None, count: int) -> None:
        self._push(b"".join((
            encode_push_header(3, self.resp), encode_bulk(kind),
            encode_null(self.resp) if name is None else encode_bulk(name), encode_int(count))))

    def _count(self, table: dict[str, bytes]) -> int:
        return len(self._shards) if table is self._shards else len(self._channels) + len(self._patterns)

    def _subscribe_to(self, args: list[bytes], table: dict[str, bytes], prefix: str,
                      kind: bytes) -> None:
        atomic = self._capture is not None or (self._data is not None and self._data.holding)
        for raw in ops.subscribe_slice(self, args, atomic):  # a slice per loop turn
            name = _text(raw)
            sid = prefix + name
            if sid not in table:
                if prefix == _PATTERN:
                    refused = self.bus.psubscribe(self, sid, name, "glob")
                elif prefix == _SHARD:
                    refused = self.bus.subscribe(self, sid, shard_subject(name))
                else:
                    refused = self.bus.subscribe(self, sid, name)
                if refused is not None:  # one the network cannot carry or match: said, not confirmed
                    self._error(refused)
                    continue
                table[sid] = raw
            self._confirm(kind, raw, self._count(table))

    def _unsubscribe_from(self, args: list[bytes], table: dict[str, bytes], prefix: str,
                          kind: bytes) -> None:
        targets = args[1:] or list(table.values())
        if not targets:
            self._confirm(kind, None, self._count(table))
        if not args[1:] and targets and sum(map(len, (self._channels, self._patterns, self._shards))) == len(table):
            table.clear()  # all the client holds: dropped at once (a per-subscription
            self.bus.unsubscribe_all(self)  # withdrawal of 100,000 stalled the node 2 s)
            if self._capture is None:  # the confirmations in one write
                self._push(encode_countdown(kind, targets, self.resp))
                return
            for i, raw in enumerate(targets):
                self._confirm(kind, raw, len(targets) - 1 - i)
            return
        for raw in targets:
            sid = prefix + _text(raw)
            if table.pop(sid, None) is not None:
                self.bus.unsubscribe(self, sid)
            self._confirm(kind, raw, self._count(table))

    def _subscribe(self, args: list[bytes]) -> None:
        self._subscribe_to(args, self._channels, _CHANNEL, b"subscribe")

    def _unsubscribe(self, args: list[bytes]) -> None:
        self._unsubscribe_from(args, self._channels, _CHANNEL, b"unsubscribe")

    def _psubscribe(self, args: list[bytes]) -> None:
        self._subscribe_to(args, self._patterns, _PATTERN, b"psubscribe")

    def _punsubscribe(self, args: list[bytes]) -> None:
        self._unsubscribe_from(args, self._patterns, _PATTERN, b"punsubscribe")

    def _ssubscribe(self, args: list[bytes]) -> None:
        self._subscribe_to(args, self._shards, _SHARD, b"ssubscribe")

    def _sunsubscribe(self, args: list[bytes]) -> None:
        self._unsubscribe_from(args, self._shards, _SHARD, b"sunsubscribe")

    # ------------------------------------------------------------ output

    def deliver(self, sid: str, subject: str, reply: str | None,
                headers: bytes | None, payload: bytes) -> None:
        kind = sid[0]
        if kind == "c":
            raw = self._channels.get(sid)
            if raw is None:
                return
            head = _MESSAGE[self.resp]
        elif kind == "p":
            pattern = self._patterns.get(sid)
            if pattern is None:
                return
            raw = _wire(subject)
            head = b"%s$%d\r\n%s\r\n" % (_PMESSAGE[self.resp], len(pattern), pattern)
        else:
            raw = self._shards.get(sid)
            if raw is None:
                return
            head = _SMESSAGE[self.resp]
        self.msgs_out += 1
        self._push(b"%s$%d\r\n%s\r\n$%d\r\n%s\r\n" % (head, len(raw), raw, len(payload), payload))

    def deliver_run(self, sid: str, subject: str, payloads: list[bytes]) -> None:
        if not deliver_channel_run(self, self._channels.get(sid), payloads):
            super().deliver_run(sid, subject, payloads)  # patterns and shard channels, one by one

    # ------------------------------------------------------------ teardown

    def connection_lost(self) -> None:
        """The transport is gone: release the bus subscriptions and the output (idempotent)."""
        self._close(b"", None)
        self._release()

    def _drop_subscriptions(self) -> None:
        if self._channels or self._patterns or self._shards:
            for table in (self._channels, self._patterns, self._shards):
                table.clear()
            self.bus.unsubscribe_all(self)

    def _on_close(self) -> None:
        if self._data is not None:
            self._data.close()
        self._channels.clear()
        self._patterns.clear()
        self._shards.clear()
        self._pause_held.clear()
        self.host.ops.waiting.discard(self)
        if self._in_bus:
            self._in_bus = False
            self.bus.drop_client(self)


Handler = Callable[[RedisSession, list[bytes]], None]


@dataclass(frozen=True, slots=True)
class _Command:
    fullname: str
    arity: int  # redis-server's: n exactly, -n at least n (the name included)
    handler: Handler | None
    pubsub_ok: bool = False  # allowed in RESP2 subscribed mode
    subcommands: Mapping[bytes, _Command] | None = None


def _table(*commands: _Command) -> Mapping[bytes, _Command]:
    return MappingProxyType({c.fullname.rpartition("|")[2].encode(): c for c in commands})


_S = RedisSession


def session_command_tree() -> dict[str, list[str]]:
    """The commands a session answers itself -> their subcommands' full names."""
    return {c.fullname: [] if c.subcommands is None else [s.fullname for s in c.subcommands.values()]
            for c in _COMMANDS.values()}


_DATA = _Command("data", -1, None)  # a data command: the DataSide runs it
_COMMANDS = _table(
    _Command("ping", -1, _S._ping, pubsub_ok=True),
    _Command("echo", 2, _S._echo),
    _Command("select", 2, _S._select),
    _Command("quit", -1, _S._quit, pubsub_ok=True),
    _Command("reset", 1, _S._reset, pubsub_ok=True),
    _Command("hello", -1, admin.hello),
    _Command("subscribe", -2, _S._subscribe, pubsub_ok=True),
    _Command("unsubscribe", -1, _S._unsubscribe, pubsub_ok=True),
    _Command("psubscribe", -2, _S._psubscribe, pubsub_ok=True),
    _Command("punsubscribe", -1, _S._punsubscribe, pubsub_ok=True),
    _Command("ssubscribe", -2, _S._ssubscribe, pubsub_ok=True),
    _Command("sunsubscribe", -1, _S._sunsubscribe, pubsub_ok=True),
    _Command("publish", -3, pubsub.publish_with_reply),
    _Command("spublish", 3, pubsub.spublish),
    _Command("client", -2, None, subcommands=_table(
        _Command("client|id", 2, admin.client_id),
        _Command("client|setname", 3, admin.client_setname),
        _Command("client|getname", 2, admin.client_getname),
        _Command("client|setinfo", 4, admin.client_setinfo),
        _Command("client|list", -2, admin.client_list),
        _Command("client|info", 2, admin.client_info),
        _Command("client|kill", -3, admin.client_kill),
        _Command("client|reply", 3, admin.client_reply),
        _Command("client|unblock", -3, admin.client_unblock),
        _Command("client|no-evict", 3, admin.client_no_evict),
        _Command("client|getredir", 2, admin.client_getredir),
        _Command("client|trackinginfo", 2, admin.client_trackinginfo),
        *ops.client_table(_Command),
    )),
    _Command("command", -1, cmdinfo.command_all, subcommands=_table(
        _Command("command|count", 2, admin.command_count),
        _Command("command|docs", -2, admin.command_docs),
        _Command("command|info", -2, cmdinfo.command_info),
        _Command("command|list", -2, cmdinfo.command_list),
        _Command("command|getkeys", -4, cmdinfo.command_getkeys),
        _Command("command|getkeysandflags", -4, cmdinfo.command_getkeysandflags),
    )),
    _Command("info", -1, admin.info),
    _Command("auth", -2, admin.auth),
    _Command("time", 1, admin.server_time),
    _Command("role", 1, admin.role),
    _Command("replicaof", 3, admin.replicaof),
    _Command("slaveof", 3, admin.replicaof),
    _Command("monitor", 1, monitor.start),
    _Command("pubsub", -2, None, subcommands=_table(
        _Command("pubsub|channels", -2, pubsub.pubsub_channels),
        _Command("pubsub|numsub", -2, pubsub.pubsub_numsub),
        _Command("pubsub|numpat", 2, pubsub.pubsub_numpat),
        _Command("pubsub|shardchannels", -2, pubsub.pubsub_shardchannels),
        _Command("pubsub|shardnumsub", -2, pubsub.pubsub_shardnumsub),
    )),
    *ops.command_table(_Command, _table),
    *ops_mem.command_table(_Command, _table),
    *cluster.command_table(_Command, _table),
)
