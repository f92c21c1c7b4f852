"""A ping claiming subscription seqnos whose floods are still on the way (NodeState.sub_claim).

During a burst of subscriptions a node's pings and heartbeats carry seqnos ahead of the
`_S.JOIN` floods held in a batch or queued behind the burst; a peer that asked for the
whole state (`adj`) at once drew an answer with every subject per ping and heartbeat.
"""

from __future__ import annotations

from collections.abc import Callable

from raims_node.crypto.credentials import Credentials
from raims_node.router.node import Node
from raims_node.wire import Fid
from tests.sim.test_sim_basic import build


def ping_claiming(b: Node, d: Node, ahead: int, now_ns: int) -> None:
    """`d`'s ping as `b` gets it, claiming `ahead` subscription changes past what `b` applied."""
    peer = b.state.peers[d.state.bridge]
    rec = b.state.db.peer(d.state.bridge)
    assert rec is not None
    b.remote_ops.in_ping(peer, {Fid.STAMP: now_ns, Fid.LINK_STATE: rec.link_seqno,
                                Fid.SUB_SEQNO: peer.sub_seqno + ahead}, d.state.bridge, now_ns)


def test_a_ping_ahead_of_the_floods_waits_for_them(creds: Callable[[str], Credentials]) -> None:
    net = build(creds)
    b, d = net.nodes["B"].node, net.nodes["D"].node
    key = ("adj", d.state.bridge)
    net.record_trace = True
    ping_claiming(b, d, 3, net.now)
    assert key not in b.state.sync.pending  # not asked at once
    for i in range(3):  # the floods it claimed arrive
        net.subscribe("D", f"claimed.{i}")
    net.run_until(lambda: net.interest_known("D", "claimed.2"))
    net.run_for(b.state.params.rpc_timeout_ns * 2)
    assert key not in b.state.sync.pending and not b.state.sync.sub_claims
    assert not [t for t in net.trace if t[1] == "B" and t[3].endswith(".adj_req")]


def test_a_claim_still_unmet_after_an_rpc_timeout_asks_adj(creds: Callable[[str], Credentials]) -> None:
    net = build(creds)
    b, d = net.nodes["B"].node, net.nodes["D"].node
    net.record_trace = True
    ping_claiming(b, d, 3, net.now)  # floods that never come (lost)
    net.run_for(b.state.params.rpc_timeout_ns // 2)
    assert not [t for t in net.trace if t[1] == "B" and t[3].endswith(".adj_req")]  # not yet
    net.run_for(b.state.params.rpc_timeout_ns)
    assert [t for t in net.trace if t[1] == "B" and t[3].endswith(".adj_req")]
