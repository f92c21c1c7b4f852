"""Name discovery on real ms_server processes (127.0.0.1, multicast on lo): meshes and
tcp listeners/connectors found by `device` with no link configured between the nodes,
NATS and Redis bridges joining a `network`, the PGM refusal, and a configured
transport winning over a bridge's network.

Each test's `type: name` transport gives its name service a group port of its own, so
that tests running at once on this machine never hear each other.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
import redis.asyncio as aioredis
import yaml

from raims_node.config.test_adj import free_port
from tests.integration.harness import (
    CONVERGED,
    PYTHON,
    NodeProc,
    get_json,
    graph_config,
    poll,
    web_addr,
)

DEVICE = "127.0.0.1"
WAIT_S = 15.0


class Net:
    """The nodes of one test: one config file, a name group port of its own."""

    def __init__(self, tmp: Path, users: str, transports: list[dict[str, Any]]) -> None:
        self.tmp = tmp
        cfg, _ = graph_config(tmp, f"node {users}\n", heartbeat="1 sec", web=True)
        data = yaml.safe_load(cfg.read_text())
        self.group_port = free_port(socket.SOCK_DGRAM)
        data["transports"] += [{"tport": DEVICE, "type": "name",
                                "route": {"connect": f"{DEVICE};239.23.22.217", "port": self.group_port}},
                               *transports]
        cfg.write_text(yaml.safe_dump(data, sort_keys=False))
        self.cfg = cfg
        self.nodes: dict[str, NodeProc] = {}

    def start(self, user: str, *tports: str) -> NodeProc:
        node = self.nodes[user] = NodeProc(user, ["-d", str(self.cfg), "-u", user, "-t", *tports, "web.listen"],
                                           self.tmp)
        return node

    def converge(self, n: int, after: dict[str, int] | None = None) -> None:
        for name, node in self.nodes.items():
            node.wait_for(CONVERGED.format(n=n), WAIT_S, after=(after or {}).get(name, 0))

    def ports(self, user: str) -> list[dict[str, Any]]:
        _, rows = get_json(web_addr(self.nodes[user]), "show ports")
        assert isinstance(rows, list)
        return rows

    def row(self, user: str, type_: str) -> dict[str, Any]:
        return next(r for r in self.ports(user) if r["type"] == type_)

    def stop(self) -> None:
        for node in self.nodes.values():
            node.stop()


@pytest.fixture
def net_factory(tmp_path: Path) -> Iterator[Any]:
    made: list[Net] = []

    def make(users: str, transports: list[dict[str, Any]], sub: str = "") -> Net:
        where = tmp_path / sub if sub else tmp_path
        where.mkdir(exist_ok=True)
        made.append(Net(where, users, transports))
        return made[-1]

    yield make
    for net in made:  # every process the test started, whatever assertion failed
        net.stop()


MESH = {"tport": "mesh", "type": "mesh", "route": {"device": DEVICE}}
TCP = {"tport": "tcp", "type": "tcp", "route": {"device": DEVICE}}


def test_two_meshes_find_each_other_and_one_link_joins_them(net_factory: Any) -> None:
    net = net_factory("A B", [MESH])
    for user in "AB":
        net.start(user, "mesh.listen")
    net.converge(1)
    for user in "AB":
        # the member that dialed may link before the other's answer to its burst arrives
        assert poll(lambda: net.row(user, "name")["mr"] > 0, 5)  # noqa: B023 (called here, in the loop)
        name = net.row(user, "name")
        assert re.fullmatch(rf"name://127\.0\.0\.1:\d+;239\.23\.22\.217:{net.group_port}", name["address"])
        assert name["tport"] == DEVICE and name["ms"] > 0 and name["heard"] == 1
        assert name["bad"] == 0 and name["ignored"] == 0
        mesh = net.row(user, "mesh")
        assert mesh["conns"] == 1 and "D" in mesh["fl"]  # one link: only one member dialed
    # B dies and comes back with a new start time (and port): A links to it again
    marks = {user: len(node.lines) for user, node in net.nodes.items()}
    net.nodes["B"].stop(signal.SIGKILL)
    net.nodes["A"].wait_for(CONVERGED.format(n=0), WAIT_S, after=marks["A"])
    net.start("B", "mesh.listen")
    net.converge(1, after={"A": marks["A"]})
    assert poll(lambda: net.row("A", "mesh")["conns"] == 1, 5)


def test_tcp_connectors_link_to_the_listener_they_discover(net_factory: Any) -> None:
    net = net_factory("A B C", [TCP])
    net.start("A", "tcp.listen")
    net.start("B", "tcp.connect")
    net.start("C", "tcp.connect")
    net.converge(2)
    assert net.row("A", "tcp")["conns"] == 2  # both connectors
    for user in "BC":
        tcp = net.row(user, "tcp")
        assert tcp["conns"] == 1 and "C" in tcp["fl"]  # the listener only, not the other connector


def _bridge(kind: str, network: str, service: str = "shared") -> dict[str, Any]:
    return {"tport": kind, "type": kind, "route": {"port": 0, "service": service, "network": network}}


def _bridge_port(net: Net, user: str, kind: str) -> int:
    return int(net.row(user, kind)["address"].rpartition(":")[2])


async def _nats_across(pub_port: int, sub_port: int) -> bytes:
    sub_nc = await nats.connect(f"nats://127.0.0.1:{sub_port}", connect_timeout=5, max_reconnect_attempts=0)
    pub_nc = await nats.connect(f"nats://127.0.0.1:{pub_port}", connect_timeout=5, max_reconnect_attempts=0)
    try:
        sub = await sub_nc.subscribe("NET.TEST")
        await sub_nc.flush()
        for attempt in range(100):  # until the subscription reached the publisher's node (bounded)
            await pub_nc.publish("NET.TEST", f"probe {attempt}".encode())
            try:
                await sub.next_msg(timeout=0.1)
                break
            except nats.errors.TimeoutError:
                continue
        else:
            raise AssertionError("no probe crossed the network")
        await pub_nc.publish("NET.TEST", b"marker")
        while (data := (await sub.next_msg(timeout=5)).data) != b"marker":
            assert data.startswith(b"probe ")
        return data
    finally:
        await pub_nc.close()
        await sub_nc.close()


async def _redis_across(pub_port: int, sub_port: int) -> bytes:
    sub_r = aioredis.Redis(port=sub_port, socket_timeout=5)
    pub_r = aioredis.Redis(port=pub_port, socket_timeout=5)
    pubsub = sub_r.pubsub()
    try:
        await pubsub.subscribe("NET.REDIS")
        assert (await pubsub.get_message(timeout=5))["type"] == "subscribe"  # type: ignore[index]
        for attempt in range(100):
            if await pub_r.publish("NET.REDIS", f"probe {attempt}") > 0:  # a subscriber is known
                break
            await asyncio.sleep(0.1)
        await pub_r.publish("NET.REDIS", "marker")
        while True:
            msg = await pubsub.get_message(timeout=5)
            assert msg is not None
            if msg["type"] == "message" and msg["data"] == b"marker":
                return bytes(msg["data"])
    finally:
        await pubsub.aclose()
        await sub_r.aclose()
        await pub_r.aclose()


def test_nats_and_redis_bridges_join_their_network(net_factory: Any) -> None:
    net = net_factory("A B", [_bridge("nats", f"{DEVICE};mesh"), _bridge("redis", f"{DEVICE};mesh")])
    for user in "AB":
        net.start(user, "nats.listen", "redis.listen")
    net.converge(1)
    for user in "AB":
        mesh = [r for r in net.ports(user) if r["tport"].startswith("net_shared.")]
        assert len(mesh) == 1 and mesh[0]["type"] == "mesh" and mesh[0]["conns"] == 1 and "D" in mesh[0]["fl"]
    assert asyncio.run(_nats_across(_bridge_port(net, "A", "nats"), _bridge_port(net, "B", "nats"))) == b"marker"
    assert asyncio.run(_redis_across(_bridge_port(net, "B", "redis"), _bridge_port(net, "A", "redis"))) == b"marker"


def test_a_multicast_network_is_joined_through_pgm(net_factory: Any) -> None:
    """`network: 127.0.0.1;<group>`: each node generates a `type: pgm` transport on the
    group (the looped-back group on this host: `mcast_loop` 2), the nodes find each other
    on it and the NATS clients talk."""
    group = f"239.192.78.{os.getpid() % 250 + 1}"
    net = net_factory("A B", [_bridge("nats", f"{DEVICE};{group}", service="s9123")])
    for user in "AB":
        net.start(user, "nats.listen")
    net.converge(1)
    for user in "AB":
        (pgm,) = [r for r in net.ports(user) if r["tport"].startswith("net_s9123.")]
        assert pgm["type"] == "pgm" and "M" in pgm["fl"] and pgm["address"].endswith(":9123")
    assert asyncio.run(_nats_across(_bridge_port(net, "A", "nats"), _bridge_port(net, "B", "nats"))) == b"marker"


@pytest.mark.parametrize(("transport", "error"), [
    ({"tport": "mesh", "type": "mesh", "route": {"device": "nosuchdev0.invalid"}},
     "device 'nosuchdev0.invalid' is not an interface (lo 127.0.0.1/8"),
])
def test_networks_that_cannot_be_joined_stop_the_server(tmp_path: Path, transport: dict[str, Any],
                                                        error: str) -> None:
    net = Net(tmp_path, "A", [transport])
    out = subprocess.run([PYTHON, "-m", "raims_node.server", "-d", str(net.cfg), "-u", "A",
                          "-t", f"{transport['tport']}.listen"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 3
    assert error in out.stderr


def test_a_configured_transport_wins_over_the_network(net_factory: Any) -> None:
    configured = {"tport": "net_shared", "type": "mesh", "route": {"device": DEVICE, "cost": 10}}
    net = net_factory("A B", [_bridge("nats", f"{DEVICE};239.1.2.3"), configured])
    for user in "AB":
        net.start(user, "nats.listen")
    net.converge(1)
    for user in "AB":
        net.nodes[user].wait_for(r"network 127.0.0.1;239.1.2.3 ignored, transport net_shared is configured", 1)
        mesh = next(r for r in net.ports(user) if r["tport"].startswith("net_shared."))
        assert mesh["type"] == "mesh" and mesh["cost"] == 10 and mesh["conns"] == 1
