"""The node's timer between the daemon's regular ticks.

The router holds some of its output for a few milliseconds (floods batched per link,
router/batch.py; a delayed filter flood) and says when it is due with
`Node.next_wake_ns`. The daemon ticks every TICK_S (50 ms), too late for a hold of 5 ms
at every hop of a flood, so after each pass over the node's actions it asks this timer
to wake the node when the earliest hold is due."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from raims_node.router.actions import Action
from raims_node.router.node import NS, Node


class NodeWake:
    def __init__(self, node: Node, apply: Callable[[list[Action]], None],
                 backlog: Callable[[], bool] | None = None) -> None:
        self.node = node
        self.apply = apply
        interest = getattr(node, "interest_part", None)  # (a test's stand-in node has none)
        if interest is not None:
            interest.clock = time.perf_counter  # announcement slices bounded by time (interest.py)
            interest.backlog = backlog  # ... and paced by the links' unsent bytes (transports/unsent.py)
        self._at: int | None = None  # when the armed timer fires, ns since the epoch
        self._handle: asyncio.TimerHandle | None = None
        self.wakes = 0

    def check(self) -> None:
        """Arm (or bring forward) the timer for what the node holds."""
        due = self.node.next_wake_ns()
        if due is None or (self._at is not None and self._at <= due):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # driven outside a loop (tests, a console command): ticks will do
            return
        if self._handle is not None:
            self._handle.cancel()
        self._at = due
        self._handle = loop.call_later(max(0.0, (due - time.time_ns()) / NS), self._fire)

    def _fire(self) -> None:
        self._handle = self._at = None
        self.wakes += 1
        self.apply(self.node.tick(time.time_ns()))

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = self._at = None
