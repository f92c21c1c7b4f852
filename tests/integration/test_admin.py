"""The web transport on real processes: ?show JSON, /healthz, websocket pub/sub across
the A-D network, and a 5-node mesh discovered from one connect address each (issue 7)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
import yaml

from raims_node.transports.poll_stats import POLL_COLUMNS
from tests.integration.harness import (
    CONVERGED,
    MANUAL_GRAPH,
    NodeProc,
    get_json,
    graph_config,
    poll,
    wait_whole_graph,
    web_addr,
)

SHOWS = ["show peers", "show adjacency", "show routes", "show subs", "show ports", "show tree",
         "show graph", "show events", "show loss", "show counters", "show sync", "show blooms"]


@pytest.fixture(scope="module")
def abcd_web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, NodeProc]]:
    """The manual's A-B-C-D graph with web ports, shared by the module's two tests (neither
    changes the network: they read the show commands and pass messages A -> D)."""
    tmp_path = tmp_path_factory.mktemp("abcd_web")
    cfg, commands = graph_config(tmp_path, MANUAL_GRAPH, web=True)
    nodes: dict[str, NodeProc] = {}
    try:
        for command in commands:
            args = command.split()[1:] + ["web.listen"]
            args[args.index("-d") + 1] = str(cfg)
            node = NodeProc(args[args.index("-u") + 1], args, tmp_path)
            nodes[node.name] = node
            web_addr(node)
        for node in nodes.values():
            node.wait_for(CONVERGED.format(n=3), 30)
        wait_whole_graph([web_addr(n) for n in nodes.values()], MANUAL_GRAPH)
        yield nodes
    finally:
        for node in nodes.values():
            node.stop()


def test_show_commands_as_json_and_health(abcd_web: dict[str, NodeProc]) -> None:
    addrs = {name: web_addr(n) for name, n in abcd_web.items()}
    status, body = get_json(addrs["A"], "")
    assert status == 200 and body["converged"] is True and body["peers"] == 3  # type: ignore[index]
    for query in SHOWS:
        status, rows = get_json(addrs["A"], query)
        assert status == 200 and isinstance(rows, list), query
    adjacency = {}
    for name, addr in addrs.items():
        _, rows = get_json(addr, "show adjacency")
        adjacency[name] = sorted((r["user"].split(".")[0], r["adj"].split(".")[0], r["cost"]) for r in rows)  # type: ignore[index, union-attr]
    assert all(v == adjacency["A"] for v in adjacency.values())  # every node's LSDB view agrees
    assert len(adjacency["A"]) == 10
    for user, adj, cost in adjacency["A"]:
        assert (adj, user, cost) in adjacency["A"]  # consistent: listed by both ends
    _, routes = get_json(addrs["A"], "show routes")
    d_routes = [r for r in routes if r["user"] and r["user"].startswith("D")]  # type: ignore[index, union-attr]
    assert d_routes[0]["cost"] == 400 and d_routes[0]["tport"].startswith("link_ab")  # type: ignore[index]
    # the manual's route: the neighbour that way and its address at the other end of the link
    assert re.fullmatch(r"B\.\d+@tcp://127\.0\.0\.1:\d+", str(d_routes[0]["route"])), d_routes[0]  # type: ignore[index]
    get_json(addrs["A"], "ping")  # every peer's latency measured
    _, ports = get_json(addrs["A"], "show ports")
    links = [r for r in ports if r["type"] == "tcp" and r["conns"]]  # type: ignore[index, union-attr]
    assert links and all(isinstance(r["lat"], int) and r["lat"] > 0 for r in links), links  # type: ignore[index]
    assert all(isinstance(r["idle"], int) and 0 <= r["idle"] < 30 * 10**9 for r in links), links  # type: ignore[index]
    status, err = get_json(addrs["A"], "show nosuchthing")
    assert status == 400 and "error" in err  # type: ignore[operator]


async def _ws_pubsub(pub_addr: str, sub_addr: str) -> list[dict[str, object]]:
    async with aiohttp.ClientSession() as http, http.ws_connect(f"http://{sub_addr}/ws") as sub, \
            http.ws_connect(f"http://{pub_addr}/ws") as pub:
        await sub.send_json({"sub": "RSF.IBM.N"})
        assert (await sub.receive_json(timeout=5)) == {"ok": True}
        got: list[dict[str, object]] = []
        for attempt in range(50):  # until D's subscription reached A (bounded)
            await pub.send_json({"pub": "RSF.IBM.N", "data": f"probe {attempt}"})
            await pub.receive_json(timeout=5)
            try:
                got.append(await sub.receive_json(timeout=0.2))
                break
            except TimeoutError:
                continue
        for i in range(20):
            await pub.send_json({"pub": "RSF.IBM.N", "data": f"m{i}"})
            await pub.receive_json(timeout=5)
        while sum(1 for m in got if not str(m["data"]).startswith("probe")) < 20:
            got.append(await sub.receive_json(timeout=5))
        return got


async def _ws_origin(addr: str, origin: str) -> int:
    """The status of a websocket handshake a browser page at `origin` would make."""
    async with aiohttp.ClientSession() as http:
        try:
            async with http.ws_connect(f"http://{addr}/ws", origin=origin):
                return 101
        except aiohttp.WSServerHandshakeError as exc:
            return exc.status


def test_publish_at_a_reaches_a_subscriber_at_d(abcd_web: dict[str, NodeProc]) -> None:
    addr = web_addr(abcd_web["A"])
    assert asyncio.run(_ws_origin(addr, "http://evil.example")) == 403  # another site's page
    assert asyncio.run(_ws_origin(addr, f"http://{addr}")) == 101  # the node's own pages
    got = asyncio.run(_ws_pubsub(web_addr(abcd_web["A"]), web_addr(abcd_web["D"])))
    # a probe may come after its 0.2 s wait: right after a link change, the first frame of
    # a stream seen without its start waits for it (router/reorder.py)
    assert [m["data"] for m in got if not str(m["data"]).startswith("probe")] == [f"m{i}" for i in range(20)]
    assert all(m["subject"] == "RSF.IBM.N" and m["loss"] == 0 for m in got)
    _, rows = get_json(web_addr(abcd_web["B"]), "show poll")  # B routed them, with the heartbeats
    [row] = rows  # type: ignore[misc]
    assert list(row) == POLL_COLUMNS
    assert min(row[k] for k in ("timer_cnt", "read_cnt", "route_cnt", "write_cnt")) > 21, row
    assert isinstance(row["timer_lat"], int) and isinstance(row["route_lat"], int), row  # ns
    assert row["rd_lo"] <= row["read_cnt"], row


def _own_links(addr: str) -> int:
    _, rows = get_json(addr, "show adjacency")
    return sum(1 for r in rows if r["user"].endswith(".*"))  # type: ignore[index, union-attr]


def test_five_node_mesh_from_one_connect_address_each(tmp_path: Path) -> None:
    cfg, _ = graph_config(tmp_path, "node A B C D E\ntcp_link_ab A B : 100\n", web=True)
    data = yaml.safe_load(cfg.read_text())
    data["transports"].append({"tport": "mesh", "type": "mesh",
                               "route": {"listen": "127.0.0.1", "connect": "127.0.0.1", "port": 0}})
    nodes: dict[str, NodeProc] = {}
    prev = 0
    try:
        for name in "ABCDE":  # each knows one address: the previous member's listener
            data["transports"][-1]["route"]["port"] = prev
            cfg_n = tmp_path / f"mesh_{name}.yaml"
            cfg_n.write_text(yaml.safe_dump(data))
            how = "mesh.listen" if name == "A" else "mesh.connect"
            node = NodeProc(name, ["-d", str(cfg_n), "-u", name, "-t", how, "web.listen"], tmp_path)
            nodes[name] = node
            prev = int(node.wait_for(r"listening on 127\.0\.0\.1:(\d+)", 10).group(1))
        for node in nodes.values():
            node.wait_for(CONVERGED.format(n=4), 30)
        for name, node in nodes.items():
            addr = web_addr(node)
            assert poll(lambda addr=addr: _own_links(addr) == 4, 10), name
    finally:
        for node in nodes.values():
            node.stop()
