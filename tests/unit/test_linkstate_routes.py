"""Routes and forwarding sets on the manual's example networks."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import mmh3
import pytest

from raims_node.linkstate import (
    NUM_PATHS,
    InvalidPath,
    LinkRecord,
    LinkStateDB,
    RouteTable,
    UnknownPeer,
    db_from_graph,
    graph_bridge,
    parse_graph,
    path_for_hash,
)

ABCD = """
node A B C D
tcp_link_ab A B : 200
tcp_link_bc B C : 100
tcp_link_ac A C : 200
tcp_link_bd B D : 200
tcp_link_dc D C : 300
"""

TWO_MESH = """
node A B C D
mesh_link_abcd A B C D : 100 1000 100 1000
mesh_link_abcd2 A B C D : 1000 100 1000 100
"""


def square(older: str) -> str:
    """The manual's circle, cost 1000 everywhere; `older` of ruby/bond starts first."""
    younger = "bond" if older == "ruby" else "ruby"
    return f"""
node dyna {older} {younger} chex
tcp_dr dyna ruby
tcp_db dyna bond
tcp_rc ruby chex
tcp_bc bond chex
"""


def B(name: str) -> bytes:  # noqa: N802 - reads like the manual's names
    return graph_bridge(name)


def tables(db: LinkStateDB) -> dict[bytes, RouteTable]:
    return {p.bridge: RouteTable(db, p.bridge) for p in db.peers()}


def flood(
    tabs: dict[bytes, RouteTable],
    source: bytes,
    path: int,
    peer_matches: Callable[[bytes], bool] | None = None,
) -> Counter[bytes]:
    """Send a multicast from `source` along every node's own forwarding set; count how
    many copies each node receives."""
    received: Counter[bytes] = Counter()
    queue = [source]
    while queue:
        node = queue.pop()
        for link in tabs[node].forward_links(source, path, peer_matches):
            assert link.bridge == node
            received[link.peer_bridge] += 1
            if received[link.peer_bridge] == 1:
                queue.append(link.peer_bridge)
    return received


def names(links: tuple[LinkRecord, ...]) -> list[str]:
    return [lk.tport_name for lk in links]


def test_abcd_routes_and_tree_match_the_reference() -> None:
    db = db_from_graph(parse_graph(ABCD))
    rt = RouteTable(db, B("A"))
    for p in range(NUM_PATHS):
        got = {(r.dest, r.link.tport_name, r.cost) for r in rt.routes(p)}
        assert got == {(B("B"), "link_ab", 200), (B("C"), "link_ac", 200), (B("D"), "link_ab", 400)}
        assert names(rt.next_hops(B("D"), p)) == ["link_ab"]
    tree = rt.tree(B("A"), 0)
    assert {(e.src, e.link.tport_name, e.dest, e.cost) for e in tree} == {
        (B("A"), "link_ac", B("C"), 200),
        (B("A"), "link_ab", B("B"), 200),
        (B("B"), "link_bd", B("D"), 400),
    }
    assert [e.cost for e in tree] == sorted(e.cost for e in tree)
    assert rt.path_cost(B("D"), 0) == 400
    assert rt.path_cost(B("D"), 0, source=B("C")) == 300
    assert rt.path_cost(B("A"), 0) == 0


def test_abcd_forwarding_from_a() -> None:
    tabs = tables(db_from_graph(parse_graph(ABCD)))
    assert names(tabs[B("A")].forward_links(B("A"), 0)) == ["link_ab", "link_ac"]
    assert names(tabs[B("B")].forward_links(B("A"), 0)) == ["link_bd"]
    assert tabs[B("C")].forward_links(B("A"), 0) == ()
    for src in tabs:
        for p in range(NUM_PATHS):
            assert flood(tabs, src, p) == Counter({b: 1 for b in tabs if b != src})


@pytest.mark.parametrize("older", ["ruby", "bond"])
def test_square_splits_chex_traffic_by_peer_age_and_subject_hash(older: str) -> None:
    younger = "bond" if older == "ruby" else "ruby"
    tabs = tables(db_from_graph(parse_graph(square(older))))
    dyna = B("dyna")
    assert {lk.peer_bridge for lk in tabs[dyna].forward_links(dyna, 0)} == {B("ruby"), B("bond")}
    via = {}
    for p in range(NUM_PATHS):
        ways = [n for n in ("ruby", "bond") if tabs[B(n)].forward_links(dyna, p)]
        assert len(ways) == 1, "exactly one of ruby and bond forwards to chex"
        via[p] = ways[0]
        assert flood(tabs, dyna, p)[B("chex")] == 1
    assert via == {0: older, 1: younger, 2: older, 3: younger}
    subjects = [f"RSF.REC.{i}.N".encode() for i in range(2000)]
    share = Counter(via[path_for_hash(mmh3.hash(s, 0, False))] for s in subjects)
    assert 0.45 < share[older] / len(subjects) < 0.55, share
    # inbox: the route dyna -> chex is ranked the same way
    assert [lk.peer_bridge for lk in tabs[dyna].next_hops(B("chex"), 0)] == [B(older), B(younger)]
    assert [lk.peer_bridge for lk in tabs[dyna].next_hops(B("chex"), 1)] == [B(younger), B(older)]


def test_two_meshes_shard_the_subject_space() -> None:
    tabs = tables(db_from_graph(parse_graph(TWO_MESH)))
    a = B("A")
    mesh = {}
    for p in range(NUM_PATHS):
        used = set(names(tabs[a].forward_links(a, p)))
        assert len(used) == 1 and len(tabs[a].forward_links(a, p)) == 3
        mesh[p] = used.pop()
        assert flood(tabs, a, p) == Counter({b: 1 for b in tabs if b != a})
    assert mesh == {0: "link_abcd", 1: "link_abcd2", 2: "link_abcd", 3: "link_abcd2"}
    share = Counter(mesh[path_for_hash(mmh3.hash(f"X.{i}", 0, False))] for i in range(2000))
    assert 900 < share["link_abcd"] < 1100, share
    assert names(tabs[a].next_hops(B("C"), 1)) == ["link_abcd2"]


def test_parallel_equal_links_alternate_across_paths() -> None:
    db = db_from_graph(parse_graph("node A B\ntcp_x A B\ntcp_y A B\n"))
    rt = RouteTable(db, B("A"))
    assert [names(rt.next_hops(B("B"), p)) for p in range(NUM_PATHS)] == [
        ["x", "y"], ["y", "x"], ["x", "y"], ["y", "x"],
    ]
    assert [names(rt.forward_links(B("A"), p)) for p in range(NUM_PATHS)] == [
        ["x"], ["y"], ["x"], ["y"],
    ]


def test_three_equal_routes_use_p_mod_3() -> None:
    text = "node S X Y Z D\ntcp_sx S X\ntcp_sy S Y\ntcp_sz S Z\ntcp_xd X D\ntcp_yd Y D\ntcp_zd Z D\n"
    rt = RouteTable(db_from_graph(parse_graph(text)), B("S"))
    first = [rt.next_hops(B("D"), p)[0].tport_name for p in range(NUM_PATHS)]
    assert first == ["sx", "sy", "sz", "sx"]


def test_bloom_pruning_keeps_links_with_a_matching_peer_behind_them() -> None:
    tabs = tables(db_from_graph(parse_graph(ABCD)))
    a = B("A")

    def only(*subs: str) -> Callable[[bytes], bool]:
        wanted = {B(s) for s in subs}
        return wanted.__contains__

    assert names(tabs[a].forward_links(a, 0, only("D"))) == ["link_ab"]
    assert names(tabs[a].forward_links(a, 0, only("C"))) == ["link_ac"]
    assert names(tabs[a].forward_links(a, 0, only("B", "C"))) == ["link_ab", "link_ac"]
    assert tabs[a].forward_links(a, 0, only()) == ()
    assert tabs[B("B")].forward_links(a, 0, only("C")) == ()
    got = flood(tabs, a, 0, only("D"))
    assert got == Counter({B("B"): 1, B("D"): 1})


def test_routes_follow_database_changes() -> None:
    db = db_from_graph(parse_graph(ABCD))
    rt = RouteTable(db, B("A"))
    assert rt.path_cost(B("D"), 0) == 400
    for x, y in (("A", "B"), ("B", "A")):
        lk = next(lk for lk in db.links(B(x)) if lk.peer_bridge == B(y))
        seqno = db.peer(B(x)).link_seqno + 1  # type: ignore[union-attr]
        db.apply_delta(B(x), seqno, False, lk)
    assert rt.path_cost(B("D"), 0) == 500
    assert names(rt.next_hops(B("D"), 0)) == ["link_ac"]
    assert rt.path_cost(B("B"), 0) == 300


def test_one_sided_links_are_not_routed() -> None:
    db = db_from_graph(parse_graph("node A B\ntcp_x A B\n"))
    db.apply_full(B("B"), 99, [])
    rt = RouteTable(db, B("A"))
    assert rt.next_hops(B("B"), 0) == () and rt.path_cost(B("B"), 0) is None
    assert rt.routes(0) == () and rt.forward_links(B("A"), 0) == ()


def test_unknown_peers_and_bad_paths() -> None:
    db = db_from_graph(parse_graph(ABCD))
    rt = RouteTable(db, B("A"))
    stranger = b"\x99" * 16
    assert rt.next_hops(stranger, 0) == () and rt.forward_links(stranger, 0) == ()
    assert rt.tree(stranger, 0) == () and rt.path_cost(stranger, 0) is None
    assert rt.next_hops(B("A"), 0) == ()
    calls: list[Callable[[int], object]] = [
        rt.routes,
        rt.forward_table,
        lambda p: rt.next_hops(stranger, p),
        lambda p: rt.forward_links(stranger, p),
        lambda p: rt.tree(stranger, p),
        lambda p: rt.path_cost(stranger, p),
    ]
    for bad in (-1, 4):
        for call in calls:
            with pytest.raises(InvalidPath, match=f"path {bad} outside 0..3"):
                call(bad)
    with pytest.raises(UnknownPeer, match=stranger.hex()):
        RouteTable(db, stranger).routes(0)


def test_forward_table_lists_every_source() -> None:
    db = db_from_graph(parse_graph(ABCD))
    rt = RouteTable(db, B("B"))
    table = rt.forward_table(0)
    assert set(table) == {p.bridge for p in db.peers()}
    assert names(table[B("A")]) == ["link_bd"]
    # from C, D is 300 away both directly and through B: B is older, so path 0 takes B;
    # likewise C from D
    assert names(table[B("C")]) == ["link_bd"]
    assert names(table[B("D")]) == ["link_ab", "link_bc"]
    assert rt.forward_table(1)[B("C")] == ()
    assert names(rt.forward_table(1)[B("D")]) == ["link_ab"]


def test_forward_table_of_a_node_without_links_is_empty() -> None:
    db = db_from_graph(parse_graph("node A\n"))  # `show forward` on a lone node raised
    table = RouteTable(db, B("A")).forward_table(0)
    assert dict(table) == {B("A"): ()}
