"""nats-server's monitoring endpoints and lame duck mode on the NATS transport (issue 23),
with nats-py clients on real processes."""

from __future__ import annotations

import asyncio
import json
import signal
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.msg import Msg

from tests.integration.test_bridges_net import BridgeNet, Transport, start_network

MONITORED: Transport = {"tport": "natsmon", "type": "nats", "route": {"port": 0, "http_port": 0}}


def _get(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=5) as r:
        assert r.status == 200
        return json.loads(r.read())


@pytest.fixture
def ab(tmp_path: Path) -> Iterator[BridgeNet]:
    net = start_network(tmp_path, "node A B\ntcp_link_ab A B : 100\n", [MONITORED],
                        params={"lame_duck_grace_period": "1 sec", "lame_duck_duration": "1 sec"})
    yield net
    net.stop()


def _monitor_url(net: BridgeNet, node: str) -> str:
    return "http://" + net.nodes[node].wait_for(r"natsmon monitoring on http://(\S+)").group(1)


async def test_varz_and_connz_see_the_clients_own_connection(ab: BridgeNet) -> None:
    url = _monitor_url(ab, "A")
    nc = await nats.connect(f"nats://127.0.0.1:{ab.port('A', 'natsmon')}", name="monitored-client")
    try:
        sub = await nc.subscribe("watch.me")
        await nc.publish("watch.me", b"x")
        await nc.publish("watch.me", b"abc", headers={"K": "V"})  # 18 B of headers: NATS/1.0, K: V, the end
        await sub.next_msg(timeout=5)
        await sub.next_msg(timeout=5)
        varz = await asyncio.to_thread(_get, url + "/varz")
        assert varz["connections"] == 1 and varz["total_connections"] >= 1
        # message bytes (headers and data), as nats-server and nats.py's own tests count them
        assert (varz["in_msgs"], varz["in_bytes"], varz["out_msgs"], varz["out_bytes"]) == (2, 22, 2, 22)
        assert varz["port"] == ab.port("A", "natsmon") and varz["max_payload"] > 0 and varz["in_msgs"] >= 1
        connz = await asyncio.to_thread(_get, url + "/connz?subs=1")
        assert connz["num_connections"] == 1
        conn = connz["connections"][0]
        assert conn["cid"] == nc.client_id and conn["name"] == "monitored-client" and conn["lang"] == "python3"
        assert conn["subscriptions"] == 1 and conn["subscriptions_list"] == ["watch.me"]
        assert (conn["in_bytes"], conn["out_bytes"]) == (22, 22)
        subsz = await asyncio.to_thread(_get, url + "/subsz")
        assert subsz["num_subscriptions"] == 1
        assert (await asyncio.to_thread(_get, url + "/healthz")) == {"status": "ok"}
    finally:
        await nc.close()


async def test_lame_duck_moves_a_client_to_the_other_server_without_loss(ab: BridgeNet) -> None:
    a, b = ab.port("A", "natsmon"), ab.port("B", "natsmon")
    sub_nc = await nats.connect(f"nats://127.0.0.1:{b}")
    pub_nc = await nats.connect(servers=[f"nats://127.0.0.1:{a}", f"nats://127.0.0.1:{b}"],
                                dont_randomize=True, reconnect_time_wait=0.1, max_reconnect_attempts=50)
    got: set[int] = set()

    async def collect(msg: Msg) -> None:
        got.add(int(msg.data))

    sub = await sub_nc.subscribe("ldm.seq", cb=collect)
    try:
        # settle: the subscription is known at A before counting
        for _ in range(100):
            await pub_nc.publish("ldm.seq", b"-1")
            await pub_nc.flush()
            if -1 in got:
                break
            await asyncio.sleep(0.05)
        assert -1 in got
        ab.nodes["A"].proc.send_signal(signal.SIGUSR2)
        sent = 0
        for i in range(400):
            await pub_nc.publish("ldm.seq", str(i).encode())
            sent += 1
            try:
                await pub_nc.flush(timeout=2)
            except Exception:  # reconnecting: the message stays in nats-py's reconnect buffer
                pass
            await asyncio.sleep(0.01)
        assert pub_nc.connected_url is not None and pub_nc.connected_url.port == b
        for _ in range(100):
            if set(range(sent)) <= got:
                break
            await asyncio.sleep(0.05)
        assert set(range(sent)) - got == set()
        assert ab.nodes["A"].proc.wait(10) == 0
    finally:
        await sub.unsubscribe()
        await pub_nc.close()
        await sub_nc.close()


def _status(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


async def test_connz_sorts_filters_and_refuses_as_nats_server(ab: BridgeNet) -> None:
    """nats-server's /connz options (sort, cid, state) and its 400s for bad ones, and the
    endpoints a monitoring tool polls on a server with no cluster (/routez ...); before,
    sort, state and cid were ignored and those endpoints were 404s."""
    url = _monitor_url(ab, "A")
    port = ab.port("A", "natsmon")
    quiet, busy = await nats.connect(f"nats://127.0.0.1:{port}"), await nats.connect(f"nats://127.0.0.1:{port}")
    try:
        for i in range(3):
            await busy.subscribe(f"sort.{i}")
        await busy.flush()
        by_subs = await asyncio.to_thread(_get, url + "/connz?sort=subs")
        assert [c["cid"] for c in by_subs["connections"]] == [busy.client_id, quiet.client_id]
        by_cid = await asyncio.to_thread(_get, url + "/connz?sort=cid")
        assert [c["cid"] for c in by_cid["connections"]] == sorted([busy.client_id, quiet.client_id])
        one = await asyncio.to_thread(_get, url + f"/connz?cid={quiet.client_id}")
        assert [c["cid"] for c in one["connections"]] == [quiet.client_id]
        assert (await asyncio.to_thread(_get, url + "/connz?state=closed"))["connections"] == []
        for query, text in (("sort=foo", "invalid sorting option: foo"), ("state=weird", "Error decoding state for weird"),
                            ("cid=abc", "Error decoding uint64 for 'cid'"),
                            ("sort=stop", "sort by stop only valid on closed connections")):
            status, body = await asyncio.to_thread(_status, url + "/connz?" + query)
            assert status == 400 and body.startswith(text), (query, status, body)
        status, text = await asyncio.to_thread(_status, url + "/subsz?test=a.*")
        assert (status, text) == (400, "invalid test subject, must be valid publish subject: a.*")
        assert (await asyncio.to_thread(_get, url + "/routez"))["num_routes"] == 0
        assert (await asyncio.to_thread(_get, url + "/leafz"))["leafnodes"] == 0
        assert (await asyncio.to_thread(_get, url + "/jsz"))["disabled"] is True
        for path in ("/gatewayz", "/accountz"):
            assert "server_id" in await asyncio.to_thread(_get, url + path)
        assert "/routez" in (await asyncio.to_thread(_status, url + "/"))[1]
    finally:
        await quiet.close()
        await busy.close()
