"""The endpoints file follows the console: a transport started with `listen T` (or
stopped with `shutdown T`) on a running node is what the Python client finds next
(README "Using the tools": configure an ipc transport from the console, then
`raims_node.client.connect()`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from raims_node.client import ClientError, ConnectionLost, connect, endpoints
from tests.integration.harness import TELNET_TPORT, NodeProc, add_transports, graph_config, poll
from tests.integration.test_console_telnet import TelnetClient


@pytest.fixture
def lone_a(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[NodeProc]:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    for var in (endpoints.ENV_FILE, endpoints.ENV_NODE):
        monkeypatch.delenv(var, raising=False)
    cfg, _ = graph_config(tmp_path, "node A\n", web=False)
    add_transports(cfg, TELNET_TPORT, {"tport": "bus", "type": "ipc", "route": {}},
                   {"tport": "web", "type": "web", "route": {"listen": "127.0.0.1", "port": 0}})
    node = NodeProc("A", ["-d", str(cfg), "-u", "A", "-t", "tel.listen"], tmp_path)
    try:
        yield node
    finally:
        node.stop()


def _file() -> endpoints.Endpoints | None:
    try:
        return endpoints.find("A")
    except endpoints.NoNode:
        return None


def test_listen_and_shutdown_from_the_console_rewrite_the_endpoints_file(lone_a: NodeProc) -> None:
    port = int(lone_a.wait_for(r"telnet listening on [\d.]+:(\d+)").group(1))
    assert poll(lambda: _file() is not None, 5)
    first = _file()
    assert first is not None and first.sbus == [] and first.web == []
    t = TelnetClient(port)
    t.read_until_prompt()
    t.command("listen bus")
    sock = str(endpoints.endpoints_dir() / "A.test.sock")
    assert poll(lambda: (ep := _file()) is not None and ep.sbus == [sock], 5), _file()
    with connect() as c:  # the README's client, on the transport the console started
        sub = c.subscribe("rows/*")
        c.publish("rows/x", b"payload")
        assert sub.next(timeout=5).payload == b"payload"
    t.command("listen web")
    web = lone_a.wait_for(r"web listening on (\S+)").group(1)
    assert poll(lambda: (ep := _file()) is not None and ep.web == [web], 5), _file()
    t.command("shutdown bus")
    assert poll(lambda: (ep := _file()) is not None and ep.sbus == [] and ep.web == [web], 5), _file()
    t.command("shutdown web")
    assert poll(lambda: (ep := _file()) is not None and ep.web == [], 5), _file()


def test_a_bus_stopped_and_started_from_the_console_is_a_lost_connection_not_a_cut(lone_a: NodeProc) -> None:
    """The node says `Server Shutdown` before it closes its clients: the client, back on
    the same node process, reported a slow-consumer cut before (only a cut closes a live
    client of a running node, client/errors.py)."""
    port = int(lone_a.wait_for(r"telnet listening on [\d.]+:(\d+)").group(1))
    t = TelnetClient(port)
    t.read_until_prompt()
    t.command("listen bus")
    assert poll(lambda: (ep := _file()) is not None and ep.sbus != [], 5), _file()
    errors: list[ClientError] = []
    with connect(reconnect_s=20, error_cb=errors.append) as c:
        sub = c.subscribe("rows/*")
        t.command("shutdown bus")
        t.command("listen bus")
        assert poll(lambda: bool(errors), 20)
        [err] = errors
        assert type(err) is ConnectionLost and err.reconnected and c.cuts == 0, err
        c.publish("rows/again", b"back")  # its subscription restored on the bus started again
        assert sub.next(timeout=5).payload == b"back"
