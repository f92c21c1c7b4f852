"""A subscription made before a publish is known wherever the publish arrives
(router/batch.py, `NodeState.floods_first`).

D subscribes `data.i`, then publishes `ready.i`; A publishes `data.i` the moment `ready.i`
reaches it. Each subscription after the first falls within D's 10 ms hold of its own
updates, so before the fix it waited there while `ready.i` went on: A did not know D's
interest yet and `data.i` reached nobody (19 of 20 lost with the daemons and nats-py).
The same for a relay: a flood held for the next hop goes out before the data frame
behind it. On the general and the lone path (tests/sim/test_sim_lone.py's LoneSim)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from raims_node.crypto.credentials import Credentials
from raims_node.router.node import NS
from raims_node.router.sim import SimNetwork
from tests.sim.test_sim_basic import build
from tests.sim.test_sim_lone import LoneSim

ROUNDS = 20


@pytest.mark.parametrize("cls", [SimNetwork, LoneSim], ids=["general", "lone"])
def test_subscribe_then_signal_ready_loses_nothing(creds: Callable[[str], Credentials],
                                                   cls: type[SimNetwork]) -> None:
    net = build(creds, cls=cls)
    net.psubscribe("A", "ready.>")
    net.run_until(lambda: net.interest_known("A", "ready.x"))
    a, d = net.nodes["A"], net.nodes["D"]
    for i in range(ROUNDS):
        net.subscribe("D", f"data.{i}")
        net.publish("D", f"ready.{i}", b"")
        net.run_until(lambda: any(x.subject == f"ready.{i}" for x in a.delivered), timeout_ns=NS)  # noqa: B023
        net.publish("A", f"data.{i}", b"x")
    net.run_for(NS // 10)
    assert [x.subject for x in d.delivered] == [f"data.{i}" for i in range(ROUNDS)]


def test_a_relay_sends_the_floods_it_holds_before_the_data_behind_them(creds: Callable[[str], Credentials]) -> None:
    """B holds D's subscription for A (a flood right after another); D's request to A's
    responder passes B behind it, so A's reply finds D's interest."""
    net = build(creds)
    net.subscribe("A", "svc")
    net.run_until(lambda: net.interest_known("A", "svc"))
    a, d = net.nodes["A"], net.nodes["D"]
    for i in range(ROUNDS):
        net.subscribe("D", f"_INBOX.{i}")
        net.publish("D", "svc", f"{i}".encode())
        net.run_until(lambda: len(a.delivered) > i, timeout_ns=NS)  # noqa: B023
        net.publish("A", f"_INBOX.{a.delivered[-1].payload.decode()}", b"reply")
    net.run_for(NS // 10)
    assert [x.subject for x in d.delivered] == [f"_INBOX.{i}" for i in range(ROUNDS)]
