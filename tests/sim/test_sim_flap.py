"""A link that flaps two hops away: A-B-C, the B-C link down and up again.

B authenticates C again before C's links reach it, and answers A's sync request about
C with C's key and no links yet; A then holds the gap before C's own link update and
must ask for it. It asked once, for C's filter too, with the rpc timeout (half a
heartbeat), and C's filter arriving cancelled that request: A stayed unconverged, C
unrouted from A, until a heartbeat's sums showed the difference (15 s at the default
10 s heartbeat, with B-C slower than A-B)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from raims_node.crypto.credentials import Credentials
from raims_node.router.node import NS, NodeParams
from raims_node.router.sim import MS, SimNetwork


@pytest.mark.parametrize("bc_latency_ns", [MS // 10, MS, 10 * MS])
def test_a_peer_two_hops_away_is_back_soon_after_its_link_flaps(creds: Callable[[str], Credentials],
                                                                  bc_latency_ns: int) -> None:
    net = SimNetwork(creds, params=NodeParams(heartbeat_ns=10 * NS))
    for name in "ABC":
        net.add_node(name)
    net.add_link("ab", "A", "B", latency_ns=MS // 10)
    net.add_link("bc", "B", "C", latency_ns=bc_latency_ns)
    net.run_until(net.converged, 30 * NS)
    net.run_for(3 * NS)
    net.disconnect("bc")
    net.run_for(2 * NS)
    net.reconnect("bc")
    back = net.now
    net.run_until(net.converged, 60 * NS)
    assert net.now - back < NS, f"{(net.now - back) / NS:.3f} s"  # was 15 s: a heartbeat and a half
    a = net.nodes["A"].node
    assert a.state.routable(net.nodes["C"].node.bridge)
