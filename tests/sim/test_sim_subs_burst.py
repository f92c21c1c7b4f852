"""A burst of subscriptions on one node (router/interest.py, batch.py, linkstate/db.py):
what the node and its peers do per announcement, per slice and per batch.

One client subscribing 100,000 subjects held the other clients of its node 50-290 ms
(nats-server: 11-22 ms): announcement slices of 256 by count (5-80 ms a turn on a loaded
machine), origin batches of up to 1 MB that a receiver applied in one go (100-200 ms),
a peer record put per announcement at both ends, and every peer's routes recomputed for
each message forwarded while the sub seqnos moved.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from raims_node.crypto.credentials import Credentials
from raims_node.router import interest
from raims_node.router.actions import Send
from raims_node.router.node import NS
from raims_node.router.sim import SimNetwork
from raims_node.router.state import NodeState
from tests.sim.test_sim_basic import build

ANNOUNCE_COST_S = 0.0002  # what one announcement costs here (a busy wait)


def slow_announcements(monkeypatch: pytest.MonkeyPatch, st: NodeState) -> None:
    plain = st.bcast

    def bcast(*args: object) -> None:
        end = time.perf_counter() + ANNOUNCE_COST_S
        while time.perf_counter() < end:
            pass
        plain(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(st, "bcast", bcast)


def subscribe_many(net: SimNetwork, name: str, n: int, prefix: str = "burst") -> None:
    for i in range(n):
        net.subscribe(name, f"{prefix}.{i}")


def test_without_a_clock_a_slice_is_counted(creds: Callable[[str], Credentials]) -> None:
    """A simulated run does not depend on the machine's speed."""
    net = build(creds)
    d = net.nodes["D"].node
    subscribe_many(net, "D", 1000)
    before = d.state.sub_seqno
    net._apply("D", d.tick(net.now))
    assert d.state.sub_seqno - before == interest.ANNOUNCE_SLICE


def test_an_announcement_slice_ends_after_its_budget(creds: Callable[[str], Credentials],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    net = build(creds)
    d = net.nodes["D"].node
    d.interest_part.clock = time.perf_counter  # as the daemon's (wake.py); the simulator's counts
    slow_announcements(monkeypatch, d.state)
    subscribe_many(net, "D", 1000)
    made = []
    for _ in range(1000):  # bounded: each turn makes at least interest.ANNOUNCE_MIN
        if not d.interest_part.pending:
            break
        before = d.state.sub_seqno
        net._apply("D", d.tick(net.now))
        made.append(d.state.sub_seqno - before)
    assert not d.interest_part.pending
    # 2 ms a turn: some 10 announcements at 0.2 ms, and at least ANNOUNCE_MIN (was 256)
    assert max(made) <= interest.ANNOUNCE_MIN + 16, made
    rec = d.state.db.peer(d.state.bridge)
    assert rec is not None and rec.sub_seqno == d.state.sub_seqno  # our record follows each slice
    net.run_until(lambda: net.interest_known("D", "burst.999"), timeout_ns=10 * NS)


def test_a_burst_goes_out_in_batches_a_receiver_applies_in_a_few_ms(creds: Callable[[str], Credentials]) -> None:
    net = build(creds)
    sizes: list[int] = []
    plain = net._send

    def send(who: str, act: Send) -> None:
        if who == "D":
            sizes.append(len(act.data))
        plain(who, act)

    net._send = send  # type: ignore[method-assign]
    b = net.nodes["B"].node
    d_bridge = net.nodes["D"].node.bridge
    versions = b.state.db.version
    subscribe_many(net, "D", 3000)
    net.run_until(lambda: net.interest_known("D", "burst.2999"), timeout_ns=10 * NS)
    assert max(sizes) <= 40_000, f"a batch of {max(sizes):,} bytes (a receiver applies it in one go)"
    rec = b.state.db.peer(d_bridge)
    assert rec is not None and rec.sub_seqno == b.state.peers[d_bridge].sub_seqno
    # the peer record is put once per origin batch, not once per subscription
    assert b.state.db.version - versions < 300


def test_subscriptions_elsewhere_do_not_recompute_the_routes(creds: Callable[[str], Credentials]) -> None:
    net = build(creds)
    net.subscribe("D", "probe")
    net.run_until(lambda: net.interest_known("D", "probe"), timeout_ns=10 * NS)
    a, b = net.nodes["A"].node, net.nodes["B"].node
    net.publish("A", "probe", b"x")  # A -> B -> D: routes computed at A and B
    net.run_for(NS // 10)
    graphs = a.state.routes._g, b.state.routes._g
    assert None not in graphs
    subscribe_many(net, "C", 500)
    net.run_until(lambda: net.interest_known("C", "burst.499"), timeout_ns=10 * NS)
    net.publish("A", "probe", b"y")
    net.run_for(NS // 10)
    assert (a.state.routes._g, b.state.routes._g) == graphs, "a peer's sub seqno moving rebuilt the link graph"


def test_announcements_wait_while_a_link_holds_too_much_unsent(creds: Callable[[str], Credentials]) -> None:
    """Paced by the links (interest.py `backlog`, the daemon's transports/unsent.py): a
    burst announced faster than the peer applied it waited in the link's socket, 2 MB
    of it, and a request written after it with it (up to 1.1 s). A paced turn announces
    nothing, not even ANNOUNCE_MIN, and the node looks again PACE_NS later."""
    net = build(creds)
    d = net.nodes["D"].node
    part = d.interest_part
    held = [True]
    part.backlog = lambda: held[0]
    subscribe_many(net, "D", 1000)
    assert part.pending  # past the first turn's slice
    before = d.state.sub_seqno
    net._apply("D", d.tick(net.now))
    assert d.state.sub_seqno == before and len(part.pending) > 500
    assert part.due_ns() == net.now + interest.PACE_NS  # not at once: no busy loop while the link drains
    assert d.next_wake_ns() != 0
    net.subscribe("D", "late.one")  # a change made meanwhile waits behind the others
    assert d.state.sub_seqno == before and part.pending[-1][0].sub.text == "late.one"
    held[0] = False
    net._apply("D", d.tick(net.now))
    assert d.state.sub_seqno - before == interest.ANNOUNCE_SLICE
    assert part.due_ns() == d.next_wake_ns() == 0  # the rest at once, as before
    net.run_until(lambda: net.interest_known("D", "late.one"), timeout_ns=10 * NS)
    assert not part.pending and net.interest_known("D", "burst.999")
