"""`show status` and `show cost` of a running daemon (manual, "The Show Commands"):
status is the address while all is well and the system's error while a link transport
cannot connect; cost gives all four costs beside the port row's fd, fl and address."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import yaml

from raims_node.config.tree import load
from raims_node.console import execute
from raims_node.daemon import Daemon
from tests.integration.harness import graph_config

WAIT_S = 10.0


async def _until(check: object, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.02)


def _status(daemon: Daemon) -> dict[str, dict[str, object]]:
    res = execute(daemon.console_context(), "show status")
    assert res.error is None and res.columns == ["tport", "type", "fd", "fl", "status"]
    return {str(r["tport"]).rpartition(".")[0] or str(r["tport"]): r for r in res.rows}


async def test_status_shows_the_connect_error_until_the_link_is_up(tmp_path: Path) -> None:
    cfg, _ = graph_config(tmp_path, "node A B\ntcp_link_ab A B : 100\n", web=False)
    data = yaml.safe_load(cfg.read_text())
    port = data["transports"][0]["route"]["port"]
    data["transports"].append({"tport": "spare", "type": "tcp", "route": {"listen": "127.0.0.1", "port": 0}})
    cfg.write_text(yaml.safe_dump(data))
    tree = load(str(cfg))
    a, b = Daemon(tree, "A"), Daemon(tree, "B")
    try:
        await b.start([], ["link_ab"])  # nothing listens yet: refused
        await _until(lambda: _status(b)["link_ab"]["status"] == f"ECONNREFUSED 127.0.0.1:{port}",
                     f"the refused connect in show status: {_status(b)}")
        assert _status(b)["spare"]["status"] == "not running"
        await a.start(["link_ab"], [])
        await _until(lambda: b.node.converged and a.node.converged, "the link came up")
        await _until(lambda: str(_status(b)["link_ab"]["status"]).startswith("127.0.0.1:"), "the address again")
        assert _status(a)["link_ab"]["status"] == f"127.0.0.1:{port}"  # the listener's bound address
        cost = execute(a.console_context(), "show cost").rows
        assert [(r["cost"], r["cost4"], r["fl"], r["address"]) for r in cost] == [(100, 100, "L", f"127.0.0.1:{port}")]
    finally:
        await a.stop()
        await b.stop()
