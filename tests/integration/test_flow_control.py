"""Flow control end to end (issue 17), on real ms_server processes and raw client sockets:
message size limits at the client edge, a 4 MiB message across A->D, slow consumers cut
while a healthy one keeps up, a Redis command that never completes, and a client's big
batch not stalling another client."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.harness import MANUAL_GRAPH
from tests.integration.test_bridges_net import BridgeNet, start_network


def _connect(port: int, rcvbuf: int = 0) -> socket.socket:
    s = socket.socket()
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(30)
    s.connect(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def _read_until(sock: socket.socket, token: bytes, buf: bytearray) -> None:
    while token not in buf:
        chunk = sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError(f"closed before {token!r}; got {bytes(buf[-200:])!r}")
        buf += chunk


def _read_to_eof(sock: socket.socket, limit: int = 1 << 26) -> bytes:
    buf = bytearray()
    with contextlib.suppress(ConnectionResetError):
        while len(buf) < limit:
            chunk = sock.recv(1 << 20)
            if not chunk:
                break
            buf += chunk
    return bytes(buf)


def _nats(port: int, subs: bytes = b"", rcvbuf: int = 0) -> socket.socket:
    s = _connect(port, rcvbuf)
    buf = bytearray()
    s.sendall(b'CONNECT {"verbose":false,"pedantic":false}\r\n' + subs + b"PING\r\n")
    _read_until(s, b"PONG\r\n", buf)
    return s


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class RssWatch(threading.Thread):
    """The largest RSS of a process, sampled every 20 ms until stopped."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak, self._done = pid, 0.0, threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            self.peak = max(self.peak, _rss_mb(self.pid))
            self._done.wait(0.02)

    def stop(self) -> float:
        self._done.set()
        self.join(2)
        return self.peak


def _settle(pub: socket.socket, sub: socket.socket, subject: bytes) -> None:
    """Publish probes until `sub` hears one, then a last one after which nothing is left."""
    sub.settimeout(0.1)
    buf = bytearray()
    deadline = time.monotonic() + 20
    while b"probe" not in buf:
        assert time.monotonic() < deadline, "the subscription never reached the publisher's node"
        pub.sendall(b"PUB %s 5\r\nprobe\r\n" % subject)
        with contextlib.suppress(TimeoutError):
            buf += sub.recv(1 << 16)
    sub.settimeout(30)
    pub.sendall(b"PUB %s 4\r\nlast\r\n" % subject)
    _read_until(sub, b"last\r\n", buf)


def _link_drops(net: BridgeNet) -> list[str]:
    return [line for node in net.nodes.values() for line in node.lines
            if "closing link" in line or "hb_timeout" in line]


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[BridgeNet]:
    net = start_network(tmp_path, "node A B\ntcp_link_ab A B : 100\n")
    yield net
    net.stop()


def test_a_payload_over_the_limit_gets_the_protocol_error_and_no_link_drops(pair: BridgeNet) -> None:
    """max_payload (1 MiB by default) is advertised in NATS INFO; a larger PUB gets
    nats-server's -ERR and the connection is closed; a larger Redis bulk gets the Redis
    protocol error (PUBLISH never answers a count for it); the link between the nodes
    stays up and carries the next message."""
    with _connect(pair.port("A")) as s:
        info = bytearray()
        _read_until(s, b"\r\n", info)
        assert b'"max_payload":1048576' in info
    big = 1024 * 1024 + 1
    with _nats(pair.port("A")) as pub:
        try:
            pub.sendall(b"PUB big %d\r\n" % big + bytes(big) + b"\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed at the PUB line, the payload still being sent (as nats-server: a reset)
        assert _read_to_eof(pub) == b"-ERR 'Maximum Payload Violation'\r\n"
    with _connect(pair.port("A", "redis")) as r:
        try:
            r.sendall(b"*3\r\n$7\r\nPUBLISH\r\n$3\r\nbig\r\n$%d\r\n" % big + bytes(big) + b"\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed while the payload was still being sent
        assert _read_to_eof(r).startswith(b"-ERR Protocol error: invalid bulk length\r\n")
    with _nats(pair.port("B"), b"SUB ok 1\r\n") as sub, _nats(pair.port("A")) as pub:
        _settle(pub, sub, b"ok")
        fits = bytes(range(256)) * 4096  # exactly 1 MiB
        pub.sendall(b"PUB ok %d\r\n" % len(fits) + fits + b"\r\n")
        buf = bytearray()
        _read_until(sub, fits + b"\r\n", buf)
    assert not _link_drops(pair)


@pytest.mark.slow
def test_a_4_mib_message_crosses_a_to_d_with_the_limit_raised(tmp_path: Path) -> None:
    """With max_payload 8 MB, 4 MiB messages (NATS and Redis) cross two links intact and
    no link is dropped (a frame larger than 16 x tcp_write_highwater no longer drops it)."""
    net = start_network(tmp_path, MANUAL_GRAPH, params={"max_payload": "8 MB", "tcp_write_highwater": "64 KB"})
    try:
        payload = bytes(range(251)) * (4 * 1024 * 1024 // 251 + 1)
        payload = payload[:4 * 1024 * 1024]
        with _nats(net.port("D"), b"SUB big 1\r\n") as sub, _nats(net.port("A")) as pub:
            _settle(pub, sub, b"big")
            for _ in range(2):
                pub.sendall(b"PUB big %d\r\n" % len(payload) + payload + b"\r\n")
            want = b"MSG big 1 %d\r\n" % len(payload) + payload + b"\r\n"
            buf = bytearray()
            while len(buf) < 2 * len(want):
                chunk = sub.recv(1 << 20)
                assert chunk, "closed"
                buf += chunk
            assert bytes(buf) == want * 2
        with _connect(net.port("D", "redis")) as rsub, _connect(net.port("A", "redis")) as rpub:
            buf = bytearray()
            rsub.sendall(b"SUBSCRIBE big\r\n")
            _read_until(rsub, b":1\r\n", buf)
            deadline = time.monotonic() + 20
            while True:  # the subscription reaches A: PUBLISH counts D
                rpub.sendall(b"PUBLISH big probe\r\n")
                reply = bytearray()
                _read_until(rpub, b"\r\n", reply)
                if reply == b":1\r\n":
                    break
                assert time.monotonic() < deadline
                time.sleep(0.05)
            rpub.sendall(b"*3\r\n$7\r\nPUBLISH\r\n$3\r\nbig\r\n$%d\r\n" % len(payload) + payload + b"\r\n")
            reply = bytearray()
            _read_until(rpub, b"\r\n", reply)
            assert reply == b":1\r\n"
            want = b"$%d\r\n" % len(payload) + payload + b"\r\n"
            buf.clear()
            _read_until(rsub, want, buf)
        assert not _link_drops(net)
    finally:
        net.stop()


# The node's peak RSS through the flood (94 MB at rest): 203-264 MB on an idle machine,
# 303 once in CI beside other work (2026-11-27); unbounded, it was 1.7 GB (8.5 MB for
# each subscriber that does not read), so the bound is set well clear of both.
PEAK_MB = 400


@pytest.mark.slow
def test_slow_subscribers_are_cut_and_a_healthy_one_keeps_up(one: BridgeNet) -> None:
    """200 NATS subscribers that never read and one that does; 100,000 messages: the slow
    ones are cut as slow consumers, the node stays under PEAK_MB, and the healthy one gets
    every message in order with no gap over 250 ms."""
    _flood_past_slow_subscribers(one, "A", "A", max_gap_s=0.25)


def test_slow_subscribers_fed_by_a_link_are_cut_before_they_bury_the_node(pair: BridgeNet) -> None:
    """The same with the publisher on A and the subscribers on B: the stream comes in on
    a link. Before, every link read went into all 200 buffers before the budget's cut ran
    (B peaked at 1.7 GB, 8.5 MB per subscriber that did not read, and stalled until its
    neighbours timed its link out); links now give the loop a turn while the clients'
    output is over budget (transports/tcp.py `_deliver`)."""
    _flood_past_slow_subscribers(pair, "A", "B", max_gap_s=2.0)
    assert not _link_drops(pair)


def _flood_past_slow_subscribers(net: BridgeNet, pub_node: str, sub_node: str, max_gap_s: float) -> None:
    count, size = 100_000, 1000
    port = net.port(sub_node)
    slow = [_nats(port, b"SUB flood 1\r\n", rcvbuf=4096) for _ in range(200)]
    healthy = _nats(port, b"SUB flood 1\r\n")
    pub = _nats(net.port(pub_node))
    if pub_node != sub_node:
        _settle(pub, healthy, b"flood")
    watch = RssWatch(net.nodes[sub_node].proc.pid)
    watch.start()
    msg = b"MSG flood 1 %d\r\n" % size
    record = len(msg) + size + 2
    gaps: list[float] = []
    data = bytearray()

    def read() -> None:
        last = time.monotonic()
        while len(data) < count * record:
            chunk = healthy.recv(1 << 20)
            if not chunk:
                break
            now = time.monotonic()
            gaps.append(now - last)
            last = now
            data.extend(chunk)

    try:
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        head = b"PUB flood %d\r\n" % size
        for lo in range(0, count, 1000):
            pub.sendall(b"".join(head + b"%0*d" % (size, i) + b"\r\n" for i in range(lo, lo + 1000)))
        reader.join(90)
        peak = watch.stop()
        assert len(data) == count * record
        want = b"".join(msg + b"%0*d" % (size, i) + b"\r\n" for i in range(count))
        assert bytes(data) == want
        assert max(gaps[1:]) < max_gap_s, f"largest gap {max(gaps[1:]):.3f} s"
        assert peak < PEAK_MB, f"peak RSS {peak:.0f} MB"
        cut = [line for line in net.nodes[sub_node].lines if "exceeds" in line and "closed" in line]
        assert len(cut) == 200
        for s in slow[:5]:  # closed by the node: what the kernel held, then the end (the
            tail = _read_to_eof(s)  # -ERR too, unless the grace for unread bytes ran out)
            assert len(tail) < 16 * 1024 * 1024 and b"MSG flood 1 1000\r\n%0*d" % (size, count - 1) not in tail
    finally:
        watch.stop()
        for s in [*slow, healthy, pub]:
            s.close()


def test_a_redis_command_that_never_completes_is_closed(one: BridgeNet) -> None:
    """`*300` SUBSCRIBE and then 1 MiB arguments, each within the bulk limit: the request
    passes the query buffer limit, the connection gets an error and is closed, and the
    node's memory stays bounded."""
    pid = one.nodes["A"].proc.pid
    watch = RssWatch(pid)
    watch.start()
    arg = b"$%d\r\n" % (1 << 20) + bytes(1 << 20) + b"\r\n"
    with _connect(one.port("A", "redis")) as r:
        def send() -> None:
            with contextlib.suppress(OSError):
                r.sendall(b"*300\r\n$9\r\nSUBSCRIBE\r\n")
                for _ in range(200):
                    r.sendall(arg)

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        reply = _read_to_eof(r)
        sender.join(30)
    peak = watch.stop()
    assert reply == b"-ERR Protocol error: query buffer limit reached\r\n"
    assert peak < 150, f"peak RSS {peak:.0f} MB"
    with _connect(one.port("A", "redis")) as r:  # the node serves others as before
        r.sendall(b"PING\r\n")
        assert r.recv(64) == b"+PONG\r\n"


def test_a_big_batch_does_not_stall_another_client(one: BridgeNet) -> None:
    """50,000 SUBs in one write on one connection while another connection's PINGs are
    answered within 100 ms (the bloom filter's rebuilds as it doubles are vectorized:
    about 12 ms at 40,000 subjects). One PING may be later, under 250 ms: with another
    test run on the 2 cores, the scheduler alone delays one now and then."""
    port = one.port("A")
    with _nats(port) as batch, _nats(port) as other:
        subs = b"".join(b"SUB s.%d %d\r\n" % (i, i) for i in range(50_000)) + b"PING\r\n"
        done = threading.Event()
        sender = threading.Thread(target=lambda: (batch.sendall(subs), done.set()), daemon=True)
        latencies: list[float] = []
        buf = bytearray()
        sender.start()
        batch_done = bytearray()
        batch.settimeout(0.001)
        t_end = time.monotonic() + 30
        while time.monotonic() < t_end:
            t0 = time.monotonic()
            other.sendall(b"PING\r\n")
            buf.clear()
            _read_until(other, b"PONG\r\n", buf)
            latencies.append(time.monotonic() - t0)
            with contextlib.suppress(TimeoutError):
                batch_done += batch.recv(1 << 16)
            if b"PONG\r\n" in batch_done:
                break
            time.sleep(0.005)
        sender.join(10)
        assert b"PONG\r\n" in batch_done, "the batch was not processed in 30 s"
        assert len(latencies) > 3
        late = sorted(t for t in latencies if t >= 0.1)
        assert len(late) <= 1 and max(latencies) < 0.25, f"PINGs answered after {late} s"


def test_clients_past_the_open_files_limit_are_refused_with_their_protocols_error(tmp_path: Path) -> None:
    """A node whose hard open-files limit is 300 takes 300 - 128 clients (bridges/
    capacity.py); the next ones get nats-server's and redis-server's errors and are
    closed, and once clients leave new ones are served. Before, they waited unanswered
    in the kernel's queue and nothing was logged or counted."""
    net = start_network(tmp_path, "node A\n", prefix={"A": ["prlimit", "--nofile=300:300", "--"]})
    socks: list[socket.socket] = []
    try:
        for i in range(190):
            socks.append(_connect(net.port("A", "nats" if i % 2 else "redis")))
        served = refused = 0
        for i, s in enumerate(socks):
            if i % 2:  # NATS: INFO, or the error and the end
                head = bytearray()
                _read_until(s, b"\r\n", head)
                if head.startswith(b"INFO "):
                    served += 1
                    continue
                assert bytes(head) + _read_to_eof(s) == b"-ERR 'maximum connections exceeded'\r\n"
            else:
                s.sendall(b"PING\r\n")
                reply = bytearray()
                _read_until(s, b"\r\n", reply)
                if reply == b"+PONG\r\n":
                    served += 1
                    continue
                assert bytes(reply) + _read_to_eof(s) == b"-ERR max number of clients reached\r\n"
            refused += 1
        assert (served, refused) == (300 - 128, 190 - 300 + 128)
        assert any("refusing clients" in line for line in net.nodes["A"].lines)
        for s in socks:
            s.close()
        socks = []
        deadline = time.monotonic() + 10
        while not socks:  # served again once the node has seen them go
            try:
                socks.append(_nats(net.port("A")))
            except ConnectionError:
                assert time.monotonic() < deadline, "no client is served after the others left"
                time.sleep(0.05)
    finally:
        for s in socks:
            s.close()
        net.stop()
