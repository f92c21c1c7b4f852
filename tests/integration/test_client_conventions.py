"""Client conventions for shardcast, ack and trace (issue 28), with NATS clients on the
line A - B - C. Shardcast: a wildcard subscription with queue group `_SHARD.<i>.<n>`
takes shard i of n (bridges/router_bus.py); two subscribers on two nodes holding shards
1/2 and 2/2 split a publisher's subjects with no overlap or gap. Ack / trace: a reply
subject `_ACK.<inbox>` / `_TRACE.<inbox>` brings the answers back on `<inbox>`
(bridges/acks.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import nats
import pytest

from tests.integration.test_bridges_net import BridgeNet, start_network

COUNT = 200


@pytest.fixture(scope="module")
def abc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BridgeNet]:
    """One A - B - C line for the module: no test changes it, each closes its clients."""
    net = start_network(tmp_path_factory.mktemp("abc"), "node A B C\ntcp_link_ab A B : 100\ntcp_link_bc B C : 100\n")
    yield net
    net.stop()


async def _split(net: BridgeNet) -> tuple[set[str], set[str]]:
    url = "nats://127.0.0.1:{}"
    a, c, b = [await nats.connect(url.format(net.port(n)), connect_timeout=5) for n in "ACB"]
    got: tuple[set[str], set[str]] = (set(), set())
    done = asyncio.Event()

    def keep(into: set[str]) -> object:
        async def on_msg(msg: nats.aio.msg.Msg) -> None:
            into.add(msg.subject)
            if len(got[0]) + len(got[1]) >= COUNT:
                done.set()
        return on_msg

    await a.subscribe("foo.>", queue="_SHARD.1.2", cb=keep(got[0]))  # type: ignore[arg-type]
    await c.subscribe("foo.>", queue="_SHARD.2.2", cb=keep(got[1]))  # type: ignore[arg-type]
    await a.flush()
    await c.flush()
    await asyncio.sleep(1.5)  # both filters reach B
    for i in range(COUNT):
        await b.publish(f"foo.{i}", b"x")
    await b.flush()
    try:
        await asyncio.wait_for(done.wait(), 10)
    except TimeoutError:
        pass
    await asyncio.sleep(0.5)  # a subject delivered twice would show by now
    for nc in (a, b, c):
        await nc.close()
    return got


def test_two_shards_split_the_subjects(abc: BridgeNet) -> None:
    one, two = asyncio.run(_split(abc))
    assert one and two and not one & two, (len(one), len(two), sorted(one & two)[:5])
    assert one | two == {f"foo.{i}" for i in range(COUNT)}


async def _answers(net: BridgeNet, prefix: str, publishes: int = 1) -> list[dict[str, object]]:
    url = "nats://127.0.0.1:{}"
    a, c = [await nats.connect(url.format(net.port(n)), connect_timeout=5) for n in "AC"]
    got: list[dict[str, object]] = []
    delivered: list[bytes] = []

    async def on_answer(msg: nats.aio.msg.Msg) -> None:
        got.append(json.loads(msg.data))

    async def on_msg(msg: nats.aio.msg.Msg) -> None:
        delivered.append(msg.data)

    await c.subscribe("bar", cb=on_msg)
    await a.subscribe("answers.1", cb=on_answer)
    await c.flush()
    await a.flush()
    await asyncio.sleep(1.5)  # C's filter reaches A
    for _ in range(publishes):
        await a.publish("bar", b"hello", reply=f"{prefix}answers.1")
    await a.flush()
    want = (1 if prefix == "_ACK." else 2) * publishes
    for _ in range(100):
        if len(got) >= want and len(delivered) >= publishes:
            break
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.3)
    for nc in (a, c):
        await nc.close()
    assert delivered == [b"hello"] * publishes
    return got


def test_ack_answers_reach_the_publisher(abc: BridgeNet) -> None:
    got = asyncio.run(_answers(abc, "_ACK."))
    assert [(g["kind"], g["user"]) for g in got] == [("ack", "C")], got


def test_trace_answers_come_from_every_router_on_the_way(abc: BridgeNet) -> None:
    got = asyncio.run(_answers(abc, "_TRACE."))
    assert sorted((str(g["kind"]), str(g["user"])) for g in got) == [("trace", "B"), ("trace", "C")], got


def test_two_acked_publishes_get_one_answer_each(abc: BridgeNet) -> None:
    """Before: each answer went to every publish of the subject awaiting answers, so the
    two publishes brought four answers (each seqno twice)."""
    got = asyncio.run(_answers(abc, "_ACK.", publishes=2))
    assert len(got) == 2 and len({g["seqno"] for g in got}) == 2, got
