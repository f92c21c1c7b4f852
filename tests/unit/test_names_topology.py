"""The topology service: subscriptions, inquiries, events and timeouts on a clock."""

from __future__ import annotations

from raims_node.names.table import Publication, Scope
from raims_node.names.topology import FOREVER, MS, PUBLISHED, TIMEOUT, WITHDRAWN, Topology

NODE = b"B" * 16


def pub(lo: int, up: int, key: int = 1, t: int = 17) -> Publication:
    return Publication(t, lo, up, Scope.CLUSTER, NODE, 3, key, "x", "B")


def test_subscription_reports_overlap_publish_and_withdraw() -> None:
    top = Topology()
    sub, first = top.subscribe(17, 7, 13, FOREVER, "ev", "owner", 0, [pub(0, 9)])
    assert [(e.event, e.found_lower, e.found_upper) for e in first] == [(PUBLISHED, 7, 9)]
    ev = top.changed(pub(10, 19, key=2), True)
    assert [(e.event, e.found_lower, e.found_upper, e.port, e.node) for e in ev] == [(PUBLISHED, 10, 13, 3, "B")]
    assert top.changed(pub(20, 29, key=3), True) == []  # outside the range
    assert top.changed(pub(7, 7, key=4, t=18), True) == []  # another type
    ev = top.changed(pub(0, 9), False)
    assert [e.event for e in ev] == [WITHDRAWN]
    body = ev[0].body()
    assert body == {"event": "withdrawn", "type": 17, "lower": 7, "upper": 13, "found_lower": 7,
                    "found_upper": 9, "port": 3, "node": "B"}
    assert top.tick(10**18) == [] and len(top) == 1  # forever never expires


def test_subscription_times_out_once() -> None:
    top = Topology()
    top.subscribe(17, 0, 5, 100, "ev", "o", 1000, [])
    assert top.tick(1000 + 99 * MS) == []
    ev = top.tick(1000 + 100 * MS)
    assert [e.event for e in ev] == [TIMEOUT] and ev[0].body()["event"] == "timeout"
    assert top.tick(10**15) == [] and len(top) == 0
    assert top.changed(pub(0, 5), True) == []


def test_inquiry_answers_at_once_when_published_or_timeout_zero() -> None:
    top = Topology()
    _, ev = top.subscribe(17, 5, 5, 2000, "r", "o", 0, [pub(0, 9)], inquiry=True)
    assert [e.event for e in ev] == [PUBLISHED] and ev[0].body()["found"] is True and len(top) == 0
    _, ev = top.subscribe(17, 5, 5, 0, "r", "o", 0, [], inquiry=True)
    assert [e.event for e in ev] == [TIMEOUT] and ev[0].body()["found"] is False and len(top) == 0


def test_inquiry_waits_for_the_publication_then_ends() -> None:
    top = Topology()
    _, ev = top.subscribe(17, 5, 5, 2000, "r", "o", 0, [], inquiry=True)
    assert ev == []
    assert top.changed(pub(6, 9), True) == []
    ev = top.changed(pub(0, 5, key=2), True)
    assert [e.event for e in ev] == [PUBLISHED] and len(top) == 0
    assert top.changed(pub(0, 5, key=2), False) == []


def test_cancel_by_owner_and_id() -> None:
    top = Topology()
    a, _ = top.subscribe(17, 0, 5, FOREVER, "ev", "o1", 0, [])
    top.subscribe(17, 0, 5, FOREVER, "ev", "o2", 0, [])
    assert not top.cancel(a.sub_id, owner="o2")
    assert top.cancel(a.sub_id, owner="o1")
    assert top.cancel_owner("o2") == 1 and len(top) == 0
