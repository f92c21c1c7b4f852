"""The data commands' engine: a table of commands, the per-client state, blocking pops,
keyspace notifications and the hand-off to persistence (issue 27).

Sans-IO: `Engine.execute(client, args)` returns a reply value (reply.py) or BLOCKED; a
blocked client is answered later through its `wake` callback, when a push serves it
(`serve_ready`, run after every command) or when its deadline passes (`tick`). Command
families live in their own modules (strings, keys, hashes, lists, sets, zsets) and
register here with `@command(name, arity, write=...)`; arity is redis-server's (n
exactly, -n at least n, the name included).

Decisions:
- Without a map (`writable` False) a write command is refused with NO_MAP and reads run
  against an empty store: GET answers nil, as the manual says ("data retrieved will be
  zero").
- Write commands are handed to `log(db, commands)` (persist.py's append-only log) only
  when they changed something; commands whose effect depends on the clock or on chance
  are logged as their effect (relative expiry as PEXPIREAT, SPOP as SREM, INCRBYFLOAT as
  SET ... KEEPTTL, blocking pops as their plain form, expired keys as DEL), so a replay
  rebuilds the same state at any time.
- Keyspace notifications (`notify-keyspace-events`, Redis's flags) go to `publish(channel,
  payload)`, which the bridge points at the node's Redis service buses.
- maxmemory (CONFIG SET; policy noeviction only): while `oom` is set (`sample_memory`,
  never per command), redis-server's denyoom commands are refused with OOM; the
  decisions are in the package's docstring (kv/__init__.py).
"""

from __future__ import annotations

import importlib
import logging
import re
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from raims_node.kv.errors import (
    NO_MAP,
    NOT_FLOAT,
    NOT_INTEGER,
    OOM,
    SYNTAX,
    WRONGTYPE,
    CommandError,
)
from raims_node.kv.memory import DENYOOM, rss_bytes
from raims_node.kv.notify import (
    N_EXPIRED,
    N_GENERIC,
    N_HASH,
    N_KEY_MISS,
    N_KEYEVENT,
    N_KEYSPACE,
    N_LIST,
    N_NEW,
    N_SET,
    N_STREAM,
    N_STRING,
    N_ZSET,
    read_keys,
    run_reading,
)
from raims_node.kv.reply import NULL_ARRAY, Err
from raims_node.kv.store import KVStore, ZSet

log = logging.getLogger("raims.kv")

FAMILIES = ("strings", "keys", "hashes", "lists", "sets", "zsets", "zsets_algebra", "server", "randoms",
            "objects", "bitmaps", "bitfield", "lcs", "hll", "sort", "geo", "streams_cmds", "streams_groups",
            "streams_claim", "streams_info", "dump", "scripting")
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1

class _Blocked:
    __slots__ = ()


BLOCKED = _Blocked()


@dataclass(slots=True)
class BlockState:
    keys: list[bytes]
    deadline_ms: int | None  # None: for ever
    args: list[bytes]
    db: int
    timeout_reply: Any = NULL_ARRAY  # the answer at the deadline (WAIT's: 0)


class KVClient:
    """One connection's data-command state: its database, RESP version, WATCHed keys and
    a blocking pop in progress. `wake(reply)` answers a blocked command."""

    __slots__ = ("db", "resp", "watched", "watch_dirty", "blocked", "wake", "in_multi")

    def __init__(self, wake: Callable[[Any], None] | None = None) -> None:
        self.db = 0
        self.resp = 2
        self.watched: set[tuple[int, bytes]] = set()
        self.watch_dirty = False
        self.blocked: BlockState | None = None
        self.wake = wake
        self.in_multi = False


Handler = Callable[["Engine", KVClient, list[bytes]], Any]


@dataclass(frozen=True, slots=True)
class Cmd:
    name: str
    arity: int
    handler: Handler
    write: bool
    subcommands: tuple[str, ...] = ()  # a container's subcommands this map answers (COMMAND INFO)
    # refused over maxmemory: True, or a test of the arguments (Engine.denies)
    denyoom: bool | Callable[[Engine, list[bytes]], bool] = False


COMMANDS: dict[bytes, Cmd] = {}
BLOCK_TYPES: dict[bytes, type] = {b"bzpopmin": ZSet, b"bzpopmax": ZSet, b"bzmpop": ZSet}  # the others pop lists
# blocking commands served on a condition of their own (XREAD): (engine, client, the
# blocked args, the ready key, whatever it holds now, maybe nothing) -> the command to
# run now, an error to answer, or None to wait on
BLOCK_READY: dict[bytes, Callable[[Engine, KVClient, list[bytes], bytes], list[bytes] | Err | None]] = {}
# commands of the map file only (persist.py's snapshot and log), never a client's
REPLAY_ONLY: dict[bytes, Handler] = {}


def command(name: str, arity: int, write: bool = False, subcommands: tuple[str, ...] = (),
            denyoom: Callable[[Engine, list[bytes]], bool] | None = None) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        key = name.encode()
        COMMANDS[key] = Cmd(name, arity, fn, write, subcommands, denyoom or key in DENYOOM)
        return fn
    return register


def load_families() -> None:
    for fam in FAMILIES:
        importlib.import_module(f"raims_node.kv.{fam}")


def is_data_command(name: bytes) -> bool:
    """`name` (lower case) is served by the engine."""
    if not COMMANDS:
        load_families()
    return name in COMMANDS


def arity_error(args: list[bytes]) -> bytes | None:
    """The encoded arity error of data command `args`, None when its count fits."""
    cmd = COMMANDS[args[0].lower()]
    n = len(args)
    if (cmd.arity > 0 and cmd.arity != n) or n < -cmd.arity:
        return b"-ERR wrong number of arguments for '%s' command\r\n" % cmd.name.encode()
    return None


# ------------------------------------------------------------------ argument parsing

_LL = re.compile(rb"0|-?[1-9][0-9]{0,18}")


def parse_int(b: bytes, err: bytes = NOT_INTEGER) -> int:
    """A signed 64-bit decimal as redis-server's string2ll accepts it; `err` otherwise."""
    if _LL.fullmatch(b) is None:
        raise CommandError(err)
    v = int(b)
    if not INT64_MIN <= v <= INT64_MAX:
        raise CommandError(err)
    return v


INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def parse_ranged(b: bytes, lo: int, hi: int) -> int:
    """An integer in [lo, hi] as redis-server's getRangeLongFromObjectOrReply reads it
    without a message of its own (getIntFromObjectOrReply for a DB index: INT32)."""
    v = parse_int(b)
    if not lo <= v <= hi:
        raise CommandError(b"ERR value is out of range, value must between %d and %d" % (lo, hi))
    return v


_HEX_FLOAT = re.compile(rb"[+-]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?[0-9]+)?")


def parse_float(b: bytes, err: bytes = NOT_FLOAT) -> float:
    """A double as strtod reads it (no blanks, no NaN, the hexadecimal form taken, out of
    range values as inf or 0); `err` otherwise."""
    if not b or b[0] in b" \t\r\n\x0b\x0c" or b[-1] in b" \t\r\n\x0b\x0c" or b"_" in b:
        raise CommandError(err)
    try:
        v = float(b)
    except ValueError:
        if _HEX_FLOAT.fullmatch(b) is None:
            raise CommandError(err) from None
        try:
            v = float.fromhex(b.decode())
        except OverflowError:
            v = float("-inf") if b[:1] == b"-" else float("inf")
    if v != v:
        raise CommandError(err)
    return v


def parse_double(b: bytes, err: bytes = NOT_FLOAT) -> float:
    """A double as redis-server's getDoubleFromObject reads it: parse_float, with
    strtod's range errors refused (1e400 overflows, 1e-400 underflows to 0; "inf" itself
    is taken). ZADD, ZINCRBY, WEIGHTS and the geo commands read their numbers so."""
    v = parse_float(b, err)
    low = b.lower()
    if v in (float("inf"), float("-inf")):
        if b"inf" not in low:
            raise CommandError(err)
    elif v == 0.0:
        if b"x" in low:
            digits, nonzero = low.partition(b"x")[2].partition(b"p")[0], b"123456789abcdef"
        else:
            digits, nonzero = low.partition(b"e")[0], b"123456789"
        if any(ch in nonzero for ch in digits):
            raise CommandError(err)
    return v


def syntax_error() -> CommandError:
    return CommandError(SYNTAX)


class Saver(Protocol):
    """What SAVE / BGSAVE / LASTSAVE and INFO use of the map file (persist.MapFile)."""

    last_save: float  # unix time of the last snapshot
    saved_dirty: int  # the store's change count at that snapshot
    path: Path  # the snapshot
    log_path: Path  # the append-only log

    def rewrite(self, store: KVStore) -> None: ...


# ------------------------------------------------------------------ the engine

class Engine:
    """Executes data commands against a KVStore for the Redis sessions of one node."""

    def __init__(self, store: KVStore, log: Callable[[int, list[list[bytes]]], None] | None = None) -> None:
        load_families()
        self.store = store
        self.log = log
        # the node's Redis buses (hub.py): keyspace notifications, a script's PUBLISH (its
        # receivers' count)
        self.publish: Callable[[str, bytes], int | None] | None = None
        self.notify_flags = 0
        self.held: list[tuple[Any, Any]] | None = None  # a reader's events, held (notify.py)
        self.prop: list[list[bytes]] | None = None  # a command's effect, when not itself
        self.blocked_clients: set[KVClient] = set()
        self.commands_processed = 0
        self.loading = False
        self.internal_errors = 0
        self.flush_log: Callable[[], None] | None = None  # hand the log to the OS (persist.py)
        # the log's hook for a command already encoded (fast.py); set beside `log`
        self.log_encoded: Callable[[int, bytes], None] | None = None
        self.saver: Saver | None = None  # the map file, for SAVE / BGSAVE / LASTSAVE (persist.py)
        self.started = time.time()
        self.scripts: Any = None  # scripting.Scripts: the Lua state, made by the first script
        self.script_time_limit_ms = 5000  # busy-reply-threshold (scripting.py)
        self.in_script = False  # a script runs: blocked clients wait for its end
        # MONITOR of the commands a script runs (the Redis bridge's monitors)
        self.script_monitor: Callable[[int, list[bytes]], None] | None = None
        self.script_monitor_hosts: list[Any] = []
        self.save_failed = False  # the last SAVE / BGSAVE failed
        self.maxmemory, self.oom = 0, False  # bytes (0 none); the last sample was over it: denyoom refused
        self.memory_probe: Callable[[], int] = rss_bytes  # the node's used memory (memory.py)
        store.on_expired = self._expired

    # ------------------------------------------------------------ execution

    def execute(self, client: KVClient, args: list[bytes], cmd: Cmd | None = None) -> Any:
        if cmd is None:
            cmd = COMMANDS[args[0].lower()]
        n = len(args)
        arity = cmd.arity
        if (arity != n if arity > 0 else n < -arity):
            return Err(b"ERR wrong number of arguments for '%s' command" % cmd.name.encode())
        store = self.store
        if cmd.write and not store.writable:
            return Err(NO_MAP)
        if self.oom and cmd.denyoom and not client.in_multi and self.denies(cmd, args):
            return Err(OOM)
        self.commands_processed += 1
        before = store.dirty
        self.prop = None
        try:
            if self.notify_flags & N_KEY_MISS and (keys := read_keys(args[0].lower(), args)):
                reply = run_reading(self, client, cmd, args, keys)
            else:
                reply = cmd.handler(self, client, args)
        except CommandError as exc:
            reply = Err(exc.text)
        except Exception:  # a bug must cost this command only, never the connection or the node
            self.internal_errors += 1
            log.exception("data command %r failed", cmd.name)
            reply = Err(b"ERR internal error in '%s', see the node's log" % cmd.name.encode())
        if store.dirty != before and cmd.write and self.log is not None and not self.loading:
            self.log(client.db, self.prop if self.prop is not None else [args])
        if store.ready and not self.in_script:
            self.serve_ready()
        return reply

    def denies(self, cmd: Cmd, args: list[bytes]) -> bool:
        """`args` is a denyoom command (refused over maxmemory)."""
        test = cmd.denyoom
        return test is True or (test is not False and test(self, args))

    def sample_memory(self) -> int:
        """Sample the node's used memory and set `oom` from it: the node's tick (50 ms),
        CONFIG SET maxmemory and INFO memory; never per command."""
        used = self.memory_probe()
        self.oom = 0 < self.maxmemory < used
        return used

    def replay(self, client: KVClient, args: list[bytes]) -> None:
        """Apply a logged command (persist.py's loader)."""
        name = args[0].lower()
        if name == b"select":
            client.db = int(args[1])
            return
        cmd = COMMANDS.get(name)
        handler = cmd.handler if cmd is not None else REPLAY_ONLY.get(name)
        if handler is None:
            raise CommandError(b"ERR unknown command in the map's log: " + name[:64])
        try:
            handler(self, client, args)
        except CommandError:
            pass  # a logged command that failed then fails alike now

    def before_output(self) -> None:
        """Replies are about to leave: the log reaches the OS first, so an acknowledged
        write survives a crash of the process (redis-server's AOF-before-reply order)."""
        if self.flush_log is not None:
            self.flush_log()

    # ------------------------------------------------------------ typed lookups

    def get(self, db: int, key: bytes, typ: type) -> Any:
        v = self.store.lookup(db, key)
        if v is not None and type(v) is not typ:
            raise CommandError(WRONGTYPE)
        return v

    def get_string(self, db: int, key: bytes) -> bytes | None:
        v: bytes | None = self.get(db, key, bytes)
        return v

    def get_or_new(self, db: int, key: bytes, typ: type) -> tuple[Any, bool]:
        v = self.get(db, key, typ)
        if v is None:
            v = typ()
            self.store.dbs[db].data[key] = v
            if self.store.on_new is not None:
                self.store.on_new(db, key)
            return v, True
        return v, False

    def get_zset(self, db: int, key: bytes) -> ZSet | None:
        v: ZSet | None = self.get(db, key, ZSet)
        return v

    # ------------------------------------------------------------ notifications

    def set_notify_flags(self, flags: int) -> None:
        """notify-keyspace-events; with `n` the store tells each key it creates."""
        self.notify_flags = flags
        self.store.on_new = self._new_key if flags & N_NEW else None

    def _new_key(self, db: int, key: bytes) -> None:
        """redis-server's dbAdd: the "new" event, before the command's own."""
        self.notify(N_NEW, "new", db, key)

    def created(self, db: int, key: bytes) -> None:
        """A command made `key` without `put` / `get_or_new` (a sorted set, a stream)."""
        if self.store.on_new is not None:
            self.store.on_new(db, key)

    def notify(self, flag: int, event: str, db: int, key: bytes) -> None:
        flags = self.notify_flags
        if not flags & flag or self.publish is None or self.loading:
            return
        if flags & N_KEYSPACE:
            self.publish(f"__keyspace@{db}__:{key.decode('utf-8', 'surrogateescape')}", event.encode())
        if flags & N_KEYEVENT:
            self.publish(f"__keyevent@{db}__:{event}", key)

    def read_miss(self, db: int, key: bytes) -> None:
        """A read lookup inside a command (SORT's patterns) found no key: its "keymiss"
        among the command's held events (notify.py)."""
        if self.held is not None:
            self.held.append((None, (db, key, False)))

    def _expired(self, db: int, key: bytes) -> None:
        if self.loading:
            return
        if self.log is not None:
            self.log(db, [[b"DEL", key]])
        self.notify(N_EXPIRED, "expired", db, key)

    # ------------------------------------------------------------ blocking pops

    def block(self, client: KVClient, keys: Iterable[bytes], timeout_ms: int, args: list[bytes],
              timeout_reply: Any = NULL_ARRAY) -> Any:
        """Park `client` on `keys` (0: no deadline; no keys: only the deadline or CLIENT
        UNBLOCK answers it, with `timeout_reply`); in MULTI the command answers null."""
        if client.in_multi:
            return NULL_ARRAY
        keys = list(dict.fromkeys(keys))
        deadline = self.store.now_ms() + timeout_ms if timeout_ms else None
        client.blocked = BlockState(keys, deadline, args, client.db, timeout_reply)
        for k in keys:
            self.store.blocked.setdefault((client.db, k), deque()).append(client)
        self.blocked_clients.add(client)
        return BLOCKED

    def unblock(self, client: KVClient) -> None:
        state = client.blocked
        if state is None:
            return
        client.blocked = None
        self.blocked_clients.discard(client)
        for k in state.keys:
            q = self.store.blocked.get((state.db, k))
            if q is not None:
                try:
                    q.remove(client)
                except ValueError:
                    pass
                if not q:
                    del self.store.blocked[(state.db, k)]

    def time_out(self, client: KVClient) -> None:
        """A blocked client answers as its timeout would have it (nil; WAIT 0)."""
        state = client.blocked
        self.unblock(client)
        if client.wake is not None:
            client.wake(NULL_ARRAY if state is None else state.timeout_reply)

    def serve_ready(self) -> None:
        """Answer the clients blocked on keys that received elements (or were deleted:
        BLOCK_READY's commands look), first come first served; a client waits on while
        the key holds another type than its pop takes (BLPOP on a key that became a
        sorted set), as in redis-server; over maxmemory too (its check was at its start)."""
        store = self.store
        while store.ready:
            ready, store.ready = store.ready, []
            for db, key in dict.fromkeys(ready):
                for client in list(store.blocked.get((db, key), ())):
                    state = client.blocked
                    if state is None:
                        continue
                    run: Any = state.args
                    serve_if = BLOCK_READY.get(run[0].lower())
                    if serve_if is None:
                        value = store.dbs[db].data.get(key)
                        if not value:
                            break
                        if type(value) is not BLOCK_TYPES.get(run[0].lower(), deque):
                            continue
                    else:
                        saved = client.db
                        client.db = state.db
                        run = serve_if(self, client, run, key)
                        client.db = saved
                        if run is None:
                            continue
                    self.unblock(client)
                    if type(run) is Err:
                        reply: Any = run
                    else:
                        saved = client.db
                        client.db = state.db
                        oom, self.oom = self.oom, False  # checked when it blocked
                        reply = self.execute(client, run)
                        client.db, self.oom = saved, oom
                    if client.wake is not None:
                        client.wake(reply)

    def tick(self) -> None:
        """Time-driven work: active expiry and blocked clients' deadlines."""
        self.store.sweep()
        if self.blocked_clients:
            now = self.store.now_ms()
            for client in [c for c in self.blocked_clients
                           if c.blocked is not None and c.blocked.deadline_ms is not None
                           and c.blocked.deadline_ms <= now]:
                self.time_out(client)
        if self.store.ready:
            self.serve_ready()

    # ------------------------------------------------------------ clients

    def watch(self, client: KVClient, keys: Iterable[bytes]) -> None:
        for k in keys:
            wk = (client.db, k)
            if wk not in client.watched:
                client.watched.add(wk)
                self.store.watchers.setdefault(wk, set()).add(client)

    def unwatch(self, client: KVClient) -> None:
        for wk in client.watched:
            s = self.store.watchers.get(wk)
            if s is not None:
                s.discard(client)
                if not s:
                    del self.store.watchers[wk]
        client.watched.clear()
        client.watch_dirty = False

    def drop_client(self, client: KVClient) -> None:
        self.unblock(client)
        self.unwatch(client)


def apply_deadline(e: Engine, c: KVClient, key: bytes, when: int) -> None:
    """Give live `key` the deadline `when` (ms), or delete it when that has passed; logged
    as PEXPIREAT or DEL."""
    store = e.store
    if when <= store.now_ms():
        store.delete(c.db, key)
        e.prop = [[b"DEL", key]]
        e.notify(N_GENERIC, "del", c.db, key)
    else:
        store.set_expire(c.db, key, when)
        e.prop = [[b"PEXPIREAT", key, b"%d" % when]]
        e.notify(N_GENERIC, "expire", c.db, key)


def parse_count(raw: bytes) -> int:
    """The optional count of LPOP / SPOP / ZPOPMIN and friends."""
    err = b"ERR value is out of range, must be positive"
    count = parse_int(raw, err)
    if count < 0:
        raise CommandError(err)
    return count


def parse_mpop(a: list[bytes], first: int, sides: tuple[bytes, bytes]) -> tuple[list[bytes], bool, int]:
    """LMPOP's / ZMPOP's arguments from `first` (numkeys): the keys, whether the side is
    sides[0] (LEFT for lists, MAX for sorted sets), the count (1 without COUNT); redis-server's order of checks:
    numkeys, the side, COUNT."""
    numkeys = parse_int(a[first], b"ERR numkeys should be greater than 0")
    if numkeys <= 0:
        raise CommandError(b"ERR numkeys should be greater than 0")
    where_at = first + 1 + numkeys
    if where_at >= len(a) or a[where_at].lower() not in sides:
        raise syntax_error()
    count = -1
    j = where_at + 1
    while j < len(a):
        if count == -1 and a[j].lower() == b"count" and j + 1 < len(a):
            count = parse_int(a[j + 1], b"ERR count should be greater than 0")
            if count <= 0:
                raise CommandError(b"ERR count should be greater than 0")
            j += 2
        else:
            raise syntax_error()
    return a[first + 1:where_at], a[where_at].lower() == sides[0], max(count, 1)


def parse_card_limit(rest: list[bytes]) -> int:
    """SINTERCARD's and ZINTERCARD's options after the keys: [LIMIT limit] (repeatable,
    the last wins); 0 is no limit."""
    limit = 0
    for i in range(0, len(rest), 2):
        if rest[i].lower() != b"limit" or i + 1 >= len(rest):
            raise syntax_error()
        limit = parse_int(rest[i + 1], b"ERR LIMIT can't be negative")
        if limit < 0:
            raise CommandError(b"ERR LIMIT can't be negative")
    return limit


def check_writable(engine: Engine) -> None:
    if not engine.store.writable:
        raise CommandError(NO_MAP)


__all__ = ["BLOCKED", "COMMANDS", "INT64_MAX", "INT64_MIN", "Engine", "KVClient", "command",
           "parse_double", "parse_float", "parse_int", "syntax_error", "WRONGTYPE", "NOT_INTEGER",
           "N_GENERIC", "N_HASH", "N_LIST", "N_SET", "N_STREAM", "N_STRING", "N_ZSET"]
