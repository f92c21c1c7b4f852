"""The data side of a Redis connection: data commands, MULTI / EXEC / DISCARD / WATCH,
and a client parked by a blocking pop (issue 27).

A RedisSession with a key-value engine owns one `DataSide`; its one hook is
`intercept(args)`, called before the session's own dispatch, plus `run(args)` for a
data command the session resolved. Semantics as redis-server 7.0:

- MULTI queues every command but EXEC, DISCARD, MULTI, WATCH, QUIT and RESET, answering
  +QUEUED; an unknown command, a wrong arity or SAVE (no-multi) inside MULTI is answered
  at once and makes EXEC fail with EXECABORT. An EXEC refused itself (its arity, RESP2 subscribed mode)
  discards the transaction and answers `-EXECABORT Transaction discarded because of:
  <the refusal>`, as redis-server's execCommandAbort. EXEC runs the queue (pub/sub and connection commands
  included) and answers an array of their replies, or a null array when a WATCHed key
  changed since WATCH. Blocking pops inside a transaction do not block.
- Over maxmemory (Engine.oom, kv/__init__.py), as redis-server 7.0.15's processCommand:
  inside MULTI every command but EXEC, DISCARD, QUIT and RESET is refused with OOM
  (after its arity) and EXEC then aborts; an EXEC whose queue holds a denyoom command
  aborts with `-EXECABORT Transaction discarded because of: OOM ...`; a denyoom command
  of a RESP2 subscriber gets OOM before the subscribed-mode refusal.
- A blocked client (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH) sends nothing and its further
  commands wait, unparsed beyond the RESP framing, until the engine wakes it with the
  reply (a push served it or its deadline passed); the node's loop never waits.
- INFO commandstats (redis_stats.py): `intercept` and `run` answer the name a command is
  counted under as a call, "" when it did not run (a refusal is counted here as
  rejected); a blocked pop is counted when it answers.
"""

from __future__ import annotations

from typing import Any, Protocol

from raims_node.bridges.redis_monitor import Client, Monitors, feed, feed_script
from raims_node.bridges.redis_stats import Stats, data_name, data_outcome
from raims_node.bridges.resp import OK, encode_error, encode_subscribed_refusal
from raims_node.kv.commands import BLOCKED, COMMANDS, Cmd, Engine, KVClient
from raims_node.kv.errors import OOM
from raims_node.kv.reply import NULL_ARRAY, Err, encode


class DataHost(Monitors, Protocol):
    stats: Stats


class SessionView(Client, Protocol):
    """What the data side uses of its RedisSession (redis_session.py)."""

    resp: int
    last_cmd: str  # CLIENT LIST's cmd=

    @property
    def host(self) -> DataHost: ...

    @property
    def subscribed(self) -> bool: ...

    @property
    def databases(self) -> int: ...

    def _error(self, message: str | bytes, code: str = "ERR") -> None: ...

    def _arity_error(self, fullname: str) -> None: ...

    def _resolve(self, args: list[bytes]) -> object: ...

    def _captured(self, args: list[bytes]) -> bytes: ...

    def _execute(self, args: list[bytes]) -> str: ...

    def _command(self, args: list[bytes]) -> None: ...

_SCRIPTS = (b"eval", b"evalsha", b"eval_ro", b"evalsha_ro")
_TX = (b"multi", b"exec", b"discard", b"watch", b"unwatch")
_NOT_QUEUED = (b"exec", b"discard", b"multi", b"watch", b"quit", b"reset")
_NO_MULTI = (b"save",)  # redis-server 7.0.15's no-multi commands that raims has (SHUTDOWN, SYNC, PSYNC: not)
_ARITY = {b"multi": 1, b"exec": 1, b"discard": 1, b"unwatch": 1}
_OOM = b"-%s\r\n" % OOM


def _arity_ok(name: bytes, args: list[bytes]) -> bool:
    """A transaction command's arity (WATCH: at least one key)."""
    want = _ARITY.get(name)
    return len(args) >= 2 if name == b"watch" else want is None or len(args) == want


class DataSide:
    def __init__(self, session: SessionView, engine: Engine) -> None:
        self.session = session
        self.engine = engine
        self.client = KVClient(self._wake)
        self.client.db = engine.store.default_db
        hosts = engine.script_monitor_hosts  # a script's commands reach this transport's monitors
        if not any(h is session.host for h in hosts):
            hosts.append(session.host)
            engine.script_monitor = lambda db, args: feed_script(hosts, db, args)
        self.multi: list[list[bytes]] | None = None
        self.multi_error = False
        self.held: list[list[bytes]] = []
        self.blocked_name = ""  # the blocked pop's name and time so far, counted when it answers
        self.blocked_ns = 0

    @property
    def holding(self) -> bool:
        """Blocked in a pop, or replaying what arrived meanwhile: commands wait."""
        return self.client.blocked is not None or bool(self.held)

    def intercept(self, args: list[bytes]) -> str | None:
        """Handle `args` here (the name it ran as, "" when it did not run) or leave it to the
        session's dispatch (None)."""
        if self.client.blocked is not None or self.held:
            self.held.append(args)
            return ""
        name = args[0].lower()
        cmd = COMMANDS.get(name)
        if name == b"info" or name == b"config":
            cmd = None  # the session's INFO (redis_admin.py) and CONFIG (redis_ops.py) add their own
        if cmd is not None and self.multi is None and (not (self.session.resp == 2 and self.session.subscribed)
                                                       or (self.engine.oom and self.engine.denies(cmd, args))):
            return self.run(args, cmd)  # the fast path: a data command outside a transaction
        stats = self.session.host.stats
        if self.multi is not None and self.engine.oom and name in (b"multi", b"watch") and _arity_ok(name, args):
            stats.reject(name.decode())
            self.multi_error = True
            self.session._write(_OOM)
            return ""
        if name in _TX:
            if self.session.resp == 2 and self.session.subscribed and self.multi is None and _arity_ok(name, args):
                stats.reject(name.decode())
                if name == b"exec":  # the arity first, then the context, as redis-server
                    self._exec_abort(encode_subscribed_refusal("exec"))
                else:
                    self.session._write(encode_subscribed_refusal(name.decode()))
                return ""
            ran = self._transaction(name, args)
            if ran and self.session.host.monitors:
                feed(self.session, (args,))
            return name.decode() if ran else ""
        if self.multi is not None and name not in _NOT_QUEUED:
            error = self.session._resolve(args)
            if not isinstance(error, bytes) and name in _NO_MULTI:  # after its arity, as processCommand
                stats.reject(name.decode())
                error = encode_error("Command not allowed inside a transaction")
            elif not isinstance(error, bytes) and self.engine.oom:  # over maxmemory nothing is queued
                full = getattr(error, "fullname", "data")
                stats.reject((data_name(args) or "") if full == "data" else full)
                error = _OOM
            if isinstance(error, bytes):
                self.multi_error = True
                self.session._write(error)
            else:
                self.multi.append(args)
                full = getattr(error, "fullname", "data")  # redis-server's lastcmd: the queued one
                self.session.last_cmd = (data_name(args) or name.decode()) if full == "data" else full
                self.session._write(b"+QUEUED\r\n")
            return ""
        if name == b"reset":
            self.reset()
        elif name == b"select" and len(args) == 2 and args[1].isdigit() \
                and self.session.databases > int(args[1]) >= len(self.engine.store.dbs):
            self.session._error("DB index is out of range")  # a map with fewer databases
            return "select"
        return None

    def run(self, args: list[bytes], cmd: Cmd | None = None) -> str:
        """A data command, with the session's database and protocol: the name it ran as."""
        s = self.session
        client = self.client
        client.db = s.db
        client.resp = s.resp
        first = bool(s.host.monitors) and args[0].lower() in _SCRIPTS  # shown before what it runs
        if first:
            feed(s, (args,))
        if cmd is None:
            cmd = COMMANDS[args[0].lower()]
        reply = self.engine.execute(client, args, cmd)
        if cmd.subcommands and len(args) > 1:  # CLIENT LIST's cmd=: container|sub
            s.last_cmd = data_name(args, cmd) or s.last_cmd
        outcome = data_outcome(s.host.stats, cmd, args, reply)
        if reply is not BLOCKED:
            s._write(encode(reply, s.resp))
        else:
            self.blocked(outcome, 0)
            outcome = ""
        if s.host.monitors and not first:
            feed(s, (args,))
        return outcome

    def blocked(self, name: str, ns: int) -> None:
        """The pop `name` blocked: counted when it answers (`_wake`)."""
        self.blocked_name, self.blocked_ns = name, ns

    def reset(self) -> None:
        self.engine.drop_client(self.client)
        self.multi = None
        self.multi_error = False
        self.held.clear()

    def close(self) -> None:
        self.reset()

    # ------------------------------------------------------------ transactions

    def _transaction(self, name: bytes, args: list[bytes]) -> bool:
        """MULTI, EXEC, DISCARD, WATCH or UNWATCH; False when it did not run (its arity
        refused, or UNWATCH queued), for MONITOR and INFO commandstats."""
        s = self.session
        if not _arity_ok(name, args):
            s.host.stats.reject(name.decode())
            if name == b"exec":
                self._exec_abort(encode_error(f"wrong number of arguments for '{name.decode()}' command"))
                return False
            if self.multi is not None:
                self.multi_error = True
            s._arity_error(name.decode())
            return False
        if name == b"multi":
            if self.multi is not None:
                s._error("MULTI calls can not be nested")
                return True
            self.multi = []
            s._write(OK)
        elif name == b"discard":
            if self.multi is None:
                s._error("DISCARD without MULTI")
                return True
            self.multi = None
            self.multi_error = False
            self.engine.unwatch(self.client)
            s._write(OK)
        elif name == b"watch":
            if self.multi is not None:
                s._error("WATCH inside MULTI is not allowed")
                return True
            self.client.db = s.db
            self.engine.watch(self.client, args[1:])
            s._write(OK)
        elif name == b"unwatch":
            if self.multi is not None:
                self.multi.append(args)
                s._write(b"+QUEUED\r\n")
                return False
            self.engine.unwatch(self.client)
            s._write(OK)
        else:
            self._exec()
        return True

    def _exec_abort(self, error: bytes) -> None:
        """An EXEC refused before it runs (its arity, subscribed mode): as redis-server's
        execCommandAbort, the transaction (if any) is discarded, the keys unwatched and
        the refusal said as `-EXECABORT Transaction discarded because of: <error>`."""
        self.multi = None
        self.multi_error = False
        self.engine.unwatch(self.client)
        self.session._write(b"-EXECABORT Transaction discarded because of: "
                            + (error[5:] if error.startswith(b"-ERR ") else error[1:]))

    def _exec(self) -> None:
        s = self.session
        queue = self.multi
        if queue is None:
            s._error("EXEC without MULTI")
            return
        if self.engine.oom and any(cmd is not None and self.engine.denies(cmd, args)
                                   for args in queue for cmd in (COMMANDS.get(args[0].lower()),)):
            s.host.stats.reject("exec")
            self._exec_abort(_OOM)
            return
        self.multi = None
        if self.multi_error:
            self.multi_error = False
            self.engine.unwatch(self.client)
            s._error("Transaction discarded because of previous errors.", "EXECABORT")
            return
        dirty = self.client.watch_dirty
        self.engine.unwatch(self.client)
        if dirty:
            s._write(encode(NULL_ARRAY, s.resp))
            return
        parts: list[bytes] = [b"*%d\r\n" % len(queue)]
        self.client.in_multi = True
        try:
            for args in queue:
                if args[0].lower() == b"unwatch":
                    parts.append(OK)
                    s.host.stats.call("unwatch", 0)
                    continue
                parts.append(s._captured(args))
        finally:
            self.client.in_multi = False
        s._write(b"".join(parts))

    # ------------------------------------------------------------ blocking

    def unblock(self, error: bool) -> bool:
        """CLIENT UNBLOCK of this client: its pop answers as timed out, or with an error."""
        client = self.client
        if client.blocked is None:
            return False
        if error:
            self.engine.unblock(client)
            self._wake(Err(b"UNBLOCKED client unblocked via CLIENT UNBLOCK"))
        else:
            self.engine.time_out(client)
        return True

    def _wake(self, reply: Any) -> None:
        s = self.session
        if s.closing:
            return
        stats = s.host.stats
        before = stats.total_errors
        s._write(encode(reply, s.resp))
        if self.blocked_name:  # counted now, as redis-server's updateStatsOnUnblock
            stats.aside(self.blocked_name, self.blocked_ns, stats.total_errors - before)
            self.blocked_name = ""
        held, self.held = self.held, []
        for args in held:
            if s.closing:
                return
            s._command(args)
