"""The link-state database: records, full and delta updates, consistency, seqno sums."""

from __future__ import annotations

import pytest

from raims_node import RaimsError
from raims_node.linkstate import (
    Applied,
    Inconsistency,
    InvalidRecord,
    LinkRecord,
    LinkStateDB,
    LinkStateError,
    NeedsSync,
    PeerRecord,
    UnknownPeer,
    expand_cost,
)

A, B, C = (bytes([i]) * 16 for i in (1, 2, 3))


def peer(bridge: bytes, start: int = 0, **kw: object) -> PeerRecord:
    return PeerRecord(bridge, bridge[:1].hex(), start, **kw)  # type: ignore[arg-type]


def link(a: bytes, b: bytes, tid: int = 1, cost: int = 1000) -> LinkRecord:
    return LinkRecord(a, "t", tid, b, (cost,) * 4)


def db_with(*bridges: bytes) -> LinkStateDB:
    db = LinkStateDB()
    for i, b in enumerate(bridges):
        db.put_peer(peer(b, i))
    return db


def test_errors_are_typed() -> None:
    assert issubclass(LinkStateError, RaimsError)
    for exc in (InvalidRecord, UnknownPeer):
        assert issubclass(exc, LinkStateError)


@pytest.mark.parametrize(
    "make",
    [
        lambda: PeerRecord(b"short", "x", 0),
        lambda: PeerRecord(A, "x", -1),
        lambda: LinkRecord(A, "t", 1, A),
        lambda: LinkRecord(A, "t", 1, B, (1000, 1000, 1000)),  # type: ignore[arg-type]
        lambda: LinkRecord(A, "t", 1, B, (0, 1, 1, 1)),
        lambda: LinkRecord(A, "t", 1, B, (2**32, 1, 1, 1)),
        lambda: LinkRecord(A, "t", -1, B),
    ],
)
def test_invalid_records_raise(make: object) -> None:
    with pytest.raises(InvalidRecord):
        make()  # type: ignore[operator]


def test_expand_cost_fills_paths_cyclically() -> None:
    assert expand_cost([200]) == (200, 200, 200, 200)
    assert expand_cost([1, 2]) == (1, 2, 1, 2)
    assert expand_cost([1, 2, 3]) == (1, 2, 3, 1)
    with pytest.raises(InvalidRecord, match="5 cost values"):
        expand_cost([1, 2, 3, 4, 5])
    with pytest.raises(InvalidRecord, match="outside"):
        expand_cost([0])


def test_put_peer_owns_link_seqno_and_bumps_version() -> None:
    db = LinkStateDB()
    v0 = db.version
    stored = db.put_peer(peer(A, link_seqno=7, sub_seqno=3))
    assert stored.link_seqno == 0 and stored.sub_seqno == 3
    assert db.version == v0 + 1 and not db.is_synced(A)
    db.put_peer(peer(A, link_seqno=7, sub_seqno=3))
    assert db.version == v0 + 1, "an identical record is no change"
    db.apply_full(A, 5, [])
    updated = db.put_peer(peer(A, sub_seqno=4, bloom=b"xx"))
    assert updated.link_seqno == 5 and updated.bloom == b"xx"
    assert db.peer(A) == updated


def test_apply_full_replaces_and_ignores_older() -> None:
    db = db_with(A, B, C)
    assert db.apply_full(A, 3, [link(A, B), link(A, C, 2)]) == Applied(True)
    assert [lk.peer_bridge for lk in db.links(A)] == [B, C]
    v = db.version
    assert db.apply_full(A, 2, [link(A, B)]) == Applied(False)
    assert db.apply_full(A, 3, [link(A, C, 2), link(A, B)]) == Applied(False)
    assert db.version == v
    assert db.apply_full(A, 4, [link(A, C, 2)]) == Applied(True)
    assert db.links(A) == (link(A, C, 2),) and db.peer(A).link_seqno == 4  # type: ignore[union-attr]
    assert db.version == v + 1


def test_apply_full_checks_peer_and_owner() -> None:
    db = db_with(A)
    with pytest.raises(UnknownPeer, match=B.hex()):
        db.apply_full(B, 1, [])
    with pytest.raises(InvalidRecord):
        db.apply_full(A, 1, [link(B, A)])


def test_apply_delta_only_on_the_next_seqno() -> None:
    db = db_with(A, B, C)
    assert db.apply_delta(A, 1, True, link(A, B)) == NeedsSync(A, 0, 1), "links never synced"
    db.apply_full(A, 1, [link(A, B)])
    assert db.apply_delta(A, 2, True, link(A, C, 2)) == Applied(True)
    assert db.apply_delta(A, 2, True, link(A, C, 2)) == Applied(False), "flooded duplicate"
    assert db.apply_delta(A, 4, False, link(A, B)) == NeedsSync(A, 2, 4), "missed seqno 3"
    assert db.apply_delta(A, 3, False, link(A, B)) == Applied(True)
    assert db.links(A) == (link(A, C, 2),)
    assert db.apply_delta(A, 4, True, link(A, C, 2, cost=5)) == Applied(True), "re-cost"
    assert db.links(A)[0].cost == (5, 5, 5, 5) and db.peer(A).link_seqno == 4  # type: ignore[union-attr]


def test_apply_delta_for_unknown_peer_needs_sync() -> None:
    db = db_with(A)
    assert db.apply_delta(B, 9, True, link(B, A)) == NeedsSync(B, 0, 9)
    with pytest.raises(InvalidRecord):
        db.apply_delta(A, 1, True, link(B, A))


def test_version_bumps_on_every_change() -> None:
    db = db_with(A, B)
    seen = [db.version]
    db.apply_full(A, 1, [link(A, B)])
    seen.append(db.version)
    db.apply_delta(A, 2, False, link(A, B))
    seen.append(db.version)
    db.remove_peer(B)
    seen.append(db.version)
    assert seen == sorted(set(seen)), seen
    assert not db.remove_peer(B) and db.version == seen[-1]


def test_remove_peer_drops_its_links() -> None:
    db = db_with(A, B)
    db.apply_full(B, 1, [link(B, A)])
    assert db.remove_peer(B)
    assert B not in db and db.links(B) == () and not db.is_synced(B)
    assert len(db) == 1


def test_consistency_reports_one_sided_and_count_mismatch() -> None:
    db = db_with(A, B, C)
    db.apply_full(A, 1, [link(A, B), link(A, B, 2), link(A, C, 3)])
    db.apply_full(B, 1, [link(B, A)])
    report = db.consistency()
    assert report.missing == (Inconsistency(A, B, 2, 1),)
    assert report.unsynced == (C,) and not report.ok
    db.apply_full(C, 1, [])
    assert set(db.consistency().missing) == {Inconsistency(A, B, 2, 1), Inconsistency(A, C, 1, 0)}
    db.apply_full(B, 2, [link(B, A), link(B, A, 2)])
    db.apply_full(C, 2, [link(C, A)])
    assert db.consistency().ok


def test_consistency_lists_referenced_unknown_peers() -> None:
    db = db_with(A)
    db.apply_full(A, 1, [link(A, B)])
    assert db.consistency().unsynced == (B,)


def test_seqno_sums() -> None:
    db = LinkStateDB()
    db.put_peer(peer(A, sub_seqno=5))
    db.put_peer(peer(B, 1, sub_seqno=2**64 - 1))
    db.apply_full(A, 3, [])
    db.apply_full(B, 4, [])
    sums = db.seqno_sums()
    assert sums.link_sum == 7
    assert sums.sub_sum == 4, "wraps at 64 bits"


def test_peers_are_listed_oldest_first_with_bridge_tiebreak() -> None:
    db = LinkStateDB()
    db.put_peer(peer(C, 5))
    db.put_peer(peer(B, 1))
    db.put_peer(peer(A, 5))
    assert [p.bridge for p in db.peers()] == [B, A, C]
