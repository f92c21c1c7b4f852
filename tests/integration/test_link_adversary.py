"""The node-to-node side as an attacker or a broken member would use it (2026-11-27,
branch link-adversary), on real ms_server processes: a stranger's key exchange that
never ends, a peer that stops reading. See docs/DESIGN-NOTES.md, "Hardening (issue 18)",
"Link adversary"."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import struct
import time
import zlib
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from tests.integration.harness import web_addr
from tests.integration.test_bridges_net import start_network
from tests.integration.test_flow_control import _nats, _read_until, _settle
from tests.integration.test_hardening import _configs, _eof_all, _node, _rejects


def test_a_key_exchange_that_never_ends_is_closed_at_the_auth_timeout(tmp_path: Path) -> None:
    """A stranger completing the X25519 exchange (any salt) and then silent, and one
    trickling its 56-byte cipher hello a byte at a time: both closed at
    tcp_auth_timeout from connect, as nats-server closes at its auth_timeout."""
    cfg, _, port = _configs(tmp_path, {"tcp_auth_timeout": "1 sec"})
    a = _node(tmp_path, "A", cfg, "listen")
    try:
        addr = web_addr(a)
        socks = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(4)]
        for s in socks[:2]:
            pub, nonce = X25519PrivateKey.generate().public_key().public_bytes_raw(), os.urandom(16)
            s.sendall(struct.pack(">Q", zlib.crc32(pub + nonce)) + pub + nonce)
        t0 = time.monotonic()
        with contextlib.suppress(OSError):  # reset once closed
            while time.monotonic() - t0 < 2.0:
                for s in socks[2:]:
                    s.send(b"\0")
                time.sleep(0.2)
        assert _eof_all(socks, 2.0) < 2.0
        assert _rejects(addr).get("auth_timeout", 0) == 4
        for s in socks:
            s.close()
    finally:
        a.stop()


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
