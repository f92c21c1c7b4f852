"""A NATS subscriber whose loop blocks while a publisher on its server floods it: what
arrives, and how long another pair of clients on the same server waits meanwhile.

A nats-py subscriber (its own thread and loop) blocks its loop for `--block` seconds at
the first message; a nats-py publisher (another thread and loop) sends `--count`
messages of `--size` bytes as fast as it can, then flushes. Meanwhile a probe pair of
raw sockets on the same server (one publishes to `probe`, the other subscribes) measures
each message's trip back to back; the longest trip before, during and after the flood
is printed. Side by side: nats-server 2.9.10 (which stalls the producer of a consumer
whose pending output is over half of max_pending) and a one-node raims network.

    .venv/bin/python bench/stall_bench.py [--count 1600] [--size 65536] [--block 1.0] [--only raims]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import threading
import time
from pathlib import Path

import nats

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.subs_burst_bench import nats_conn, read_until  # noqa: E402
from tests.integration.nats_diff import NatsServer  # noqa: E402
from tests.integration.test_bridges_net import start_network  # noqa: E402


class Probe(threading.Thread):
    """Trips of a probe message from one client to another, back to back."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.sub = nats_conn(port)
        self.sub.sendall(b"SUB probe 1\r\nPING\r\n")
        read_until(self.sub, b"PONG\r\n")
        self.pub = nats_conn(port)
        self.trips: list[tuple[float, float]] = []  # (sent at, trip)
        self.stop = threading.Event()

    def run(self) -> None:
        want = b"MSG probe 1 1\r\nx\r\n"
        while not self.stop.is_set():
            t = time.perf_counter()
            self.pub.sendall(b"PUB probe 1\r\nx\r\n")
            got = bytearray()
            while not got.endswith(want):
                chunk = self.sub.recv(1 << 16)
                if not chunk:
                    return
                got += chunk
                if got.endswith(b"PING\r\n"):  # the server's: answered, and not part of the trip
                    self.sub.sendall(b"PONG\r\n")
                    del got[-6:]
            self.trips.append((t, time.perf_counter() - t))
            time.sleep(0.002)

    def worst(self, lo: float, hi: float) -> float:
        return max((trip for t, trip in self.trips if lo <= t < hi), default=0.0)


def run(port: int, count: int, size: int, block_s: float) -> dict[str, float]:
    got: list[int] = []
    closing: list[bool] = []
    events: list[str] = []
    ready = threading.Event()
    done = threading.Event()

    def subscriber() -> None:
        async def main() -> None:
            async def err(e: Exception) -> None:
                events.append(f"error {e!r}")

            async def disc() -> None:
                if not closing:
                    events.append("disconnected")

            nc = await nats.connect(f"nats://127.0.0.1:{port}", error_cb=err, disconnected_cb=disc,
                                    max_reconnect_attempts=-1, reconnect_time_wait=0.1)

            async def on_msg(msg: object) -> None:
                if not got:
                    time.sleep(block_s)  # the loop is blocked: nothing is read meanwhile
                got.append(1)
                if len(got) == count:
                    done.set()

            await nc.subscribe("big", cb=on_msg, pending_msgs_limit=count * 2, pending_bytes_limit=-1)
            await nc.flush()
            ready.set()
            while not done.is_set():
                await asyncio.sleep(0.05)
                if quiet_since[0] and time.perf_counter() - quiet_since[0] > 3:
                    break
            closing.append(True)
            await nc.close()

        asyncio.run(main())

    quiet_since = [0.0]
    t_sub = threading.Thread(target=subscriber, daemon=True)
    t_sub.start()
    ready.wait(10)
    probe = Probe(port)
    probe.start()
    time.sleep(0.5)
    payload = b"x" * size

    async def publisher() -> float:
        nc = await nats.connect(f"nats://127.0.0.1:{port}")
        t = time.perf_counter()
        for _ in range(count):
            await nc.publish("big", payload)
        await nc.flush(timeout=120)
        took = time.perf_counter() - t
        await nc.close()
        return took

    t0 = time.perf_counter()
    pub_s = asyncio.run(publisher())
    quiet_since[0] = time.perf_counter()
    done.wait(30)
    t1 = time.perf_counter()
    time.sleep(0.5)
    probe.stop.set()
    probe.join(5)
    t_sub.join(10)
    return {"received": len(got), "sent": count, "publish_s": round(pub_s, 2),
            "deliver_s": round(t1 - t0, 2), "reconnects": events.count("disconnected"),
            "probe_before_ms": round(probe.worst(0, t0) * 1000, 1),
            "probe_during_ms": round(probe.worst(t0, t1) * 1000, 1),
            "probe_after_ms": round(probe.worst(t1, 1e18) * 1000, 1),
            "errors": "; ".join(sorted(set(e for e in events if e.startswith("error")))) or "-"}  # type: ignore[dict-item]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=1600)
    ap.add_argument("--size", type=int, default=65536)
    ap.add_argument("--block", type=float, default=1.0)
    ap.add_argument("--only", choices=("nats", "raims"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.only != "raims":
            ref = NatsServer(Path(tmp))
            try:
                print("nats-server", run(ref.port, args.count, args.size, args.block), flush=True)
            finally:
                ref.stop()
        if args.only != "nats":
            net = start_network(Path(tmp), "node A\n")
            try:
                print("raims      ", run(net.port("A"), args.count, args.size, args.block), flush=True)
            finally:
                net.stop()


if __name__ == "__main__":
    main()
