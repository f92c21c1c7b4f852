"""A leak diagnostic: what a long-running node holds, on demand (DESIGN-NOTES "Client
churn: leak or allocator").

Off unless the environment names a file in `RAIMS_DIAG_DUMP` when the node starts; then
SIGUSR1 makes the node collect garbage and write one JSON object to that file (written
aside and renamed, so a reader never sees half of it):

- `types`: live gc-tracked objects per type (`module.qualname`), those made after start
  (the objects of the start are frozen out of the collector, server._tune_gc, and so out
  of this count);
- `tables`: the length of every dict, set, list and deque held in an attribute of an
  object of a raims_node class, or in a raims_node module's globals, summed per
  `module.Class.attr` (a table that grows with connections that came and went shows here);
- `fds`, `rss_kb`, `tasks` (asyncio tasks alive), `timers` (`call_later` handles alive,
  uvloop's or asyncio's: pending ones and any a reference keeps);
- `tracemalloc`: the 25 lines that hold the most, and `traced_kb` all that Python holds,
  when tracing (`PYTHONTRACEMALLOC=1`).

Nothing of it runs unless asked: a node without the variable has no handler.
"""

from __future__ import annotations

import asyncio
import collections
import gc
import json
import logging
import os
import signal
import sys
import tracemalloc
from pathlib import Path
from typing import Any

from raims_node.procmem import rss_bytes

ENV = "RAIMS_DIAG_DUMP"
TOP_LINES = 25

log = logging.getLogger(__name__)


def install(loop: asyncio.AbstractEventLoop) -> None:
    """SIGUSR1 -> a snapshot in $RAIMS_DIAG_DUMP, when that is set."""
    path = os.environ.get(ENV)
    if path:
        loop.add_signal_handler(signal.SIGUSR1, lambda: dump(Path(path), loop))


def dump(path: Path, loop: asyncio.AbstractEventLoop | None = None) -> None:
    """Write the snapshot (module docstring) to `path`."""
    try:
        data = snapshot(loop)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(data, sort_keys=True))
        tmp.replace(path)
    except Exception:  # a diagnostic never stops the node
        log.exception("diagnostic dump to %s failed", path)


def snapshot(loop: asyncio.AbstractEventLoop | None = None) -> dict[str, Any]:
    gc.collect()
    objs = gc.get_objects()
    types: collections.Counter[str] = collections.Counter()
    tables: collections.Counter[str] = collections.Counter()
    for o in objs:
        t = type(o)
        mod = t.__module__ if isinstance(t.__module__, str) else "?"  # some C types have none
        name = f"{mod}.{t.__qualname__}"
        types[name] += 1
        if mod.startswith("raims_node"):
            _tables(o, name, tables)
    for mod_name, module in list(sys.modules.items()):
        if mod_name.startswith("raims_node") and module is not None:
            for attr, value in list(vars(module).items()):
                if isinstance(value, (dict, set, list, collections.deque)) and not attr.startswith("__"):
                    tables[f"{mod_name}.{attr}"] += len(value)
    del objs
    out: dict[str, Any] = {
        "types": dict(types),
        "tables": {k: v for k, v in tables.items() if v},
        "fds": len(os.listdir("/proc/self/fd")),
        "rss_kb": (rss_bytes() or 0) // 1024,
        "tasks": len(asyncio.all_tasks(loop)) if loop is not None else 0,
        "timers": sum(n for t, n in types.items() if t.endswith(".TimerHandle")),  # call_later's, alive
    }
    if tracemalloc.is_tracing():
        stats = tracemalloc.take_snapshot().statistics("lineno")[:TOP_LINES]
        out["tracemalloc"] = [[str(s.traceback), s.size, s.count] for s in stats]
        out["traced_kb"] = tracemalloc.get_traced_memory()[0] // 1024
    return out


def _tables(o: object, name: str, tables: collections.Counter[str]) -> None:
    attrs: dict[str, Any] = {}
    d = getattr(o, "__dict__", None)
    if isinstance(d, dict):
        attrs.update(d)
    for klass in type(o).__mro__:
        for slot in getattr(klass, "__slots__", ()):
            if isinstance(slot, str) and slot not in attrs and hasattr(o, slot):
                attrs[slot] = getattr(o, slot, None)
    for attr, value in attrs.items():
        if isinstance(value, (dict, set, list, collections.deque)):
            tables[f"{name}.{attr}"] += len(value)
