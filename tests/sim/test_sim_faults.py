"""Joins, failures, partitions and bad peers in the simulator (issue 6)."""

from __future__ import annotations

from collections.abc import Callable

from raims_node.crypto.credentials import Credentials
from raims_node.router.actions import Send
from raims_node.router.node import NS
from raims_node.router.sim import MS, SimNetwork
from raims_node.router.state import Pending
from raims_node.wire import peek
from raims_node.wire.subjects import bridge_b64
from tests.sim.conftest import creds_factory
from tests.sim.test_sim_basic import build

HB = NS  # the simulator's heartbeat interval


def _flow(net: SimNetwork, a: str, b: str) -> list[str]:
    """Subjects sent from a to b, system suffixes only (`_I.<bridge>.auth` -> `auth`)."""
    out = []
    for _, src, dst, subject in net.trace:
        if src == a and dst == b:
            out.append(subject.rsplit(".", 1)[-1] if subject.startswith("_I.") else subject)
    return out


def test_fifth_node_joins_with_the_manuals_message_flow(creds: Callable[[str], Credentials]) -> None:
    net = build(creds)
    net.record_trace = True
    net.add_node("E")
    net.add_link("link_eb", "E", "B", (100,) * 4)
    took = net.run_until(net.converged, timeout_ns=10 * HB)
    assert took < HB // 2  # no heartbeat needed: the join completes by messages alone
    e_to_b, b_to_e = _flow(net, "E", "B"), _flow(net, "B", "E")
    # E (the manual's ruby) connecting to B (dyna): both open with a HELLO, then B's auth
    assert e_to_b[0] == b_to_e[0] == "_X.HELLO"
    e_to_b, b_to_e = [s for s in e_to_b if s[:3] != "_X."], [s for s in b_to_e if s[:3] != "_X."]
    assert b_to_e[0] == "auth"
    for expected in ("auth", "_Z.ADD", "_Z.ADJ", "adj_req", "sync_req"):
        assert expected in e_to_b, expected
    for expected in ("_Z.ADJ", "add_rte", "adj_rpy", "sync_rpy"):
        assert expected in b_to_e, expected
    assert e_to_b.index("auth") < e_to_b.index("_Z.ADD") < e_to_b.index("sync_req")
    assert b_to_e.index("add_rte") < b_to_e.index("sync_rpy")
    assert e_to_b.count("sync_req") == 3  # one per peer it did not know: A, C, D
    # B tells its other neighbours about E; they ask B for E's state
    assert "_Z.ADD" in _flow(net, "B", "A") and "sync_req" in _flow(net, "A", "B")
    for s in net.nodes.values():
        assert len(s.node.peers) == 4


def test_node_death_reroutes_and_rejoins(creds: Callable[[str], Credentials]) -> None:
    net = build(creds)
    net.subscribe("D", "data.x")
    net.run_until(lambda: net.interest_known("D", "data.x"))
    net.kill("B")
    took = net.run_until(net.converged, timeout_ns=10 * HB)
    assert took <= int(1.5 * HB) + 200 * MS  # heartbeat timeout plus sync
    b = net.nodes["B"].node.bridge
    for name in "ACD":
        assert b not in net.nodes[name].node.peers
    net.record_trace = True
    for i in range(10):
        net.publish("A", "data.x", b"%d" % i)
    net.run_for(100 * MS)
    assert [d.payload for d in net.nodes["D"].delivered] == [b"%d" % i for i in range(10)]
    hops = [(src, dst) for _, src, dst, s in net.trace if s == "data.x"]
    assert set(hops) == {("A", "C"), ("C", "D")}
    net.restart("B")
    net.run_until(net.converged, timeout_ns=10 * HB)
    assert len(net.nodes["A"].node.peers) == 3
    assert net.nodes["B"].node.bridge != b


def test_bye_drops_the_peer_at_once(creds: Callable[[str], Credentials]) -> None:
    net = build(creds)
    net.bye("D")
    took = net.run_until(net.converged, timeout_ns=HB)
    assert took < HB // 2
    assert all(len(net.nodes[n].node.peers) == 2 for n in "ABC")


def test_partition_and_heal_merge_the_databases(creds: Callable[[str], Credentials]) -> None:
    net = SimNetwork(creds, seed=3)
    names = ["A", "B", "C", "D", "E", "F"]
    for n in names:
        net.add_node(n)
    for a, b in [("A", "B"), ("B", "C"), ("C", "A"), ("D", "E"), ("E", "F"), ("F", "D"), ("C", "D"), ("A", "F")]:
        net.add_link(f"l_{a}{b}".lower(), a, b)
    net.run_until(net.converged, timeout_ns=10 * HB)
    net.set_link("l_cd", False)
    net.set_link("l_af", False)
    net.run_for(3 * HB)
    assert len(net.nodes["A"].node.peers) == 2 and len(net.nodes["D"].node.peers) == 2
    net.subscribe("E", "after.split")  # a change on one side while split
    net.run_for(HB // 2)
    net.set_link("l_cd", True)
    net.set_link("l_af", True)
    net.run_until(net.converged, timeout_ns=10 * HB)
    assert all(len(s.node.peers) == 5 for s in net.nodes.values())
    net.run_until(lambda: net.interest_known("E", "after.split"), timeout_ns=5 * HB)
    net.publish("B", "after.split", b"x")
    net.run_for(50 * MS)
    assert [d.payload for d in net.nodes["E"].delivered] == [b"x"]


def test_wrong_service_forged_and_replayed_frames_are_rejected(creds: Callable[[str], Credentials]) -> None:
    net = build(creds)
    other = creds_factory("othersvc", ("X",))
    a = net.nodes["A"].node
    # a node whose keys belong to another service
    net.creds = lambda name: other("X") if name == "X" else creds(name)  # type: ignore[method-assign]
    net.add_node("X")
    net.add_link("link_xa", "X", "A")
    net.run_for(3 * HB)
    assert net.nodes["X"].node.peers == {}
    assert len(a.peers) == 3 and a.counters.auth_rejected > 0
    assert any("remove auth" in t for _, t in net.nodes["A"].logs)
    # a forged frame: B's data with one bit flipped, and a replay of a genuine frame
    net.subscribe("A", "s.t")
    net.run_until(lambda: net.interest_known("A", "s.t", among="BCD"))
    bnode = net.nodes["B"].node
    frames = [act.data for act in bnode.publish("s.t", b"real", net.now)]
    link = net.links["link_ab"]
    conn_a = link.conn_a if link.a == "A" else link.conn_b
    bad_before = a.counters.bad_mac
    forged = bytearray(frames[0])
    forged[-3] ^= 0x01
    net._apply("A", a.on_frame(conn_a, bytes(forged), net.now))
    assert a.counters.bad_mac == bad_before + 1
    net._apply("A", a.on_frame(conn_a, frames[0], net.now))
    net._apply("A", a.on_frame(conn_a, frames[0], net.now))
    assert [d.payload for d in net.nodes["A"].delivered] == [b"real"]
    assert a.peers[bnode.bridge].loss.repeat == 1


def test_an_unanswered_sync_is_retried_with_the_next_neighbour(creds: Callable[[str], Credentials]) -> None:
    """A node that cannot route to the peer it lags on asks its neighbours in turn: the
    one asked may lag as far behind (in a 128-node network, pairs of lagging nodes asked
    each other for ever)."""
    net = SimNetwork(creds, seed=3)
    for name in "ABCD":
        net.add_node(name)
    for link, a, b in (("ab", "A", "B"), ("ac", "A", "C"), ("bd", "B", "D"), ("cd", "C", "D")):
        net.add_link(link, a, b, (100,) * 4)
    net.run_until(net.converged, timeout_ns=10 * HB)
    a = net.nodes["A"].node
    b, c, d = (net.nodes[x].node.bridge for x in "BCD")
    record = a.db.peer(d)
    assert record is not None
    a.db.remove_peer(d)  # A has lost D's links: D is out of its routes
    a.db.put_peer(record)
    assert not a.state.routable(d)
    asked = []
    first = min(b, c)  # the neighbour asked first, then the other, then the first again
    a.state.sync.pending[("adj", d)] = Pending("adj", d, first, net.now)
    for _ in range(3):
        sent = [peek(act.data).subject for act in a.tick(net.now) if isinstance(act, Send)]
        asked += [s for s in sent if s.endswith(b".adj_req")]
        a.state.sync.pending[("adj", d)].deadline_ns = net.now
        a.state.sync.pending[("adj", d)].tries = 1
    to = {bridge_b64(x).encode(): x for x in (b, c)}
    assert [to[s.split(b".")[1]] for s in asked] == [max(b, c), min(b, c), max(b, c)]
