"""ms_test_adj: graph text to a runnable single-file configuration."""

from __future__ import annotations

import io
import socket
from pathlib import Path

import pytest

from raims_node.config.keyset import ServiceKeys
from raims_node.config.test_adj import FIRST_PORT, ephemeral_low, free_ports, main, pgm_group, run
from raims_node.config.tree import load_file, load_text

ABCD = """node A B C D
tcp_link_ab A B : 200
tcp_link_bc B C : 100
tcp_link_ac A C : 200
tcp_link_bd B D : 200
tcp_link_dc D C : 300
"""

# the manual's commands for ABCD (run there with & and -c appended)
MANUAL_COMMANDS = [
    "ms_server -d graph.yaml -u A -t link_ab.listen link_ac.listen",
    "ms_server -d graph.yaml -u B -t link_ab.connect link_bc.listen link_bd.listen",
    "ms_server -d graph.yaml -u C -t link_ac.connect link_bc.connect link_dc.listen",
    "ms_server -d graph.yaml -u D -t link_bd.connect link_dc.connect",
]


def commands(text: str) -> list[str]:
    return [line[2:] for line in text.splitlines() if line.startswith("# ms_server ")]


def test_manual_graph_gives_the_manual_commands(tmp_path: Path) -> None:
    graph = tmp_path / "graph.txt"
    graph.write_text(ABCD)
    out, err = io.StringIO(), io.StringIO()
    assert run(["-l", str(graph)], out, err, io.StringIO()) == 0, err.getvalue()
    assert commands(out.getvalue()) == [
        c.replace("graph.yaml", str(tmp_path / "graph.yaml")) for c in MANUAL_COMMANDS
    ]


def test_config_has_signed_users_and_one_transport_per_link(tmp_path: Path) -> None:
    graph = tmp_path / "graph.txt"
    graph.write_text(ABCD)
    assert main([str(graph), "-o", str(tmp_path / "net.yaml")]) == 0
    text = (tmp_path / "net.yaml").read_text()
    assert (tmp_path / "net.yaml").stat().st_mode & 0o777 == 0o600  # sealed keys and pass_data: owner only
    assert commands(text)[0] == f"ms_server -d {tmp_path / 'net.yaml'} -u A -t link_ab.listen link_ac.listen"
    tree = load_file(tmp_path / "net.yaml")
    keys = ServiceKeys.from_tree(tree, "test")  # verifies every user's signature
    assert sorted(keys.users) == ["A", "B", "C", "D"]
    assert [t.tport for t in tree.transports] == ["link_ab", "link_bc", "link_ac", "link_bd", "link_dc"]
    ports = set()
    for t, cost in zip(tree.transports, (200, 100, 200, 200, 300), strict=True):
        assert t.type == "tcp" and t.listen == ["127.0.0.1"] and t.connect == ["127.0.0.1"]
        assert t.cost == (cost,) * 4
        assert t.port is not None and 1024 <= t.port <= 65535
        ports.add(t.port)
    assert len(ports) == 5


def test_mesh_and_pgm_links(tmp_path: Path) -> None:
    text = (
        "node A B C D\nmesh_link_abcd A B C D : 100 1000 100 1000\n"
        "mesh_link_abcd2 A B C D : 1000 100 1000 100\npgm_bus D B\n"
    )
    out, err = io.StringIO(), io.StringIO()
    assert run(["-", "-s", "lab"], out, err, io.StringIO(text)) == 0, err.getvalue()
    tree = load_text(out.getvalue())
    assert tree.service().svc == "lab"
    mesh, mesh2, bus = tree.transports
    assert (mesh.type, mesh.cost) == ("mesh", (100, 1000, 100, 1000))
    assert mesh2.cost == (1000, 100, 1000, 100)
    assert bus.type == "pgm" and bus.listen == [";239.192.0.1"] and bus.cost == (1000,) * 4
    assert "cost" not in bus.route, "the default cost is left out"
    assert commands(out.getvalue()) == [
        "ms_server -d graph.yaml -u A -t link_abcd.listen link_abcd2.listen",
        "ms_server -d graph.yaml -u B -t bus.listen link_abcd.connect link_abcd2.connect",
        "ms_server -d graph.yaml -u C -t link_abcd.connect link_abcd2.connect",
        "ms_server -d graph.yaml -u D -t bus.connect link_abcd.connect link_abcd2.connect",
    ]


def test_node_without_links_still_gets_a_command() -> None:
    out = io.StringIO()
    assert run(["-"], out, io.StringIO(), io.StringIO("node A B C\ntcp_x A B\n")) == 0
    assert commands(out.getvalue())[-1] == "ms_server -d graph.yaml -u C"


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("node A B\ntcp_x A Z\n", "line 2: node 'Z'"),
        ("node A.b\n", "user name 'A.b'"),
        ("", "no 'node' line"),
        ("  \n# only a comment\n", "no 'node' line"),
    ],
)
def test_errors_are_reported_not_raised(text: str, match: str) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert run(["-"], out, err, io.StringIO(text)) == 1
    assert match in err.getvalue() and err.getvalue().startswith("ms_test_adj: -: ")
    assert out.getvalue() == ""


def test_a_graph_file_that_is_not_text_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    graph = tmp_path / "bin.txt"
    graph.write_bytes(b"\xff\xfe")
    err = io.StringIO()
    assert run([str(graph)], io.StringIO(), err, io.StringIO()) == 1
    assert err.getvalue() == f"ms_test_adj: {graph}: not UTF-8 text (byte 0)\n"


def test_missing_graph_file(tmp_path: Path) -> None:
    err = io.StringIO()
    assert run([str(tmp_path / "nope.txt")], io.StringIO(), err, io.StringIO()) == 1
    assert err.getvalue() == f"ms_test_adj: {tmp_path / 'nope.txt'}: No such file or directory\n"  # was "[Errno 2] ..."


def test_an_output_file_that_cannot_be_written_is_named(tmp_path: Path) -> None:
    err = io.StringIO()
    out = tmp_path / "no" / "graph.yaml"
    assert run(["-o", str(out), "-"], io.StringIO(), err, io.StringIO("node A\n")) == 1
    assert err.getvalue() == f"ms_test_adj: {out}: No such file or directory\n"


def test_free_ports_are_distinct_and_bindable() -> None:
    ports = free_ports(20, socket.SOCK_STREAM)
    assert len(set(ports)) == 20
    with socket.socket() as s:
        s.bind(("127.0.0.1", ports[0]))
    low = ephemeral_low()
    if low is not None:  # Linux: none a client's connect() could take meanwhile
        assert all(FIRST_PORT <= p < low for p in ports)
    assert ephemeral_low("/nonexistent/range") is None


def test_pgm_groups_are_distinct() -> None:
    assert [pgm_group(i) for i in (0, 1, 254, 255)] == [
        "239.192.0.1", "239.192.0.2", "239.192.0.255", "239.192.1.0",
    ]
    assert len({pgm_group(i) for i in range(1000)}) == 1000
