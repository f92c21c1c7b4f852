"""A congested bridge consumer holds the daemon's links too, within the gate's deadline
(transports/backpressure.py, issue 24)."""

from __future__ import annotations

import asyncio

from raims_node.bridges.gate import FlowGate
from raims_node.transports.backpressure import Backpressure


class FakeLink:
    buffered = 0
    write_drops = 0

    def __init__(self) -> None:
        self.held = False

    def hold_reading(self, held: bool) -> None:
        self.held = held


class FakeNode:
    def __init__(self) -> None:
        self.liveness: list[tuple[int, bool]] = []

    def hold_liveness(self, conn_id: int, held: bool, now_ns: int) -> None:
        self.liveness.append((conn_id, held))


async def test_links_wait_while_a_consumer_holds_the_gate_and_no_longer() -> None:
    gate = FlowGate(deadline_s=0.05)
    links = {1: FakeLink(), 2: FakeLink()}
    node = FakeNode()
    bp = Backpressure(links, gate, node)  # type: ignore[arg-type]
    consumer, other = object(), object()
    gate.congested(consumer, True)  # type: ignore[arg-type]
    assert all(link.held for link in links.values()) and bp.read_paused == {1, 2}
    assert (1, True) in node.liveness  # not timed out for the silence meanwhile
    gate.congested(consumer, False)  # type: ignore[arg-type]
    assert not any(link.held for link in links.values()) and not bp.read_paused
    gate.congested(other, True)  # type: ignore[arg-type]
    assert all(link.held for link in links.values())
    await asyncio.sleep(0.15)  # a consumer that stays slow holds the links no longer than the deadline
    assert not any(link.held for link in links.values())
    bp.set_full(1, True)  # the link-level rule still holds: a full link stops the others
    assert links[2].held and not links[1].held
