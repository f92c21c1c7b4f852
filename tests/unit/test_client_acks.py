"""bridges/acks.py: the `_ACK.` / `_TRACE.` reply convention and the waits."""

from __future__ import annotations

import json

from raims_node.bridges.acks import ACK_WAIT_NS, AckWaits, ack_request


def test_ack_request() -> None:
    assert ack_request("_ACK.in.1") == ("ack", "in.1")
    assert ack_request("_TRACE.x") == ("trace", "x")
    assert ack_request("_ACK.") is None and ack_request("inbox") is None and ack_request(None) is None


def test_answers_go_to_the_waiting_inbox_once_and_expire() -> None:
    w = AckWaits()
    w.add("_nats.foo", "_nats.in", 1000)
    log = [("ack", "C", "_nats.foo", 7, "link_bc", 500),  # before the publish: not ours
           ("ack", "C", "_nats.foo", 8, "link_bc", 2000),
           ("ack", "D", "_nats.other", 9, "x", 2001)]
    out = w.answers(log, 3000)
    assert [(i, json.loads(p)["seqno"]) for i, p in out] == [("_nats.in", 8)]
    assert w.answers(log, 3001) == []  # each answer once
    w.answers([], 1000 + ACK_WAIT_NS + 1)
    assert w.waits == {} and w.count == 0


def test_two_publishes_of_one_subject_each_get_their_own_answers() -> None:
    """Before: every answer went to every wait of the subject (inbox x got the answer
    to y's message, and a client publishing twice to x got each answer twice)."""
    w = AckWaits()
    w.add("_nats.foo", "_nats.x", 1000, seqno=8)
    w.add("_nats.foo", "_nats.y", 1001, seqno=9)
    log = [("ack", "C", "_nats.foo", 8, "link_bc", 2000), ("ack", "C", "_nats.foo", 9, "link_bc", 2001)]
    assert [(i, json.loads(p)["seqno"]) for i, p in w.answers(log, 3000)] == [("_nats.x", 8), ("_nats.y", 9)]
