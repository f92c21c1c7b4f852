"""The node's key-value map: typed values in numbered databases, with expiry (issue 27).

Manual "Redis" (data operators on cached structures) and the `map_file` / `db_num`
parameters. Sans-IO: the clock is an injected `now_ms()`, nothing here touches a file or
a socket. Value types are Python's own, one per Redis type:

    string -> bytes, hash -> dict[bytes, bytes], list -> deque[bytes],
    set -> set[bytes], zset -> ZSet (a dict of scores plus a SortedList of (score, member)),
    stream -> streams.Stream (never empty as a container: an empty stream stays a key)

Expiry is lazy (a key past its deadline is removed when a command looks at it) and
active (`sweep` removes at most SWEEP_LIMIT expired keys; the daemon calls it from its
tick, as redis-server's `activeExpireCycle`). Every change to a key calls `touch`, which
marks the WATCHers of that key dirty; list pushes (and deletions, for XREADGROUP) also
record the key as ready for the clients blocked on it (commands.py serves them after
the command).
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from sortedcontainers import SortedList

from raims_node.kv.streams import Stream

SWEEP_LIMIT = 1000  # expired keys removed per sweep at most (the rest wait for the next tick)


class Client(Protocol):
    """A connection as the store sees it (commands.KVClient): WATCH marks it dirty."""

    watch_dirty: bool


class ZSet:
    """A sorted set: member -> score, and the members ordered by (score, member)."""

    __slots__ = ("scores", "order")

    def __init__(self) -> None:
        self.scores: dict[bytes, float] = {}
        self.order: SortedList = SortedList()

    def __len__(self) -> int:
        return len(self.scores)

    def add(self, member: bytes, score: float) -> None:
        old = self.scores.get(member)
        if old is not None:
            if old == score:
                return
            self.order.remove((old, member))
        self.scores[member] = score
        self.order.add((score, member))

    def remove(self, member: bytes) -> bool:
        old = self.scores.pop(member, None)
        if old is None:
            return False
        self.order.remove((old, member))
        return True


Value = bytes | dict | deque | set | ZSet | Stream
TYPE_NAMES: dict[type, bytes] = {bytes: b"string", dict: b"hash", deque: b"list", set: b"set", ZSet: b"zset",
                                 Stream: b"stream"}


@dataclass(slots=True)
class Database:
    data: dict[bytes, Any] = field(default_factory=dict)
    expires: dict[bytes, int] = field(default_factory=dict)  # key -> deadline, ms since the epoch


class KVStore:
    """`databases` numbered key spaces; hooks for persistence and notifications.

    `on_expired(db, key)` runs for each key removed by expiry (commands.py logs it as a
    DEL and sends the `expired` notification).
    """

    def __init__(self, databases: int = 16, now_ms: Callable[[], int] | None = None,
                 default_db: int = 0) -> None:
        import time

        self.dbs = [Database() for _ in range(databases)]
        self.now_ms: Callable[[], int] = now_ms or (lambda: time.time_ns() // 1_000_000)
        self.default_db = default_db
        self.writable = True
        self.on_expired: Callable[[int, bytes], None] | None = None
        # set only while the `n` keyspace event is on (Engine.set_notify_flags): `put`
        # then tells a created key (redis-server's dbAdd), else it costs nothing
        self.on_new: Callable[[int, bytes], None] | None = None
        self.watchers: dict[tuple[int, bytes], set[Client]] = {}
        self.blocked: dict[tuple[int, bytes], deque[Any]] = {}  # commands.KVClient, first come first
        self.ready: list[tuple[int, bytes]] = []
        self.dirty = 0  # changes since start (INFO persistence's rdb_changes_since_last_save)
        self.expired_keys = 0
        self.rng = random.Random()
        self._deadlines: list[tuple[int, int, bytes]] = []

    # ------------------------------------------------------------ lookup

    def lookup(self, db: int, key: bytes) -> Any:
        """The live value of `key` or None (an expired key is removed first)."""
        d = self.dbs[db]
        value = d.data.get(key)
        if value is not None and d.expires and key in d.expires and d.expires[key] <= self.now_ms():
            self.expire_now(db, key)
            return None
        return value

    def expire_now(self, db: int, key: bytes) -> None:
        d = self.dbs[db]
        d.data.pop(key, None)
        d.expires.pop(key, None)
        self.expired_keys += 1
        self.touch(db, key)
        if self.blocked:
            self.signal_ready(db, key)
        if self.on_expired is not None:
            self.on_expired(db, key)

    def exists(self, db: int, key: bytes) -> bool:
        return self.lookup(db, key) is not None

    def keys(self, db: int) -> Iterator[bytes]:
        """The live keys of `db` (expired ones are removed on the way)."""
        d = self.dbs[db]
        now = self.now_ms()
        dead = [k for k, t in d.expires.items() if t <= now]
        for k in dead:
            self.expire_now(db, k)
        return iter(list(d.data))

    # ------------------------------------------------------------ changes

    def put(self, db: int, key: bytes, value: Any, keep_ttl: bool = False, fresh: bool = False) -> None:
        """Set `key` to `value`; `fresh`: redis-server deletes the old key and adds this
        one (RENAME), so it is a new key even over an existing one."""
        d = self.dbs[db]
        if self.on_new is not None and (fresh or self.lookup(db, key) is None):
            d.data[key] = value
            self.on_new(db, key)
        else:
            d.data[key] = value
        if not keep_ttl:
            d.expires.pop(key, None)
        self.touch(db, key)
        if self.blocked:
            self.signal_ready(db, key)

    def delete(self, db: int, key: bytes) -> bool:
        d = self.dbs[db]
        if self.lookup(db, key) is None:
            return False
        del d.data[key]
        d.expires.pop(key, None)
        self.touch(db, key)
        if self.blocked:  # a blocked XREADGROUP is told its stream is gone
            self.signal_ready(db, key)
        return True

    def drop_if_empty(self, db: int, key: bytes) -> bool:
        """Remove a container left empty by a command (Redis never keeps empty ones)."""
        d = self.dbs[db]
        value = d.data.get(key)
        if value is not None and not isinstance(value, bytes) and not value:
            del d.data[key]
            d.expires.pop(key, None)
            return True
        return False

    def set_expire(self, db: int, key: bytes, when_ms: int) -> None:
        self.dbs[db].expires[key] = when_ms
        heapq.heappush(self._deadlines, (when_ms, db, key))
        self.touch(db, key)

    def ttl_ms(self, db: int, key: bytes) -> int | None:
        """Deadline in ms since the epoch, None without one (the key must be live)."""
        return self.dbs[db].expires.get(key)

    def touch(self, db: int, key: bytes) -> None:
        """A key changed: its WATCHers see it at EXEC."""
        self.dirty += 1
        if self.watchers:
            clients = self.watchers.get((db, key))
            if clients:
                for c in clients:
                    c.watch_dirty = True

    def touch_all(self, db: int | None) -> None:
        """FLUSHDB / FLUSHALL, before the database(s) empty: every watched key they hold is
        dirty; a watched key they do not hold is untouched (redis-server 7.0's
        touchAllWatchedKeysInDb: WATCH x, FLUSHALL, EXEC runs when x did not exist)."""
        for (wdb, key), clients in self.watchers.items():
            if (db is None or wdb == db) and key in self.dbs[wdb].data:
                for c in clients:
                    c.watch_dirty = True

    def signal_ready(self, db: int, key: bytes) -> None:
        if self.blocked and (db, key) in self.blocked:
            self.ready.append((db, key))

    def flush(self, db: int | None) -> None:
        self.touch_all(db)
        targets = self.dbs if db is None else [self.dbs[db]]
        for d in targets:
            d.data.clear()
            d.expires.clear()
        self.ready += [wk for wk in self.blocked if db is None or wk[0] == db]
        self.dirty += 1

    # ------------------------------------------------------------ active expiry

    def sweep(self, limit: int = SWEEP_LIMIT) -> int:
        """Remove up to `limit` keys whose deadline has passed (active expiry, driven by
        the daemon's clock); the number removed. A heap of (deadline, db, key) finds them
        without scanning: an entry whose key got another deadline since is skipped."""
        removed = 0
        now = self.now_ms()
        heap = self._deadlines
        while heap and heap[0][0] <= now and removed < limit:
            when, db, key = heapq.heappop(heap)
            d = self.dbs[db]
            if d.expires.get(key) == when:
                self.expire_now(db, key)
                removed += 1
        if len(heap) > 2 * sum(len(d.expires) for d in self.dbs) + 1024:
            self.reindex_deadlines()
        return removed

    def reindex_deadlines(self) -> None:
        """Rebuild the deadline heap from the databases (after SWAPDB renumbered them)."""
        self._deadlines = [(t, i, k) for i, d in enumerate(self.dbs) for k, t in d.expires.items()]
        heapq.heapify(self._deadlines)
