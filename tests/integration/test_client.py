"""raims_node.client against a real ms_server: found through its endpoints file,
pub/sub (iterator, callback, asyncio), flush, wait_visible, request, reconnect."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from raims_node.client import ClientError, Message, NoNode, aconnect, connect, endpoints
from tests.integration.harness import NodeProc, graph_config


class Node:
    def __init__(self, tmp: Path) -> None:
        cfg, _ = graph_config(tmp, "node A\n", web=False)
        data = yaml.safe_load(cfg.read_text())
        data["transports"] += [{"tport": "bus", "type": "ipc", "route": {}}]
        cfg.write_text(yaml.safe_dump(data, sort_keys=False))
        self.tmp, self.cfg = tmp, cfg
        self.proc = self.start()

    def start(self) -> NodeProc:
        proc = NodeProc("A", ["-d", str(self.cfg), "-u", "A", "-t", "bus.listen"], self.tmp)
        proc.wait_for(r"listening on .*A\.test\.sock")
        deadline = threading.Event()
        for _ in range(100):  # the endpoints file follows the listeners
            if endpoints.endpoints_file("A", "test").exists():
                break
            deadline.wait(0.05)
        return proc


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Node]:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    for var in (endpoints.ENV_FILE, endpoints.ENV_NODE):
        monkeypatch.delenv(var, raising=False)
    n = Node(tmp_path)
    yield n
    n.proc.stop()


def test_no_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.delenv(endpoints.ENV_FILE, raising=False)
    with pytest.raises(NoNode, match="no raims node runs on this host"):
        connect()
    with pytest.raises(NoNode, match="no node 'Z' runs"):
        connect(node="Z")


def test_endpoints_file(node: Node) -> None:
    ep = endpoints.find()
    assert ep.node == "A" and ep.service == "test" and ep.sbus == [str(endpoints.endpoints_dir() / "A.test.sock")]
    assert endpoints.find("A.test") == endpoints.find("A") == ep
    node.proc.stop()
    assert not endpoints.endpoints_file("A", "test").exists()  # removed at stop


def test_pubsub_iterator_callback_flush_visible(node: Node) -> None:
    with connect() as c, connect() as d:
        seen: list[Message] = []
        done = threading.Event()

        def on_msg(m: Message) -> None:
            seen.append(m)
            if len(seen) == 3:
                done.set()

        assert not c.visible("it/x")
        with c.subscribe("it/*") as sub:
            d.subscribe("it/", callback=on_msg)
            d.wait_visible("it/x", timeout=5)
            for i in range(3):
                c.publish("it/x", b"%d" % i)
            c.flush()
            assert [sub.next(5).payload for _ in range(3)] == [b"0", b"1", b"2"]
            assert done.wait(5) and [m.subject for m in seen] == ["it/x"] * 3
        with pytest.raises(ClientError, match="no subscriber"):
            c.wait_visible("nobody/listens", timeout=0.3)


def test_a_secret_key_subscription_with_empty_fields_delivers(node: Node) -> None:
    """Seed 001: empty `!/cred/` fields match the client's own credentials. The server
    filled them in and delivered; the library matched the unfilled pattern and dropped."""
    with connect() as c, connect() as d:
        sub = c.subscribe("!/cred////sec/")
        c.flush()
        d.publish(f"!/cred/{os.getgid()}/{os.getuid()}/{os.getpid()}/sec/1", b"for me")
        d.flush()
        assert sub.next(5).payload == b"for me"


def test_request(node: Node) -> None:
    with connect() as server, connect() as c:
        server.subscribe("svc/echo", callback=lambda m: m.respond(b"re:" + m.payload))
        server.flush()
        assert c.request("svc/echo", b"hi", timeout=5).payload == b"re:hi"


def test_reconnect_restores_subscriptions(node: Node) -> None:
    with connect(reconnect_s=20) as c, connect(reconnect_s=20) as d:
        sub = c.subscribe("rc/x")
        c.flush()
        node.proc.stop(signal.SIGKILL)  # the socket and endpoints file stay behind
        node.proc = node.start()
        d.wait_visible("rc/x", timeout=20)  # c's subscription is back
        d.publish("rc/x", b"after")
        assert sub.next(10).payload == b"after"


def test_asyncio_client(node: Node) -> None:
    async def run() -> list[bytes]:
        async with await aconnect() as c:
            sub = await c.subscribe("aio/*")
            await c.wait_visible("aio/x", timeout=5)
            for i in range(3):
                await c.publish("aio/x", b"%d" % i)
            return [(await sub.next(5)).payload for _ in range(3)]

    assert asyncio.run(run()) == [b"0", b"1", b"2"]


@pytest.mark.parametrize("xdg", [False, True])
def test_ipc_name_parameter_alone_starts_a_named_bus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     xdg: bool) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    if xdg:
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "xdg"))
        want = tmp_path / "xdg" / "raims" / "named.sock"
    else:
        monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
        want = tmp_path / f"raims-{os.getuid()}" / "named.sock"
    cfg, _ = graph_config(tmp_path, "node A\n", web=False)
    data = yaml.safe_load(cfg.read_text())
    data["parameters"]["ipc_name"] = "named"
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))
    proc = NodeProc("A", ["-d", str(cfg), "-u", "A"], tmp_path)
    try:
        proc.wait_for(re.escape(f"listening on {want}"))
        with connect(path=str(want)) as c:
            c.subscribe("n/x")
            c.wait_visible("n/x", timeout=5)
    finally:
        proc.stop()
