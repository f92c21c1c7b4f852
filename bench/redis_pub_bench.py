"""Redis PUBLISH with one subscriber (issue 24): redis-benchmark (Debian's redis-tools)
pipelining PUBLISH (-P 100, 50 connections, 16-byte payloads) against a raims node's
Redis transport and against redis-server, in the same run, alternately (best of 3, 1
with --quick), so both see the same load of a shared host. A raw subscriber (a thread
reading its socket, counting bytes) must receive every message. Reported: requests per
second, the server's CPU time per PUBLISH (from /proc), and the ratio (target >= 0.5x).

    /work/main/.venv/bin/python bench/redis_pub_bench.py [--quick]
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from tests.integration.kv_diff import RedisServer  # noqa: E402
from tests.integration.test_bridges_net import start_network  # noqa: E402

from _report import report  # noqa: E402

TARGET = 0.5
PIPELINE = 100
CLIENTS = 50
CHANNEL = b"chan"
PAYLOAD = b"0123456789abcdef"
MESSAGE = b"*3\r\n$7\r\nmessage\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(CHANNEL), CHANNEL, len(PAYLOAD), PAYLOAD)


class Subscriber:
    """A raw RESP subscriber on `port` counting the bytes of its messages."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.sendall(b"SUBSCRIBE %s\r\n" % CHANNEL)
        confirm = b"*3\r\n$9\r\nsubscribe\r\n$%d\r\n%s\r\n:1\r\n" % (len(CHANNEL), CHANNEL)
        got = b""
        while len(got) < len(confirm):
            got += self.sock.recv(4096)
        self.bytes = len(got) - len(confirm)
        self.sock.settimeout(None)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while True:
            try:
                data = self.sock.recv(1 << 20)
            except OSError:
                return
            if not data:
                return
            self.bytes += len(data)

    def wait_for(self, messages: int, timeout: float = 30.0) -> int:
        """Messages received once `messages` arrived or `timeout` passed."""
        deadline = time.monotonic() + timeout
        while self.bytes < messages * len(MESSAGE) and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.bytes // len(MESSAGE)

    def close(self) -> None:
        self.sock.close()
        self._thread.join(2)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(port: int, pid: int, requests: int) -> tuple[float, float, int]:
    """(requests per second, server CPU us per PUBLISH, messages delivered)."""
    sub = Subscriber(port)
    try:
        cpu0 = cpu_seconds(pid)
        out = subprocess.run(["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-P", str(PIPELINE),
                              "-c", str(CLIENTS), "-n", str(requests), "--csv", "PUBLISH", CHANNEL.decode(),
                              PAYLOAD.decode()], capture_output=True, text=True, timeout=600, check=True).stdout
        got = sub.wait_for(requests)
        cpu = cpu_seconds(pid) - cpu0
    finally:
        sub.close()
    rows = [r for r in csv.reader(io.StringIO(out)) if len(r) >= 2 and r[0] != "test"]
    return float(rows[0][1]), cpu / requests * 1e6, got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes")
    args = ap.parse_args()
    requests = 100_000 if args.quick else 1_000_000
    rounds = 1 if args.quick else 3
    with tempfile.TemporaryDirectory(prefix="redis_pub_bench") as d:
        tmp = Path(d)
        ref = RedisServer(tmp)
        net = None
        try:
            net = start_network(tmp, "node A\n", heartbeat="10 sec")
            best: dict[str, tuple[float, float, int]] = {}
            for _ in range(rounds):
                for name, port, pid in (("raims", net.port("A", "redis"), net.nodes["A"].proc.pid),
                                        ("redis", ref.port, ref.proc.pid)):
                    result = run(port, pid, requests)
                    if name not in best or result[0] > best[name][0]:
                        best[name] = result
        finally:
            if net is not None:
                net.stop()
            ref.stop()
    ours, theirs = best["raims"], best["redis"]
    ratio = ours[0] / theirs[0]
    report("redis_pub_bench", [{
        "case": "PUBLISH 16 B, 1 subscriber", "requests": requests, "pipeline": PIPELINE, "clients": CLIENTS,
        "raims_rps": round(ours[0]), "redis_rps": round(theirs[0]), "ratio": round(ratio, 3),
        "raims_cpu_us": round(ours[1], 3), "redis_cpu_us": round(theirs[1], 3),
        "raims_delivered": ours[2], "redis_delivered": theirs[2], "target": TARGET,
        "ok": ratio >= TARGET and ours[2] == requests}])
    return 0


if __name__ == "__main__":
    sys.exit(main())
