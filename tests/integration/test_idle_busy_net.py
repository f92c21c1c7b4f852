"""`idle_busy` on real daemons: traffic across a link sets both nodes turning, and once
it stops they come to rest (blocked in their poll, using next to no CPU) instead of
spinning on. A node that kept turning would use a whole CPU here."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from tests.integration.test_bridges_net import await_route, start_network

GRAPH = "node A B\ntcp_link_ab A B : 100\n"
MESSAGES = 2000
REST_S = 1.5
MAX_REST_SHARE = 0.25  # of one CPU, per node, while nothing happens


def cpu_s(pid: int) -> float:
    """On-CPU seconds of every thread of `pid`."""
    return sum(int((task / "schedstat").read_text().split()[0])
               for task in Path(f"/proc/{pid}/task").iterdir()) / 1e9


def read_until(sock: socket.socket, token: bytes, buf: bytearray) -> None:
    """Read into `buf` until it holds `token`, then drop what is up to it."""
    while token not in buf:
        chunk = sock.recv(1 << 16)
        assert chunk, f"connection closed before {token!r}"
        buf += chunk
    del buf[:buf.index(token) + len(token)]


@pytest.mark.parametrize("idle_busy", ["16", "4096"])
def test_nodes_come_to_rest_after_traffic(tmp_path: Path, idle_busy: str) -> None:
    net = start_network(tmp_path, GRAPH, heartbeat="10 sec", params={"idle_busy": idle_busy})
    try:
        with socket.create_connection(("127.0.0.1", net.port("B")), timeout=30) as sub, \
                socket.create_connection(("127.0.0.1", net.port("A")), timeout=30) as pub:
            buf = bytearray()
            sub.sendall(b'CONNECT {"verbose":false}\r\nSUB t.x 1\r\nPING\r\n')
            read_until(sub, b"PONG\r\n", buf)
            pub.sendall(b'CONNECT {"verbose":false}\r\n')
            await_route(pub, sub, b"t.x", buf)
            buf.clear()
            for _ in range(MESSAGES):  # one at a time: each message wakes both nodes
                pub.sendall(b"PUB t.x 2\r\nhi\r\n")
                read_until(sub, b"MSG t.x 1 2\r\nhi\r\n", buf)
            pids = [net.nodes[n].proc.pid for n in "AB"]
            time.sleep(0.2)  # the last turns: 4,096 take a few milliseconds
            before = [cpu_s(p) for p in pids]
            time.sleep(REST_S)
            used = [cpu_s(p) - b for p, b in zip(pids, before, strict=True)]
            assert all(u < REST_S * MAX_REST_SHARE for u in used), f"CPU at rest: {used} s in {REST_S} s"
    finally:
        net.stop()
