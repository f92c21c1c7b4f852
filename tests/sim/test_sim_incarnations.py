"""A node killed and restarted many times: every incarnation is a new bridge (new key,
new start), and the nodes that outlive it keep nothing of the old ones but a zombie
each (`show peers zombie`, at most uids.ZOMBIES_KEPT) and the handshake's replay floors
(at most handshake.MAX_PEERS). Before (2026-11-27, branch churn-leaks), each
incarnation left on every other node a zero count per link pair and per bridge in the
link-state database, the cached MAC key of its session, its mesh url (on a mesh
transport), and, per link connection
closed, the flood batcher's last flush time: 40 restarts of a real node, 26 of each
on its neighbour. And each zombie kept its subscription tables (the replica of its
filter and its subjects: 1.8 MB for 10,000 subjects), now let go but for the count."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from raims_node.crypto.credentials import Credentials
from raims_node.router.node import NS, Node, NodeParams
from raims_node.router.sim import MS, Jitter, SimNetwork


def sizes(node: Node) -> dict[str, int]:
    st = node.state
    return {"pairs": len(st.db._pair), "refs": len(st.db._refs), "macs": len(st._macs),
            "batch_last": len(st.batch._last), "peers": len(st.peers),
            "mesh_urls": len(node.mesh.member_urls)}


@pytest.mark.parametrize("seed", [1, 7])
def test_a_node_restarted_many_times_leaves_no_state_per_incarnation(
        creds: Callable[[str], Credentials], seed: int) -> None:
    net = SimNetwork(creds, seed=seed, params=NodeParams(heartbeat_ns=NS), jitter=Jitter(seed=seed))
    for name in "ABC":
        net.add_node(name)
    net.add_link("ab", "A", "B", latency_ns=MS // 10)
    net.add_link("bc", "B", "C", latency_ns=MS // 10, tport_type="mesh")  # C tells B its mesh url
    net.run_until(net.converged, 30 * NS)
    net.subscribe("A", "churn.x")
    net.run_until(lambda: net.interest_known("A", "churn.x", among=["C"]), 10 * NS)
    first: dict[str, dict[str, int]] = {}
    for i in range(25):
        net.kill("C")
        net.run_for(3 * NS)  # A and B time it out (1.5 heartbeats) and remove it
        c = net.restart("C")
        net.disconnect("bc")
        c.set_mesh_url(next(t.tport_id for t in c.tports if t.name == "bc"), f"tcp://127.0.0.1:{9000 + i}")
        net.reconnect("bc")
        net.run_until(net.converged, 30 * NS)
        net.run_until(lambda: net.interest_known("A", "churn.x", among=["C"]), 10 * NS)
        for j in range(20):
            net.subscribe("C", f"c.{i}.{j}")
        net.publish("C", "churn.x", b"%d" % i)  # A verifies it with the new session's key
        net.run_for(50 * MS)
        if i == 1:
            first = {n: sizes(net.nodes[n].node) for n in "AB"}
    last = {n: sizes(net.nodes[n].node) for n in "AB"}
    assert last == first
    assert last["B"]["mesh_urls"] == 1
    for n in "AB":
        st = net.nodes[n].node.state
        assert len(st.zombies) == 25 and len(st.hs.peers()) <= 27
        zombies = list(st.zombies.values())[1:]  # (the first died before its subscriptions were known)
        assert all(z.bloom is None and not z.subjects for z in zombies)  # its tables let go
        assert all(z.zombie_subs == 20 for z in zombies)  # show peers zombie: its count kept


def test_links_that_come_and_go_leave_no_flood_batcher_state(creds: Callable[[str], Credentials]) -> None:
    """Each link connection is a new conn id (a reconnecting TCP link): the batcher's
    last flush time per connection went with it only when a flood was held for it
    while it closed (30 flaps: 31 kept before, 1 after)."""
    net = SimNetwork(creds, seed=3, params=NodeParams(heartbeat_ns=NS))
    for name in "AB":
        net.add_node(name)
    net.add_link("ab0", "A", "B", latency_ns=MS // 10)
    net.run_until(net.converged, 30 * NS)
    for i in range(1, 31):
        net.add_link(f"ab{i}", "A", "B", latency_ns=MS // 10)
        net.run_for(200 * MS)
        net.disconnect(f"ab{i - 1}")
        net.run_until(net.converged, 10 * NS)
        net.run_for(200 * MS)
    assert len(net.nodes["A"].node.state.batch._last) <= 2
