"""Every `show` command answers on a node with a client on each kind of transport
(NATS, Redis, RV, an sbus bus, telnet, web; the links' rows are test_console_operator's): a command that reads a
transport's state (its fds, ports, sessions) must understand every kind of transport,
not only those a narrower test started. Found so: an RV session took `show fds` and,
once port rows carried real fds, every port-based command to a 500."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from raims_node.console.commands import COMMANDS
from tests.integration.harness import TELNET_TPORT, get_json
from tests.integration.rv_client import RvClient
from tests.integration.test_bridges_net import WEB, BridgeNet, start_network
from tests.integration.test_bridges_rv import RV
from tests.integration.test_console_fds import NatsClient
from tests.integration.test_console_telnet import TelnetClient
from tests.integration.test_ipc_bus import Raw

# what a command needs after its words to run (its required arguments)
ARGS = {"show match": "sweep.x"}
ODD_ARGS = ("zz", "9", "-1", "A 7", "x" * 300)


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BridgeNet, Path]]:
    tmp = tmp_path_factory.mktemp("sweep")
    bus = tmp / "bus.sock"
    ipc = {"tport": "bus", "type": "ipc", "route": {"path": str(bus)}}
    n = start_network(tmp, "node A\n", extra=[RV, ipc, TELNET_TPORT, WEB])
    yield n, bus
    n.stop()


def _show_commands() -> list[str]:
    names = [c.name for c in COMMANDS if c.words[0] == "show"]
    plain = [f"{name} {ARGS[name]}" if name in ARGS else name for name in names]
    odd = [f"{name} {arg}" for name in names for arg in ODD_ARGS]  # an error, never a crash
    return plain + odd


def _ask(web: str, command: str) -> tuple[int, object]:
    try:
        return get_json(web, command)
    except ValueError as exc:  # not JSON: a 500's text
        return -1, str(exc)


async def _with_every_client(n: BridgeNet, bus: Path) -> tuple[dict[str, tuple[int, object]], dict[str, str]]:
    web = f"127.0.0.1:{n.port('A', 'web')}"
    nats = NatsClient(n.port("A", "nats"))
    redis = socket.create_connection(("127.0.0.1", n.port("A", "redis")), timeout=5)
    redis.sendall(b"*2\r\n$9\r\nSUBSCRIBE\r\n$7\r\nsweep.r\r\n")
    assert redis.recv(256).startswith(b"*3\r\n")
    sbus = Raw(bus)
    sbus.sub(b"sweep/s")
    sbus.drain()
    telnet = TelnetClient(n.port("A", "tel"))
    telnet.read_until_prompt()
    rv = await RvClient.connect(n.port("A", "rv"))
    try:
        await rv.listen("sweep.rv")
        loop = asyncio.get_running_loop()
        answers, texts = {}, {}
        for command in _show_commands():
            answers[command] = await loop.run_in_executor(None, _ask, web, command)
            texts[command] = await loop.run_in_executor(None, telnet.command, command)  # the text rendering
        return answers, texts
    finally:
        await rv.close()
        for s in (redis, telnet.sock, sbus.s):
            s.close()
        nats.close()


def test_every_show_command_answers_with_a_client_on_every_transport(net: tuple[BridgeNet, Path]) -> None:
    answers, texts = asyncio.run(_with_every_client(*net))
    failed = {c: a for c, a in answers.items() if a[0] not in (200, 400) or not isinstance(a[1], (list, dict))}
    assert not failed, failed
    assert not [c for c, t in texts.items() if "Traceback" in t or "failed" in t], texts  # (and the node logged none)
    fds: list[dict[str, Any]] = answers["show fds"][1]  # type: ignore[assignment]
    kinds = {(r["type"], r["kind"]) for r in fds}
    for typ in ("nats", "redis", "rv", "ipc", "telnet", "web"):
        assert (typ, f"{typ}_accept") in kinds, (typ, sorted(kinds))
