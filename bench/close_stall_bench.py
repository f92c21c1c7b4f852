"""A client with very many subscriptions dropping them: how long every other client waits.

One client subscribes N subjects (NATS SUB lines, Redis SUBSCRIBE / PSUBSCRIBE), then
drops them all in one event: it closes (`nclose`, `rclose`), a NATS client sends N
UNSUB lines (`nunsub`), a Redis client sends UNSUBSCRIBE / PUNSUBSCRIBE without
arguments (`runsub`, `rpunsub`). A probe client on the same server does PING/PONG
round trips back to back from before the event until 1 s after it (the longest is the
stall); on raims a second probe measures across two nodes (bench/subs_burst_bench.py's
echo). Side by side with nats-server / redis-server (the same events, one server).

    .venv/bin/python bench/close_stall_bench.py [--count N] [--cases nclose,nunsub,rclose,runsub,rpunsub]
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.subs_burst_bench import (  # noqa: E402
    TWO,
    Probe,
    echo_trip,
    free_port,
    nats_conn,
    nats_ping,
    read_until,
    redis_conn,
    redis_ping,
    resp,
    wait_port,
)
from tests.integration.test_bridges_net import start_network  # noqa: E402


def subscribe(kind: str, port: int, n: int) -> socket.socket:
    """A client holding n subscriptions, confirmed."""
    if kind.startswith("n"):
        s = nats_conn(port)
        s.sendall(b"".join(b"SUB many.%d %d\r\n" % (i, i) for i in range(n)) + b"PING\r\n")
        read_until(s, b"PONG\r\n")
        return s
    s = redis_conn(port)
    if kind == "rpunsub":
        s.sendall(resp(b"PSUBSCRIBE", *(b"many.%d.*" % i for i in range(n))) + resp(b"PING", b"done"))
    else:
        s.sendall(resp(b"SUBSCRIBE", *(b"many.%d" % i for i in range(n))) + resp(b"PING", b"done"))
    read_until(s, b"done\r\n")
    return s


def drop(kind: str, s: socket.socket, n: int) -> float:
    """The event; how long until its last confirmation (0 for a close)."""
    t = time.perf_counter()
    if kind.endswith("close"):
        s.close()
        return 0.0
    if kind == "nunsub":
        s.sendall(b"".join(b"UNSUB %d\r\n" % i for i in range(n)) + b"PING\r\n")
        read_until(s, b"PONG\r\n")
    else:
        s.sendall(resp(b"PUNSUBSCRIBE" if kind == "rpunsub" else b"UNSUBSCRIBE") + resp(b"PING", b"gone"))
        read_until(s, b"gone\r\n")
    took = time.perf_counter() - t
    s.close()
    return took


def run_case(kind: str, n: int, port: int, probes: list[Probe]) -> tuple[float, list[float]]:
    s = subscribe(kind, port, n)
    time.sleep(1.5)  # the subscriptions' announcements
    for p in probes:
        p.start()
    time.sleep(0.3)
    took = drop(kind, s, n)
    time.sleep(1.0)  # what follows (withdrawals)
    for p in probes:
        p.stop.set()
        p.join(2)
    return took, [p.result() for p in probes]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=100_000)
    ap.add_argument("--pcount", type=int, default=10_000)
    ap.add_argument("--cases", default="nclose,nunsub,rclose,runsub,rpunsub")
    ap.add_argument("--servers", default="raims,ref")
    args = ap.parse_args()
    cases = args.cases.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        if "raims" in args.servers:
            net = start_network(Path(tmp), TWO)
            try:
                for kind in cases:
                    n = args.pcount if kind == "rpunsub" else args.count
                    proto = "nats" if kind.startswith("n") else "redis"
                    local = Probe(nats_ping(nats_conn(net.port("A"))) if proto == "nats"
                                  else redis_ping(redis_conn(net.port("A", "redis"))))
                    across = Probe(echo_trip(net.port("A"), net.port("B"), kind.encode()))
                    took, (w1, w2) = run_case(kind, n, net.port("A", proto), [local, across])
                    print(f"raims        {kind:7} n={n:6}  drop {took:6.3f} s  same-node worst {w1 * 1e3:7.1f} ms"
                          f"  across worst {w2 * 1e3:7.1f} ms", flush=True)
            finally:
                net.stop()
        if "ref" in args.servers:
            for kind in cases:
                n = args.pcount if kind == "rpunsub" else args.count
                proto = "nats" if kind.startswith("n") else "redis"
                port = free_port()
                cmd = (["nats-server", "-a", "127.0.0.1", "-p", str(port)] if proto == "nats" else
                       ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no"])
                proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp)
                try:
                    wait_port(port)
                    local = Probe(nats_ping(nats_conn(port)) if proto == "nats" else redis_ping(redis_conn(port)))
                    took, (w1,) = run_case(kind, n, port, [local])
                    print(f"{'nats-server' if proto == 'nats' else 'redis-server':12} {kind:7} n={n:6}  "
                          f"drop {took:6.3f} s  same-node worst {w1 * 1e3:7.1f} ms", flush=True)
                finally:
                    proc.terminate()
                    proc.wait(10)


if __name__ == "__main__":
    main()
