"""Rate-limited log lines: a flood of one warning costs a few lines, not one per event.

Per key, the first `burst` lines of a `window_s` window are written; the rest are only
counted, and when the window ends (at the next line of that key or at `flush`) one
line says "... and 9,874 more like this in the last 10 s". Sans-IO: the caller gives
the clock (or the default monotonic one) and a function that writes a line.

    limited = RateLimitedLog(lambda level, text: log.log(level, "%s", text))
    limited.log("link.close", logging.WARNING, f"closing link {addr}: {reason}")
    limited.flush()  # from a periodic timer: the summaries of ended windows
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

WINDOW_S = 10.0
BURST = 5
MAX_KEYS = 1024  # distinct keys remembered (a flood of new keys is itself limited)

_VARYING = re.compile(r"\[[0-9a-fA-F:.]+\]:\d+|\d+(?:\.\d+)*(?::\d+)?|'[^']*'")


@dataclass(slots=True)
class _Window:
    start: float
    written: int = 0
    suppressed: int = 0
    level: int = logging.WARNING


def key_of(text: str) -> str:
    """A key for a line without one: the text with numbers, addresses and quoted names
    blanked, so that the same warning about different peers shares a window."""
    return _VARYING.sub("#", text)[:80]


class RateLimitedLog:
    def __init__(self, emit: Callable[[int, str], None], *, window_s: float = WINDOW_S, burst: int = BURST,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._emit = emit
        self.window_s = window_s
        self.burst = burst
        self._clock = clock
        self._windows: dict[str, _Window] = {}
        self.suppressed_total = 0

    def log(self, key: str | None, level: int, text: str) -> bool:
        """Write `text` unless its key is over the limit; True when written."""
        now = self._clock()
        k = key if key is not None else key_of(text)
        w = self._windows.get(k)
        if w is not None and now - w.start >= self.window_s:
            self._close(k, w)
            w = None
        if w is None:
            if len(self._windows) >= MAX_KEYS:
                self.flush(now, force=True)
            w = self._windows[k] = _Window(now, level=level)
        if w.written < self.burst:
            w.written += 1
            self._emit(level, text)
            return True
        w.suppressed += 1
        self.suppressed_total += 1
        return False

    def flush(self, now: float | None = None, *, force: bool = False) -> None:
        """Write the summary of every window that ended (all of them with `force`)."""
        t = self._clock() if now is None else now
        for k, w in list(self._windows.items()):
            if force or t - w.start >= self.window_s:
                self._close(k, w)

    def _close(self, key: str, w: _Window) -> None:
        del self._windows[key]
        if w.suppressed:
            self._emit(w.level, f"... and {w.suppressed:,} more like this in the last {self.window_s:g} s ({key})")
