"""A stream across the network while its route changes (router/route_grace.py,
router/reorder.py).

The manual's A-D graph is built without B; D subscribes and A publishes one message
every 50 us; B joins mid-stream, so A->D moves from A-C-D (cost 500) to A-B-D (400).
C learns of B's links a few milliseconds before A does: without make before break C
dropped what A still sent it in between (100 of 2,000 lost); with the old path slower
than the new, the new one's first frames overtake its last ones at D, which holds them
until those arrive. Run on the general path and on the lone-frame path
(tests/sim/test_sim_lone.LoneSim)."""

from __future__ import annotations

import random
from collections.abc import Callable
from types import SimpleNamespace
from typing import cast

import pytest

from raims_node.bloom import BloomFilter
from raims_node.crypto.credentials import Credentials
from raims_node.router.node import NS
from raims_node.router.peer import Peer
from raims_node.router.route_grace import ROUTE_GRACE_NS, RouteGrace
from raims_node.router.sim import MS, Jitter, SimNetwork
from raims_node.router.state import Conn, NodeState, Tport
from raims_node.wire.frame import DIGEST_OFFSET
from tests.sim.test_sim_lone import LoneSim

US = MS // 1000
COUNT = 2000
GAP_NS = 50 * US


def stream_while_b_joins(net: SimNetwork, join_after_ns: int, old_latency_ns: int = MS) -> list[int]:
    """What D received of A's COUNT messages, in delivery order (`old_latency_ns`: of the
    links of the old path, A-C and C-D; B's take 1 ms)."""
    for name in "ACD":
        net.add_node(name)
    net.add_link("tcp_link_ac", "A", "C", (200,) * 4, latency_ns=old_latency_ns)
    net.add_link("tcp_link_dc", "D", "C", (300,) * 4, latency_ns=old_latency_ns)
    net.run_until(net.converged, timeout_ns=10 * NS)
    net.subscribe("D", "data.x")
    net.run_until(lambda: net.interest_known("D", "data.x"))
    start = net.now
    for i in range(COUNT):
        net.at(start + i * GAP_NS, lambda i=i: net.publish("A", "data.x", b"%d" % i))

    def join() -> None:
        net.add_node("B")
        net.add_link("tcp_link_ab", "A", "B", (200,) * 4)
        net.add_link("tcp_link_bc", "B", "C", (100,) * 4)
        net.add_link("tcp_link_bd", "B", "D", (200,) * 4)

    net.at(start + join_after_ns, join)
    net.run_for(COUNT * GAP_NS + 500 * MS)
    return [int(d.payload) for d in net.nodes["D"].delivered if d.subject == "data.x"]


@pytest.mark.parametrize("cls", [SimNetwork, LoneSim])
@pytest.mark.parametrize(("join_ms", "old_ms"), [(10, 1), (35, 1), (20, 4)])
def test_no_message_is_lost_when_a_shorter_route_appears(creds: Callable[[str], Credentials],
                                                         cls: type[SimNetwork], join_ms: int, old_ms: int) -> None:
    """With the old path slower (4 ms links) the new one's first frames overtake its last
    ones at D, which holds them until those arrive (router/reorder.py)."""
    net = cls(creds, seed=join_ms)
    got = stream_while_b_joins(net, join_ms * MS, old_ms * MS)
    assert got == list(range(COUNT))
    a = net.nodes["A"].node.bridge
    loss = net.nodes["D"].node.peers[a].loss
    assert (loss.msg_loss, loss.repeat) == (0, 0)
    # the route did move: C relayed the first part, B the rest
    relayed = {name: net.nodes[name].node.counters.forwarded for name in "BC"}
    assert relayed["B"] > COUNT // 2 and 0 < relayed["C"] < COUNT // 2


REJOIN_SEEDS = (2, 17, 31, 57)  # with each, B dropped frames before (below)


def stream_while_b_returns(net: SimNetwork, rng: random.Random, restart: bool = True,
                           subscribers: str = "D") -> list[int]:
    """tests/integration/test_route_change_net.py on the simulator: the manual's A-D
    graph, B leaves (`_X.BYE`) and comes back, new, while A streams to D; or, without
    `restart`, only the A-B link is down and comes back. What D got."""
    for name in "ABCD":
        net.add_node(name)
    for link, a, b, cost in (("ab", "A", "B", 200), ("bc", "B", "C", 100), ("ac", "A", "C", 200),
                             ("bd", "B", "D", 200), ("dc", "D", "C", 300)):
        net.add_link(f"tcp_link_{link}", a, b, (cost,) * 4)
    net.run_until(net.converged, timeout_ns=20 * NS)
    for name in subscribers:
        net.subscribe(name, "data.x")
    net.run_until(lambda: all(net.interest_known(n, "data.x") for n in subscribers), timeout_ns=20 * NS)
    net.bye("B") if restart else net.disconnect("tcp_link_ab")
    net.run_for(rng.randrange(50, 500) * MS)
    net.run_until(net.converged, timeout_ns=20 * NS)
    start, gap = net.now, rng.choice((20, 50, 200)) * US
    for i in range(COUNT):
        net.at(start + i * gap, lambda i=i: net.publish("A", "data.x", b"%d" % i))
    back: Callable[[], object] = (lambda: net.restart("B")) if restart else (lambda: net.reconnect("tcp_link_ab"))
    net.at(start + rng.randrange(COUNT * gap // 2), back)
    net.run_for(COUNT * gap + 1000 * MS)
    return [int(d.payload) for d in net.nodes["D"].delivered if d.subject == "data.x"]


@pytest.mark.parametrize("cls", [SimNetwork, LoneSim])
@pytest.mark.parametrize("seed", REJOIN_SEEDS)
def test_no_message_is_lost_when_a_node_rejoins_over_busy_links(creds: Callable[[str], Credentials],
                                                                cls: type[SimNetwork], seed: int) -> None:
    """Frames are delayed up to 2 ms more than their link's latency and nodes stall up to
    20 ms (less than the hold, router/reorder.py). B, back, had its own link to D before
    D's side of it, so no tree of B's reached D, and B dropped what A or C sent it for D
    (18-668 messages in 7 of 60 seeds); it now sends them to its neighbours that want
    them (route_grace.interested_neighbours)."""
    net = cls(creds, seed=seed, jitter=Jitter(seed=seed))
    got = stream_while_b_returns(net, random.Random(seed))
    assert got == list(range(COUNT))
    loss = net.nodes["D"].node.peers[net.nodes["A"].node.bridge].loss
    assert loss.msg_loss == 0


@pytest.mark.parametrize("cls", [SimNetwork, LoneSim])
@pytest.mark.parametrize("seed", (0, 1))
def test_a_relay_that_subscribes_as_well_passes_on_what_its_old_route_carries(
        creds: Callable[[str], Credentials], cls: type[SimNetwork], seed: int) -> None:
    """C subscribes too; the A-B link comes back under A's stream to D. C, a leaf of A's
    new tree, kept what A had sent it before A switched (every run lost 5-137 at D);
    now it passes those on to D as well, and the copies that come both ways are counted
    as repeats and dropped."""
    net = cls(creds, seed=seed, jitter=Jitter(seed=seed))
    got = stream_while_b_returns(net, random.Random(seed), restart=False, subscribers="CD")
    assert got == list(range(COUNT))
    loss = net.nodes["D"].node.peers[net.nodes["A"].node.bridge].loss
    assert loss.msg_loss == 0


def _state(*ids: int, subscribed: bool = False, converged: bool = True) -> NodeState:
    """What RouteGrace reads of a node: its connections, local subscriptions, convergence."""
    tport = Tport("t", 0, "tcp", (100,) * 4)
    subs = SimpleNamespace(match=lambda subject: [subject]) if subscribed else None
    db = SimpleNamespace(links_version=0, links=lambda bridge: ())  # no records: every link is half (half_links)
    return cast(NodeState, SimpleNamespace(conns={i: Conn(i, tport, 0, active=True) for i in ids}, subs=subs,
                                           converged=converged, db=db, bridge=b"M" * 16))


def _own_tree() -> tuple[int, ...]:
    return (7, 3)


def _frame(digest: bytes) -> bytes:
    return bytes(DIGEST_OFFSET) + digest + bytes(20)


KEY = (b"A" * 16, 0, b"data.x")


def test_the_old_links_count_for_the_grace_period_only() -> None:
    grace, st = RouteGrace(), _state(1, 2, 3)
    grace.started(1_000)
    grace.keep({KEY: (1, 2)}, 1_000)
    assert grace.extra(st, KEY, 3, _frame(b"a" * 16), 1_000, _own_tree) == (1, 2)
    subscriber = _state(1, 2, 3, subscribed=True)  # an old route explains it as well: on its way to (1, 2)
    assert grace.extra(subscriber, KEY, 3, _frame(b"k" * 16), 2_000, _own_tree) == (1, 2)
    assert grace.extra(subscriber, (b"C" * 16, 0, b"data.x"), 3, _frame(b"p" * 16), 2_000, _own_tree) == ()
    assert grace.extra(st, KEY, 1, _frame(b"c" * 16), 3_000, _own_tree) == (2,)  # never back where it came from
    assert grace.extra(st, (b"B" * 16, 0, b"data.x"), 3, _frame(b"d" * 16), 4_000, lambda: ()) == ()
    assert grace.in_flux(1_000 + ROUTE_GRACE_NS) and not grace.in_flux(1_000 + ROUTE_GRACE_NS + 1)
    assert grace.extra(st, KEY, 3, _frame(b"e" * 16), 1_000 + ROUTE_GRACE_NS + 1, lambda: ()) == ()
    assert not grace.old


def test_the_grace_runs_from_the_change_not_from_the_first_frame_after_it() -> None:
    """The forwarding cache is rebuilt by the first frame after a change; the old sets
    it keeps count until the change's grace ends, however late that frame came."""
    grace, st = RouteGrace(), _state(1)
    grace.started(1_000)
    grace.keep({KEY: (1,)}, 1_000 + ROUTE_GRACE_NS - 5)
    assert grace.extra(st, KEY, 3, _frame(b"l" * 16), 1_000 + ROUTE_GRACE_NS, lambda: ()) == (1,)
    assert grace.extra(st, KEY, 3, _frame(b"n" * 16), 1_000 + ROUTE_GRACE_NS + 1, lambda: ()) == ()


def test_a_cache_rebuilt_after_the_grace_keeps_nothing() -> None:
    grace = RouteGrace()
    grace.started(1_000)
    grace.keep({KEY: (1,)}, 1_000 + ROUTE_GRACE_NS + 1)
    assert not grace.old and not grace.in_flux(1_000 + ROUTE_GRACE_NS + 1)


def test_a_frame_takes_the_old_links_once_and_only_live_ones() -> None:
    grace, st = RouteGrace(), _state(1, 2)
    grace.started(0)
    grace.keep({KEY: (1, 2, 9)}, 0)  # conn 9 has closed since
    frame = _frame(b"f" * 16)
    assert grace.extra(st, KEY, 3, frame, 1, _own_tree) == (1, 2)
    assert grace.extra(st, KEY, 3, frame, 2, _own_tree) == ()  # it came around: no cycle through old links
    st.conns[2].active = False
    assert grace.extra(st, KEY, 3, _frame(b"g" * 16), 3, _own_tree) == (1,)


def test_without_an_old_set_a_frame_goes_on_our_own_tree() -> None:
    """A joining node may lack the source's links: its tree for the source sends a frame
    nowhere that the source sent it for a subscriber behind it."""
    grace, st = RouteGrace(), _state(1, 3, 7, converged=False)
    assert grace.extra(st, KEY, 3, _frame(b"m" * 16), 1, _own_tree) == (7,)  # not back on conn 3
    assert grace.extra(st, KEY, 3, _frame(b"m" * 16), 2, _own_tree) == ()  # once per frame
    assert not grace.in_flux(2 + ROUTE_GRACE_NS)  # relay_set asks only in the flux or unconverged


def test_when_no_tree_reaches_a_subscriber_its_neighbours_that_want_the_frame_get_it() -> None:
    """Those whose filter passes the subject or has not arrived; not those whose filter
    does not, not where it came from, not an inactive connection; once per frame."""
    wants, not_this = BloomFilter(), BloomFilter()
    wants.add_subject("data.x")
    not_this.add_subject("data.y")
    st = _state(1, 2, 3, 4, 5, converged=False)
    for conn_id, peer in zip((1, 2, 3, 4, 5), (b"P" * 16, b"Q" * 16, b"R" * 16, b"S" * 16, b"T" * 16), strict=True):
        st.conns[conn_id].peer = peer
    st.conns[5].active = False
    blooms = {b"P" * 16: wants, b"Q" * 16: not_this, b"R" * 16: None, b"S" * 16: wants, b"T" * 16: wants}
    st.peers = {b: Peer(b, "u", 0, bloom=bloom) for b, bloom in blooms.items()}
    grace = RouteGrace()
    assert grace.extra(st, KEY, 4, _frame(b"o" * 16), 1, lambda: ()) == (1, 3)
    assert grace.extra(st, KEY, 4, _frame(b"o" * 16), 2, lambda: ()) == ()


def test_a_second_change_keeps_the_last_set_that_sent_somewhere() -> None:
    grace, st = RouteGrace(), _state(1, 2, 3)
    grace.started(10)
    grace.keep({KEY: (1,)}, 10)
    assert grace.extra(st, KEY, 0, _frame(b"h" * 16), 10, _own_tree) == (1,)
    grace.started(10 + ROUTE_GRACE_NS)  # a second change restarts the grace
    grace.keep({KEY: (2,)}, 10 + ROUTE_GRACE_NS)
    assert grace.extra(st, KEY, 0, _frame(b"i" * 16), 10 + ROUTE_GRACE_NS, _own_tree) == (2,)
    grace.started(20 + 2 * ROUTE_GRACE_NS)
    grace.keep({KEY: ()}, 20 + 2 * ROUTE_GRACE_NS)  # a set that sent nowhere replaces nothing
    assert grace.extra(st, KEY, 0, _frame(b"j" * 16), 20 + 2 * ROUTE_GRACE_NS, _own_tree) == (2,)


def test_routes_changing_under_a_stream_cause_no_storm_and_no_disorder(creds: Callable[[str], Credentials]) -> None:
    """A ring of six with a chord, three subscribers, links cut and restored while A
    streams: every subscriber's deliveries stay in order without copies, and the frames
    sent stay within what the trees need (old links are taken once per frame)."""
    net = SimNetwork(creds, seed=7)
    ring = "ABCDEF"
    for name in ring:
        net.add_node(name)
    for i, name in enumerate(ring):
        net.add_link(f"ring_{i}", name, ring[(i + 1) % 6], (100 * (i + 1),) * 4)
    net.add_link("chord", "B", "E", (250,) * 4)
    net.run_until(net.converged, timeout_ns=10 * NS)
    for name in "CDF":
        net.subscribe(name, "data.x")
    net.run_until(lambda: all(net.interest_known(n, "data.x") for n in "CDF"))
    start, sent_before = net.now, net.frames_sent
    for i in range(COUNT):
        net.at(start + i * GAP_NS, lambda i=i: net.publish("A", "data.x", b"%d" % i))
    for at_ms, link, up in ((15, "ring_1", False), (30, "chord", False), (50, "ring_1", True),
                            (65, "chord", True), (80, "ring_4", False)):
        net.at(start + at_ms * MS, lambda link=link, up=up: (net.disconnect if not up else net.reconnect)(link))
    net.run_for(COUNT * GAP_NS + 3000 * MS)
    for name in "CDF":
        got = [int(d.payload) for d in net.nodes[name].delivered if d.subject == "data.x"]
        assert got == sorted(set(got)) and len(got) > COUNT * 9 // 10, name
    data_frames = net.frames_sent - sent_before
    assert data_frames < COUNT * 6  # a tree of six nodes: five links a frame, plus control traffic
