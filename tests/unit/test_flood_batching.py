"""Flood batching (router/batch.py) and the database's incremental consistency (issue 24)."""

from __future__ import annotations

import random

from raims_node.linkstate import LinkRecord, LinkStateDB, PeerRecord
from raims_node.router.batch import HOLD_NS, FloodBatcher, split_batches

MS = 1_000_000


def test_first_flood_leaves_at_once_and_the_rest_wait_one_hold() -> None:
    b = FloodBatcher()
    b.hold(1, b"k1", b"f1", 0)
    assert b.due(0) == [(1, [b"f1"])]
    b.hold(1, b"k2", b"f2", 1 * MS)
    b.hold(1, b"k3", b"f3", 2 * MS)
    assert b.due(2 * MS) == []
    assert b.next_due_ns() == HOLD_NS
    assert b.due(HOLD_NS) == [(1, [b"f2", b"f3"])]
    assert b.next_due_ns() is None


def test_a_flood_the_neighbour_sent_us_is_not_sent_back() -> None:
    b = FloodBatcher()
    b.hold(1, b"k0", b"f0", 0)
    b.due(0)
    b.hold(1, b"k1", b"f1", MS)
    b.hold(1, b"k2", b"f2", MS)
    b.has_from(1, b"k1")
    assert b.due(HOLD_NS) == [(1, [b"f2"])]
    assert b.suppressed == 1


def test_own_updates_after_the_first_are_batched() -> None:
    b = FloodBatcher()
    b.hold_own(b"a", 0)
    assert b.own_due(0) == [b"a"]
    b.hold_own(b"b", MS)
    b.hold_own(b"c", 3 * MS)
    assert b.own_due(3 * MS) == []
    assert b.own_due(b.next_due_ns() or 0) == [b"b", b"c"]


def test_links_coming_up_get_the_recent_floods() -> None:
    b = FloodBatcher()
    b.log(b"k1", b"f1", 0)
    b.log(b"k2", b"f2", 5 * MS)
    assert b.since(1 * MS) == [(b"k2", b"f2")]


def test_split_batches_bounds_the_bytes() -> None:
    frames = [bytes(40)] * 5
    assert [len(g) for g in split_batches(frames, limit=100)] == [2, 2, 1]
    assert split_batches([bytes(300)], limit=100) == [[bytes(300)]]


def _bridge(i: int) -> bytes:
    return i.to_bytes(16, "big")


def test_incremental_consistency_agrees_with_the_full_check() -> None:
    rng = random.Random(24)
    db = LinkStateDB()
    n = 8
    for step in range(3000):
        a = rng.randrange(n)
        op = rng.random()
        if op < 0.1:
            db.put_peer(PeerRecord(_bridge(a), f"u{a}", a))
        elif op < 0.15:
            db.remove_peer(_bridge(a))
        elif _bridge(a) in db:
            rec = db.peer(_bridge(a))
            assert rec is not None
            others = [rng.randrange(n) for _ in range(rng.randrange(4))]
            links = [LinkRecord(_bridge(a), "t", rng.randrange(3), _bridge(b), (1000,) * 4, "tcp")
                     for b in others if b != a]
            if op < 0.4 or not links:
                db.apply_full(_bridge(a), rec.link_seqno + 1, links)
            else:
                db.apply_delta(_bridge(a), rec.link_seqno + 1, rng.random() < 0.6, links[0])
        assert db.is_consistent() == db.consistency().ok, step
        assert all(db.referenced(_bridge(i)) == any(x.peer_bridge == _bridge(i) for p in db.peers()
                                                     for x in db.links(p.bridge)) for i in range(n))
