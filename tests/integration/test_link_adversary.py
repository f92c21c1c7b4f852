"""The node-to-node side as an attacker or a broken member would use it (2026-11-27,
branch link-adversary): a peer that stops reading, ... on real ms_server processes.
See docs/DESIGN-NOTES.md, "Hardening (issue 18)", "Link adversary"."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from tests.integration.test_bridges_net import start_network
from tests.integration.test_flow_control import _nats, _read_until, _settle


def test_a_peer_that_stops_reading_releases_the_node_at_its_write_timeout(tmp_path: Path) -> None:
    """B stops (SIGSTOP: its kernel still acknowledges, its window stays shut) under a
    stream from A. A's link congests and A stops reading its clients, as backpressure
    says; at tcp_write_timeout the link is dropped and A reads its publisher again.
    Before, the close waited for the buffer to drain: the socket stayed, its congestion
    held every client of A for as long as B was stopped (no PUB read in 8 s)."""
    net = start_network(tmp_path, "node A B\ntcp_link_ab A B : 100\n", params={"tcp_write_timeout": "1 sec"})
    a, b = net.nodes["A"], net.nodes["B"]
    stopped = False
    try:
        with _nats(net.port("A")) as pub, _nats(net.port("B"), b"SUB s 1\r\n") as sub, \
                _nats(net.port("A"), b"SUB loc 1\r\n") as loc:
            _settle(pub, sub, b"s")
            mark = len(a.lines)
            os.kill(b.proc.pid, signal.SIGSTOP)
            stopped = True
            pub.settimeout(0.5)
            msg = b"PUB s 65536\r\n" + bytes(65536) + b"\r\n"
            with contextlib.suppress(TimeoutError):
                for _ in range(2_000):  # 128 MB at most: A stops reading long before
                    pub.sendall(msg)
            a.wait_for(r"closing link .*write timeout", 10, after=mark)
            t0 = time.monotonic()
            pub.settimeout(10)
            pub.sendall(b"PUB loc 4\r\ndone\r\n")
            _read_until(loc, b"done\r\n", bytearray())
            assert time.monotonic() - t0 < 4.0
    finally:
        if stopped:
            os.kill(b.proc.pid, signal.SIGCONT)
        net.stop()
