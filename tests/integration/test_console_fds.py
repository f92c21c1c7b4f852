"""`show fds`, `show buffers` and `show urls` on real ms_server processes (manual, "The
Show Commands"; console/show_fds.py): two nodes with a TCP link, NATS, Redis and web
transports, and a NATS client. The fds are the processes' own sockets: each is checked
against /proc/<pid>/fd and, through the socket's inode, against /proc/net/tcp's ports."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.harness import NodeProc, get_json, graph_config, poll, web_addr
from tests.integration.test_bridges_net import WEB, BridgeNet, start_network
from tests.integration.test_ipc_bus import Raw

GRAPH = "node A B\ntcp_link_ab A B : 100\n"  # A listens, B connects


@pytest.fixture(scope="module")
def ab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BridgeNet]:
    net = start_network(tmp_path_factory.mktemp("fds"), GRAPH)
    yield net
    net.stop()


def show(net: BridgeNet, node: str, command: str) -> list[dict[str, Any]]:
    status, rows = get_json(f"127.0.0.1:{net.port(node, 'web')}", command)
    assert status == 200 and isinstance(rows, list), rows
    return rows


def _tcp_ports_by_inode() -> dict[str, tuple[int, int]]:
    """socket inode -> (local port, remote port) of every TCP socket of this host."""
    out: dict[str, tuple[int, int]] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not Path(table).exists():
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            out[f[9]] = (int(f[1].rpartition(":")[2], 16), int(f[2].rpartition(":")[2], 16))
    return out


def _inode(pid: int, fd: int) -> str:
    target = os.readlink(f"/proc/{pid}/fd/{fd}")
    assert target.startswith("socket:["), (fd, target)
    return target[len("socket:["):-1]


class NatsClient:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.buf = b""
        self.read_until(b"\r\n")  # INFO
        self.sock.sendall(b'CONNECT {"verbose":false}\r\nSUB fds.x 1\r\nPING\r\n')
        self.read_until(b"PONG\r\n")

    def read_until(self, marker: bytes) -> bytes:
        while marker not in self.buf:
            chunk = self.sock.recv(65536)
            assert chunk, self.buf
            self.buf += chunk
        out, _, self.buf = self.buf.partition(marker)
        return out

    def close(self) -> None:
        self.sock.close()


def test_show_fds_lists_the_processes_real_sockets(ab: BridgeNet) -> None:
    client = NatsClient(ab.port("A", "nats"))
    try:
        pid = ab.nodes["A"].proc.pid
        rows = show(ab, "A", "show fds")
        assert set(rows[0]) == {"fd", "rid", "bs", "br", "ms", "mr", "ac", "rq", "wq", "fl", "type", "kind",
                                "name", "address"}
        fds = [r["fd"] for r in rows]
        assert len(set(fds)) == len(fds) and fds == sorted(fds)
        ports = _tcp_ports_by_inode()
        for r in rows:
            if r["kind"] == "web_accept":  # the connection that asked, closed by urllib since
                continue
            inode = _inode(pid, r["fd"])  # a socket of this process, at this fd
            if r["kind"] == "tcp_listen":
                assert ports[inode][0] == int(str(r["address"]).rpartition(":")[2]), r
        kinds = {(r["type"], r["kind"]) for r in rows}
        assert {("tcp", "tcp_listen"), ("tcp", "tcp_accept"), ("nats", "tcp_listen"), ("nats", "nats_accept"),
                ("redis", "tcp_listen"), ("web", "web_listen")} <= kinds, kinds
        # the NATS client's row is the fd of our connection: its remote port is our socket's
        mine = client.sock.getsockname()[1]
        (nats,) = [r for r in rows if r["kind"] == "nats_accept"]
        assert ports[_inode(pid, nats["fd"])] == (ab.port("A", "nats"), mine)
        assert nats["address"] == f"127.0.0.1:{mine}" and nats["name"].startswith("nats.nats_acc.")
        # the link accepted from B: its listener counted it, its row names B
        (link,) = [r for r in rows if r["kind"] == "tcp_accept"]
        (listen,) = [r for r in rows if r["kind"] == "tcp_listen" and r["type"] == "tcp"]
        assert listen["ac"] >= 1 and link["rid"] == listen["rid"] >= 0 and link["name"] == f"link_ab.tcp_acc.{link['rid']}"
        assert str(link["address"]).startswith("B.") and link["mr"] > 0 and link["br"] > 0
        assert ports[_inode(pid, link["fd"])][0] == int(str(listen["address"]).rpartition(":")[2])
        nats_listen = next(r for r in rows if r["kind"] == "tcp_listen" and r["type"] == "nats")
        assert nats_listen["ac"] >= 1
        # traffic: the client publishes to itself; its row's counters grow
        for _ in range(5):
            client.sock.sendall(b"PUB fds.x 5\r\nhello\r\n")
        for _ in range(5):
            client.read_until(b"hello\r\n")
        assert poll(lambda: _nats_row(ab)["mr"] >= nats["mr"] + 5, 5)
        after = _nats_row(ab)
        assert after["br"] >= nats["br"] + 5 * len(b"PUB fds.x 5\r\nhello\r\n")
        assert after["bs"] > nats["bs"] and after["ms"] >= nats["ms"] + 5 and after["fd"] == nats["fd"]
    finally:
        client.close()
    # a second client: the listener's accept count goes up by one
    before = next(r for r in show(ab, "A", "show fds") if r["kind"] == "tcp_listen" and r["type"] == "nats")["ac"]
    NatsClient(ab.port("A", "nats")).close()
    assert poll(lambda: next(r for r in show(ab, "A", "show fds")
                             if r["kind"] == "tcp_listen" and r["type"] == "nats")["ac"] == before + 1, 5)


def _nats_row(net: BridgeNet) -> dict[str, Any]:
    return next(r for r in show(net, "A", "show fds") if r["kind"] == "nats_accept")


def test_show_buffers_has_a_row_per_connection_fd(ab: BridgeNet) -> None:
    client = NatsClient(ab.port("A", "nats"))
    try:
        fds = {r["fd"]: r for r in show(ab, "A", "show fds")}
        rows = [r for r in show(ab, "A", "show buffers") if r["name"] != "web.web_acc"]  # but the asking one
        assert set(rows[0]) == {"fd", "wr", "wmax", "rd", "rmax", "zref", "send", "recv", "mall", "pall", "name"}
        conns = {fd for fd, r in fds.items() if r["kind"] in ("tcp_accept", "tcp_connect", "nats_accept")}
        assert conns and conns == {r["fd"] for r in rows}
        pid = ab.nodes["A"].proc.pid
        for r in rows:
            _inode(pid, r["fd"])
            assert r["name"] == fds[r["fd"]]["name"] and r["wmax"] >= r["wr"] and r["rmax"] > 0
            assert 0 <= r["wr"] <= 1 << 24 and r["rd"] >= 0 and r["zref"] == r["mall"] == r["pall"] == 0
            assert r["send"] <= fds[r["fd"]]["bs"] + 65536 and r["recv"] > 0  # each has read (CONNECT, frames)
        link = next(r for r in rows if fds[r["fd"]]["kind"] == "tcp_accept")
        time.sleep(1.2)  # a heartbeat each way at least
        again = next(r for r in show(ab, "A", "show buffers") if r["fd"] == link["fd"])
        assert again["send"] > link["send"] and again["recv"] > link["recv"]
    finally:
        client.close()


def test_show_urls_has_the_ports_then_the_routes_with_the_links_addresses(ab: BridgeNet) -> None:
    a, b = show(ab, "A", "show urls"), show(ab, "B", "show urls")
    assert [k for k in a[0] if k != "section"] == ["user", "tport", "state", "cost", "mesh", "fd", "url", "local",
                                                  "remote"]
    assert [r["section"] for r in a] == sorted((r["section"] for r in a), key=["ports", "routes"].index)
    (a_link,) = [r for r in a if r["section"] == "ports" and str(r["user"] or "").startswith("B.")]
    (b_link,) = [r for r in b if r["section"] == "ports" and str(r["user"] or "").startswith("A.")]
    # the two ends of one connection: each side's local address is the other's remote
    assert a_link["local"] == b_link["remote"] and a_link["remote"] == b_link["local"], (a_link, b_link)
    assert a_link["local"] == f"127.0.0.1:{_link_port(ab)}" and a_link["state"] == "A" and b_link["state"] == "C"
    assert b_link["url"] == f"tcp://{b_link['remote']}"  # B dialed A's listener
    pid = ab.nodes["A"].proc.pid
    remote_port = int(str(a_link["remote"]).rpartition(":")[2])
    assert _tcp_ports_by_inode()[_inode(pid, a_link["fd"])] == (_link_port(ab), remote_port)
    # A's transport row: its listener's fd and url
    (port,) = [r for r in a if r["section"] == "ports" and r["user"] is None and str(r["tport"]).startswith("link_ab.")]
    assert port["url"] == f"tcp://127.0.0.1:{_link_port(ab)}" and port["fd"] != a_link["fd"]
    _inode(pid, port["fd"])
    # the routes section: B through the link, with its fd and addresses
    (route,) = [r for r in a if r["section"] == "routes"]
    assert route["user"] == a_link["user"] and route["tport"] == a_link["tport"] and route["cost"] == 100
    assert "hb" in route["state"] and (route["fd"], route["local"], route["remote"]) == (
        a_link["fd"], a_link["local"], a_link["remote"])


def _link_port(net: BridgeNet) -> int:
    return next(int(str(r["address"]).rpartition(":")[2]) for r in show(net, "A", "show fds")
                if r["kind"] == "tcp_listen" and r["type"] == "tcp")


def test_show_fds_lists_an_ipc_bus_and_its_sbus_clients(tmp_path: Path) -> None:
    """The ipc transport's unix listener and an sbus client's socket, with their counts."""
    cfg, _ = graph_config(tmp_path, "node A\n")
    data = yaml.safe_load(cfg.read_text())
    path = str(tmp_path / "bus.sock")
    data["transports"].append({"tport": "bus", "type": "ipc", "route": {"path": path}})
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))
    node = NodeProc("A", ["-d", str(cfg), "-u", "A", "-t", "bus.listen", "web.listen"], tmp_path)
    try:
        web = web_addr(node)
        client = Raw(path)
        client.sub(b"fds.y")
        client.sync()

        def fds() -> list[dict[str, Any]]:
            status, rows = get_json(web, "show fds")
            assert status == 200 and isinstance(rows, list)
            return rows

        rows = fds()
        (listen,) = [r for r in rows if r["kind"] == "unix_listen"]
        (sbus,) = [r for r in rows if r["kind"] == "ipc_accept"]
        assert listen["address"] == path and listen["ac"] == 1 and listen["type"] == "ipc"
        assert sbus["rid"] == listen["rid"] >= 0 and sbus["name"] == f"bus.ipc_acc.{sbus['rid']}"
        pid = node.proc.pid
        _inode(pid, listen["fd"])
        _inode(pid, sbus["fd"])
        for _ in range(3):
            client.pub(b"fds.y", b"hello")
        assert [p for p in client.drain() if p.startswith(b"MSG ")] == [b"MSG fds.y\x00hello"] * 3
        after = next(r for r in fds() if r["fd"] == sbus["fd"])
        assert after["mr"] >= sbus["mr"] + 3 and after["br"] > sbus["br"] and after["bs"] > sbus["bs"]
        client.close()
        assert poll(lambda: not any(r["kind"] == "ipc_accept" for r in fds()), 5)
    finally:
        node.stop()


async def _rv_session_rows(tmp_path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    from tests.integration.rv_client import RvClient
    from tests.integration.test_bridges_rv import RV

    net = start_network(tmp_path, "node A\n", extra=[RV, WEB])
    try:
        client = await RvClient.connect(net.port("A", "rv"))
        try:
            await client.listen("fds.rv")
            return show(net, "A", "show fds"), show(net, "A", "show ports"), show(net, "A", "show hosts")
        finally:
            await client.close()
    finally:
        net.stop()


def test_an_rv_client_is_a_row_of_show_fds_and_show_ports_still_answers(tmp_path: Path) -> None:
    """The RV bridge's `clients` counts sessions per service (it is not the ipc bus's
    client table): an RV session took show fds, and with it every port-based command
    (show ports, hosts, rvsub), to a 500."""
    import asyncio

    fds, ports, hosts = asyncio.run(_rv_session_rows(tmp_path))
    assert [r["kind"] for r in fds if r["type"] == "rv"] == ["tcp_listen", "rv_accept"]
    rv_port = next(p for p in ports if str(p["tport"]).startswith("rv"))
    assert rv_port["fd"] == next(r["fd"] for r in fds if r["type"] == "rv" and r["kind"] == "tcp_listen")
    assert len(hosts) == 1
