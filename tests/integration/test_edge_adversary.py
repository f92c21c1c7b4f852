"""Hostile and broken clients on the node's less-travelled client edges (2026-11-27,
branch edge-adversary; DESIGN-NOTES "Client edges"): telnet clients that never read.
Real ms_server processes, raw sockets. (The RV flood's fix, a slice per loop turn, is
tests/unit/test_glue_slices.py's.)"""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from tests.integration.harness import TELNET_TPORT, poll
from tests.integration.test_bridges_net import BridgeNet, start_network


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS"))


def _telnet(port: int, rcvbuf: int = 4096) -> socket.socket:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.connect(("127.0.0.1", port))
    return s


@pytest.fixture(scope="module")
def tel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BridgeNet]:
    n = start_network(tmp_path_factory.mktemp("tel"), "node A\n", extra=[TELNET_TPORT])
    yield n
    n.stop()


def _send_for(s: socket.socket, data: bytes, seconds: float) -> bool:
    """Send `data` again and again for `seconds` or until the node stops reading; False
    when the node dropped the connection."""
    s.settimeout(1.0)
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            s.send(data)
    except TimeoutError:
        pass
    except ConnectionError:
        return False
    return True


@pytest.mark.parametrize("what", ["iac", "help"])
def test_a_telnet_client_that_never_reads_is_not_read_either(tel: BridgeNet, what: str) -> None:
    """Option negotiations (`IAC DO 99`, each answered `IAC WONT 99`) or `help` lines sent
    without reading: the node held every answer (+95 MB for 12 MB of IAC, +85 MB of help
    pages) until the transport failed (writev EINVAL past 1,024 buffers: the connection
    reset, nothing logged). Now it stops reading the client and runs no more of its lines
    until it reads; the connection stays. (Decoding one 256 KB read of IAC sequences costs
    some 20 MB transiently, which the allocator keeps: the bound for `iac` is loose.)"""
    node = tel.nodes["A"]
    before = _rss_mb(node.proc.pid)
    s = _telnet(tel.port("A", "tel"))
    data = bytes([255, 253, 99]) * 100_000 if what == "iac" else b"help\r\n" * 1000
    try:
        kept = _send_for(s, data, 5.0)
        grew = _rss_mb(node.proc.pid) - before
    finally:
        s.close()
    assert kept, "the node dropped the connection"
    assert grew < (30 if what == "iac" else 10), f"the node grew {grew:.0f} MB for a client that reads nothing"
    other = _telnet(tel.port("A", "tel"), 1 << 16)  # the console still answers
    try:
        other.settimeout(5)
        other.sendall(b"show ports\r\n")
        buf = b""
        try:
            while b"tel" not in buf:
                buf += other.recv(65536)
        except TimeoutError:
            raise AssertionError(f"no answer: {buf[-300:]!r} {node.lines[-5:]}") from None
    finally:
        other.close()


def test_a_telnet_subscriber_that_never_reads_is_cut_and_logged(tel: BridgeNet) -> None:
    """`sub` deliveries the client does not read: past 8 MiB unsent it is aborted, with a
    log line (before: held until the transport failed, silently)."""
    node = tel.nodes["A"]
    mark = len(node.lines)
    sub = _telnet(tel.port("A", "tel"))
    pub = _telnet(tel.port("A", "tel"), 1 << 20)
    done = threading.Event()

    def drain() -> None:  # the publisher reads its prompts
        while not done.is_set():
            if select.select([pub], [], [], 0.2)[0] and not pub.recv(1 << 20):
                return

    reader = threading.Thread(target=drain)
    reader.start()
    try:
        sub.sendall(b"sub EDGE.SLOW\r\n")  # publishes until the cut: the first may precede the sub
        line = b"pub EDGE.SLOW " + b"x" * 4000 + b"\r\n"

        def cut() -> bool:
            pub.sendall(line * 50)
            return any("slow consumer" in ln for ln in node.lines[mark:])

        assert poll(cut, timeout=20, interval=0.01)
    finally:
        done.set()
        reader.join()
        sub.close()
        pub.close()
