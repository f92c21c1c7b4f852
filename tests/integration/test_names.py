"""Service names across real ms_server processes on the manual's A-D graph (issue 21),
with nats-py (through raims_node.names.client) and redis-py clients.

The tests share one network and run in file order; the last one kills C with SIGKILL.
Replication is awaited through the topology service (a subscription's published
events), never with fixed sleeps.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import AsyncIterator, Iterator

import nats
import pytest
import redis
from nats.aio.client import Client

from raims_node.names.client import NamesClient, NamesRequestError, TopologySubscription
from tests.integration.harness import MANUAL_GRAPH, get_json
from tests.integration.test_bridges_net import WEB, BridgeNet, start_network

WAIT_S = 10.0
HEARTBEAT_S = 1.0


@pytest.fixture(scope="module")
def abcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BridgeNet]:
    net = start_network(tmp_path_factory.mktemp("names"), MANUAL_GRAPH, [WEB], heartbeat="1 sec")
    yield net
    net.stop()


class Clients:
    def __init__(self, net: BridgeNet) -> None:
        self.net = net
        self.open: list[Client] = []

    async def __call__(self, node: str) -> tuple[Client, NamesClient]:
        nc = await nats.connect(f"nats://127.0.0.1:{self.net.port(node)}", connect_timeout=5,
                                max_reconnect_attempts=0)
        self.open.append(nc)
        return nc, NamesClient(nc)


@pytest.fixture
async def clients(abcd: BridgeNet) -> AsyncIterator[Clients]:
    c = Clients(abcd)
    yield c
    for nc in c.open:
        if not nc.is_closed:
            await nc.close()


async def published(sub: TopologySubscription, count: int, kind: str = "published") -> list[dict[str, object]]:
    """The next `count` events of kind `kind` (others skipped)."""
    got: list[dict[str, object]] = []
    deadline = time.monotonic() + WAIT_S
    while len(got) < count:
        ev = await sub.next(timeout=max(0.1, deadline - time.monotonic()))
        if ev["event"] == kind:
            got.append(ev)
    return got


async def test_lookups_from_a_alternate_between_b_and_c(clients: Clients) -> None:
    _, a = await clients("A")
    _, b = await clients("B")
    _, c = await clients("C")
    watch = await a.subscribe(100, 0, 99)
    await b.bind(100, 0, 99)
    await c.bind(100, 0, 99)
    assert sorted(str(e["node"]) for e in await published(watch, 2)) == ["B", "C"]
    nodes = [str((await a.lookup(100, 42, "cluster"))["node"]) for _ in range(6)]
    assert sorted(nodes[:2]) == ["B", "C"] and nodes == nodes[:2] * 3
    nodes = [str((await a.lookup(100, 42))["node"]) for _ in range(4)]  # nearest: none on A, so round robin
    assert sorted(nodes) == ["B", "B", "C", "C"]
    with pytest.raises(NamesRequestError):
        await a.lookup(100, 100)
    with pytest.raises(NamesRequestError):
        await a.lookup(100, 42, "node")


async def test_send_to_a_name_goes_to_the_looked_up_port_with_its_reply(clients: Clients) -> None:
    nc_a, a = await clients("A")
    nc_d, d = await clients("D")
    watch = await a.subscribe(101, 5, 5)
    bound = await d.bind(101, 0, 9)
    await published(watch, 1)

    async def serve() -> None:
        msg = await bound.sub.next_msg(timeout=WAIT_S)
        await nc_d.publish(msg.reply, b"echo:" + msg.data)

    server = asyncio.create_task(serve())
    answer = await nc_a.request("_NAMES.TO.101.5", b"ping", timeout=WAIT_S)
    await server
    assert answer.data == b"echo:ping"


async def test_multicast_reaches_each_overlapping_port_once(clients: Clients) -> None:
    nc_a, a = await clients("A")
    _, b = await clients("B")
    _, c = await clients("C")
    watch = await a.subscribe(17, 0, 100)
    low = await b.bind(17, 0, 9)
    high = await c.bind(17, 10, 19)
    far = await c.bind(17, 50, 59)
    await published(watch, 3)
    await a.mcast(17, 7, 13, b"m")
    await nc_a.flush()
    assert (await low.sub.next_msg(timeout=WAIT_S)).data == b"m"
    assert (await high.sub.next_msg(timeout=WAIT_S)).data == b"m"
    # a marker sent after it, by name, arrives after any second copy would have
    await a.send(17, 15, b"end")
    assert (await high.sub.next_msg(timeout=WAIT_S)).data == b"end"
    await a.send(17, 5, b"end")
    assert (await low.sub.next_msg(timeout=WAIT_S)).data == b"end"
    assert far.sub.pending_msgs == 0


async def test_a_node_scope_name_is_invisible_from_other_nodes(clients: Clients) -> None:
    _, a = await clients("A")
    _, b = await clients("B")
    watch = await a.subscribe(18)
    await b.bind(18, 1, 1, scope="node")
    await b.bind(18, 2, 2)  # a cluster one after it: once A sees this, it would have seen the first
    events = await published(watch, 1)
    assert events[0]["found_lower"] == 2
    with pytest.raises(NamesRequestError):
        await a.lookup(18, 1)
    assert (await b.lookup(18, 1))["node"] == "B"


async def test_an_inquiry_returns_when_the_name_is_bound_later(clients: Clients) -> None:
    _, a = await clients("A")
    _, b = await clients("B")
    start = time.monotonic()
    inquiry = asyncio.create_task(a.inquire(19, 3, 2000))
    await asyncio.sleep(1.0)  # the scenario: bound 1 s after the inquiry
    await b.bind(19, 0, 9)
    answer = await inquiry
    took = time.monotonic() - start
    assert answer["found"] is True and answer["node"] == "B"
    assert 1.0 <= took < 2.0
    assert (await a.inquire(19, 99, 0))["found"] is False
    start = time.monotonic()
    assert (await a.inquire(19, 99, 300))["found"] is False
    assert 0.3 <= time.monotonic() - start < 2.0


async def test_redis_clients_bind_and_look_up_with_the_reply_in_the_body(abcd: BridgeNet,
                                                                         clients: Clients) -> None:
    nc_a, a = await clients("A")
    watch = await a.subscribe(20)
    r = redis.Redis(host="127.0.0.1", port=abcd.port("B", "redis"), socket_timeout=WAIT_S)
    ps = r.pubsub()
    try:
        ps.subscribe("r.answers", "r.port")
        for _ in range(2):
            ps.get_message(timeout=WAIT_S)  # the subscribe confirmations
        r.publish("_NAMES.BIND", json.dumps({"type": 20, "instance": 1, "inbox": "r.port", "reply": "r.answers"}))
        answer = ps.get_message(timeout=WAIT_S)
        assert answer is not None and json.loads(answer["data"])["node"] == "B"
        await published(watch, 1)
        # a NATS client on A reaches the Redis client's port on B by name
        await nc_a.publish("_NAMES.TO.20.1", b"from nats")
        await nc_a.flush()
        msg = ps.get_message(timeout=WAIT_S)
        assert msg is not None and msg["channel"] == b"r.port" and msg["data"] == b"from nats"
    finally:
        ps.close()  # the Redis client leaves: its name is withdrawn
        r.close()
    assert (await published(watch, 1, "withdrawn"))[0]["node"] == "B"


async def test_show_names_and_topology_as_web_json(abcd: BridgeNet, clients: Clients) -> None:
    _, a = await clients("A")
    _, b = await clients("B")
    watch = await a.subscribe(21, 0, 9)
    await b.bind(21, 0, 9, scope="zone")
    await published(watch, 1)
    status, rows = get_json(f"127.0.0.1:{abcd.port('A', 'web')}", "show names 21")
    assert status == 200 and isinstance(rows, list)
    assert [(r["type"], r["lower"], r["upper"], r["scope"], r["node"]) for r in rows] == [(21, 0, 9, "zone", "B")]
    assert isinstance(rows[0]["port"], int) and rows[0]["port"] >= 1
    status, rows = get_json(f"127.0.0.1:{abcd.port('A', 'web')}", "show topology")
    assert status == 200 and any(r["type"] == 21 and r["kind"] == "subscription" for r in rows)  # type: ignore[union-attr]
    status, rows = get_json(f"127.0.0.1:{abcd.port('A', 'web')}", "show names 0")
    assert status == 200 and sorted(r["node"] for r in rows) == ["A", "B", "C", "D"]  # type: ignore[union-attr]


async def test_kill_9_c_withdraws_its_names_on_a_within_two_heartbeats(abcd: BridgeNet, clients: Clients) -> None:
    """Last in the file: C stays dead."""
    _, a = await clients("A")
    _, c = await clients("C")
    watch = await a.subscribe(30, 0, 99)
    await c.bind(30, 10, 20)
    await published(watch, 1)
    start = time.monotonic()
    abcd.nodes["C"].stop(signal.SIGKILL)
    ev = (await published(watch, 1, "withdrawn"))[0]
    took = time.monotonic() - start
    assert (ev["node"], ev["found_lower"], ev["found_upper"]) == ("C", 10, 20)
    assert took < 2 * HEARTBEAT_S, took
