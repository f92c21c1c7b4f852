"""A burst across the manual's A-D graph: nothing lost, nothing reordered, no link drops.

The four nodes run as ms_server processes (heartbeat 1 s). Raw-socket NATS clients:
- one node: a publisher and a subscriber on A (the peer figure of the same run);
- A->D: one publisher on A, one subscriber on D (two links on the way, A-B-D);
- A+B->4xD: publishers on A and B at once (N/2 each, own subjects), four subscribers on D
  subscribed to both subjects.
Each publisher writes N 16-byte messages (a decimal sequence number) pipelined in batches
of 1000, as fast as the socket takes them (backpressure slows it to what the network
sustains). Each subscriber checks it got every message of each stream in order. Rate:
messages delivered per second from the first publish to the last delivery of the slowest
subscriber. Afterwards every node's log is searched for dropped links and peer timeouts.

    .venv/bin/python bench/burst_bench.py [--quick] [--count N]
"""

from __future__ import annotations

import argparse
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from tests.integration.harness import MANUAL_GRAPH  # noqa: E402
from tests.integration.test_bridges_net import BridgeNet, start_network  # noqa: E402

from _report import report  # noqa: E402

BATCH = 1000
TIMEOUT_S = 120.0
STALL_S = 15.0  # a subscriber that receives nothing for this long has lost the rest
DROP_MARKS = ("closing link", "hb_timeout", "timed out", "write timeout", "link down", "Slow Consumer",
              "slow consumer")


def _msg(i: int) -> bytes:
    return b"%016d" % i


def _connect(port: int, subs: bytes = b"") -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = bytearray()
    s.sendall(b'CONNECT {"verbose":false,"pedantic":false}\r\n' + subs + b"PING\r\n")
    while b"PONG\r\n" not in buf:
        chunk = s.recv(1 << 16)
        if not chunk:
            raise ConnectionError("closed before PONG")
        buf += chunk
    return s


def _settle(pubs: list[tuple[socket.socket, bytes]], subs: list[socket.socket]) -> None:
    """Probe each publisher's subject until every subscriber hears it (each subscription
    has reached each publisher's node), then drain what the probes left."""
    for s in subs:
        s.settimeout(0.05)
    deadline = time.monotonic() + 30
    for pub, subject in pubs:
        token = b"probe." + subject
        for s in subs:
            got = bytearray()
            while token not in got:
                if time.monotonic() > deadline:
                    raise TimeoutError("subscriptions did not reach the publishers")
                pub.sendall(b"PUB %s 0\r\n\r\n" % token)
                try:
                    got += s.recv(1 << 16)
                except TimeoutError:
                    pass
    for pub, subject in pubs:  # a last probe from each publisher follows all earlier ones
        pub.sendall(b"PUB probe.%s 4\r\ndone\r\n" % subject)
    for s in subs:
        s.settimeout(TIMEOUT_S)
        tail = bytearray()
        while tail.count(b"\r\ndone\r\n") < len(pubs):
            tail += s.recv(1 << 16)
        assert tail.endswith(b"\r\ndone\r\n"), "data after the last probe"


class Receiver(threading.Thread):
    """Reads `size` bytes from a subscriber into memory, timestamps the end."""

    def __init__(self, sock: socket.socket, size: int) -> None:
        super().__init__(daemon=True)
        self.sock, self.size = sock, size
        self.data = bytearray()
        self.done = 0.0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            buf = bytearray(self.size)
            view = memoryview(buf)
            got = 0
            while got < self.size:
                n = self.sock.recv_into(view[got:], min(self.size - got, 1 << 20))
                if not n:
                    raise ConnectionError(f"closed after {got} of {self.size} bytes")
                got += n
            self.data = buf
        except BaseException as exc:  # reported by the caller
            self.error = exc
            self.data = buf[:got]
        self.done = time.perf_counter()


def _stream(subject: bytes, sid: bytes, lo: int, hi: int) -> bytes:
    head = b"MSG %s %s 16\r\n" % (subject, sid)
    return b"".join(head + _msg(i) + b"\r\n" for i in range(lo, hi))


def _check(data: bytes, streams: list[tuple[bytes, bytes, int]]) -> int:
    """Messages of `data` that match `streams` (subject, sid, count) in order; raises
    nothing, the caller compares with the total."""
    if len(streams) == 1:
        subject, sid, count = streams[0]
        want = _stream(subject, sid, 0, count)
        if data == want:
            return count
    rec = len(b"MSG %s %s 16\r\n" % (streams[0][0], streams[0][1])) + 18
    ok = 0
    for subject, sid, count in streams:
        head = b"MSG %s %s 16\r\n" % (subject, sid)
        mine = [data[i:i + rec] for i in range(0, len(data), rec) if data[i:i + len(head)] == head]
        want = [head + _msg(i) + b"\r\n" for i in range(count)]
        ok += sum(1 for a, b in zip(mine, want, strict=False) if a == b)
    return ok


def run_case(net: BridgeNet, name: str, pub_nodes: list[str], sub_node: str, nsubs: int, n: int) -> dict[str, object]:
    subjects = [b"burst.%s.%d" % (node.encode(), k) for k, node in enumerate(pub_nodes)]
    per_pub = n // len(pub_nodes)
    sub_line = b"".join(b"SUB %s %d\r\n" % (s, k + 1) for k, s in enumerate(subjects))
    sub_line += b"".join(b"SUB probe.%s 9%d\r\n" % (s, k) for k, s in enumerate(subjects))
    subs = [_connect(net.port(sub_node), sub_line) for _ in range(nsubs)]
    pubs = [(_connect(net.port(node)), s) for node, s in zip(pub_nodes, subjects, strict=True)]
    try:
        _settle(pubs, subs)
        rec = len(b"MSG %s 1 16\r\n" % subjects[0]) + 18
        for s in subs:
            s.settimeout(STALL_S)
        receivers = [Receiver(s, rec * per_pub * len(pubs)) for s in subs]
        for r in receivers:
            r.start()

        def publish(sock: socket.socket, subject: bytes) -> None:
            head = b"PUB %s 16\r\n" % subject
            for lo in range(0, per_pub, BATCH):
                sock.sendall(b"".join(head + _msg(i) + b"\r\n" for i in range(lo, min(lo + BATCH, per_pub))))

        t0 = time.perf_counter()
        senders = [threading.Thread(target=publish, args=p, daemon=True) for p in pubs]
        for t in senders:
            t.start()
        for t in senders:
            t.join(TIMEOUT_S)
        pub_s = time.perf_counter() - t0
        print(f"{name}: published in {pub_s:.2f} s", file=sys.stderr, flush=True)
        deadline = time.monotonic() + TIMEOUT_S
        for r in receivers:
            r.join(max(0.0, deadline - time.monotonic()))
            if r.is_alive():  # stuck: what it has so far is checked
                r.sock.shutdown(socket.SHUT_RDWR)
                r.join(5)
        streams = [(s, b"%d" % (k + 1), per_pub) for k, s in enumerate(subjects)]
        got = [_check(bytes(r.data), streams) for r in receivers]
        total = per_pub * len(pubs)
        end = max((r.done for r in receivers), default=t0)
        return {"case": name, "msgs": total, "subs": nsubs,
                "delivered %": round(100.0 * min(got) / total, 3),
                "msgs/s": total / (end - t0) if end > t0 else 0.0,
                "publish s": round(pub_s, 2),
                "errors": "; ".join(str(r.error) for r in receivers if r.error) or "-"}
    finally:
        for s in subs:
            s.close()
        for p, _ in pubs:
            p.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="100,000 messages per case")
    ap.add_argument("--count", type=int, default=0, help="messages per case (default 1,000,000)")
    ap.add_argument("--logs", action="store_true", help="print the nodes' logs at the end")
    args = ap.parse_args()
    n = args.count or (100_000 if args.quick else 1_000_000)
    with tempfile.TemporaryDirectory() as tmp:
        net = start_network(Path(tmp), MANUAL_GRAPH, heartbeat="1 sec")
        marks = {name: len(node.lines) for name, node in net.nodes.items()}
        try:
            rows = [run_case(net, "one node (A->A)", ["A"], "A", 1, n),
                    run_case(net, "A->D", ["A"], "D", 1, n),
                    run_case(net, "A+B->4xD", ["A", "B"], "D", 4, n)]
            time.sleep(2.5)  # a heartbeat timeout caused by the burst shows within 3 heartbeats
        finally:
            net.stop()
        drops = [f"{name}: {line}" for name, node in net.nodes.items()
                 for line in node.lines[marks[name]:] if any(m in line for m in DROP_MARKS)]
    one = float(rows[0]["msgs/s"])  # type: ignore[arg-type]
    for row in rows:
        row["vs one node"] = round(float(row["msgs/s"]) / one, 2) if one else 0.0  # type: ignore[arg-type]
        row["drops"] = len(drops)
    for line in drops[:20]:
        print(line)
    if args.logs:
        for name, node in net.nodes.items():
            print(f"--- {name}", *node.lines[-60:], sep="\n")
    report("burst", rows)


if __name__ == "__main__":
    main()
