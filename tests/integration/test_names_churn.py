"""Service names under node churn (issue 21, TIPC seed 002's topology events): a node
killed with SIGKILL, alone or restarted at once, on the A-B-C chain of real ms_server
processes; the withdrawn events must reach the subscribers on the other nodes within
two heartbeats (the router's peer-down time, DESIGN-NOTES "names")."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import nats
import pytest
from nats.aio.client import Client

from raims_node.names.client import NamesClient, NamesRequestError, TopologySubscription
from tests.integration.test_bridges_net import BridgeNet, start_network

HEARTBEAT_S = 1.0
WAIT_S = 10.0
Connect = Callable[[str], Awaitable[NamesClient]]
CHAIN = """node A B C
tcp_link_ab A B : 100
tcp_link_bc B C : 100
"""


@pytest.fixture
def abc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BridgeNet]:
    net = start_network(tmp_path_factory.mktemp("churn"), CHAIN, heartbeat="1 sec")
    yield net
    net.stop()


@pytest.fixture
async def connect(abc: BridgeNet) -> AsyncIterator[Connect]:
    opened: list[Client] = []

    async def open_(node: str) -> NamesClient:
        nc = await nats.connect(f"nats://127.0.0.1:{abc.port(node)}", connect_timeout=5,
                                max_reconnect_attempts=0, allow_reconnect=False)
        opened.append(nc)
        return NamesClient(nc)

    yield open_
    for nc in opened:
        if not nc.is_closed:
            await nc.close()


async def events(sub: TopologySubscription, count: int, kind: str, timeout: float = WAIT_S) -> list[dict[str, object]]:
    got: list[dict[str, object]] = []
    deadline = time.monotonic() + timeout
    while len(got) < count:
        ev = await sub.next(timeout=max(0.05, deadline - time.monotonic()))
        if ev["event"] == kind:
            got.append(ev)
    return got


async def test_kill_9_withdraws_every_name_at_every_other_node(abc: BridgeNet, connect: Connect) -> None:
    a, b, c = await connect("A"), await connect("B"), await connect("C")
    watch_a = await a.subscribe(40, 0, 999)
    watch_b = await b.subscribe(40, 0, 999)
    for i in range(50):
        await c.bind(40, i * 10, i * 10 + 5)
    await events(watch_a, 50, "published")
    await events(watch_b, 50, "published")
    start = time.monotonic()
    abc.nodes["C"].stop(signal.SIGKILL)
    got_a, got_b = await asyncio.gather(events(watch_a, 50, "withdrawn"), events(watch_b, 50, "withdrawn"))
    took = time.monotonic() - start
    assert sorted(int(e["found_lower"]) for e in got_a) == [i * 10 for i in range(50)]
    assert {e["node"] for e in got_a + got_b} == {"C"}
    assert took < 2 * HEARTBEAT_S + 0.5, took
    with pytest.raises(NamesRequestError, match="no publication"):
        await a.lookup(40, 12)


async def test_kill_9_and_restart_at_once_withdraws_the_old_names(abc: BridgeNet, connect: Connect) -> None:
    """C dies and is back before its peers' heartbeat timeout: the names its dead
    clients bound are withdrawn all the same, and a name bound on the new C is published."""
    a, c = await connect("A"), await connect("C")
    watch = await a.subscribe(41, 0, 999)
    await c.bind(41, 1, 1)
    await events(watch, 1, "published")
    start = time.monotonic()
    abc.restart("C", signal.SIGKILL)
    withdrawn = await events(watch, 1, "withdrawn", timeout=WAIT_S)
    took = time.monotonic() - start
    assert withdrawn[0]["node"] == "C"
    assert took < 2 * HEARTBEAT_S + 1.5, took  # the restart itself takes part of it
    c2 = await connect("C")
    await c2.bind(41, 2, 2)
    again = await events(watch, 1, "published")
    assert (again[0]["node"], again[0]["found_lower"]) == ("C", 2)


async def test_a_stopped_node_is_withdrawn_and_its_names_come_back_when_it_resumes(abc: BridgeNet, connect: Connect) -> None:
    """SIGSTOP (a hung host): no socket closes, the heartbeats stop. A hears `withdrawn`
    after the router's peer timeout; after SIGCONT the same names are published again
    (the client that bound them is still connected to C)."""
    a, c = await connect("A"), await connect("C")
    watch = await a.subscribe(42, 0, 999)
    await c.bind(42, 7, 7)
    await events(watch, 1, "published")
    proc = abc.nodes["C"]
    start = time.monotonic()
    proc.proc.send_signal(signal.SIGSTOP)
    try:
        gone = await events(watch, 1, "withdrawn", timeout=WAIT_S)
        took = time.monotonic() - start
    finally:
        proc.proc.send_signal(signal.SIGCONT)
    assert gone[0]["node"] == "C" and took < 5 * HEARTBEAT_S, took  # the link's 5 silent heartbeats at most
    back = await events(watch, 1, "published", timeout=WAIT_S * 2)
    assert (back[0]["node"], back[0]["found_lower"]) == ("C", 7)
