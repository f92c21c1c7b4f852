"""The manual's TCP transport fields on real processes (issue 28): several `connect`
addresses (the first that links stops the others), `timeout` 0 against a late listener,
a `timeout` that expires, `host:port` overriding `port`, `listen` defaulting to `*`."""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from raims_node.config.test_adj import free_port
from tests.integration.harness import (
    CONVERGED,
    TELNET_TPORT,
    NodeProc,
    add_transports,
    get_json,
    graph_config,
    web_addr,
)


@pytest.fixture
def procs() -> Iterator[list[NodeProc]]:
    started: list[NodeProc] = []
    yield started
    for p in started:
        p.stop()


def _config(tmp: Path, route: dict[str, Any], params: dict[str, Any] | None = None) -> tuple[Path, int]:
    """A two-node graph whose link's route is replaced by `route` (PORT: a free port)."""
    cfg, _ = graph_config(tmp, "node A B\ntcp_link_ab A B : 100\n")
    data = yaml.safe_load(cfg.read_text())
    port = free_port()
    link = next(t for t in data["transports"] if t["tport"] == "link_ab")
    link["route"] = {k: (v.replace("PORT", str(port)) if isinstance(v, str) else
                         [x.replace("PORT", str(port)) for x in v] if isinstance(v, list) else v)
                     for k, v in route.items()}
    link["route"].setdefault("port", port)
    data["parameters"].update(params or {})
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))
    return cfg, port


def _node(tmp: Path, cfg: Path, user: str, how: str) -> NodeProc:
    return NodeProc(user, ["-d", str(cfg), "-u", user, "-t", f"link_ab.{how}", "web.listen"], tmp)


def _links(node: NodeProc) -> int:
    """The links of transport link_ab (`show ports`: its JSON-only conns counts them)."""
    _, rows = get_json(web_addr(node), "show ports")
    assert isinstance(rows, list)
    return sum(int(r["conns"]) for r in rows if str(r.get("tport", "")).startswith("link_ab."))


def test_connect_list_first_success_stops_the_others(tmp_path: Path, procs: list[NodeProc]) -> None:
    dead = free_port()
    cfg, port = _config(tmp_path, {"listen": "127.0.0.1",
                                   "connect": [f"127.0.0.1:{dead}", "127.0.0.1", "127.0.0.1:PORT"]})
    a = _node(tmp_path, cfg, "A", "listen")
    procs.append(a)
    assert a.listening()[0] == f"127.0.0.1:{port}"
    b = _node(tmp_path, cfg, "B", "connect")
    procs.append(b)
    a.wait_for(CONVERGED.format(n=1), 20)
    time.sleep(1.5)  # a second address that had also linked would show by now
    assert _links(a) == 1 and _links(b) == 1


def test_timeout_zero_waits_for_a_late_listener(tmp_path: Path, procs: list[NodeProc]) -> None:
    cfg, _ = _config(tmp_path, {"listen": "127.0.0.1", "connect": "127.0.0.1", "timeout": 0},
                     {"tcp_timeout": "1 sec"})  # the transport's 0 wins over tcp_timeout
    b = _node(tmp_path, cfg, "B", "connect")
    procs.append(b)
    time.sleep(2.5)
    a = _node(tmp_path, cfg, "A", "listen")
    procs.append(a)
    a.wait_for(CONVERGED.format(n=1), 20)
    assert not any("expired" in line for line in b.lines)


def test_connect_timeout_expires_and_is_logged(tmp_path: Path, procs: list[NodeProc]) -> None:
    cfg, port = _config(tmp_path, {"listen": "127.0.0.1", "connect": "127.0.0.1", "timeout": "1 sec"})
    b = _node(tmp_path, cfg, "B", "connect")
    procs.append(b)
    t0 = time.monotonic()
    b.wait_for(rf"link_ab connect timeout 1s expired, stopped trying 127.0.0.1:{port}", 10)
    assert time.monotonic() - t0 < 8
    a = _node(tmp_path, cfg, "A", "listen")
    procs.append(a)
    a.listening()
    time.sleep(2.0)  # the connector has stopped: no link
    assert not any("uids authenticated" in line and "1 uids" in line for line in a.lines)


def test_tcp_timeout_is_the_default(tmp_path: Path, procs: list[NodeProc]) -> None:
    cfg, _ = _config(tmp_path, {"listen": "127.0.0.1", "connect": "127.0.0.1"}, {"tcp_timeout": "1 sec"})
    b = _node(tmp_path, cfg, "B", "connect")
    procs.append(b)
    b.wait_for(r"link_ab connect timeout 1s expired", 10)


def test_listen_defaults_to_every_address(tmp_path: Path, procs: list[NodeProc]) -> None:
    cfg, port = _config(tmp_path, {"connect": "localhost"})
    a = _node(tmp_path, cfg, "A", "listen")
    procs.append(a)
    bound = a.listening()
    assert any(addr in (f"0.0.0.0:{port}", f"[::]:{port}") for addr in bound), bound
    b = _node(tmp_path, cfg, "B", "connect")
    procs.append(b)
    a.wait_for(CONVERGED.format(n=1), 20)


@pytest.mark.parametrize("stamp", ["GMT", "LOCAL"])
def test_timestamp_gmt_stamps_log_lines_in_utc(tmp_path: Path, procs: list[NodeProc],
                                                monkeypatch: pytest.MonkeyPatch, stamp: str) -> None:
    monkeypatch.setenv("TZ", "XYZ-9")  # local time 9 hours ahead of UTC
    cfg, _ = _config(tmp_path, {"listen": "127.0.0.1"}, {"timestamp": stamp})
    a = _node(tmp_path, cfg, "A", "listen")
    procs.append(a)
    line = a.wait_for(r"^(\d\d):\d\d:\d\d\.\d{3}  listening on 127", 10).group(1)
    utc = time.gmtime().tm_hour
    want = utc if stamp == "GMT" else (utc + 9) % 24
    assert int(line) in (want, (want - 1) % 24), (line, stamp)
    _, rows = get_json(web_addr(a), "show log")
    assert isinstance(rows, list)
    shown = [m for r in rows if (m := re.search(r"(\d\d):\d\d:\d\d\.\d{3}  listening on 127", str(r)))]
    assert shown and int(shown[0].group(1)) in (want, (want - 1) % 24), rows


def test_edge_listener_pools_its_links_on_one_port(tmp_path: Path, procs: list[NodeProc]) -> None:
    cfg, _ = graph_config(tmp_path, "node A B C\ntcp_link_ab A B : 100\ntcp_link_bc B C : 100\n")
    data = yaml.safe_load(cfg.read_text())
    port = free_port()
    link = next(t for t in data["transports"] if t["tport"] == "link_ab")
    link["route"] = {"listen": "127.0.0.1", "connect": "127.0.0.1", "port": port, "edge": True}
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))
    a = _node(tmp_path, cfg, "A", "listen")
    procs.append(a)
    a.listening()
    for user in "BC":  # two peers at the edge dial the same listener
        procs.append(_node(tmp_path, cfg, user, "connect"))
    a.wait_for(CONVERGED.format(n=2), 20)
    _, rows = get_json(web_addr(a), "show ports")
    assert isinstance(rows, list)
    ports = [r for r in rows if str(r["tport"]).startswith("link_ab.")]
    assert len(ports) == 1 and ports[0]["conns"] == 2, ports


@pytest.mark.parametrize(("param", "want"), [("tcp_ipv4only", "0.0.0.0:"), ("tcp_ipv6only", "[::]:")])
def test_ip_family_parameters_choose_the_wildcard_bind(tmp_path: Path, procs: list[NodeProc],
                                                       param: str, want: str) -> None:
    if param == "tcp_ipv6only" and not socket.has_ipv6:
        pytest.skip("no IPv6 here")
    cfg, port = _config(tmp_path, {"connect": "localhost"}, {param: True})
    a = _node(tmp_path, cfg, "A", "listen")
    procs.append(a)
    link = [addr for addr in a.listening() if addr.endswith(f":{port}")]
    assert link == [f"{want}{port}"], link


def test_console_connect_rejoins_after_the_timeout(tmp_path: Path, procs: list[NodeProc]) -> None:
    from tests.integration.test_console_telnet import TelnetClient

    cfg, port = _config(tmp_path, {"listen": "127.0.0.1", "connect": "127.0.0.1", "timeout": "1 sec"})
    add_transports(cfg, TELNET_TPORT)
    b = NodeProc("B", ["-d", str(cfg), "-u", "B", "-t", "link_ab.connect", "tel.listen"], tmp_path)
    procs.append(b)
    b.wait_for(r"link_ab connect timeout 1s expired", 10)
    tel = int(b.wait_for(r"telnet listening on [\d.]+:(\d+)").group(1))
    a = _node(tmp_path, cfg, "A", "listen")
    procs.append(a)
    a.listening()
    t = TelnetClient(tel)
    t.read_until_prompt()
    t.command("connect link_ab")
    a.wait_for(CONVERGED.format(n=1), 20)
    t.sock.close()
