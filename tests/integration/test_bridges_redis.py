"""redis-py 8.1 (asyncio, RESP2 and RESP3) and redis-cli against ms_server's Redis
transport on the manual's A-D graph, and one NATS <-> Redis exchange on a shared service.

Counts follow router_bus.py: PUBLISH answers the local deliveries plus one per remote
node whose filter matches; NUMSUB counts the local subscribers plus one per remote node
holding the channel. Cross-node waits publish probes until the count says the
subscription arrived and a probe got through (the nodes on the way may learn of it
later than the publisher's), then a marker that every earlier probe precedes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import nats
import pytest
import redis.asyncio as aredis
from nats.errors import TimeoutError as NatsTimeout
from redis.asyncio.client import PubSub
from redis.exceptions import ResponseError

from tests.integration.harness import MANUAL_GRAPH
from tests.integration.test_bridges_net import BridgeNet, Transport, hot_paths, start_network

WAIT_S = 10.0
MIXED: list[Transport] = [{"tport": "xnats", "type": "nats", "route": {"port": 0, "service": "mixed"}},
         {"tport": "xredis", "type": "redis", "route": {"port": 0, "service": "mixed"}}]


@pytest.fixture(scope="module", params=["compiled", "python"])
def abcd(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BridgeNet]:
    """The network; every test runs on nodes with the compiled RESP scan and without."""
    with hot_paths(request.param):
        net = start_network(tmp_path_factory.mktemp("abcd"), MANUAL_GRAPH, MIXED)
    yield net
    net.stop()


class Clients:
    def __init__(self, net: BridgeNet) -> None:
        self.net = net
        self.open: list[aredis.Redis] = []
        self.pubsubs: list[PubSub] = []

    def __call__(self, node: str, resp: int = 2, tport: str = "redis") -> aredis.Redis:
        r = aredis.Redis(port=self.net.port(node, tport), protocol=resp, socket_timeout=WAIT_S)
        self.open.append(r)
        return r

    def pubsub(self, node: str, resp: int = 2, tport: str = "redis") -> PubSub:
        ps = self(node, resp, tport).pubsub()
        self.pubsubs.append(ps)
        return ps


@pytest.fixture
async def redis(abcd: BridgeNet) -> AsyncIterator[Clients]:
    clients = Clients(abcd)
    yield clients
    for ps in clients.pubsubs:
        await ps.aclose()
    for r in clients.open:
        await r.aclose()


async def next_message(ps: PubSub) -> dict[str, Any]:
    msg = await ps.get_message(ignore_subscribe_messages=True, timeout=WAIT_S)
    assert msg is not None, "no message within the deadline"
    return msg


async def until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not await check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.02)


async def settle(pub: aredis.Redis, channel: str, receivers: int, *subs: PubSub) -> None:
    """Publish probes until PUBLISH reaches `receivers` and a probe has reached every sub
    (a node on the way may learn of a subscription after the publisher's node did), then
    a marker, and drain `subs` up to it."""
    await settle_with(lambda data: pub.publish(channel, data), receivers, *subs)


async def settle_with(publish: Callable[[bytes], Awaitable[int]], receivers: int, *subs: PubSub) -> None:
    async def arrived() -> bool:
        return int(await publish(b"probe")) >= receivers

    await until(arrived, "the subscriptions never reached the publisher")
    waiting = list(subs)
    deadline = time.monotonic() + WAIT_S
    while waiting:
        assert time.monotonic() < deadline, "no probe got through to every subscriber"
        await publish(b"probe")
        waiting = [ps for ps in waiting if await ps.get_message(ignore_subscribe_messages=True, timeout=0.1) is None]
    await publish(b"settled")
    for ps in subs:
        while (await next_message(ps))["data"] != b"settled":
            pass


# ---------------------------------------------------------------- pub/sub

@pytest.mark.parametrize("resp", [2, 3])
async def test_subscribe_and_psubscribe_across_nodes(redis: Clients, resp: int) -> None:
    a = redis("A", resp)
    ps = redis.pubsub("D", resp)
    channel = f"news{resp}.today"
    await ps.subscribe(channel)
    assert await ps.get_message(timeout=WAIT_S) == \
        {"type": "subscribe", "pattern": None, "channel": channel.encode(), "data": 1}
    await settle(a, channel, 1, ps)
    await ps.psubscribe(f"news{resp}.*")
    assert (await ps.get_message(timeout=WAIT_S) or {})["data"] == 2
    assert await a.publish(channel, b"hello") == 1  # one remote node
    assert await next_message(ps) == {"type": "message", "pattern": None, "channel": channel.encode(),
                                      "data": b"hello"}
    assert await next_message(ps) == {"type": "pmessage", "pattern": f"news{resp}.*".encode(),
                                      "channel": channel.encode(), "data": b"hello"}
    await ps.unsubscribe(channel)
    await ps.get_message(timeout=WAIT_S)
    await a.publish(channel, b"again")
    assert (await next_message(ps))["type"] == "pmessage"


async def test_pipelined_publish_counts_local_and_remote_receivers(redis: Clients) -> None:
    a = redis("A")
    local = [redis.pubsub("A"), redis.pubsub("A")]
    far = redis.pubsub("C", 3)
    for ps in (*local, far):
        await ps.subscribe("count.me")
        await ps.get_message(timeout=WAIT_S)
    await settle(a, "count.me", 3, *local, far)
    pipe = a.pipeline(transaction=False)
    for i in range(50):
        pipe.publish("count.me", b"%d" % i)
    assert await pipe.execute() == [3] * 50  # two here, one node away
    for ps in (*local, far):
        assert [(await next_message(ps))["data"] for _ in range(50)] == [b"%d" % i for i in range(50)]
    assert await a.publish("count.nobody", b"x") == 0


async def test_pubsub_introspection_across_nodes(redis: Clients) -> None:
    subs = [("B", "intro.alpha"), ("D", "intro.alpha"), ("D", "intro.alpha"), ("C", "intro.beta")]
    for node, channel in subs:
        ps = redis.pubsub(node)
        await ps.subscribe(channel)
    pat = redis.pubsub("D", 3)
    await pat.psubscribe("intro.al*")
    shard = redis.pubsub("B")
    await shard.ssubscribe("intro.shard")
    for ps in redis.pubsubs:
        await ps.get_message(timeout=WAIT_S)
    a, d = redis("A"), redis("D", 3)

    async def complete() -> bool:
        return (await a.pubsub_channels("intro.*") == [b"intro.alpha", b"intro.beta"]
                and await a.pubsub_numpat() == 1
                and await a.pubsub_shardchannels() == [b"intro.shard"])

    await until(complete, "A never saw every subscription of B, C and D")
    assert await a.pubsub_channels("intro.a*") == [b"intro.alpha"]
    assert await a.pubsub_numsub("intro.alpha", "intro.beta", "intro.none") == \
        [(b"intro.alpha", 2), (b"intro.beta", 1), (b"intro.none", 0)]  # B and D; C
    assert await d.pubsub_numsub("intro.alpha") == [(b"intro.alpha", 3)]  # two on D, and B
    assert await a.pubsub_shardnumsub("intro.shard") == [(b"intro.shard", 1)]
    assert b"intro.shard" not in await a.pubsub_channels()


async def test_sharded_pubsub_is_a_separate_space(redis: Clients) -> None:
    a = redis("A")
    ps = redis.pubsub("D")
    await ps.ssubscribe("orders.s")
    await ps.get_message(timeout=WAIT_S)
    everything = redis.pubsub("D")
    await everything.psubscribe("*")
    await everything.get_message(timeout=WAIT_S)

    await settle_with(lambda data: a.spublish("orders.s", data), 1, ps)
    await a.spublish("orders.s", b"sharded")
    msg = await next_message(ps)
    assert (msg["type"], msg["data"]) == ("smessage", b"sharded")
    await settle(a, "orders.s", 1, everything)  # plain messages: the pattern sees only these
    assert await a.publish("orders.s", b"plain") == 1
    msg = await next_message(everything)
    assert (msg["type"], msg["channel"], msg["data"]) == ("pmessage", b"orders.s", b"plain")


@pytest.mark.parametrize("resp", [2, 3])
async def test_ping_when_subscribed_and_unknown_commands(redis: Clients, resp: int) -> None:
    ps = redis.pubsub("B", resp)
    await ps.subscribe("pinged")
    await ps.get_message(timeout=WAIT_S)
    await ps.ping()
    assert await ps.get_message(timeout=WAIT_S) == {"type": "pong", "pattern": None, "channel": None, "data": b""}
    await ps.ping("hi")
    assert (await ps.get_message(timeout=WAIT_S) or {})["data"] == b"hi"
    r = redis("B", resp)
    with pytest.raises(ResponseError, match="unknown command 'FROB', with args beginning with: 'a' 'b'"):
        await r.execute_command("FROB", "a", "b")
    assert await r.ping() is True
    assert await r.echo("still here") == b"still here"
    await r.execute_command("CLIENT", "SETNAME", "tester")
    assert await r.client_getname() in ("tester", b"tester")


async def test_a_subscription_the_network_cannot_carry_or_match_is_refused_with_an_error(redis: Clients) -> None:
    """Not confirmed and then never delivered: an error in place of its confirmation
    (a channel longer than a frame's subject; a glob raims does not compile, see
    raims_node/subject/glob.py); the client's other subscriptions are unaffected."""
    ps = redis.pubsub("A")
    await ps.subscribe("kept")
    assert (await ps.get_message(timeout=WAIT_S) or {}).get("type") == "subscribe"
    for refused, why in ((lambda: ps.subscribe("x" * 65_500), "subject too long"),
                         (lambda: ps.psubscribe("a[b"), "unterminated-bracket"),
                         (lambda: ps.psubscribe("?" * 2000 + "*"), "glob-too-complex")):
        await refused()
        with pytest.raises(ResponseError, match=why):
            await ps.get_message(timeout=WAIT_S)
    r = redis("A")
    assert await r.pubsub_numpat() == 0
    assert await r.publish("kept", b"still") == 1
    assert (await next_message(ps))["data"] == b"still"


async def test_redis_cli(abcd: BridgeNet, redis: Clients) -> None:
    port = abcd.port("C", "redis")

    async def cli(*args: str) -> str:
        proc = await asyncio.create_subprocess_exec("redis-cli", "-p", str(port), *args,
                                                    stdout=asyncio.subprocess.PIPE)
        out, _ = await asyncio.wait_for(proc.communicate(), WAIT_S)
        return out.decode()

    assert await cli("PING") == "PONG\n"
    assert (await cli("FROB", "x")).startswith("ERR unknown command 'FROB'")
    sub = await asyncio.create_subprocess_exec("redis-cli", "-p", str(port), "SUBSCRIBE", "cli.chan",
                                               stdout=asyncio.subprocess.PIPE)
    try:
        assert sub.stdout is not None
        for expected in ("subscribe", "cli.chan", "1"):
            line = await asyncio.wait_for(sub.stdout.readline(), WAIT_S)
            assert line.decode().strip() == expected
        b = redis("B")
        deadline = time.monotonic() + WAIT_S
        while await b.publish("cli.chan", b"from B") != 1:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        lines = [(await asyncio.wait_for(sub.stdout.readline(), WAIT_S)).decode().strip() for _ in range(3)]
        assert lines == ["message", "cli.chan", "from B"]
        assert await cli("PUBSUB", "NUMSUB", "cli.chan") == "cli.chan\n1\n"
    finally:
        sub.terminate()
        await sub.wait()


# ---------------------------------------------------------------- across protocols

async def test_nats_and_redis_share_a_service(abcd: BridgeNet, redis: Clients) -> None:
    nc = await nats.connect(f"nats://127.0.0.1:{abcd.port('A', 'xnats')}", max_reconnect_attempts=0)
    try:
        ps = redis.pubsub("D", 3, "xredis")
        await ps.subscribe("mixed.1")
        await ps.get_message(timeout=WAIT_S)
        deadline = time.monotonic() + WAIT_S
        while (msg := await ps.get_message(ignore_subscribe_messages=True, timeout=0.05)) is None:
            await nc.publish("mixed.1", b"from nats")  # until D's subscription reaches A
            assert time.monotonic() < deadline
        assert (msg["channel"], msg["data"]) == (b"mixed.1", b"from nats")
        nsub = await nc.subscribe("mixed.>")
        await nc.flush()
        d = redis("D", 2, "xredis")

        deadline = time.monotonic() + WAIT_S
        while True:  # until A's NATS subscription is known at D and a probe got through
            await d.publish("mixed.2", b"probe")
            try:
                await nsub.next_msg(timeout=0.1)
                break
            except NatsTimeout:
                assert time.monotonic() < deadline, "the NATS subscription on A never reached D"
        await d.publish("mixed.2", b"from redis")
        while (m := await nsub.next_msg(timeout=WAIT_S)).data == b"probe":
            pass
        assert (m.subject, m.data) == ("mixed.2", b"from redis")
        assert await redis("D", 2, "xredis").pubsub_numsub("mixed.1") == [(b"mixed.1", 1)]
        assert await redis("D").pubsub_numsub("mixed.1") == [(b"mixed.1", 0)]  # another service
    finally:
        await nc.close()
