"""The node's key-value map behind the Redis bridge's data commands (issue 27).

store.py holds the typed values, commands.py executes commands (families in strings,
keys, hashes, lists, sets, zsets, server, hll, sort, geo, streams, dump..., scripting: Lua
with lua_libs, lua_convert and lua_msgpack), reply.py encodes replies, persist.py keeps
the map file, glob.py matches KEYS / SCAN patterns, cli.py is `ms_kv`.
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
        """Active expiry, blocked clients' deadlines, fsync (called from the daemon's tick)."""
        self.engine.tick()
        if self.map is not None:
            self.map.tick(self.engine.store)

    def close(self) -> None:
        if self.map is not None:
            self.map.close()
            self.map = None
