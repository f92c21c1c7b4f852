"""A request across a link while the other end of the link is behind on a burst of
subscription announcements (router/interest.py `backlog`, transports/unsent.py).

A client of A subscribing 100,000 subjects made A announce them faster than B applied
them (B's loop is as busy as A's, and the machine shared); asyncio handed them all to
the kernel, whose send buffer grows to 4 MB, and a request from A to a responder on B
was written behind up to 2 MB of them: it waited 0.1-1.1 s. Here B's process is
stopped for STOP_S (less than unsent.STUCK_S) while A takes the burst (a descheduled
peer, the worst case of a slow one): A keeps at most PACE_BYTES unsent on the link (plus B's
receive window), so the request written when B runs again waits for little of the
burst. A peer that reads nothing at all (stopped) paces nothing after
unsent.STUCK_S: a third node hears A's subscriptions all the same.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import time
from collections.abc import Iterator

import nats
import pytest
from nats.aio.msg import Msg

from tests.integration.test_bridges_many_subs import raw_subscriber, request_state
from tests.integration.test_bridges_net import BridgeNet, start_network

WAIT_S = 20.0
N = 50_000
STOP_S = 0.8  # B descheduled meanwhile (heartbeats of 5 s: no timeout), not yet stuck
# the request written when B runs again: 0.61-1.27 s before, 36-96 ms after (4 runs
# each at load 5-7 on the shared 2 vCPUs, B stopped for 2 s)
BOUND_S = 0.3
HEARD_S = 2.0  # a third node hears A's subscriptions while B is stopped (never, before STUCK_S)


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BridgeNet]:
    net = start_network(tmp_path_factory.mktemp("two"), "node A B\ntcp_link_ab A B : 200\n", heartbeat="5 sec")
    yield net
    net.stop()


async def test_a_request_does_not_wait_behind_a_burst_of_announcements(two: BridgeNet) -> None:
    here = await nats.connect(f"nats://127.0.0.1:{two.port('A')}", max_reconnect_attempts=0)
    there = await nats.connect(f"nats://127.0.0.1:{two.port('B')}", max_reconnect_attempts=0)
    many: socket.socket | None = None
    b = two.nodes["B"].proc
    try:
        async def answer(msg: Msg) -> None:
            await msg.respond(b"echo " + msg.data)

        await there.subscribe("svc.echo", cb=answer)
        await there.flush()
        deadline = time.monotonic() + WAIT_S
        while await request_state(here, "svc.echo") != "echo ?":  # B's subscription reached A
            assert time.monotonic() < deadline, "B's responder never reached A"
            await asyncio.sleep(0.05)
        b.send_signal(signal.SIGSTOP)
        try:
            start = time.monotonic()
            many = await asyncio.to_thread(raw_subscriber, two.port("A"), [f"many.{i}" for i in range(N)])
            await asyncio.sleep(max(0.0, STOP_S - (time.monotonic() - start)))  # A announces meanwhile
        finally:
            b.send_signal(signal.SIGCONT)
        sent = time.monotonic()
        assert (await here.request("svc.echo", b"now", timeout=WAIT_S)).data == b"echo now"
        took = time.monotonic() - sent
        assert took < BOUND_S, f"the request waited {took * 1e3:.0f} ms behind A's announcements"
        deadline = time.monotonic() + WAIT_S
        while await request_state(there, f"many.{N - 1}") != "silent":  # every JOIN reached B, in order
            assert time.monotonic() < deadline, "A's subscriptions never reached B"
            await asyncio.sleep(0.05)
        assert await request_state(there, "many.0") == "silent"
    finally:
        b.send_signal(signal.SIGCONT)
        if many is not None:
            many.close()
        await here.close()
        await there.close()


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BridgeNet]:
    net = start_network(tmp_path_factory.mktemp("three"), "node A B C\ntcp_link_ab A B : 200\n"
                        "tcp_link_ac A C : 200\n", heartbeat="5 sec")
    yield net
    net.stop()


async def test_a_stopped_peer_does_not_hold_our_announcements_from_the_others(three: BridgeNet) -> None:
    """B stops reading with more than PACE_BYTES of A's output unsent: after STUCK_S it
    paces nothing, and C hears a burst of A's subscriptions while B is still stopped
    (before: not until B's link was dropped, seconds later)."""
    a = await nats.connect(f"nats://127.0.0.1:{three.port('A')}", max_reconnect_attempts=0)
    b = await nats.connect(f"nats://127.0.0.1:{three.port('B')}", max_reconnect_attempts=0)
    c = await nats.connect(f"nats://127.0.0.1:{three.port('C')}", max_reconnect_attempts=0)
    many: socket.socket | None = None
    proc = three.nodes["B"].proc
    try:
        await b.subscribe("fill.>")
        await b.flush()
        deadline = time.monotonic() + WAIT_S
        while await request_state(a, "fill.x") != "silent":  # B's subscription reached A
            assert time.monotonic() < deadline, "B's subscription never reached A"
            await asyncio.sleep(0.05)
        proc.send_signal(signal.SIGSTOP)
        for _ in range(400):  # 4 MB for B, which reads none of it
            await a.publish("fill.x", bytes(10_000))
        await a.flush(timeout=WAIT_S)
        start = time.monotonic()
        many = await asyncio.to_thread(raw_subscriber, three.port("A"), [f"held.{i}" for i in range(2_000)])
        while await request_state(c, "held.1999") != "silent":  # A's last JOIN reached C
            assert time.monotonic() - start < HEARD_S, "C did not hear A's subscriptions while B was stopped"
            await asyncio.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGCONT)
        if many is not None:
            many.close()
        for nc in (a, b, c):
            await nc.close()
