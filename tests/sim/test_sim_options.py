"""Publish options and point-to-point deliveries: ack and trace replies, `_INBOX` anycast,
remote console commands (issue 6, item 5)."""

from __future__ import annotations

from collections.abc import Callable

from raims_node.crypto.credentials import Credentials
from raims_node.router.node import NS, OPT_ACK, OPT_TRACE
from raims_node.router.sim import MS
from tests.sim.test_sim_basic import build


def test_ack_comes_from_receivers_and_trace_from_every_router(creds: Callable[[str], Credentials]) -> None:
    net = build(creds)
    net.subscribe("D", "orders.new")
    net.run_until(lambda: net.interest_known("D", "orders.new"), timeout_ns=5 * NS)
    a = net.nodes["A"]
    net._apply("A", a.node.publish("orders.new", b"1", net.now, opt=OPT_ACK))
    net.run_for(50 * MS)
    assert [(k, u, s) for k, u, s, _, _, _ in a.node.acks] == [("ack", "D", "orders.new")]
    a.node.acks.clear()
    net._apply("A", a.node.publish("orders.new", b"2", net.now, opt=OPT_TRACE))
    net.run_for(50 * MS)
    hops = {(k, u, tport) for k, u, _, _, tport, _ in a.node.acks}
    assert hops == {("trace", "B", "link_ab"), ("trace", "D", "link_bd")}  # A -> B -> D at cost 400
    assert [d.payload for d in net.nodes["D"].delivered] == [b"1", b"2"]


def test_inbox_replies_go_point_to_point_to_one_node(creds: Callable[[str], Credentials]) -> None:
    net = build(creds)
    inbox = "_nats._INBOX.client7.reply"
    net.subscribe("C", inbox)
    net.run_until(lambda: net.interest_known("C", inbox), timeout_ns=5 * NS)
    net.run_for(20 * MS)  # redundant floods held for a batch (router/batch.py) drain first
    net.record_trace = True
    net.publish("D", inbox, b"the answer")
    net.run_for(50 * MS)
    assert [d.payload for d in net.nodes["C"].delivered] == [b"the answer"]
    sent = [(src, dst, subj) for _, src, dst, subj in net.trace if not subj.startswith("_X.")]
    assert sent and all(subj.endswith(".any") for _, _, subj in sent)  # never multicast
    assert net.nodes["D"].node.counters.anycast == 1


def test_remote_console_command(creds: Callable[[str], Credentials]) -> None:
    net = build(creds)
    d = net.nodes["D"].node
    d.rem_handler = lambda line: f"D ran {line!r}"
    a = net.nodes["A"]
    net._apply("A", a.node.remote(d.bridge, "show pubtype", a, net.now))
    net.run_for(50 * MS)
    (reply,) = a.delivered
    assert reply.payload == b"D ran 'show pubtype'" and reply.subject == "rem.D"


def test_shardcast_splits_the_subject_space_between_nodes(creds: Callable[[str], Credentials]) -> None:
    from raims_node.bloom import Shard

    net = build(creds)
    for name, k in (("C", 1), ("D", 2)):
        sim = net.nodes[name]
        net._apply(name, sim.node.psubscribe(sim, "s", "X.*", "rv", net.now, shard=Shard(k, 2)))
    net.run_until(lambda: all(net.nodes["A"].node.peers[net.nodes[n].node.bridge].patterns for n in "CD"),
                  timeout_ns=5 * NS)
    net.record_trace = True
    for i in range(100):
        net.publish("A", f"X.{i}", b"%d" % i)
    net.run_for(50 * MS)
    got_c = {d.subject for d in net.nodes["C"].delivered}
    got_d = {d.subject for d in net.nodes["D"].delivered}
    assert got_c | got_d == {f"X.{i}" for i in range(100)} and not got_c & got_d
    assert 20 < len(got_c) < 80  # the hash splits the space about evenly
    # the filters prune by shard: no message was sent towards a node not holding its shard
    to_c = {s for _, _, dst, s in net.trace if dst == "C" and s.startswith("X.")}
    assert to_c == got_c
