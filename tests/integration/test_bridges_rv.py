"""RV clients on the manual's A-D graph (issue 25 point 1): real ms_server processes,
the test RV client (tests/integration/rv_client.py), nats-py for the cross-protocol
path.

Every node runs the `rv` transport (port 0) and a NATS transport sharing the RV
service 7500's namespace (`service: _rv_7500`). One network serves all the tests of
this module (starting four nodes is the slow part)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest

from raims_node.config.test_adj import free_port
from tests.integration.harness import MANUAL_GRAPH
from tests.integration.rv_client import RvClient, RvMessage
from tests.integration.test_bridges_net import BridgeNet, start_network

RV = {"tport": "rv", "type": "rv", "route": {"port": 0}}
NATS_RV = {"tport": "nats_rv", "type": "nats", "route": {"port": 0, "service": "_rv_7500"}}
DATALOSS = "_RV.ERROR.SYSTEM.DATALOSS.INBOUND.BCAST"


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BridgeNet]:
    tmp: Path = tmp_path_factory.mktemp("rvnet")
    n = start_network(tmp, MANUAL_GRAPH, extra=[RV, NATS_RV])
    yield n
    n.stop()


async def _until_delivered(sub: RvClient, pub: RvClient, subject: str, timeout: float = 15.0) -> RvMessage:
    """Publish probes on `subject` until one arrives (the subscription has reached the
    publisher's node); the first one received."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        await pub.publish(subject, b"probe")
        try:
            return await sub.next(0.2, subject)
        except TimeoutError:
            if loop.time() > deadline:
                raise


async def test_subscribe_on_a_publish_on_d(net: BridgeNet) -> None:
    a = await RvClient.connect(net.port("A", "rv"))
    d = await RvClient.connect(net.port("D", "rv"))
    try:
        await a.listen("RSF.REC.INST.N")
        await _until_delivered(a, d, "RSF.REC.INST.N")
        nested = {"BID": 10, "ASK": "11.5"}
        await d.publish("RSF.REC.INST.N", nested)
        await d.publish("RSF.REC.INST.N", b"opaque bytes")
        got = []
        while len(got) < 2:
            m = await a.next(5, "RSF.REC.INST.N")
            if m.data != b"probe":
                got.append(m)
        assert got[0].mtype == "D" and got[0].data == nested
        assert got[1].data == b"opaque bytes"
    finally:
        await a.close()
        await d.close()


async def test_wildcards(net: BridgeNet) -> None:
    a = await RvClient.connect(net.port("A", "rv"))
    d = await RvClient.connect(net.port("D", "rv"))
    try:
        await a.listen("W.*.X")
        await a.listen("W.Y.>")
        await _until_delivered(a, d, "W.Y.probe")
        await _until_delivered(a, d, "W.q.X")
        for subject in ("W.a.X", "W.a.Z", "W.Y.b.c", "W.Y", "W.b.X"):
            await d.publish(subject, subject.encode())
        await d.publish("W.end.X", b"end")
        got = []
        while True:
            m = await a.next(5)
            if m.data == b"probe":
                continue
            got.append(m.subject)
            if m.subject == "W.end.X":
                break
        assert got == ["W.a.X", "W.Y.b.c", "W.b.X", "W.end.X"]
    finally:
        await a.close()
        await d.close()


@pytest.mark.parametrize("style", ["rv5", "rv6"])
async def test_inbox_request_reply(net: BridgeNet, style: str) -> None:
    requester = await RvClient.connect(net.port("A", "rv"), style=style)
    server = await RvClient.connect(net.port("D", "rv"), style="rv6")
    try:
        await server.listen("svc.echo")

        async def serve() -> None:
            while True:
                m = await server.next(30, "svc.echo")
                assert m.reply is not None and m.reply.startswith("_INBOX.")
                await server.publish(m.reply, b"re:" + m.data)

        task = asyncio.create_task(serve())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 15
        while True:  # until the server's subscription reaches A
            try:
                reply = await requester.request("svc.echo", b"hello", 0.5)
                break
            except TimeoutError:
                assert loop.time() < deadline, "no reply"
        assert reply.data == b"re:hello" and reply.subject.startswith(f"_INBOX.{requester.session}.")
        task.cancel()
    finally:
        await requester.close()
        await server.close()


async def test_rv5_session_advisory(net: BridgeNet) -> None:
    watcher = await RvClient.connect(net.port("B", "rv"))
    try:
        await watcher.listen("_RV.INFO.SYSTEM.SESSION.>")
        await watcher.listen("_RV.INFO.SYSTEM.HOST.>")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 15
        while True:  # sessions come and go until the watcher's interest has spread
            c = await RvClient.connect(net.port("C", "rv"), style="rv5")
            await c.close()
            try:
                m = await watcher.next(0.5, f"_RV.INFO.SYSTEM.SESSION.START.{c.session}")
                break
            except TimeoutError:
                assert loop.time() < deadline, "no SESSION.START advisory"
        assert m.mtype == "A" and m.data["ADV_NAME"] == f"SESSION.START.{c.session}"
        host = await watcher.next(5, "_RV.INFO.SYSTEM.HOST.STOP.")  # C's service 7500 lost its last client
        assert host.mtype == "A" and host.data["ADV_NAME"].startswith("HOST.STOP.")
        rv6 = await RvClient.connect(net.port("C", "rv"), style="rv6")  # the daemon's session: none
        c5 = await RvClient.connect(net.port("C", "rv"), style="rv5")
        m = await watcher.next(5, "_RV.INFO.SYSTEM.SESSION.START.")
        assert c5.session in m.subject
        await rv6.close()
        await c5.close()
    finally:
        await watcher.close()


async def test_cross_protocol_rv_nats(net: BridgeNet) -> None:
    rv = await RvClient.connect(net.port("A", "rv"))
    nc = await nats.connect(f"nats://127.0.0.1:{net.port('D', 'nats_rv')}")
    try:
        got: asyncio.Queue[nats.aio.msg.Msg] = asyncio.Queue()

        async def on_msg(msg: nats.aio.msg.Msg) -> None:
            await got.put(msg)

        await nc.subscribe("X.from.rv", cb=on_msg)
        await rv.listen("X.from.nats")
        await nc.flush()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 15
        while True:  # both subscriptions known across the network
            await rv.publish("X.from.rv", b"rv->nats")
            await nc.publish("X.from.nats", b"nats->rv")
            try:
                m = await rv.next(0.3, "X.from.nats")
                n = await asyncio.wait_for(got.get(), 0.3)
                break
            except TimeoutError:
                assert loop.time() < deadline, "no cross-protocol delivery"
        assert m.data == b"nats->rv" and n.data == b"rv->nats"
        # a NATS request answered by an RV client through its reply subject
        await rv.listen("X.svc")

        async def serve() -> None:
            req = await rv.next(10, "X.svc")
            assert req.reply is not None
            await rv.publish(req.reply, b"answer")

        task = asyncio.create_task(serve())
        deadline = loop.time() + 15
        while True:
            try:
                resp = await nc.request("X.svc", b"q", timeout=0.5)
                break
            except (nats.errors.TimeoutError, nats.errors.NoRespondersError):
                assert loop.time() < deadline
                if task.done():
                    task = asyncio.create_task(serve())
        assert resp.data == b"answer"
        task.cancel()
    finally:
        await nc.close()
        await rv.close()


async def test_forced_gap_one_dataloss_advisory(net: BridgeNet) -> None:
    """A's subscriber stops listening while D publishes 5 messages (not forwarded to A,
    whose sequence window keeps the subject's last number; B's interest makes D number
    them), listens again: the next message arrives with 5 lost, and exactly one
    DATALOSS advisory reports 5. Each change of A's interest is fenced: probes on a
    fresh subject from D and from B (D's next hop toward A) must reach A first, so
    that both nodes have applied A's earlier subscription changes."""
    a = await RvClient.connect(net.port("A", "rv"))
    b = await RvClient.connect(net.port("B", "rv"))  # keeps D publishing into the network
    d = await RvClient.connect(net.port("D", "rv"))

    async def fence(name: str) -> None:
        await a.listen(name)
        await _until_delivered(a, d, name)
        await _until_delivered(a, b, name)

    try:
        await b.listen("GAP.sub")
        await _until_delivered(b, d, "GAP.sub")
        await a.listen("GAP.sub")
        await fence("GAP.f1")
        await d.publish("GAP.sub", b"first")
        assert (await a.next(10, "GAP.sub")).data == b"first"
        await a.cancel("GAP.sub")
        await fence("GAP.f2")
        for i in range(5):
            await d.publish("GAP.sub", b"lost %d" % i)
        while (await b.next(10, "GAP.sub")).data != b"lost 4":  # past B, D's next hop toward A
            pass
        await a.listen("GAP.sub")
        await fence("GAP.f3")
        await d.publish("GAP.sub", b"after")
        seen = []
        while True:
            m = await a.next(10)
            seen.append(m)
            if m.subject == "GAP.sub" and m.data == b"after":
                break
        await asyncio.sleep(1.2)  # a second advisory would be due by now
        while not a.queue.empty():
            seen.append(a.queue.get_nowait())
        losses = [m for m in seen if m.subject == DATALOSS]
        assert len(losses) == 1, [m.subject for m in seen]
        adv = losses[0]
        assert adv.mtype == "A"
        assert adv.data["ADV_NAME"] == "DATALOSS.INBOUND.BCAST" and adv.data["lost"] == 5
        assert adv.data["sub_cnt"] == 1 and adv.data["sub1"] == "GAP.sub" and adv.data["lost1"] == 5
        assert not [m for m in seen if m.subject == "GAP.sub" and m.data.startswith(b"lost")]
    finally:
        await a.close()
        await b.close()
        await d.close()


def test_configured_rv_service_transport_takes_precedence(tmp_path: Path) -> None:
    """Two nodes with no links but a configured `rv_7500` (A listens, B connects): RV
    clients of service 7500 asking for a PGM network start
    `rv_7500` instead, the nodes link and the clients talk."""
    import yaml

    from tests.integration.harness import NodeProc, graph_config

    cfg, _ = graph_config(tmp_path, "node A B\n", web=False)
    data = yaml.safe_load(cfg.read_text())
    port = free_port()
    nodes: dict[str, NodeProc] = {}
    try:
        for name, link in (("A", {"listen": "127.0.0.1", "port": port}), ("B", {"connect": f"127.0.0.1:{port}"})):
            data["transports"] = [dict(RV), {"tport": "rv_7500", "type": "tcp", "route": link}]
            path = tmp_path / f"{name}.yaml"
            path.write_text(yaml.safe_dump(data, sort_keys=False))
            nodes[name] = NodeProc(name, ["-d", str(path), "-u", name, "-t", "rv.listen"], tmp_path)
        asyncio.run(_two_nodes_talk(nodes, "7500", "eth0;239.192.0.1", "PREC.x"))
        assert any("rv_7500" in line and "ignored" in line for line in nodes["A"].lines + nodes["B"].lines)
    finally:
        for node in nodes.values():
            node.stop()


def test_a_multicast_network_is_joined_through_pgm(tmp_path: Path) -> None:
    """Two nodes with nothing but an RV listener: their clients ask for the network
    `127.0.0.1;<group>` (the looped-back group of this host), each node generates the
    PGM transport `rv_<service>` on it, port the service's number, and the clients talk."""
    import os

    import yaml

    from tests.integration.harness import NodeProc, graph_config

    service = str(17000 + os.getpid() % 3000)
    network = f"127.0.0.1;239.192.79.{os.getpid() % 250 + 1}"
    cfg, _ = graph_config(tmp_path, "node A B\n", web=False)
    data = yaml.safe_load(cfg.read_text())
    data["transports"] = [dict(RV)]
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))
    nodes = {name: NodeProc(name, ["-d", str(cfg), "-u", name, "-t", "rv.listen"], tmp_path) for name in "AB"}
    try:
        asyncio.run(_two_nodes_talk(nodes, service, network, "MCAST.x"))
        for node in nodes.values():
            assert node.wait_for(rf"pgm rv_{service} on \S+:{service}", 5)
    finally:
        for node in nodes.values():
            node.stop()


async def _two_nodes_talk(nodes: dict[str, Any], service: str, network: str, subject: str) -> None:
    """RV clients of A and B on `service` / `network`: once B has converged, what B
    publishes on `subject` reaches A."""
    from tests.integration.test_bridges_net import CONVERGED, _listen_ports

    ports = {name: _listen_ports(node, 1)[0] for name, node in nodes.items()}
    a = await RvClient.connect(ports["A"], service=service, network=network)
    b = await RvClient.connect(ports["B"], service=service, network=network)
    try:
        nodes["B"].wait_for(CONVERGED.format(n=1), 30)
        await a.listen(subject)
        m = await _until_delivered(a, b, subject)
        assert m.data == b"probe"
    finally:
        await a.close()
        await b.close()


def test_a_network_raims_cannot_join_is_refused(net: BridgeNet) -> None:
    async def connect() -> None:
        await RvClient.connect(net.port("A", "rv"), service="7777", network="eth0;no.such.kind")

    with pytest.raises(ConnectionRefusedError, match="RVD.INITREFUSED"):
        asyncio.run(connect())


def test_a_service_name_too_long_is_refused_at_init(net: BridgeNet) -> None:
    async def connect() -> None:
        await RvClient.connect(net.port("A", "rv"), service="s" * 300)

    with pytest.raises(ConnectionRefusedError, match="RVD.INITREFUSED"):
        asyncio.run(connect())


async def test_a_listen_the_node_cannot_take_closes_the_client_unannounced(net: BridgeNet) -> None:
    port = net.port("A", "rv")
    watcher = await RvClient.connect(port, service="7620")
    try:
        await watcher.listen("_RV.INFO.SYSTEM.LISTEN.>")
        for bad in ("BAD.>.*", "BAD.>.x"):
            client = await RvClient.connect(port, service="7620")
            await client.listen(bad)
            assert client._task is not None
            await asyncio.wait_for(client._task, 10)  # the node closed the connection
            await client.close()
        good = await RvClient.connect(port, service="7620")
        await good.listen("GOOD.>")
        started = await watcher.next(10, "_RV.INFO.SYSTEM.LISTEN.START.")
        assert started.subject == "_RV.INFO.SYSTEM.LISTEN.START.GOOD.>"  # none for the refused ones
        await good.close()
    finally:
        await watcher.close()
    net.nodes["A"].wait_for(r"listen 'BAD\.>\.x': '>' is a wildcard only as the last element", 10)
