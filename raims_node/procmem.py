"""The node process's resident set, read from /proc: what INFO's `used_memory` and the
map's maxmemory check count (kv/memory.py says why the resident set) and the NATS
monitor's /varz `mem`."""

from __future__ import annotations

import os


def rss_bytes() -> int:
    """The process's resident set (redis-server's used_memory_rss); 0 where /proc is not."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0
