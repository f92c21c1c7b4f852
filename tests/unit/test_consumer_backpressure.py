"""A blocked sbus receiver holds the daemon's links too, within the gate's deadline
(transports/backpressure.py, issue 24); a congested bridge consumer stalls the producers
feeding it, or, fed by a link, holds the links (gate.py)."""

from __future__ import annotations

import asyncio

import pytest

from raims_node.bridges.gate import STALL_GRANT, STALL_MAX_S, STALL_MIN_S, FlowGate, stall_duration
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


class FakeConn:
    """A gate member: counts the gate's calls to re-read its reading."""

    session = None

    def __init__(self, gate: FlowGate) -> None:
        self.gate = gate
        self.updates = 0
        self.buffered = 0

    def update_reading(self) -> None:
        self.updates += 1

    def flush(self) -> None:
        pass

    @property
    def reading(self) -> bool:
        return not self.gate.closed and not self.gate.stalled(self)  # type: ignore[arg-type]


async def test_a_congested_consumer_stalls_only_the_producer_feeding_it() -> None:
    gate = FlowGate(deadline_s=0.05)
    links = {1: FakeLink()}
    Backpressure(links, gate, FakeNode())  # type: ignore[arg-type]
    consumer, producer, other = FakeConn(gate), FakeConn(gate), FakeConn(gate)
    gate.conns |= {consumer, producer, other}  # type: ignore[arg-type]
    gate.producer = producer  # type: ignore[assignment]
    gate.fed(consumer, 30.0)  # type: ignore[arg-type]
    gate.fed(consumer, 30.0)  # type: ignore[arg-type]  (one stall, however many deliveries)
    gate.producer = None
    assert gate.stalled(producer) and producer.updates == 1 and not producer.reading  # type: ignore[arg-type]
    assert other.reading and consumer.reading and other.updates == 0  # the node's other clients run on
    assert not links[1].held and gate.stalls == 1
    gate.drained(consumer)  # type: ignore[arg-type]
    assert producer.reading and producer.updates == 2 and gate.stall_timeouts == 0


async def test_a_stall_ends_at_its_deadline_and_with_either_end() -> None:
    gate = FlowGate()
    consumer, producer = FakeConn(gate), FakeConn(gate)
    gate.producer = producer  # type: ignore[assignment]
    gate.fed(consumer, 0.01)  # type: ignore[arg-type]
    assert gate.stalled(producer)  # type: ignore[arg-type]
    while gate.stalled(producer):  # type: ignore[arg-type]  (a consumer that never drains)
        await asyncio.sleep(0.01)
    assert gate.stall_timeouts == 1
    consumer.buffered += STALL_GRANT - 1
    gate.fed(consumer, 30.0)  # type: ignore[arg-type]  within the grant that followed the deadline
    assert not gate.stalled(producer)  # type: ignore[arg-type]
    consumer.buffered += 1
    gate.fed(consumer, 30.0)  # type: ignore[arg-type]  past it: stalled again
    assert gate.stalled(producer) and gate.stalls == 2  # type: ignore[arg-type]
    gate.remove(consumer)  # type: ignore[arg-type]  (cut as a slow consumer, or gone)
    assert not gate.stalled(producer)  # type: ignore[arg-type]
    gate.fed(consumer, 30.0)  # type: ignore[arg-type]
    gate.remove(producer)  # type: ignore[arg-type]  (the producer went)
    assert not gate.stalled(producer) and gate.producer is None  # type: ignore[arg-type]


async def test_a_congested_consumer_holds_the_links_once_not_the_clients() -> None:
    """Link frames carry many producers and cannot be stalled per producer: a congested
    consumer holds the links within the deadline, once until it drains; a delivery
    without a producer (a link's frame) stalls no one."""
    gate = FlowGate(deadline_s=0.05)
    links = {1: FakeLink(), 2: FakeLink()}
    Backpressure(links, gate, FakeNode())  # type: ignore[arg-type]
    consumer, client = FakeConn(gate), FakeConn(gate)
    gate.conns |= {consumer, client}  # type: ignore[arg-type]
    gate.fed(consumer, 30.0)  # type: ignore[arg-type]  no producer: a link's frame
    gate.hold_links(consumer)  # type: ignore[arg-type]  (the glue's flush saw it congested)
    assert all(link.held for link in links.values())
    assert client.reading and client.updates == 0 and not gate.stalls and not gate.closed
    while links[1].held:
        await asyncio.sleep(0.01)
    gate.hold_links(consumer)  # type: ignore[arg-type]  still congested: not again
    assert not links[1].held
    gate.drained(consumer)  # type: ignore[arg-type]
    gate.hold_links(consumer)  # type: ignore[arg-type]  a new episode holds them again
    assert links[1].held
    gate.remove(consumer)  # type: ignore[arg-type]
    assert not links[1].held


def test_stall_duration_follows_nats_server_over_the_high_to_hard_range() -> None:
    mib = 1 << 20
    assert stall_duration(mib + 1, mib, 65 * mib) == STALL_MIN_S
    assert stall_duration(mib + 32 * mib, mib, 65 * mib) == pytest.approx(0.6)
    assert stall_duration(65 * mib, mib, 65 * mib) == STALL_MAX_S
