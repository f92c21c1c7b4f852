"""The map file: a snapshot plus an append-only log, both RESP command streams (issue 27).

Manual `map_file` / `-m` ("where the data is stored"; "the kv_server command will
initialize a map file"). Layout (decisions; the reference maps a shared-memory segment,
which a Python node cannot share with other processes usefully):

- `PATH` is the snapshot: a header command `RAIMSKV 1 <databases>` then, per database
  with keys, `SELECT n` and commands that rebuild each key (SET, RPUSH, HSET, SADD, ZADD
  in chunks of CHUNK elements, XADD per stream entry then the stream's counters and
  groups, PEXPIREAT for a deadline). `ms_kv init PATH` writes the
  header alone. A `sysv:`, `posix:` or `file:` prefix (the manual's `-m sysv:raikv.shm`)
  is dropped and the rest used as a path.
- `PATH.log` is the append-only log: every write command that changed something, as
  its effect (commands.py: relative expiry as PEXPIREAT, SPOP as SREM, ...), with
  `SELECT n` when the database changes.
- Start: the snapshot then the log are replayed (a deadline already past removes its
  key, so expiry survives a restart); a torn last command (a crash mid-write) is cut
  off with a warning; then the log is compacted into a new snapshot (written to
  `PATH.tmp`, fsync'ed, renamed over PATH, then the log emptied). The same rewrite runs
  when the log outgrows REWRITE_MIN_BYTES and twice the snapshot.
- fsync policy "everysec", as redis-server's default `appendfsync everysec`: log bytes
  are handed to the OS before any reply leaves the node (Engine.before_output, called
  when a Redis session's output is taken) or at the end of the loop turn (the daemon's
  `schedule`; at once without one), and fsync'ed at most once per FSYNC_INTERVAL_S from
  the daemon's tick: a process crash loses no acknowledged write, a machine crash at
  most about a second of writes. A failed write (disk full) is logged and retried with
  the bytes kept in memory. Compaction runs in the loop: a pause proportional to the map.
"""

from __future__ import annotations

import logging
import os
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path

from raims_node.kv.commands import Engine, KVClient
from raims_node.kv.errors import CommandError, MapFileError
from raims_node.kv.reply import format_double
from raims_node.kv.store import KVStore, ZSet
from raims_node.kv.streams import Stream, fmt_id

log = logging.getLogger("raims.kv")

MAGIC = b"RAIMSKV"
FORMAT = b"1"
CHUNK = 512
FSYNC_INTERVAL_S = 1.0
REWRITE_MIN_BYTES = 64 * 1024 * 1024
_PREFIXES = ("sysv:", "posix:", "file:")


def map_path(spec: str) -> Path:
    for p in _PREFIXES:
        if spec.startswith(p):
            spec = spec[len(p):]
            break
    return Path(spec)


def encode_command(args: list[bytes]) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def header(databases: int) -> bytes:
    return encode_command([MAGIC, FORMAT, b"%d" % databases])


def init_map(path: Path, databases: int = 16, force: bool = False) -> None:
    """Create an empty map at `path` (`ms_kv init`)."""
    if path.exists() and not force:
        raise MapFileError(f"map file {path} already exists (use --force to empty it)")
    _write_atomic(path, header(databases))
    log_path(path).write_bytes(b"")


def log_path(path: Path) -> Path:
    return path.with_name(path.name + ".log")


def _write_atomic(path: Path, data: bytes | Iterator[bytes]) -> int:
    tmp = path.with_name(path.name + ".tmp")
    size = 0
    try:
        with open(tmp, "wb") as f:
            for chunk in ([data] if isinstance(data, bytes) else data):
                f.write(chunk)
                size += len(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        raise MapFileError(f"map file {path}: {exc.strerror or exc}") from None
    return size


def parse_commands(data: bytes) -> tuple[list[list[bytes]], int]:
    """The complete commands of a RESP command stream and the offset after the last one;
    MapFileError for bytes that are not such a stream."""
    out: list[list[bytes]] = []
    pos = 0
    n = len(data)
    while pos < n:
        start = pos
        if data[pos] != 42:
            raise MapFileError(f"corrupt map data at offset {pos}")
        nl = data.find(b"\r\n", pos)
        if nl < 0:
            return out, start
        count = _number(data[pos + 1:nl], pos)
        pos = nl + 2
        args: list[bytes] = []
        for _ in range(count):
            nl = data.find(b"\r\n", pos)
            if nl < 0:
                return out, start
            if data[pos] != 36:
                raise MapFileError(f"corrupt map data at offset {pos}")
            size = _number(data[pos + 1:nl], pos)
            pos = nl + 2
            if pos + size + 2 > n:
                return out, start
            args.append(data[pos:pos + size])
            pos += size + 2
        out.append(args)
    return out, pos


def _number(text: bytes, pos: int) -> int:
    if not text.isdigit():
        raise MapFileError(f"corrupt map data at offset {pos}")
    return int(text)


def snapshot_commands(store: KVStore) -> Iterator[bytes]:
    """The snapshot of `store` as RESP commands."""
    yield header(len(store.dbs))
    now = store.now_ms()
    for i, d in enumerate(store.dbs):
        live = [(k, v) for k, v in d.data.items() if d.expires.get(k, now + 1) > now]
        if not live:
            continue
        yield encode_command([b"SELECT", b"%d" % i])
        for key, value in live:
            for cmd in _rebuild(key, value):
                yield encode_command(cmd)
            when = d.expires.get(key)
            if when is not None:
                yield encode_command([b"PEXPIREAT", key, b"%d" % when])


def _chunks(items: list[bytes], per: int) -> Iterator[list[bytes]]:
    for i in range(0, len(items), per):
        yield items[i:i + per]


def _rebuild(key: bytes, value: object) -> Iterator[list[bytes]]:
    if isinstance(value, bytes):
        yield [b"SET", key, value]
    elif isinstance(value, deque):
        for part in _chunks(list(value), CHUNK):
            yield [b"RPUSH", key, *part]
    elif isinstance(value, dict):
        flat = [x for kv in value.items() for x in kv]
        for part in _chunks(flat, 2 * CHUNK):
            yield [b"HSET", key, *part]
    elif isinstance(value, set):
        for part in _chunks(list(value), CHUNK):
            yield [b"SADD", key, *part]
    elif isinstance(value, ZSet):
        flat = [x for s, m in value.order for x in (format_double(s), m)]
        for part in _chunks(flat, 2 * CHUNK):
            yield [b"ZADD", key, *part]
    elif isinstance(value, Stream):
        yield from _rebuild_stream(key, value)


def _rebuild_stream(key: bytes, s: Stream) -> Iterator[list[bytes]]:
    """A stream: its entries, its counters, its groups with their consumers and pending
    entries (streams_groups.py's XRESTORE commands keep the times)."""
    for sid, flat in s.entries.items():
        yield [b"XADD", key, fmt_id(sid), *flat]
    yield [b"XRESTORE.STREAM", key, fmt_id(s.last_id), b"%d" % s.entries_added, fmt_id(s.max_deleted)]
    for name, g in s.groups.items():
        yield [b"XGROUP", b"CREATE", key, name, fmt_id(g.last_id), b"ENTRIESREAD", b"%d" % g.entries_read]
        for cname, cons in g.consumers.items():
            yield [b"XRESTORE.CONSUMER", key, name, cname, b"%d" % cons.seen_time]
        for sid, n in g.pel.items():
            yield [b"XRESTORE.NACK", key, name, n.consumer, fmt_id(sid), b"%d" % n.delivery_time,
                   b"%d" % n.delivery_count]


class MapFile:
    """The open map: `load` it into an engine, then the engine's `log` hook appends."""

    def __init__(self, spec: str, schedule: Callable[[Callable[[], None]], object] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.path = map_path(spec)
        self.log_path = log_path(self.path)
        self.schedule = schedule
        self.clock = clock
        self.databases = 16
        self._buf = bytearray()
        self._scheduled = False
        self._fd: int | None = None
        self._db = -1  # the database the log's last SELECT chose
        self._unsynced = False
        self._last_sync = clock()
        self.log_bytes = 0
        self.snapshot_bytes = 0
        self.rewrites = 0
        self.last_save = time.time()  # unix time of the last snapshot (LASTSAVE)
        self.saved_dirty = 0  # the store's change count at that snapshot
        self.failing = False  # the last write to the log failed (disk full...)
        self._read_header()

    def _read_header(self) -> None:
        try:
            with open(self.path, "rb") as f:
                head = f.read(256)
        except FileNotFoundError:
            raise MapFileError(f"map file {self.path} does not exist; create it with: ms_kv init {self.path}") from None
        except OSError as exc:
            raise MapFileError(f"map file {self.path}: {exc.strerror}") from None
        try:
            cmds, _ = parse_commands(head)
        except MapFileError:
            cmds = []
        if not cmds or cmds[0][:2] != [MAGIC, FORMAT] or len(cmds[0]) != 3 or not cmds[0][2].isdigit():
            raise MapFileError(f"{self.path} is not a raims map file (create one with: ms_kv init PATH)")
        self.databases = int(cmds[0][2])

    def load(self, engine: Engine) -> int:
        """Replay the snapshot and the log into `engine`, compact, open the log; the number
        of commands replayed."""
        client = KVClient()
        engine.loading = True
        replayed = 0
        try:
            for path, is_log in ((self.path, False), (self.log_path, True)):
                try:
                    data = path.read_bytes()
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    raise MapFileError(f"map file {path}: {exc.strerror}") from None
                cmds, end = parse_commands(data)
                if end < len(data):
                    if not is_log:
                        raise MapFileError(f"map file {path} is truncated at offset {end}")
                    log.warning("map log %s: a torn last command of %d bytes is dropped", path, len(data) - end)
                for args in cmds[1:] if not is_log else cmds:
                    try:
                        engine.replay(client, args)
                    except CommandError as exc:
                        raise MapFileError(f"map file {path}: {exc}") from None
                    replayed += 1
            engine.store.sweep(limit=1 << 62)  # deadlines that passed while the node was down
        finally:
            engine.loading = False
        self.rewrite(engine.store)
        log.info("map %s loaded: %d commands replayed, %d keys", self.path, replayed,
                 sum(len(d.data) for d in engine.store.dbs))
        return replayed

    def rewrite(self, store: KVStore) -> None:
        """Compact: a new snapshot of `store`, then an empty log."""
        self.flush()
        self.snapshot_bytes = _write_atomic(self.path, snapshot_commands(store))
        if self._fd is not None:
            os.close(self._fd)
        try:
            self._fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        except OSError as exc:
            raise MapFileError(f"map log {self.log_path}: {exc.strerror}") from None
        self._db = -1
        self.log_bytes = 0
        self.rewrites += 1
        self.last_save = time.time()
        self.saved_dirty = store.dirty

    # ------------------------------------------------------------ the log

    def append(self, db: int, commands: list[list[bytes]]) -> None:
        """The engine's `log` hook."""
        buf = self._buf
        if db != self._db:
            buf += encode_command([b"SELECT", b"%d" % db])
            self._db = db
        for args in commands:
            buf += b"*%d\r\n" % len(args)
            for a in args:
                buf += b"$%d\r\n%s\r\n" % (len(a), a)
        self._appended()

    def append_encoded(self, db: int, command: bytes) -> None:
        """`append` of one command already encoded as RESP (the engine's fast forms)."""
        if db != self._db:
            self._buf += encode_command([b"SELECT", b"%d" % db])
            self._db = db
        self._buf += command
        if not self._scheduled:
            self._appended()

    def _appended(self) -> None:
        if self.schedule is None:
            self.flush()
        elif not self._scheduled:
            self._scheduled = True
            self.schedule(self.flush)

    def flush(self) -> None:
        """Hand the buffered log to the OS."""
        self._scheduled = False
        if not self._buf or self._fd is None:
            return
        data = bytes(self._buf)
        self._buf.clear()
        done = 0
        try:
            while done < len(data):
                done += os.write(self._fd, data[done:])
        except OSError as exc:
            self._buf[:0] = data[done:]  # kept, retried at the next flush
            if not self.failing:
                log.error("map log %s: write failed, retrying: %s", self.log_path, exc.strerror)
            self.failing = True
        else:
            if self.failing:
                log.warning("map log %s: writing again", self.log_path)
            self.failing = False
        self.log_bytes += done
        self._unsynced = True

    def tick(self, store: KVStore) -> None:
        """fsync once per FSYNC_INTERVAL_S; compact a log grown past its bound."""
        now = self.clock()
        if self._unsynced and now - self._last_sync >= FSYNC_INTERVAL_S:
            self.sync()
        if self.log_bytes > max(REWRITE_MIN_BYTES, 2 * self.snapshot_bytes):
            self.rewrite(store)

    def sync(self) -> None:
        self.flush()
        self._last_sync = self.clock()
        if self._fd is not None and self._unsynced:
            self._unsynced = False
            try:
                os.fsync(self._fd)
            except OSError as exc:
                log.error("map log %s: fsync failed: %s", self.log_path, exc.strerror)

    def close(self) -> None:
        self.sync()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
