"""Service names on a simulated network (issue 21): 16 nodes, 1,000 bindings converge on
every node, round-robin lookups spread exactly evenly, a killed node's names are
withdrawn everywhere, a node that joins late catches up, multicast reaches each port once."""

from __future__ import annotations

import random
from collections import Counter

from raims_node.names.service import Publish
from raims_node.names.sim import NamesSim
from raims_node.names.table import Domain
from raims_node.router.node import NS
from raims_node.router.sim import MS, SimNetwork
from tests.sim.conftest import USERS, creds_factory
from tests.sim.test_sim_scale import random_redundant_graph

N = 16
BINDINGS = 1000
RR_TYPE = 7
BEACON_NS = 2 * NS


def build(seed: int, n: int = N) -> tuple[SimNetwork, NamesSim, list[str]]:
    names = USERS[:n]
    net = SimNetwork(creds_factory("test", tuple(USERS[:40])), seed=seed)
    rng = random.Random(seed)
    for name in names:
        net.add_node(name, start_offset_ns=rng.randrange(10**9))
    ns = NamesSim(net)
    ns.attach_all()
    for a, b in random_redundant_graph(rng, n, n // 2):
        net.add_link(f"l{a}_{b}", names[a], names[b], latency_ns=rng.randrange(1, 5) * MS)
    net.run_until(net.converged, timeout_ns=30 * NS)
    return net, ns, names


def bind_all(net: SimNetwork, ns: NamesSim, names: list[str]) -> None:
    for k in range(BINDINGS):
        name = names[k % len(names)]
        ns.request(name, "BIND", {"type": 100 + k % 10, "lower": k * 10, "upper": k * 10 + 9, "inbox": f"p.{k}"})
        if k % 50 == 0:
            net.run_for(MS)
    for name in names:
        ns.request(name, "BIND", {"type": RR_TYPE, "lower": 0, "upper": 99, "inbox": f"rr.{name}"})


def test_16_nodes_1000_bindings_converge_round_robin_even_and_kill_withdraws() -> None:
    net, ns, names = build(seed=21)
    bind_all(net, ns, names)
    want = BINDINGS + 2 * N  # the bindings, the round-robin ones, every node's type 0
    took = net.run_until(lambda: all(len(s.table) == want for s in ns.services.values()) and ns.converged(),
                         timeout_ns=10 * NS)
    assert took < 2 * NS
    # every node holds the same publications, with the same ports and inboxes
    ref = {(p.node, p.key): p for p in ns.services[names[0]].table}
    for name in names[1:]:
        assert {(p.node, p.key): p for p in ns.services[name].table} == ref

    for name in (names[0], names[5]):
        svc = ns.services[name]
        chosen = Counter(svc.lookup(RR_TYPE, 50, Domain("cluster")).user for _ in range(N * 100))  # type: ignore[union-attr]
        assert chosen == {n: 100 for n in names}

    victim = names[3]
    gone = net.nodes[victim].node.bridge
    assert any(p.node == gone for p in ns.services[names[0]].table)
    net.kill(victim)
    took = net.run_until(lambda: all(not any(p.node == gone for p in ns.services[n].table)
                                     for n in names if n != victim), timeout_ns=10 * NS)
    assert took < 3 * NS  # the peer's heartbeat timeout (1.5 s here) and a flood
    left = want - BINDINGS // N - 2
    assert all(len(ns.services[n].table) in (left, left - 1) for n in names if n != victim)
    chosen = Counter(ns.services[names[0]].lookup(RR_TYPE, 1, Domain("cluster")).user  # type: ignore[union-attr]
                     for _ in range((N - 1) * 10))
    assert chosen == {n: 10 for n in names if n != victim}


def test_a_late_node_catches_up() -> None:
    net, ns, names = build(seed=5, n=6)
    for i, name in enumerate(names):
        ns.request(name, "BIND", {"type": 9, "instance": i, "inbox": f"i.{i}"})
    net.run_until(ns.converged, timeout_ns=5 * NS)
    late = USERS[6]
    net.add_node(late)
    ns.attach(late)
    net.add_link("late", late, names[2])
    net.run_until(lambda: len(ns.services[late].table) == 6 + 7 and ns.converged(), timeout_ns=10 * NS)
    # the late node's own binding reaches everyone
    ns.request(late, "BIND", {"type": 9, "instance": 99, "inbox": "late"})
    net.run_until(lambda: all(len(s.table) == 14 for s in ns.services.values()), timeout_ns=5 * NS)


def test_multicast_reaches_each_overlapping_port_once_and_to_follows_lookup() -> None:
    net, ns, names = build(seed=9, n=4)
    a, b, c = names[:3]
    net.subscribe(b, "port.b")
    net.subscribe(c, "port.c")
    ns.request(b, "BIND", {"type": 17, "lower": 0, "upper": 9, "inbox": "port.b"})
    ns.request(b, "BIND", {"type": 17, "lower": 30, "upper": 39, "inbox": "port.b"})
    ns.request(c, "BIND", {"type": 17, "lower": 10, "upper": 19, "inbox": "port.c"})
    net.run_until(lambda: len(ns.services[a].table) == 4 + 3, timeout_ns=5 * NS)
    net.run_until(lambda: net.interest_known(b, "port.b") and net.interest_known(c, "port.c"), timeout_ns=5 * NS)
    ns.request(a, "MCAST.17.7.13", b"m1")
    ns.request(a, "MCAST.17.0.39", b"m2")  # port.b overlaps twice: still one replica
    ns.request(a, "TO.17.15", b"t1")
    net.run_for(200 * MS)
    got = Counter((d.subject, d.payload) for n in (b, c) for d in net.nodes[n].delivered)
    assert got == {("port.b", b"m1"): 1, ("port.c", b"m1"): 1, ("port.b", b"m2"): 1, ("port.c", b"m2"): 1,
                   ("port.c", b"t1"): 1}


def test_topology_subscription_sees_remote_publish_withdraw_and_node_type_0() -> None:
    net, ns, names = build(seed=11, n=4)
    a, b = names[:2]
    net.subscribe(a, "ev")
    ns.request(a, "SUBSCRIBE", {"type": 17, "lower": 0, "upper": 100, "inbox": "ev"})
    ns.request(a, "SUBSCRIBE", {"type": 0, "inbox": "ev"})
    ns.request(b, "BIND", {"type": 17, "lower": 50, "upper": 150, "inbox": "x"}, owner="cli")
    net.run_for(500 * MS)
    ns.client_gone(b, "cli")
    net.run_for(500 * MS)
    import json

    events = [json.loads(d.payload) for d in net.nodes[a].delivered]
    t17 = [(e["event"], e["found_lower"], e["found_upper"], e["node"]) for e in events if e["type"] == 17]
    assert t17 == [("published", 50, 100, b), ("withdrawn", 50, 100, b)]
    assert sorted(e["node"] for e in events if e["type"] == 0) == sorted(names)  # every node is up
    net.kill(names[3])
    net.run_for(4 * NS)
    events = [json.loads(d.payload) for d in net.nodes[a].delivered]
    assert [(e["event"], e["node"]) for e in events if e["type"] == 0][-1] == ("withdrawn", names[3])
    assert not [o for o in ns.services[a].tick(net.now) if isinstance(o, Publish)]


def test_partition_withdraws_across_the_split_and_heal_restores_with_changes_made_while_split() -> None:
    net = SimNetwork(creds_factory("test", tuple(USERS[:40])), seed=3)
    names = ["A", "B", "C", "D", "E", "F"]
    for n in names:
        net.add_node(n)
    ns = NamesSim(net)
    ns.attach_all()
    for a, b in [("A", "B"), ("B", "C"), ("C", "A"), ("D", "E"), ("E", "F"), ("F", "D"), ("C", "D"), ("A", "F")]:
        net.add_link(f"l_{a}{b}".lower(), a, b)
    net.run_until(net.converged, timeout_ns=10 * NS)
    ns.request("A", "BIND", {"type": 40, "instance": 1, "inbox": "a1"})
    ns.request("E", "BIND", {"type": 40, "instance": 2, "inbox": "e2"}, owner="e-client")
    net.run_until(lambda: ns.converged() and len(ns.services["D"].table) == 8, timeout_ns=5 * NS)
    net.set_link("l_cd", False)
    net.set_link("l_af", False)
    net.run_until(lambda: len(ns.services["A"].table) == 4 and len(ns.services["D"].table) == 4, timeout_ns=5 * NS)
    ns.client_gone("E", "e-client")  # changes on one side while split
    ns.request("F", "BIND", {"type": 40, "instance": 3, "inbox": "f3"})
    net.run_for(NS // 2)
    net.set_link("l_cd", True)
    net.set_link("l_af", True)
    net.run_until(lambda: net.converged() and ns.converged(), timeout_ns=10 * NS)
    assert sorted(p.lower for p in ns.services["B"].table if p.type == 40) == [1, 3]
    assert sum(1 for p in ns.services["B"].table if p.type == 0) == 6


def test_a_restarted_node_is_a_new_origin_and_its_old_names_go() -> None:
    net, ns, names = build(seed=13, n=5)
    ns.request(names[1], "BIND", {"type": 50, "instance": 1, "inbox": "old"})
    net.run_until(lambda: all(len(s.table) == 6 for s in ns.services.values()), timeout_ns=5 * NS)
    old = net.nodes[names[1]].node.bridge
    net.kill(names[1])
    net.run_for(NS // 2)
    net.restart(names[1])
    ns.attach(names[1])
    ns.request(names[1], "BIND", {"type": 50, "instance": 2, "inbox": "new"})
    net.run_until(lambda: net.converged() and ns.converged() and all(len(s.table) == 6 for s in ns.services.values()),
                  timeout_ns=10 * NS)
    for svc in ns.services.values():
        assert not any(p.node == old for p in svc.table)
        assert [p.lower for p in svc.table if p.type == 50] == [2]


def test_lossy_links_converge_through_gaps_and_beacons() -> None:
    net = SimNetwork(creds_factory("test", tuple(USERS[:40])), seed=17)
    names = USERS[:8]
    rng = random.Random(17)
    for name in names:
        net.add_node(name)
    ns = NamesSim(net, beacon_ns=BEACON_NS)
    ns.attach_all()
    for a, b in random_redundant_graph(rng, len(names), 4):
        net.add_link(f"l{a}_{b}", names[a], names[b])
    net.run_until(net.converged, timeout_ns=30 * NS)
    for link in net.links.values():
        link.loss = 0.05
    for k in range(80):
        ns.request(names[k % len(names)], "BIND", {"type": 60, "instance": k, "inbox": f"p{k}"})
        net.run_for(5 * MS)
    for link in net.links.values():
        link.loss = 0.0  # no frame is lost from here, but missed ones are still missing
    net.run_until(lambda: ns.converged() and all(len(s.table) == 80 + 8 for s in ns.services.values()),
                  timeout_ns=30 * NS)


def test_a_lost_last_update_is_caught_by_the_next_beacon() -> None:
    net = SimNetwork(creds_factory("test", tuple(USERS[:40])), seed=23)
    for name in "AB":
        net.add_node(name)
    ns = NamesSim(net, beacon_ns=BEACON_NS)
    ns.attach_all()
    link = net.add_link("ab", "A", "B")
    net.run_until(lambda: net.converged() and ns.converged(), timeout_ns=10 * NS)
    link.loss = 1.0  # the update's frame vanishes; the link stays up
    ns.request("A", "BIND", {"type": 61, "instance": 1, "inbox": "p"})
    net.run_for(5 * MS)
    link.loss = 0.0
    net.run_for(BEACON_NS // 4)
    assert len(ns.services["B"].table) == 2  # nothing after it to show the gap
    took = net.run_until(lambda: len(ns.services["B"].table) == 3, timeout_ns=2 * BEACON_NS)
    assert took <= BEACON_NS + NS
    assert ns.services["B"].repl.lagging == 1
