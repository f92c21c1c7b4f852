"""Queue groups (anycast to one member among all nodes), echo, replicated subject lists."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from raims_node.crypto.credentials import Credentials
from raims_node.router.node import NS
from raims_node.router.sim import MS
from tests.sim.test_sim_basic import build


def test_queue_group_delivers_each_message_to_exactly_one_member(creds: Callable[[str], Credentials]) -> None:
    net = build(creds)
    members = {"B": ["b1"], "C": ["c1", "c2"], "D": ["d1"]}
    for name, sids in members.items():
        sim = net.nodes[name]
        for sid in sids:
            net._apply(name, sim.node.subscribe(sim, sid, "work.items", net.now, queue="workers"))
    net.subscribe("D", "work.items", sid="plain")  # a plain subscriber gets everything
    marker = "_QUEUE.workers.sub.work.items"
    net.run_until(lambda: all(marker in net.nodes["A"].node.peers[net.nodes[n].node.bridge].subjects
                              for n in members), timeout_ns=5 * NS)
    net.run_until(lambda: net.interest_known("D", "work.items"), timeout_ns=5 * NS)
    for i in range(300):
        net.publish("A", "work.items", b"%d" % i)
    net.run_for(100 * MS)
    got = Counter()
    per_member = Counter()
    plain = 0
    for name in members:
        for d in net.nodes[name].delivered:
            if d.sid == "plain":
                plain += 1
            else:
                got[d.payload] += 1
                per_member[d.sid] += 1
    assert plain == 300
    assert got == Counter({b"%d" % i: 1 for i in range(300)})
    assert set(per_member) == {"b1", "c1", "c2", "d1"} and min(per_member.values()) > 20


def test_no_echo_and_replicated_subject_lists(creds: Callable[[str], Credentials]) -> None:
    net = build(creds)
    a = net.nodes["A"]
    net._apply("A", a.node.subscribe(a, "s1", "chat", net.now))
    net.psubscribe("D", "chat.>", "rv")
    net.subscribe("D", "chat")
    net.run_until(lambda: net.interest_known("D", "chat"), timeout_ns=5 * NS)
    net._apply("A", a.node.publish("chat", b"hi", net.now, no_echo=a))
    net._apply("A", a.node.publish("chat", b"echo", net.now))
    net.run_for(50 * MS)
    assert [d.payload for d in a.delivered] == [b"echo"]
    d_bridge = net.nodes["D"].node.bridge
    assert "chat" in a.node.peers[d_bridge].subjects
    assert ("rv", "chat.>") in a.node.peers[d_bridge].patterns
    assert a.node.interest("chat") == (1, 1)
    # a node joining later learns the lists from sync replies
    net.add_node("E")
    net.add_link("link_ea", "E", "A")
    net.run_until(net.converged, timeout_ns=5 * NS)
    e = net.nodes["E"].node
    assert "chat" in e.peers[d_bridge].subjects and ("rv", "chat.>") in e.peers[d_bridge].patterns


def test_binary_subjects_cross_the_network(creds: Callable[[str], Credentials]) -> None:
    net = build(creds)
    subject = b"chan\xff\x00\xfe".decode("utf-8", "surrogateescape")  # a Redis channel, not UTF-8
    net.subscribe("D", subject)
    net.run_until(lambda: net.interest_known("D", subject), timeout_ns=5 * NS)
    net.publish("A", subject, b"payload")
    net.run_for(50 * MS)
    assert [(d.subject, d.payload) for d in net.nodes["D"].delivered] == [(subject, b"payload")]
    assert subject in net.nodes["A"].node.peers[net.nodes["D"].node.bridge].subjects
