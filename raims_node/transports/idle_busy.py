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
- Without sched_yield (not Linux) there is no busy loop: the count is taken as 0.
"""

from __future__ import annotations

import asyncio
import os

_yield = getattr(os, "sched_yield", None)


class IdleBusy:
    """The idle turns of one event loop; `activity` is called on every read that matters."""

    __slots__ = ("count", "turns", "_left", "_busy", "_loop")

    def __init__(self, count: int) -> None:
        self.count = count if _yield is not None else 0
        self.turns = 0  # idle turns taken, in all
        self._left = 0  # idle turns before the loop blocks
        self._busy = False  # activity since the last turn
        self._loop: asyncio.AbstractEventLoop | None = None  # the running one, taken at each start

    def activity(self) -> None:
        if self._left <= 0 and self.count > 0:
            self._loop = asyncio.get_running_loop()
            self._loop.call_soon(self._turn)
        self._left = self.count
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
        self.turns += 1
        self._left -= 1
        if self._left > 0:
            _yield()
            self._loop.call_soon(self._turn)
