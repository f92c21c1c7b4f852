"""The console's show commands as an operator meets them on a running A-B-C chain
(manual, "The Show Commands"): the fd columns are the processes' own sockets, checked
against /proc/<pid>/fd and, through a socket's inode, against /proc/net/tcp's ports."""

from __future__ import annotations

import http.client
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.harness import (
    CONVERGED,
    TELNET_TPORT,
    NodeProc,
    add_transports,
    get_json,
    graph_config,
    poll,
    web_addr,
)
from tests.integration.test_console_telnet import TelnetClient

GRAPH = "node A B C\ntcp_link_ab A B : 100\ntcp_link_bc B C : 100\n"


class Chain:
    def __init__(self, nodes: dict[str, NodeProc]) -> None:
        self.nodes = nodes
        self.web = {name: web_addr(node) for name, node in nodes.items()}
        self.telnet = {name: int(node.wait_for(r"telnet listening on [\d.]+:(\d+)").group(1))
                       for name, node in nodes.items()}

    def pid(self, name: str) -> int:
        return self.nodes[name].proc.pid

    def show(self, name: str, command: str) -> list[dict[str, Any]]:
        status, rows = get_json(self.web[name], command)
        assert status == 200 and isinstance(rows, list), (command, rows)
        return rows


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chain]:
    tmp = tmp_path_factory.mktemp("chain")
    cfg, commands = graph_config(tmp, GRAPH)
    add_transports(cfg, TELNET_TPORT)
    nodes: dict[str, NodeProc] = {}
    try:
        for command in commands:
            args = command.split()[1:]
            args[args.index("-d") + 1] = str(cfg)
            args += ["web.listen", "tel.listen"] if "-t" in args else ["-t", "web.listen", "tel.listen"]
            node = NodeProc(args[args.index("-u") + 1], args, tmp)
            nodes[node.name] = node
        for node in nodes.values():
            node.wait_for(CONVERGED.format(n=2), 30)
        yield Chain(nodes)
    finally:
        for node in nodes.values():
            node.stop()


def tcp_ports_by_inode() -> dict[str, tuple[int, int]]:
    """socket inode -> (local port, remote port) of every TCP socket of this host."""
    out: dict[str, tuple[int, int]] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if Path(table).exists():
            for line in Path(table).read_text().splitlines()[1:]:
                f = line.split()
                out[f[9]] = (int(f[1].rpartition(":")[2], 16), int(f[2].rpartition(":")[2], 16))
    return out


def fd_ports(pid: int, fd: object) -> tuple[int, int]:
    """(local port, remote port) of TCP socket `fd` of process `pid`, as the OS reports it."""
    assert isinstance(fd, int), fd
    target = os.readlink(f"/proc/{pid}/fd/{fd}")
    assert target.startswith("socket:["), (pid, fd, target)
    return tcp_ports_by_inode()[target[len("socket:["):-1]]


def pid_ports(pid: int) -> set[tuple[int, int]]:
    """(local port, remote port) of every TCP socket of process `pid`."""
    by_inode = tcp_ports_by_inode()
    out = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:[") and target[8:-1] in by_inode:
            out.add(by_inode[target[8:-1]])
    return out


def _port(address: object) -> int:
    return int(str(address).split(",")[0].rpartition(":")[2])


def test_ports_status_and_cost_show_each_transports_endpoint_fd(chain: Chain) -> None:
    """The manual: "The fd field is the endpoint for the transport, usually a listener":
    a listening transport's listener, a dialing one's connection (to the listener)."""
    listeners = {}  # listening port of each node's link transports
    for name in "ABC":
        for r in chain.show(name, "show ports"):
            if "L" in str(r["fl"]) and str(r["tport"]).startswith("link_"):
                listeners[str(r["tport"]).rpartition(".")[0]] = _port(r["address"])
    assert set(listeners) == {"link_ab", "link_bc"}, listeners
    for name in "ABC":
        pid = chain.pid(name)
        ports = chain.show(name, "show ports")
        fds = {r["tport"]: r["fd"] for r in ports}
        for r in ports:
            local, remote = fd_ports(pid, r["fd"])
            if "L" in str(r["fl"]):  # a listener: its own port, no remote
                assert (local, remote) == (_port(r["address"]), 0), r
            else:  # a link it dialed: the connection to the other node's listener
                assert remote == listeners[str(r["tport"]).rpartition(".")[0]], r
        assert {"web", "tel"} <= set(fds) and len(set(fds.values())) == len(fds), fds
        urls = [r for r in chain.show(name, "show urls") if r["section"] == "ports" and r["user"] is None]
        assert {r["tport"]: r["fd"] for r in urls} == fds, urls  # "similar to show ports"
        for command in ("show status", "show cost", "show reachable"):
            got = {r["tport"]: r["fd"] for r in chain.show(name, command) if r["fd"] is not None}
            assert got and all(fds[t] == fd for t, fd in got.items()), (command, got, fds)


def test_routes_and_blooms_show_the_fd_of_the_link_each_route_takes(chain: Chain) -> None:
    """The manual's routes example prints each connection's own fd (19, 21, ...): the
    fd's connection ends at the neighbour the route goes through."""
    pids = {name: chain.pid(name) for name in "ABC"}
    for name in "ABC":
        routes = [r for r in chain.show(name, "show routes") if r["tport"]]
        assert len(routes) >= 2, routes
        for r in routes:
            local, remote = fd_ports(pids[name], r["fd"])
            adj = str(r["adj"]).split(".")[0]
            assert (remote, local) in pid_ports(pids[adj]), (name, r)  # the other end is the neighbour's
        for b in chain.show(name, "show blooms"):
            if b["tport"]:
                local, remote = fd_ports(pids[name], b["fd"])
                assert (remote, local) in pid_ports(pids[str(b["dest"]).split(".")[0]]), (name, b)


def test_show_fds_lists_telnet_and_web_sessions(chain: Chain) -> None:
    """A connected telnet console and the web connection asking are rows of `show fds`
    and `show buffers`, at the fds the OS gives their sockets."""
    t = TelnetClient(chain.telnet["A"])
    try:
        t.read_until_prompt()
        t.command("show peers")
        pid, mine = chain.pid("A"), t.sock.getsockname()[1]
        rows = chain.show("A", "show fds")
        (tel,) = [r for r in rows if r["kind"] == "telnet_accept"]
        assert fd_ports(pid, tel["fd"]) == (chain.telnet["A"], mine), tel
        assert tel["address"] == f"127.0.0.1:{mine}" and tel["type"] == "telnet" and tel["rid"] == -1
        assert tel["br"] >= len("show peers\r\n") and tel["bs"] > 0 and tel["name"] == "tel.telnet_acc"
        conn = http.client.HTTPConnection(chain.web["A"], timeout=5)  # kept alive: its socket stays open
        conn.request("GET", "/?show%20fds")
        webs = [r for r in json.loads(conn.getresponse().read()) if r["kind"] == "web_accept"]
        ours = [r for r in webs if r["address"] == f"127.0.0.1:{conn.sock.getsockname()[1]}"]
        assert len(ours) == 1, webs
        assert fd_ports(pid, ours[0]["fd"]) == (_port(chain.web["A"]), conn.sock.getsockname()[1])
        conn.close()
        buffers = {r["fd"]: r for r in chain.show("A", "show buffers")}
        assert buffers[tel["fd"]]["name"] == "tel.telnet_acc" and buffers[tel["fd"]]["rmax"] >= 1
    finally:
        t.sock.close()
    assert poll(lambda: not any(r["kind"] == "telnet_accept" for r in chain.show("A", "show fds")), 5)


def test_show_buffers_wmax_and_rmax_are_peaks(chain: Chain) -> None:
    """The manual: wmax "the largest write buffer used", rmax "the largest read buffer
    used": peaks of what a connection held, not the transport's limits."""
    rows = [r for r in chain.show("B", "show buffers") if str(r["name"]).startswith("link_")]
    assert len(rows) == 2, rows
    for r in rows:
        assert 0 < r["rmax"] <= r["recv"] and r["rd"] <= r["rmax"], r  # one read took at most all received
        assert r["wr"] <= r["wmax"] <= r["send"] + r["wr"], r


def test_show_inbox_starts_at_a_neighbours_first_seqno(chain: Chain) -> None:
    """The manual's `show inbox` starts with each neighbour's seqno 1, the auth answering
    its hello; what one end logs as sent the other logs as received, type for type."""
    logs = {name: chain.show(name, "show inbox") for name in "ABC"}

    def side(name: str, peer: str, key: str) -> dict[int, str]:
        rows, user = logs[name], None
        out = {}
        for r in rows:
            user = r["user"] or user  # a user's later rows leave it blank in text only; JSON repeats it
            if str(user).split(".")[0] == peer and r[f"{key}_seqno"] is not None:
                out[r[f"{key}_seqno"]] = r[f"{key}_type"]
        return out

    for a, b in (("A", "B"), ("B", "A"), ("B", "C"), ("C", "B")):
        sent, got = side(a, b, "send"), side(b, a, "recv")
        assert min(sent) == 1 and sent[1] == "u_inbox_auth", (a, b, sent)
        assert min(got) == 1 and got[1] == "u_inbox_auth", (b, a, got)
        both = set(sent) & set(got)
        assert {1, 2, 3} <= both and all(sent[s] == got[s] for s in both), (a, b, sent, got)


def test_show_poll_prints_its_latencies_with_their_unit(chain: Chain) -> None:
    """The manual's `show poll` prints `2.52us`, `11.4us`: durations, not bare numbers
    (it printed microsecond floats, `1.03e+03`); the JSON has the nanoseconds."""
    (row,) = chain.show("B", "show poll")
    lats = [c for c in row if c.endswith("_lat")]
    assert all(isinstance(row[c], int) and row[c] > 0 for c in ("timer_lat", "route_lat")), row
    t = TelnetClient(chain.telnet["B"])
    try:
        t.read_until_prompt()
        lines = [line for line in t.command("show poll").splitlines() if "|" in line]
    finally:
        t.sock.close()
    cells = dict(zip([c.strip() for c in lines[0].split("|")], [c.strip() for c in lines[1].split("|")], strict=True))
    for c in lats:
        assert cells[c] == "" or re.fullmatch(r"[\d.]+(us|ms|s|hr)", cells[c]), (c, cells)
    assert cells["timer_lat"] and cells["route_lat"], cells
