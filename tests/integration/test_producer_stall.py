"""A NATS subscriber whose loop blocks stalls the publisher feeding it, not the node
(bridges/gate.py, 2026-11-27 branch producer-stall), as nats-server 2.9.10 stalls a
fast producer: every message arrives and another pair of clients keeps going.

Before, the node held every local publisher for at most 0.1 s (a node-wide gate) and its
16 MiB output budget cut the lone subscriber: a nats-py subscriber blocked 1 s while a
publisher sent 1,600 x 64 KB was cut and reconnected, receiving 61-195 of them
(nats-server: all 1,600; bench/stall_bench.py measures both side by side).
"""

from __future__ import annotations

import asyncio
import threading

import nats

from tests.integration.test_bridges_net import BridgeNet
from tests.integration.test_flow_control import _nats, _read_until

COUNT, SIZE = 800, 64 * 1024  # 50 MiB: past the node's output budget, under a subscriber's limit
BLOCK_S = 1.0  # the subscriber's loop is blocked until the publisher is done, or this long
WAIT_S = 60.0


class Probe(threading.Thread):
    """Another publisher / subscriber pair on the node: one message at a time, each
    published once the one before arrived; counts the trips done while `during` is set."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.sub = _nats(port, b"SUB probe 1\r\n")
        self.pub = _nats(port)
        self.during = threading.Event()
        self.stop = threading.Event()
        self.trips = self.trips_during = 0

    def run(self) -> None:
        want = b"MSG probe 1 1\r\nx\r\n"
        while not self.stop.is_set():
            self.pub.sendall(b"PUB probe 1\r\nx\r\n")
            buf = bytearray()
            _read_until(self.sub, want, buf)
            self.trips += 1
            if self.during.is_set():
                self.trips_during += 1


def test_a_subscriber_whose_loop_blocks_gets_every_message_and_others_run_on(one: BridgeNet) -> None:
    port = one.port("A")
    got: list[int] = []
    events: list[str] = []
    subscribed, blocked, published, done = (threading.Event() for _ in range(4))

    async def subscriber() -> None:
        async def error(e: Exception) -> None:
            events.append(f"error {e!r}")

        async def disconnected() -> None:
            if not done.is_set():
                events.append("disconnected")

        nc = await nats.connect(f"nats://127.0.0.1:{port}", error_cb=error, disconnected_cb=disconnected,
                                max_reconnect_attempts=-1, reconnect_time_wait=0.1)

        async def on_msg(msg: object) -> None:
            if not got:
                blocked.set()
                probe.during.set()
                published.wait(BLOCK_S)  # the loop blocked: nothing is read meanwhile
                probe.during.clear()
            got.append(1)
            if len(got) == COUNT:
                done.set()

        await nc.subscribe("big", cb=on_msg, pending_msgs_limit=COUNT * 2, pending_bytes_limit=-1)
        await nc.flush()
        subscribed.set()
        await asyncio.to_thread(done.wait, WAIT_S)
        done.set()
        await nc.close()

    async def publisher() -> None:
        nc = await nats.connect(f"nats://127.0.0.1:{port}")
        payload = b"x" * SIZE
        for _ in range(COUNT):
            await nc.publish("big", payload)
        await nc.flush(timeout=WAIT_S)  # the node has read them all
        published.set()
        await nc.close()

    sub = threading.Thread(target=asyncio.run, args=(subscriber(),), daemon=True)
    sub.start()
    assert subscribed.wait(WAIT_S)
    probe = Probe(port)
    probe.start()
    try:
        asyncio.run(publisher())
        sub.join(WAIT_S)
    finally:
        probe.stop.set()
        probe.join(WAIT_S)
    assert blocked.is_set() and not sub.is_alive()
    assert (len(got), events) == (COUNT, [])  # before: 61-195 and a reconnect
    assert not [line for line in one.nodes["A"].lines if "closed" in line and "exceeds" in line]
    assert probe.trips_during >= 3, f"the other pair made {probe.trips_during} trips while the publisher stalled"
