"""The node's key-value map behind the Redis bridge's data commands (issue 27).

store.py holds the typed values, commands.py executes commands (families in strings,
keys, hashes, lists, sets, zsets, server, hll, sort, geo, streams, dump..., scripting: Lua
with lua_libs, lua_convert and lua_msgpack), reply.py encodes replies, persist.py keeps
the map file, glob.py matches KEYS / SCAN patterns, cli.py is `ms_kv`.

maxmemory (decisions): CONFIG SET maxmemory N (redis-server's memory values; 0, the
default, no limit) is enforced as redis-server's default policy `noeviction`, the only
one the map has (CONFIG SET maxmemory-policy takes only noeviction; another policy is
refused with an error rather than accepted and not applied). Over the limit a command
flagged denyoom in redis-server 7.0.15's table (memory.DENYOOM: SET, LPUSH, SADD, ...)
gets `-OOM command not allowed when used memory > 'maxmemory'.`; reads, DEL, EXPIRE and
the other commands run; inside MULTI every command but EXEC / DISCARD / QUIT / RESET is
refused and EXEC then aborts, an EXEC whose queue holds a denyoom command aborts with the
OOM; a script's first write is refused (unless its shebang has allow-oom), a script with
a shebang but neither no-writes nor allow-oom is refused whole; as redis-server 7.0.15.
"Used memory" is the resident set of the whole node process (memory.py), the figure INFO
memory shows as used_memory, sampled by `Engine.sample_memory` in the node's tick (every
50 ms, `NodeKV.tick`, only while a maxmemory is set), at CONFIG SET maxmemory and at INFO
memory: the command path reads one flag (`Engine.oom`), never /proc, so a burst of
writes can pass the limit by what 50 ms of them add. Differences from redis-server,
whose used_memory counts its allocations: the node's figure includes the interpreter,
the router and the bridges (tens of MB before the first key), and it need not drop when
keys are deleted (memory.py has measurements), so DEL / FLUSHALL may not bring a node
back under its limit; raising maxmemory or lifting it (0) does.
"""

from __future__ import annotations

from collections.abc import Callable

from raims_node.kv.commands import Engine
from raims_node.kv.errors import KVError, MapFileError
from raims_node.kv.persist import MapFile
from raims_node.kv.store import KVStore

__all__ = ["Engine", "KVError", "KVStore", "MapFile", "MapFileError", "NodeKV", "loop_schedule", "open_kv"]


def open_kv(map_spec: str | None, db_num: str | None = None,
            schedule: Callable[[Callable[[], None]], object] | None = None) -> tuple[Engine, MapFile | None]:
    """The node's engine: loaded from `map_spec` (writable), or an empty read-only store
    when there is no map (writes refused, reads answer nil). MapFileError when the map
    cannot be read; KVError for a bad `db_num`."""
    mf = MapFile(map_spec, schedule) if map_spec else None
    databases = mf.databases if mf is not None else 16
    default_db = 0
    if db_num not in (None, ""):
        assert db_num is not None
        if not db_num.strip().isdigit() or not 0 <= int(db_num) < databases:
            raise KVError(f"db_num {db_num!r} is not a database number in 0..{databases - 1}")
        default_db = int(db_num)
    store = KVStore(databases, default_db=default_db)
    engine = Engine(store, mf.append if mf is not None else None)
    if mf is None:
        store.writable = False
    else:
        mf.load(engine)
        engine.flush_log = mf.flush
        engine.log_encoded = mf.append_encoded
        engine.saver = mf
    return engine, mf


def loop_schedule(fn: Callable[[], None]) -> None:
    """Run `fn` at the end of the running loop's turn (at once without a loop)."""
    import asyncio

    try:
        asyncio.get_running_loop().call_soon(fn)
    except RuntimeError:
        fn()


class NodeKV:
    """The daemon's handle on its map: the engine, the map file, and their timed work."""

    def __init__(self, map_spec: str | None, db_num: str | None = None) -> None:
        self.engine, self.map = open_kv(map_spec, db_num, loop_schedule)

    def tick(self) -> None:
        """Active expiry, blocked clients' deadlines, fsync, the used memory against
        maxmemory (called from the daemon's tick)."""
        engine = self.engine
        if engine.maxmemory:
            engine.sample_memory()
        engine.tick()
        if self.map is not None:
            self.map.tick(self.engine.store)

    def close(self) -> None:
        if self.map is not None:
            self.map.close()
            self.map = None
