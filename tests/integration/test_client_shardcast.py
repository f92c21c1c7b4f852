"""Shardcast for NATS clients (issue 28): a wildcard subscription with queue group
`_SHARD.<i>.<n>` takes shard i of n (bridges/router_bus.py); two subscribers on two
nodes holding shards 1/2 and 2/2 split a publisher's subjects with no overlap or gap."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest

from tests.integration.test_bridges_net import BridgeNet, start_network

COUNT = 200


@pytest.fixture
def abc(tmp_path: Path) -> Iterator[BridgeNet]:
    net = start_network(tmp_path, "node A B C\ntcp_link_ab A B : 100\ntcp_link_bc B C : 100\n")
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
