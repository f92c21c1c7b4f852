"""`_N.` statistics on the manual's A-D graph (issue 28): a NATS client subscribed to
`_N.>` on A receives peer and port statistics from B, C and D; nothing is built or sent
while no one subscribes (`show counters`: n_stats_sent / n_stats_skipped)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest
import redis

from tests.integration.harness import MANUAL_GRAPH, get_json
from tests.integration.test_bridges_net import WEB, BridgeNet, start_network


@pytest.fixture
def abcd(tmp_path: Path) -> Iterator[BridgeNet]:
    net = start_network(tmp_path, MANUAL_GRAPH, extra=[WEB])
    yield net
    net.stop()


def _counters(net: BridgeNet, node: str) -> dict[str, int]:
    _, rows = get_json(f"127.0.0.1:{net.port(node, 'web')}", "show counters")
    assert isinstance(rows, list)
    return {k: int(v) for k, v in rows[0].items() if k.startswith("n_stats_")}


async def _collect(port: int, want: set[str], timeout: float) -> dict[str, dict[str, object]]:
    """The last `_N.` message per subject seen on A until every node of `want` sent one."""
    nc = await nats.connect(f"nats://127.0.0.1:{port}", connect_timeout=5)
    got: dict[str, dict[str, object]] = {}
    done = asyncio.Event()

    async def on_msg(msg: nats.aio.msg.Msg) -> None:
        got[msg.subject] = json.loads(msg.data)
        if want <= {s.split(".")[2] for s in got}:
            done.set()

    await nc.subscribe("_N.>", cb=on_msg)
    try:
        await asyncio.wait_for(done.wait(), timeout)
    finally:
        await nc.close()
    return got


def test_stats_reach_a_subscriber_and_are_skipped_without_one(abcd: BridgeNet) -> None:
    time.sleep(2.5)  # a round (2 heartbeats of 1 s) with no subscriber anywhere
    before = _counters(abcd, "B")
    assert before["n_stats_sent"] == 0 and before["n_stats_skipped"] > 0, before
    got = asyncio.run(_collect(abcd.port("A"), {"B", "C", "D"}, 15))
    subjects = set(got)
    for node in "BCD":
        assert f"_N.PEER.{node}.0" in subjects or any(s.startswith(f"_N.PEER.{node}.") for s in subjects)
        assert any(s.startswith(f"_N.PORT.{node}.link_") for s in subjects), sorted(subjects)
        assert f"_N.ALL.{node}" in subjects
    port = next(v for s, v in got.items() if s.startswith("_N.PORT.B.link_"))
    assert port["user"] == "B" and int(port["fd_cnt"]) == 1 and int(port["bs_tot"]) > 0  # type: ignore[call-overload]
    peers = [v for s, v in got.items() if s.startswith("_N.PEER.B.") and v["peer"] == "D"]
    assert peers and int(peers[0]["cost"]) == 200, peers  # type: ignore[call-overload]
    assert _counters(abcd, "B")["n_stats_sent"] > 0


def test_an_adjacency_change_is_notified(abcd: BridgeNet) -> None:
    async def run() -> dict[str, object]:
        nc = await nats.connect(f"nats://127.0.0.1:{abcd.port('A')}", connect_timeout=5)
        got: asyncio.Queue[dict[str, object]] = asyncio.Queue()

        async def on_msg(msg: nats.aio.msg.Msg) -> None:
            await got.put(json.loads(msg.data))

        await nc.subscribe("_N.ADJ.B", cb=on_msg)
        await nc.flush()
        await asyncio.sleep(1.0)  # the subscription reaches B's filter
        abcd.nodes["D"].stop()  # B loses its link to D
        try:
            while True:
                body = await asyncio.wait_for(got.get(), 15)
                if "D" not in body["neighbors"]:  # type: ignore[operator]
                    return body
        finally:
            await nc.close()

    body = asyncio.run(run())
    assert body["user"] == "B" and body["neighbors"] == ["A", "C"], body


def test_a_redis_client_gets_stats_with_a_glob(abcd: BridgeNet) -> None:
    r = redis.Redis(host="127.0.0.1", port=abcd.port("A", "redis"), socket_timeout=5)
    ps = r.pubsub()
    ps.psubscribe("_N.ALL.*")
    seen: set[str] = set()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not {"_N.ALL.B", "_N.ALL.C", "_N.ALL.D"} <= seen:
        msg = ps.get_message(timeout=1.0)
        if msg is not None and msg["type"] == "pmessage":
            seen.add(msg["channel"].decode())
    ps.close()
    r.close()
    assert {"_N.ALL.B", "_N.ALL.C", "_N.ALL.D"} <= seen, seen
