"""The naming table: overlap queries, partial-overlap refusal, lookup policies, round-robin."""

from __future__ import annotations

from collections import Counter

import pytest

from raims_node.names.errors import BadRequest, PartialOverlap
from raims_node.names.table import Domain, NameTable, Publication, Scope, check_range

ME, B, C = b"A" * 16, b"B" * 16, b"C" * 16


def pub(t: int, lo: int, up: int, node: bytes = ME, port: int = 1, key: int = 1,
        scope: Scope = Scope.CLUSTER) -> Publication:
    return Publication(t, lo, up, scope, node, port, key, f"in.{node[:1].decode()}.{port}", node[:1].decode())


def test_overlap_queries_find_every_overlapping_sequence_and_no_other() -> None:
    t = NameTable(ME)
    t.add(pub(17, 0, 9, key=1))
    t.add(pub(17, 10, 19, key=2))
    t.add(pub(17, 100, 1000, key=3))
    t.add(pub(18, 0, 9, key=4))
    assert {p.key for p in t.overlapping(17, 7, 13)} == {1, 2}
    assert {p.key for p in t.overlapping(17, 20, 99)} == set()
    assert {p.key for p in t.overlapping(17, 500, 500)} == {3}  # found through the width bound
    assert {p.key for p in t.overlapping(17, 0, 0xFFFFFFFF)} == {1, 2, 3}
    assert t.overlapping(99, 0, 10) == []


def test_remove_and_remove_node() -> None:
    t = NameTable(ME)
    t.add(pub(17, 0, 9, key=1))
    t.add(pub(17, 0, 9, node=B, key=1))
    t.add(pub(17, 10, 19, node=B, key=2))
    assert not t.add(pub(17, 0, 9, key=1))  # same (node, key)
    assert {p.key for p in t.remove_node(B)} == {1, 2}
    assert [p.node for p in t.overlapping(17, 0, 100)] == [ME]
    assert t.remove(ME, 1) is not None and len(t) == 0 and t.overlapping(17, 0, 100) == []


def test_partial_overlap_is_refused_identical_and_disjoint_are_not() -> None:
    t = NameTable(ME)
    t.add(pub(17, 0, 9))
    t.check_bind(17, 0, 9)
    t.check_bind(17, 10, 19)
    t.check_bind(18, 5, 6)
    with pytest.raises(PartialOverlap):
        t.check_bind(17, 5, 15)
    with pytest.raises(PartialOverlap):
        t.check_bind(17, 3, 3)


def test_cluster_lookup_round_robin_is_exactly_even() -> None:
    t = NameTable(ME)
    for i, node in enumerate((ME, B, C)):
        t.add(pub(17, 0, 9, node=node, key=i))
    chosen = Counter(t.lookup(17, 5, Domain("cluster")).node for _ in range(300))  # type: ignore[union-attr]
    assert chosen == {ME: 100, B: 100, C: 100}
    zone = Counter(t.lookup(17, 5, Domain("zone")).node for _ in range(30))  # type: ignore[union-attr]
    assert zone == {ME: 10, B: 10, C: 10}


def test_node_domain_looks_only_there_and_nearest_prefers_this_node() -> None:
    t = NameTable(ME)
    t.add(pub(17, 0, 9, node=B, key=1))
    t.add(pub(17, 0, 9, node=C, key=2))
    assert t.lookup(17, 5, Domain("node")) is None  # nothing on this node: rejected
    assert t.lookup(17, 5, Domain("node", B)).node == B  # type: ignore[union-attr]
    # nearest without a local one: round robin over the cluster
    assert {t.lookup(17, 5, Domain("nearest")).node for _ in range(4)} == {B, C}  # type: ignore[union-attr]
    t.add(pub(17, 0, 9, node=ME, key=3, scope=Scope.NODE))
    assert {t.lookup(17, 5, Domain("nearest")).node for _ in range(4)} == {ME}  # type: ignore[union-attr]
    assert t.lookup(17, 10, Domain("nearest")) is None
    assert t.lookup_misses == 2


def test_ports_gives_one_replica_per_port() -> None:
    t = NameTable(ME)
    t.add(pub(17, 0, 9, port=1, key=1))
    t.add(pub(17, 10, 19, port=1, key=2))  # same port, second overlapping sequence
    t.add(pub(17, 10, 19, node=B, port=1, key=1))
    t.add(pub(17, 20, 29, node=C, port=1, key=1))
    got = t.ports(17, 7, 13)
    assert sorted((p.node, p.port) for p in got) == [(ME, 1), (B, 1)]


def test_ranges_are_checked() -> None:
    with pytest.raises(BadRequest):
        check_range(5, 4)
    with pytest.raises(BadRequest):
        check_range(-1, 4)
    with pytest.raises(BadRequest):
        check_range(0, 1 << 32)
    with pytest.raises(BadRequest):
        Scope.parse("galaxy")
    assert Scope.parse(None) is Scope.CLUSTER and Scope.parse("node") is Scope.NODE and Scope.parse(1) is Scope.ZONE


def test_round_robin_turns_of_names_that_come_and_go_are_bounded() -> None:
    """A turn was kept per sequence (and node) ever looked up, after its publications
    were withdrawn (a service instance per job): forgotten at TURNS_LIMIT now."""
    from raims_node.turns import TURNS_LIMIT

    t = NameTable(ME)
    for i in range(TURNS_LIMIT + 500):
        t.add(pub(17, i, i, node=B, key=2 * i))
        t.add(pub(17, i, i, node=C, key=2 * i + 1))
        assert {t.lookup(17, i, Domain("cluster")).node for _ in range(2)} == {B, C}  # type: ignore[union-attr]
        t.remove(B, 2 * i)
        t.remove(C, 2 * i + 1)
    assert len(t) == 0 and len(t._turns) <= TURNS_LIMIT
