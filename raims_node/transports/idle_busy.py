"""`idle_busy`: the event loop keeps turning for a while after activity before it blocks.

The manual ("Parameters", seed 000): "Number of times to loop while no activity is
present. More looping while idle keeps the process on a CPU for lower latency at the
expense of wasted CPU cycles." Default 16.

Here a turn is one pass of the asyncio loop with this callback ready: the loop polls its
sockets without blocking (a ready callback makes its poll timeout zero), runs what they
brought, then the callback asks for the next turn. A turn that saw no activity (a frame
read from a link, a read from a bridge client) since the one before is an idle turn: it
first gives the CPU to any other runnable process (sched_yield), and after `idle_busy`
idle turns in a row the loop blocks in its poll as before. A turn that saw activity
neither yields nor counts, so a busy loop pays one callback per pass and no system
call. `idle_busy: 0` blocks at once.

Why (issue 24, measured with bench/bridge_bench.py --native-only on the 2-vCPU VM): a
process that blocks lets its CPU halt, and waking it costs tens of microseconds, more
than a node's work on a message; a node still turning when the next message comes reads
it without that wakeup. One message at a time, p50: one node 63 -> 35-38 us, A->D
(three nodes) 200 -> 112-127 us with the default 16 turns (70-93 us with 256).

Decisions:
- The yield: with more busy processes than cores a turn that kept its CPU would delay
  the process the message goes to next (measured: A->D p50 630 us on 2 vCPUs without
  it); with it, a turning node costs others nothing when they have work.
- Only idle turns yield: yielding on busy passes too gave the CPU away on every pass
  under load (Redis PUBLISH, 50 pipelining clients: 0.43x redis-server against 0.52x
  with idle_busy 0; CPU per PUBLISH 1.19 against 1.01 us).
- Idle turns are counted (`turns`) so a test can see the loop stop turning: a node at
  rest must block, never spin.
- The window adapts, as the kernel's cpuidle haltpoll governor adapts its poll: `idle_busy`
  turns is the floor; a block that a window lasting POLL_MAX_NS (200 us, the governor's
  default) would have caught (the window's turns and the block together within it)
  doubles the window, up to the turns that last that long; a block longer than that
  halves it. Why: a Python turn costs 2-3 us, so 16 turns wait ~40 us, and one message
  at a time through A->B->D each node's gap between messages (the others' work, ~60-90
  us) was longer than that: every node blocked just before its next message and paid the
  wake-up at every hop (A->D p50 116-176 us, 3.2-4.2x one node's, with one node ~35-40 us
  where the gap fits the window). Adapted, in five runs alternating with the fixed
  window: A->D p50 70-97 us against 117-121 (one node 35-47 us in both). Growing on any
  block under the limit (200 or 500 us) spun more and was slower (84-153 us): the
  spinning nodes share two vCPUs. The cost is bounded: a node spins at most POLL_MAX_NS
  after its last message (or `idle_busy` turns, if longer), and a sparse stream brings
  the window back to the floor.
- Without sched_yield (not Linux) there is no busy loop: the count is taken as 0.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable

_yield = getattr(os, "sched_yield", None)
POLL_MAX_NS = 200_000  # the longest a window grows to, in time (haltpoll's default)


def next_window(window: int, count: int, turn_ns: float, blocked_ns: int) -> int:
    """The kernel's haltpoll rule on a window of `window` idle turns of `turn_ns` each:
    the activity that ended a block came the window plus `blocked_ns` after the last one.
    Double the window when one lasting POLL_MAX_NS would have caught it, halve it when
    even that would not have; never below `count` turns."""
    if window * turn_ns + blocked_ns <= POLL_MAX_NS:
        return max(count, min(int(POLL_MAX_NS / turn_ns), window * 2))
    if blocked_ns > POLL_MAX_NS:
        return max(count, window // 2)
    return window


class IdleBusy:
    """The idle turns of one event loop; `activity` is called on every read that matters."""

    __slots__ = ("count", "window", "turns", "_left", "_busy", "_loop", "_spun_from", "_blocked_at",
                 "_turn_ns", "_clock")

    def __init__(self, count: int, clock: Callable[[], int] = time.monotonic_ns) -> None:
        self._clock = clock  # monotonic ns (a test's own, so the gaps it measures are the test's)
        self.count = count if _yield is not None else 0
        self.window = self.count  # idle turns before the loop blocks, adapted between count and POLL_MAX_NS
        self.turns = 0  # idle turns taken, in all
        self._left = 0  # idle turns left before the loop blocks
        self._busy = False  # activity since the last turn
        self._loop: asyncio.AbstractEventLoop | None = None  # the running one, taken at each start
        self._spun_from = 0  # monotonic ns of the first idle turn of this run
        self._blocked_at = 0  # monotonic ns the loop last blocked at; 0 when adapted since
        self._turn_ns = 1.0  # one idle turn's wall time, from the last run that ended blocked

    def activity(self) -> None:
        if self._left <= 0 and self.count > 0:
            if self._blocked_at:  # it blocked: was the window too short, or too long?
                blocked_ns = self._clock() - self._blocked_at
                self.window = next_window(self.window, self.count, self._turn_ns, blocked_ns)
                self._blocked_at = 0
            self._loop = asyncio.get_running_loop()
            self._loop.call_soon(self._turn)
        self._left = self.window
        self._busy = True

    @property
    def turning(self) -> bool:
        """True while the loop turns instead of blocking."""
        return self._left > 0

    def _turn(self) -> None:
        assert _yield is not None and self._loop is not None
        if self._busy:  # a pass with work: poll again at once
            self._busy = False
            self._loop.call_soon(self._turn)
            return
        if self._left == self.window:  # the first idle turn since activity
            self._spun_from = self._clock()
        self.turns += 1
        self._left -= 1
        if self._left > 0:
            _yield()
            self._loop.call_soon(self._turn)
        else:  # the loop blocks in its next poll
            self._blocked_at = self._clock()
            self._turn_ns = max(1.0, (self._blocked_at - self._spun_from) / self.window)
