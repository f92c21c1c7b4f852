"""The daemon's timer for what the router holds between ticks (raims_node/wake.py)."""

from __future__ import annotations

import asyncio
import time
from typing import Any, cast

from raims_node.router.node import NS
from raims_node.wake import NodeWake


class HoldingNode:
    """Holds output until `due_ns`; `tick` releases it."""

    def __init__(self) -> None:
        self.due_ns: int | None = None
        self.ticks: list[int] = []
        self.ticked = asyncio.Event()

    def next_wake_ns(self) -> int | None:
        return self.due_ns

    def tick(self, now_ns: int) -> list[Any]:
        self.ticks.append(now_ns)
        self.ticked.set()
        if self.due_ns is not None and now_ns >= self.due_ns:
            self.due_ns = None
        return []


def test_the_node_is_ticked_when_its_hold_is_due_not_at_the_next_regular_tick() -> None:
    async def run() -> None:
        node = HoldingNode()
        applied: list[list[Any]] = []
        wake = NodeWake(cast(Any, node), applied.append)
        wake.check()  # nothing held: no timer
        assert wake.wakes == 0
        start = time.time_ns()
        node.due_ns = start + 30 * NS
        wake.check()
        node.due_ns = start + 5 * NS // 1000  # an earlier hold brings the timer forward
        wake.check()
        await asyncio.wait_for(node.ticked.wait(), 20)  # long before the first hold's 30 s, however loaded
        assert len(node.ticks) == 1 and node.ticks[0] >= start + 5 * NS // 1000
        assert wake.wakes == 1 and applied == [[]]
        node.due_ns = time.time_ns() + NS
        wake.check()
        wake.close()  # a stop cancels the armed timer
        await asyncio.sleep(0.01)
        assert wake.wakes == 1

    asyncio.run(run())


def test_outside_a_running_loop_the_hold_waits_for_the_regular_tick() -> None:
    node = HoldingNode()
    node.due_ns = time.time_ns()
    wake = NodeWake(cast(Any, node), lambda actions: None)
    wake.check()  # a daemon driven synchronously (tests, the console): no timer, no error
    assert wake.wakes == 0 and node.ticks == []
