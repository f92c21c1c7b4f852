"""A request reaching a node whose filter still shows its subject, with nobody there to
take it (router/no_responders.py): the node answers 503 unless another node may answer."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from raims_node.crypto.credentials import Credentials
from raims_node.router.no_responders import STATUS_503
from raims_node.router.node import NS
from raims_node.router.sim import SimNetwork
from tests.sim.test_sim_basic import build


def stale(net: SimNetwork, name: str, subject: str) -> None:
    """`name` subscribes `subject`, the others learn it, and the subscription leaves the
    local table without its withdrawal (still queued, as behind a closing client's)."""
    net.subscribe(name, subject)
    net.run_until(lambda: net.interest_known(name, subject), timeout_ns=10 * NS)
    sim = net.nodes[name]
    assert sim.node.state.subs.remove(sim, subject) is not None


def request(net: SimNetwork, subject: str, service: str) -> list[bytes | None]:
    """A request from A (its inbox subscribed first); the headers of what came back."""
    a = net.nodes["A"]
    net.psubscribe("A", f"{service}_INBOX.k.*")  # as nats-py's mux inbox
    net.run_until(lambda: net.interest_known("A", f"{service}_INBOX.k.1"), timeout_ns=10 * NS)
    a.delivered.clear()
    net._apply("A", a.node.publish(service + subject, b"?", net.now, reply="_INBOX.k.1"))
    net.run_for(NS // 2)
    return [d.headers for d in a.delivered if d.subject == f"{service}_INBOX.k.1"]


@pytest.mark.parametrize("service", ["_nats.", "my.svc.", ""])
def test_a_request_nobody_takes_gets_the_503_from_the_stale_node(creds: Callable[[str], Credentials],
                                                                  service: str) -> None:
    net = build(creds)
    stale(net, "D", service + "svc.q")
    assert request(net, "svc.q", service) == [STATUS_503]
    assert net.nodes["D"].node.state.counters.no_responders == 1


def test_no_503_when_another_node_may_answer(creds: Callable[[str], Credentials]) -> None:
    net = build(creds)
    stale(net, "D", "_nats.svc.q")
    net.subscribe("B", "_nats.svc.q")  # B's responder (it answers in its own time)
    net.run_until(lambda: net.interest_known("B", "_nats.svc.q"), timeout_ns=10 * NS)
    assert request(net, "svc.q", "_nats.") == []
    assert net.nodes["D"].node.state.counters.no_responders == 0


def test_a_plain_message_or_a_non_inbox_reply_gets_no_status(creds: Callable[[str], Credentials]) -> None:
    net = build(creds)
    stale(net, "D", "_nats.svc.q")
    a = net.nodes["A"]
    net._apply("A", a.node.publish("_nats.svc.q", b"no reply", net.now))
    net._apply("A", a.node.publish("_nats.svc.q", b"rv reply", net.now, reply="reply.here"))
    net.run_for(NS // 2)
    assert net.nodes["D"].node.state.counters.no_responders == 0


def test_the_503_goes_to_the_requesters_node_only(creds: Callable[[str], Credentials]) -> None:
    """With an `_INBOX.>` monitor on C, the 503 for each of four requests reaches A, and
    the monitor sees none (nats-server sends the status to the requester alone). Before,
    it went to one node whose filter passed the inbox, by the inbox's hash: 2 of the 4 went
    to C's monitor only and A's requests waited for their timeout; an `_INBOX.` reply to
    every node that subscribes it (router/point.py) would have shown the monitor all 4."""
    net = build(creds)
    stale(net, "D", "_nats.svc.q")
    net.psubscribe("C", "_nats._INBOX.>", "rv", "monitor")
    net.psubscribe("A", "_nats._INBOX.k.*")
    net.run_until(lambda: net.interest_known("A", "_nats._INBOX.k.1") and net.interest_known("C", "_nats._INBOX.k.1"),
                  timeout_ns=10 * NS)
    a = net.nodes["A"]
    for i in range(4):
        net._apply("A", a.node.publish("_nats.svc.q", b"?", net.now, reply=f"_INBOX.k.{i}"))
    net.run_for(NS // 2)
    assert sorted(d.subject for d in a.delivered if d.headers == STATUS_503) == [f"_nats._INBOX.k.{i}" for i in range(4)]
    assert [d.subject for d in net.nodes["C"].delivered] == []
    assert net.nodes["D"].node.state.counters.no_responders == 4
