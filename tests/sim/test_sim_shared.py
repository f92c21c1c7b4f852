"""A filter replica shared by simulated nodes (bloom.shared_replica) stays each node's
own: a subscription delta applied at one holder copies it first (issue 24, lane 24e)."""

from __future__ import annotations

from collections.abc import Callable

from raims_node.crypto.credentials import Credentials
from raims_node.router.node import NS
from raims_node.router.sim import MS, SimNetwork


def test_a_subscription_delta_does_not_reach_the_other_holders_of_a_filter(
        creds: Callable[[str], Credentials]) -> None:
    """Two simulated nodes hold one shared replica of a third's filter; a `_S.JOIN`
    applied at one of them must not show at the other."""
    net = SimNetwork(creds)
    for n in "ABC":
        net.add_node(n)
    net.add_link("ab", "A", "B", latency_ns=MS)
    net.add_link("bc", "B", "C", latency_ns=MS)
    net.run_until(net.converged, timeout_ns=10 * NS)
    bridge_a = net.nodes["A"].node.bridge
    at_b, at_c = net.nodes["B"].node.peers[bridge_a], net.nodes["C"].node.peers[bridge_a]
    assert at_b.bloom is at_c.bloom  # one replica, decoded once
    net.set_link("bc", False)
    net.subscribe("A", "only.b")
    net.run_for(20 * MS)
    assert at_b.bloom is not None and at_b.bloom.matches("only.b")  # type: ignore[attr-defined]
    assert at_c.bloom is not None and not at_c.bloom.matches("only.b")  # type: ignore[attr-defined]


