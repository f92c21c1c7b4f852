"""Issue 19 with real redis-py clients against a real ms_server process: the glob
`a*a*a*a*a*a*a*a*a*a*b` and PUBLISHes to new subjects of thirty-odd 'a's, which froze the
daemon for 11 s when globs were Python regular expressions, while another client PINGs.
The PINGs are answered within 50 ms (a loaded test machine may stall a process for a
moment by itself, so at most 5% may be later, none later than 1 s), and the pattern still
gets the message that matches it."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis.asyncio as aredis

from tests.integration.test_bridges_net import BridgeNet, start_network

WORST_GLOB = "a*a*a*a*a*a*a*a*a*a*b"
PUBLISHES = 300
PING_LIMIT_S = 0.050
PUBLISH_LIMIT_S = 5.0  # a stalled daemon fails the test here rather than hang it


@pytest.fixture
def one_node(tmp_path: Path) -> Iterator[BridgeNet]:
    net = start_network(tmp_path, "node A\n")
    yield net
    net.stop()


async def test_worst_glob_does_not_stall_other_clients(one_node: BridgeNet) -> None:
    port = one_node.port("A", "redis")
    sub, pub, pinger = (aredis.Redis(port=port, socket_timeout=10) for _ in range(3))
    ps = sub.pubsub()
    try:
        await ps.psubscribe(WORST_GLOB)
        assert (await ps.get_message(timeout=10) or {}).get("type") == "psubscribe"
        assert await pinger.ping()
        latencies: list[float] = []
        done = asyncio.Event()

        async def ping() -> None:
            while not done.is_set():
                t0 = time.perf_counter()
                await pinger.ping()
                latencies.append(time.perf_counter() - t0)

        pinging = asyncio.create_task(ping())
        try:
            t0 = time.perf_counter()
            for k in range(PUBLISHES):  # each subject new: no cached result helps
                async with asyncio.timeout(PUBLISH_LIMIT_S):
                    assert await pub.publish("a" * (30 + k), b"x") == 0
            elapsed = time.perf_counter() - t0
        finally:
            done.set()
            pinging.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pinging
        assert elapsed < 10, f"{PUBLISHES} publishes took {elapsed:.1f} s"
        late = [x for x in latencies if x > PING_LIMIT_S]
        assert latencies and len(late) <= len(latencies) // 20, (len(late), len(latencies), max(latencies))
        assert max(latencies) < 1.0
        assert await pub.publish("a" * 30 + "b", b"hit") == 1
        msg = await ps.get_message(ignore_subscribe_messages=True, timeout=10)
        assert msg is not None and msg["type"] == "pmessage" and msg["pattern"] == WORST_GLOB.encode()
        assert msg["channel"] == b"a" * 30 + b"b" and msg["data"] == b"hit"
    finally:
        await ps.aclose()
        for r in (sub, pub, pinger):
            await r.aclose()
