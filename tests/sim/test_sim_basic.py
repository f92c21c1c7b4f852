"""The manual's 4-node A-D network in the simulator: convergence, delivery, wildcards."""

from __future__ import annotations

from collections.abc import Callable

from raims_node.crypto.credentials import Credentials
from raims_node.router.node import NS
from raims_node.router.sim import SimNetwork

MANUAL_GRAPH = [("link_ab", "A", "B", 200), ("link_bc", "B", "C", 100), ("link_ac", "A", "C", 200),
                ("link_bd", "B", "D", 200), ("link_dc", "D", "C", 300)]


def build(creds: Callable[[str], Credentials], seed: int = 1, cls: type[SimNetwork] = SimNetwork) -> SimNetwork:
    """The manual's A-D network (`cls`: a SimNetwork or a subclass), converged."""
    net = cls(creds, seed=seed)
    for name in "ABCD":
        net.add_node(name)
    for link, a, b, cost in MANUAL_GRAPH:
        net.add_link(link, a, b, (cost,) * 4)
    net.run_until(net.converged, timeout_ns=10 * NS)
    return net


def test_converges_with_equal_consistent_databases(creds: Callable[[str], Credentials]) -> None:
    net = build(creds)
    dbs = [s.node.db for s in net.nodes.values()]
    bridges = sorted(s.node.bridge for s in net.nodes.values())
    for db in dbs:
        assert db.consistency().ok
        assert sorted(p.bridge for p in db.peers()) == bridges
        for b in bridges:
            assert db.links(b) == dbs[0].links(b)
    assert sum(len(dbs[0].links(b)) for b in bridges) == 10  # 5 links, listed by both ends
    for s in net.nodes.values():
        assert any("network converges" in text and "3 uids authenticated" in text for _, text in s.logs)


def test_publish_reaches_the_subscriber_once_in_order(creds: Callable[[str], Credentials]) -> None:
    net = build(creds)
    net.subscribe("D", "RSF.IBM.N")
    net.run_until(lambda: net.interest_known("D", "RSF.IBM.N"))
    for i in range(50):
        net.publish("A", "RSF.IBM.N", f"m{i}".encode())
        net.publish("A", "RSF.MSFT.N", b"nobody wants this")
    net.run_for(NS // 10)
    got = [d.payload for d in net.nodes["D"].delivered]
    assert got == [f"m{i}".encode() for i in range(50)]
    assert all(d.loss == 0 and d.subject == "RSF.IBM.N" for d in net.nodes["D"].delivered)
    for other in "ABC":
        assert net.nodes[other].delivered == []
    # the unsubscribed subject went nowhere; no message was lost, repeated or unwanted
    for s in net.nodes.values():
        for p in s.node.peers.values():
            assert (p.loss.not_sub, p.loss.repeat, p.loss.msg_loss, p.loss.ibx_loss) == (0, 0, 0, 0)


def test_wildcard_subscription_gets_matches_only(creds: Callable[[str], Credentials]) -> None:
    net = build(creds)
    net.psubscribe("C", "RSF.*.N", "rv")
    net.psubscribe("B", "RSF.>", "rv")
    net.run_until(lambda: net.interest_known("C", "RSF.X.N") and net.interest_known("B", "RSF.X"))
    for subject in ["RSF.IBM.N", "RSF.IBM.O", "RSF.MSFT.N", "XYZ.IBM.N", "RSF.IBM.N.X"]:
        net.publish("A", subject, subject.encode())
    net.run_for(NS // 10)
    assert [d.subject for d in net.nodes["C"].delivered] == ["RSF.IBM.N", "RSF.MSFT.N"]
    assert [d.subject for d in net.nodes["B"].delivered] == [
        "RSF.IBM.N", "RSF.IBM.O", "RSF.MSFT.N", "RSF.IBM.N.X"]


def test_pings_measure_latency_and_skew(creds: Callable[[str], Credentials]) -> None:
    net = build(creds)
    net.run_for(20 * NS)  # a ping every 1.5 heartbeats (1 s here) to a random peer
    a = net.nodes["A"].node
    pinged = [p for p in a.peers.values() if p.pong_recv]
    assert pinged and all(p.ping_sent >= p.pong_recv for p in a.peers.values())
    d = a.peers[net.nodes["D"].node.bridge]
    if d.pong_recv:  # A-D is 2 hops of 1 ms each way: a round trip of 4 ms
        assert d.latency_ns == 4_000_000 and d.lat_max_ns == 4_000_000
    for p in pinged:
        assert p.latency_ns in (2_000_000, 4_000_000) and abs(p.pong_skew_ns) <= 1_000_000
    assert sum(s.node.peers[a.bridge].ping_recv for s in net.nodes.values() if s.node is not a) == \
        sum(p.ping_sent for p in a.peers.values())
