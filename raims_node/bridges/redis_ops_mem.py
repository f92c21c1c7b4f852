"""MEMORY and LOLWUT of the Redis transport, as redis-server 7.0.15 answers them
(redis_ops.py has the other operator commands).

- MEMORY USAGE: an estimate, not an allocator's count: 40 bytes of key overhead + the
  key + the value, where a string is its length + 16, a collection 32 + per element 16 +
  its bytes (a zset's 8 more for the score; a hash's field and value), averaged over
  SAMPLES elements (default 5, 0 all) and multiplied out, as redis-server samples; a
  stream 64 + 32 per entry.
- MEMORY STATS has redis-server 7.0's fields in its order: the process RSS as
  total.allocated and the allocator's figures, the largest RSS seen as peak.allocated,
  the map's estimate (MEMORY USAGE summed) as dataset.bytes, 20000 bytes per client as
  clients.normal, 0 for what raims does not have (replication backlog, Lua, AOF
  buffer), ratios 1. MALLOC-STATS answers "Stats not supported for the current
  allocator" (as a redis-server built with libc malloc); DOCTOR redis-server's texts
  (the "empty" one under 5 MB of data); PURGE +OK.
- LOLWUT VERSION 5 [columns [squares-per-row [squares-per-column]]] draws Georg Nees'
  Schotter in braille (raims' own drawing, clamped as redis-server clamps, and the
  squares per column cut so the canvas stays under 4M dots); any other
  version, as redis-server 7.0.15 answers it, only "Redis ver. 7.0.15".
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from raims_node.bridges.redis_ops import OpsClient, OpsState, help_reply
from raims_node.bridges.resp import OK, parse_ll
from raims_node.kv.commands import Engine
from raims_node.kv.reply import Map, Verbatim, encode
from raims_node.kv.server import REDIS_VERSION
from raims_node.kv.store import ZSet
from raims_node.procmem import rss_bytes

MAX_DOTS = 4_000_000  # LOLWUT's canvas, at most (redis-server's can reach 800M dots: 1000 1 200)

# ------------------------------------------------------------ MEMORY

def value_bytes(value: Any, samples: int) -> int:
    """MEMORY USAGE's estimate of a value (the module docstring's formula)."""
    if isinstance(value, (bytes, bytearray)):
        return len(value) + 16
    if isinstance(value, (int, float)):
        return 8
    if isinstance(value, ZSet):
        items: Iterable[Any] = value.scores.keys()
        extra = 8
    elif isinstance(value, dict):
        items, extra = value.items(), 0
    elif isinstance(value, (set, frozenset, list, deque)):
        items, extra = value, 0
    else:
        return 64 + len(value) * 32 if hasattr(value, "__len__") else 64
    n = len(value)
    seen = total = 0
    for item in items:
        if samples and seen >= samples:
            break
        total += 16 + extra + (sum(_item_bytes(x) for x in item) if isinstance(item, tuple) else _item_bytes(item))
        seen += 1
    return 32 + (total * n // seen if seen else 0)


def _item_bytes(x: Any) -> int:
    return len(x) if isinstance(x, (bytes, bytearray)) else 8


def key_bytes(key: bytes, value: Any, samples: int) -> int:
    return 40 + len(key) + value_bytes(value, samples)


def memory_usage(s: OpsClient, args: list[bytes]) -> None:
    samples = 5
    i = 3
    while i < len(args):
        if args[i].lower() == b"samples" and i + 1 < len(args):
            v = parse_ll(args[i + 1])
            if v is None:
                s._error("value is not an integer or out of range")
                return
            if v < 0:
                s._error("syntax error")
                return
            samples = v
            i += 2
        else:
            s._error("syntax error")
            return
    engine = s.engine()
    db = s.db
    value = engine.store.lookup(db, args[2]) if engine is not None and db < len(engine.store.dbs) else None
    s._write(encode(None if value is None else key_bytes(args[2], value, samples), s.resp))


def dataset_bytes(engine: Engine | None) -> tuple[int, int]:
    """(keys, estimated bytes) of the whole map, each value sampled."""
    if engine is None:
        return 0, 0
    keys = total = 0
    for d in engine.store.dbs:
        keys += len(d.data)
        total += sum(key_bytes(k, v, 5) for k, v in d.data.items())
    return keys, total


def memory_stats(s: OpsClient, args: list[bytes]) -> None:
    ops: OpsState = s.host.ops
    rss = rss_bytes()
    engine = s.engine()
    keys, dataset = dataset_bytes(engine)
    ops.peak = max(ops.peak, rss)
    clients = sum(1 for _ in s.host.sessions())
    overhead = 20000 * clients
    pairs: list[tuple[bytes, Any]] = [
        (b"peak.allocated", ops.peak), (b"total.allocated", rss), (b"startup.allocated", 0),
        (b"replication.backlog", 0), (b"clients.slaves", 0), (b"clients.normal", overhead),
        (b"cluster.links", 0), (b"aof.buffer", 0), (b"lua.caches", 0), (b"functions.caches", 0)]
    if engine is not None:
        for i, d in enumerate(engine.store.dbs):
            if d.data:
                pairs.append((b"db.%d" % i, Map([(b"overhead.hashtable.main", 16 * len(d.data)),
                                                  (b"overhead.hashtable.expires", 16 * len(d.expires)),
                                                  (b"overhead.hashtable.slot-to-keys", 0)])))
    pct = 100.0 * dataset / rss if rss else 0.0
    pairs += [(b"overhead.total", overhead), (b"keys.count", keys),
              (b"keys.bytes-per-key", dataset // keys if keys else 0), (b"dataset.bytes", dataset),
              (b"dataset.percentage", pct), (b"peak.percentage", 100.0 * rss / ops.peak if ops.peak else 0.0),
              (b"allocator.allocated", rss), (b"allocator.active", rss), (b"allocator.resident", rss),
              (b"allocator-fragmentation.ratio", 1.0), (b"allocator-fragmentation.bytes", 0),
              (b"allocator-rss.ratio", 1.0), (b"allocator-rss.bytes", 0), (b"rss-overhead.ratio", 1.0),
              (b"rss-overhead.bytes", 0), (b"fragmentation", 1.0), (b"fragmentation.bytes", 0)]
    s._write(encode(Map(pairs), s.resp))


def memory_doctor(s: OpsClient, args: list[bytes]) -> None:
    if dataset_bytes(s.engine())[1] < 5 * 1024 * 1024:
        text = (b"Hi Sam, this instance is empty or is using very little memory, my issues detector can't be "
                b"used in these conditions. Please, leave for your mission on Earth and fill it with some data. "
                b"The new Sam and I will be back to our programming as soon as I finished rebooting.\n")
    else:
        text = b"Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs " \
               b"on this base.\n"
    s._write(encode(Verbatim(text), s.resp))


def memory_malloc_stats(s: OpsClient, args: list[bytes]) -> None:
    s._write(encode(Verbatim(b"Stats not supported for the current allocator"), s.resp))


def memory_purge(s: OpsClient, args: list[bytes]) -> None:
    s._write(OK)


def memory_help(s: OpsClient, args: list[bytes]) -> None:
    help_reply(s, (
        "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", "DOCTOR",
        "    Return memory problems reports.", "MALLOC-STATS",
        "    Return internal statistics report from the memory allocator.", "PURGE",
        "    Attempt to purge dirty pages for reclamation by the allocator.", "STATS",
        "    Return information about the memory usage of the server.", "USAGE <key> [SAMPLES <count>]",
        "    Return memory in bytes used by <key> and its value. Nested values are",
        "    sampled up to <count> times (default: 5, 0 means sample all).", "HELP", "    Prints this help."))


# ------------------------------------------------------------ LOLWUT

_BRAILLE = 0x2800


def schotter(cols: int, squares_row: int, squares_col: int, seed: int) -> bytes:
    """Georg Nees' "Schotter" in braille dots: rows of squares, more disordered down the
    page (raims' own rendering: 2x4 dots per character; a deterministic generator)."""
    side = max(1, (cols * 2) // squares_row)
    squares_col = max(1, min(squares_col, MAX_DOTS // (side * side * squares_row)))
    width, height = side * squares_row, side * squares_col
    dots = [[False] * width for _ in range(height)]
    state = seed or 1
    for r in range(squares_col):
        disorder = r / max(1, squares_col)
        for c in range(squares_row):
            state = (state * 1103515245 + 12345) & 0x7FFFFFFF
            shift = int((state % 100 / 100 - 0.5) * disorder * side)
            x0, y0 = c * side + shift, r * side
            for k in range(side):
                for x, y in ((x0 + k, y0), (x0 + k, y0 + side - 1), (x0, y0 + k), (x0 + side - 1, y0 + k)):
                    if 0 <= x < width and 0 <= y < height:
                        dots[y][x] = True
    bits = ((0, 0, 0x01), (0, 1, 0x02), (0, 2, 0x04), (1, 0, 0x08), (1, 1, 0x10), (1, 2, 0x20), (0, 3, 0x40),
            (1, 3, 0x80))
    lines = []
    for y in range(0, height, 4):
        line = []
        for x in range(0, width, 2):
            code = sum(bit for dx, dy, bit in bits if y + dy < height and x + dx < width and dots[y + dy][x + dx])
            line.append(chr(_BRAILLE + code))
        lines.append("".join(line))
    return "\n".join(lines).encode()


def lolwut(s: OpsClient, args: list[bytes]) -> None:
    """LOLWUT [VERSION v] [...]: VERSION 5 draws Schotter (columns 1..1000, squares per row
    1..200, per column 1..200, as redis-server clamps them); any other answers the version."""
    version = 0
    if len(args) >= 3 and args[1].lower() == b"version":
        v = parse_ll(args[2])
        if v is None:
            s._error("value is not an integer or out of range")
            return
        version = v
    tail = b"Redis ver. " + REDIS_VERSION + b"\n"
    if version != 5:
        s._write(encode(Verbatim(tail), s.resp))
        return
    params = [66, 8, 12]
    for j, raw in enumerate(args[3:6]):
        v = parse_ll(raw)
        if v is None:
            s._error("value is not an integer or out of range")
            return
        params[j] = v
    cols = min(1000, max(1, params[0]))
    row, col = min(200, max(1, params[1])), min(200, max(1, params[2]))
    art = schotter(cols, row, col, int(time.time()))
    s._write(encode(Verbatim(art + b"\n\nGeorg Nees - schotter, plotter on paper, 1968. " + tail), s.resp))


def command_table(make: Callable[..., Any], table: Callable[..., Any]) -> list[Any]:
    """MEMORY and LOLWUT as redis_session's `_Command`s."""
    return [
        make("memory", -2, None, subcommands=table(
            make("memory|usage", -3, memory_usage), make("memory|stats", 2, memory_stats),
            make("memory|doctor", 2, memory_doctor), make("memory|malloc-stats", 2, memory_malloc_stats),
            make("memory|purge", 2, memory_purge), make("memory|help", 2, memory_help))),
        make("lolwut", -1, lolwut),
    ]
