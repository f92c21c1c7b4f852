"""A client subscribing to very many subjects at once: how long every other client waits.

One client sends a burst of subscriptions in one write (NATS: N `SUB` lines; Redis: one
SUBSCRIBE / PSUBSCRIBE / SSUBSCRIBE with N arguments) and waits for the last
confirmation. Meanwhile a probe client on the same server does PING/PONG round trips
(NATS PING, Redis PING) back to back; the longest round trip is the stall. On raims a
second probe measures across two nodes: a client on B publishes to a subject a client
on A echoes back (A's loop is on the way). Side by side with nats-server and
redis-server (the same bursts, the same probes, one server). Also on raims: how long
after the last confirmation another node first counts the last subscription (a Redis
PUBLISH's count, a NATS request not answered 503 at once).

    .venv/bin/python bench/subs_burst_bench.py [--count N] [--cases nats,sub,psub,ssub]
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.integration.test_bridges_net import start_network  # noqa: E402

TWO = "node A B\ntcp_link_ab A B : 200\n"


def resp(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def read_until(s: socket.socket, until: bytes, pong: bool = False) -> bytearray:
    """Read until the data ends with `until` (`pong`: answer a NATS server's PINGs)."""
    got = bytearray()
    deadline = time.monotonic() + 120
    while not got.endswith(until):
        assert time.monotonic() < deadline, f"no {until!r}"
        chunk = s.recv(1 << 20)
        assert chunk, f"closed after {bytes(got[-100:])!r}"
        got += chunk
        if pong and got.endswith(b"PING\r\n"):
            s.sendall(b"PONG\r\n")
    return got


def nats_conn(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=120)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    read_until(s, b"\r\n")
    s.sendall(b'CONNECT {"verbose":false}\r\nPING\r\n')
    read_until(s, b"PONG\r\n")
    return s


def redis_conn(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=120)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


class Probe(threading.Thread):
    """Round trips back to back until stopped; the longest and the count."""

    def __init__(self, trip: Callable[[], None]) -> None:
        super().__init__(daemon=True)
        self.trip, self.worst, self.n, self.stop = trip, 0.0, 0, threading.Event()
        self.started = 0.0

    def result(self) -> float:
        """The longest round trip, counting one still waiting (lost: the link dropped)."""
        if self.is_alive():
            self.worst = max(self.worst, time.perf_counter() - self.started)
        return self.worst

    def run(self) -> None:
        while not self.stop.is_set() and self.n < 1_000_000:
            t = self.started = time.perf_counter()
            try:
                self.trip()
            except (AssertionError, OSError):
                return
            self.worst = max(self.worst, time.perf_counter() - t)
            self.n += 1


def nats_ping(s: socket.socket) -> Callable[[], None]:
    def trip() -> None:
        s.sendall(b"PING\r\n")
        read_until(s, b"PONG\r\n")
    return trip


def redis_ping(s: socket.socket) -> Callable[[], None]:
    def trip() -> None:
        s.sendall(b"*1\r\n$4\r\nPING\r\n")
        read_until(s, b"+PONG\r\n")
    return trip


def echo_trip(a_port: int, b_port: int, tag: bytes) -> Callable[[], None]:
    """A client on A echoes `echo.q` to `echo.a` (`tag` added); the trip starts and ends on B."""
    q, a = b"echo.q." + tag, b"echo.a." + tag
    echo = nats_conn(a_port)
    echo.sendall(b"SUB %s 1\r\nPING\r\n" % q)
    read_until(echo, b"PONG\r\n")
    b = nats_conn(b_port)
    b.sendall(b"SUB %s 1\r\nPING\r\n" % a)
    read_until(b, b"PONG\r\n")

    def echo_loop() -> None:
        buf = bytearray()
        while True:
            try:
                chunk = echo.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            buf += chunk
            while b"\r\n" in buf:
                line, _, rest = bytes(buf).partition(b"\r\n")
                if line.startswith(b"MSG "):
                    if len(rest) < 3:
                        break
                    buf = bytearray(rest[3:])  # 1-byte payload + CRLF
                    echo.sendall(b"PUB %s 1\r\nx\r\n" % a)
                else:
                    buf = bytearray(rest)
                    if line == b"PING":
                        echo.sendall(b"PONG\r\n")
    threading.Thread(target=echo_loop, daemon=True).start()
    deadline = time.monotonic() + 20
    while True:  # the subscriptions are known across the link
        b.sendall(b"PUB %s 1\r\nx\r\n" % q)
        b.settimeout(0.2)
        try:
            read_until(b, b"x\r\n")
            break
        except TimeoutError:
            assert time.monotonic() < deadline
    b.settimeout(120)

    def trip() -> None:
        b.sendall(b"PUB %s 1\r\nx\r\n" % q)
        read_until(b, b"x\r\n", pong=True)
    return trip


def burst(kind: str, n: int) -> tuple[bytes, bytes, bool]:
    """(request, the last confirmation's ending, redis?)"""
    if kind == "nats":
        return (b"".join(b"SUB many.%d %d\r\n" % (i, i) for i in range(n)) + b"PING\r\n", b"PONG\r\n", False)
    if kind == "natsw":
        return (b"".join(b"SUB many.%d.* %d\r\n" % (i, i) for i in range(n)) + b"PING\r\n", b"PONG\r\n", False)
    cmd = {"sub": b"SUBSCRIBE", "psub": b"PSUBSCRIBE", "ssub": b"SSUBSCRIBE"}[kind]
    arg = b"many.%d.*" if kind == "psub" else b"many.%d"
    return resp(cmd, *(arg % i for i in range(n))) + resp(b"PING", b"done"), b"done\r\n", True


def heard_across(port: int, subject: bytes) -> Callable[[], bool]:
    """Whether a node other than the burst's counts `subject` in a Redis PUBLISH (its
    filter replica has the burst's last subscription)."""
    s = redis_conn(port)

    def heard() -> bool:
        s.sendall(resp(b"PUBLISH", subject, b"x"))
        return read_until(s, b"\r\n") != b":0\r\n"
    return heard


def heard_across_nats(port: int, subject: bytes) -> Callable[[], bool]:
    """The same for a NATS subject: a request gets no 503 at once (the node sees interest)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=120)
    read_until(s, b"\r\n")
    s.sendall(b'CONNECT {"verbose":false,"headers":true,"no_responders":true}\r\nSUB _INBOX.heard.* 1\r\nPING\r\n')
    read_until(s, b"PONG\r\n")

    def heard() -> bool:
        s.sendall(b"PUB %s _INBOX.heard.1 0\r\n\r\nPING\r\n" % subject)
        return b"503" not in read_until(s, b"PONG\r\n")
    return heard


def run_case(kind: str, n: int, port: int, probes: list[Probe],
             heard: Callable[[], bool] | None = None) -> tuple[float, list[float], float]:
    """(burst, the probes' worst, when the last subscription was heard across after the
    last confirmation)"""
    request, until, is_redis = burst(kind, n)
    s = redis_conn(port) if is_redis else nats_conn(port)
    for p in probes:
        p.start()
    time.sleep(0.3)
    t = time.perf_counter()
    s.sendall(request)
    read_until(s, until)
    confirmed = time.perf_counter()
    took = confirmed - t
    across = 0.0
    for _ in range(10_000):
        if heard is None or heard():
            across = time.perf_counter() - confirmed
            break
        time.sleep(0.005)
    time.sleep(0.5)  # what follows the confirmations (announcements)
    for p in probes:
        p.stop.set()
        p.join(2)
    s.close()
    return took, [p.result() for p in probes], across


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=100_000)
    ap.add_argument("--pcount", type=int, default=10_000)
    ap.add_argument("--cases", default="nats,natsw,sub,psub,ssub")
    ap.add_argument("--servers", default="raims,ref")
    args = ap.parse_args()
    cases = args.cases.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        if "raims" in args.servers:
            net = start_network(Path(tmp), TWO)
            try:
                for kind in cases:
                    n = args.pcount if kind in ("psub", "natsw") else args.count
                    proto = "nats" if kind.startswith("nats") else "redis"
                    local = Probe(nats_ping(nats_conn(net.port("A"))) if proto == "nats"
                                  else redis_ping(redis_conn(net.port("A", "redis"))))
                    across = Probe(echo_trip(net.port("A"), net.port("B"), kind.encode()))
                    last = (b"many.%d.x" if kind in ("psub", "natsw") else b"many.%d") % (n - 1)
                    heard = (heard_across_nats(net.port("B"), last) if proto == "nats"
                             else heard_across(net.port("B", "redis"), last) if kind != "ssub" else None)
                    took, (w1, w2), heard_s = run_case(kind, n, net.port("A", proto), [local, across], heard)
                    print(f"raims  {kind:6} n={n:6}  burst {took:6.3f} s  same-node worst {w1 * 1e3:7.1f} ms"
                          f"  across worst {w2 * 1e3:7.1f} ms  last heard across {heard_s:6.3f} s", flush=True)
            finally:
                for name, node in net.nodes.items():
                    for line in node.lines:
                        if any(m in line for m in ("link down", "timeout", "timed out", "closing", "Slow")):
                            print(f"  {name}: {line}")
                net.stop()
        if "ref" in args.servers:
            for kind in cases:
                n = args.pcount if kind in ("psub", "natsw") else args.count
                proto = "nats" if kind.startswith("nats") else "redis"
                port = free_port()
                cmd = (["nats-server", "-a", "127.0.0.1", "-p", str(port)] if proto == "nats" else
                       ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no"])
                proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp)
                try:
                    wait_port(port)
                    local = Probe(nats_ping(nats_conn(port)) if proto == "nats" else redis_ping(redis_conn(port)))
                    took, (w1,), _ = run_case(kind, n, port, [local])
                    print(f"{'nats-server' if proto == 'nats' else 'redis-server':12} {kind:6} n={n:6}  "
                          f"burst {took:6.3f} s  same-node worst {w1 * 1e3:7.1f} ms", flush=True)
                finally:
                    proc.terminate()
                    proc.wait(10)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


if __name__ == "__main__":
    main()
