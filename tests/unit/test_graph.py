"""Graph text (show graph, ms_test_adj input): parsing, printing, and the LSDB round trip."""

from __future__ import annotations

import pytest

from raims_node.linkstate import (
    Graph,
    GraphError,
    GraphLink,
    LinkRecord,
    LinkStateDB,
    PeerRecord,
    db_from_graph,
    graph_bridge,
    graph_from_db,
    parse_graph,
)

ABCD = """node A B C D
tcp_link_ab A B : 200
tcp_link_bc B C : 100
tcp_link_ac A C : 200
tcp_link_bd B D : 200
tcp_link_dc D C : 300
"""

TWO_MESH = """node A B C D
mesh_link_abcd A B C D : 100 1000 100 1000
mesh_link_abcd2 A B C D : 1000 100 1000 100
"""

# the manual's "show graph" output from lex_a1
SHOW_GRAPH = """start lex_a1
node edo_a1 edo_a2 edo_a3 lex_a1 lex_a2 edo_a4 edo_a lex_a3 lex_a4 lee_a1 lee_a2 lee_a3 dex_a1 lee_a4 lee_a dex_a2 dex_a3 dex_a4 dex_a pic_a1 pic_a2 pic_a3 pic_a4 pic_a lex_a
mesh_lex_amesh lex_a1 lex_a2 lex_a3 lex_a4 lex_a
mesh_edo_amesh edo_a edo_a4 edo_a3 edo_a1 edo_a2
mesh_fo_mesh edo_a lee_a dex_a pic_a lex_a
mesh_lee_amesh lee_a1 lee_a2 lee_a4 lee_a lee_a3
mesh_dex_amesh dex_a1 dex_a2 dex_a3 dex_a4 dex_a
mesh_pic_amesh pic_a3 pic_a4 pic_a1 pic_a2 pic_a
"""


def shape(g: Graph) -> set[tuple[str, str, frozenset[str], tuple[int, ...]]]:
    """A graph's links regardless of line and member order."""
    return {(gl.type, gl.name, frozenset(gl.nodes), gl.cost) for gl in g.links}


def test_parse_the_manuals_graph() -> None:
    g = parse_graph(ABCD)
    assert g.nodes == ("A", "B", "C", "D") and g.start is None
    assert g.links[0] == GraphLink("tcp", "link_ab", ("A", "B"), (200, 200, 200, 200))
    assert g.links[4].nodes == ("D", "C") and g.links[4].cost == (300,) * 4
    m = parse_graph(TWO_MESH)
    assert [gl.cost for gl in m.links] == [(100, 1000, 100, 1000), (1000, 100, 1000, 100)]
    assert m.links[1].name == "link_abcd2" and m.links[1].type == "mesh"


def test_text_prints_what_it_parses() -> None:
    for text in (ABCD, TWO_MESH, SHOW_GRAPH):
        assert parse_graph(text).text() == text
    assert GraphLink("tcp", "x", ("A", "B")).text() == "tcp_x A B", "default cost is omitted"


def test_cost_forms_and_comments() -> None:
    g = parse_graph("node A B C  # users\n\ntcp_x A B :5 6\npgm_y A B C : 7 8 9\n# done\n")
    assert g.links[0].cost == (5, 6, 5, 6)
    assert g.links[1].cost == (7, 8, 9, 7)


@pytest.mark.parametrize(
    ("text", "line", "match"),
    [
        ("node A B\nudp_x A B\n", 2, "not 'node'"),
        ("node A B\ntcp A B\n", 2, "not 'node'"),
        ("node A B\ntcp_x A C\n", 2, "'C' of tcp_x is not declared"),
        ("node A B\ntcp_x A\n", 2, "at least 2 distinct"),
        ("node A B C\ntcp_x A B C\n", 2, "a tcp link connects 2"),
        ("node A B\nmesh_x A A\n", 2, "at least 2 distinct"),
        ("node A B\ntcp_x A B\nmesh_x A B\n", 3, "'x' used twice"),
        ("node A B\ntcp_x A B : fast\n", 2, "not 1 to 4 integers"),
        ("node A B\ntcp_x A B : 1 2 3 4 5\n", 2, "not 1 to 4 integers"),
        ("node A B\ntcp_x A B : 0\n", 2, "outside"),
        ("node A A\n", 1, "declared twice"),
        ("start Z\nnode A\n", 1, "start node 'Z'"),
        ("start A\nstart A\nnode A\n", 2, "one 'start"),
    ],
)
def test_parse_errors_name_the_line(text: str, line: int, match: str) -> None:
    with pytest.raises(GraphError, match=match) as info:
        parse_graph(text)
    assert info.value.line == line
    assert str(info.value).startswith(f"line {line}: ")


def test_db_from_graph_numbers_transports_like_show_adjacency() -> None:
    db = db_from_graph(parse_graph("node A B C\nmesh_m A B C\npgm_p A B C\ntcp_t A B\ntcp_u A C\n"))
    a = graph_bridge("A")
    by_name: dict[str, list[LinkRecord]] = {}
    for lk in db.links(a):
        by_name.setdefault(lk.tport_name, []).append(lk)
    assert [lk.tport_id for lk in by_name["m"]] == [1, 2], "a mesh connection each"
    assert [lk.tport_id for lk in by_name["p"]] == [3, 3], "one pgm transport"
    assert [lk.tport_id for lk in by_name["t"] + by_name["u"]] == [4, 5]
    assert {lk.tport_type for lk in db.links(a)} == {"mesh", "pgm", "tcp"}
    b = graph_bridge("B")
    assert [lk.tport_id for lk in db.links(b)] == [1, 2, 3, 3, 4], "mesh A, mesh C, pgm x2, tcp A"
    ages = [p.name for p in db.peers()]
    assert ages == ["A", "B", "C"] and db.consistency().ok


@pytest.mark.parametrize("text", [ABCD, TWO_MESH, SHOW_GRAPH])
def test_show_graph_describes_the_database(text: str) -> None:
    g = parse_graph(text)
    start = graph_bridge(g.start) if g.start else None
    out = graph_from_db(db_from_graph(g), start)
    assert out.nodes == g.nodes and out.start == g.start
    assert shape(out) == shape(g)
    assert parse_graph(out.text()) == out


def test_show_graph_orders_lines_by_member_age() -> None:
    out = graph_from_db(db_from_graph(parse_graph(ABCD)), graph_bridge("A"))
    assert out.text() == (
        "start A\nnode A B C D\ntcp_link_ab A B : 200\ntcp_link_ac A C : 200\n"
        "tcp_link_bc B C : 100\ntcp_link_bd B D : 200\ntcp_link_dc C D : 300\n"
    )


def test_show_graph_splits_disjoint_meshes_and_renames_repeats() -> None:
    g = Graph(
        ("A", "B", "C", "D"),
        (GraphLink("mesh", "m", ("A", "B")), GraphLink("mesh", "m", ("C", "D")),
         GraphLink("tcp", "t", ("A", "C")), GraphLink("tcp", "t", ("B", "D"))),
    )
    out = graph_from_db(db_from_graph(g))
    assert [gl.text() for gl in out.links] == ["mesh_m A B", "tcp_t A C", "tcp_t2 B D", "mesh_m2 C D"]


def test_show_graph_renames_repeated_peers_and_uses_older_side() -> None:
    db = LinkStateDB()
    x1, x2 = b"\x01" * 16, b"\x02" * 16
    db.put_peer(PeerRecord(x1, "x", 1))
    db.put_peer(PeerRecord(x2, "x", 2))
    db.apply_full(x1, 1, [LinkRecord(x1, "old", 1, x2, (5, 5, 5, 5))])
    db.apply_full(x2, 1, [LinkRecord(x2, "new", 1, x1, (7, 7, 7, 7))])
    out = graph_from_db(db, x2)
    assert out.text() == "start x_2\nnode x x_2\ntcp_old x x_2 : 5\n"
