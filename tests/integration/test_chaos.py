"""Chaos on the manual's A-D graph (issue 18): every link runs through a proxy that
delays, cuts, truncates and corrupts bytes while A and B publish. The nodes must not
crash, must reject the corrupted frames (MAC, hello digest, stream checks) and count
them, must reconverge once the faults stop, and then deliver every subject's
messages in order; the messages lost during the faults are reported to the
subscriber by the sequence windows (the `loss` of the next message delivered)."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from tests.integration.faultproxy import FaultProxy
from tests.integration.harness import (
    CONVERGED,
    MANUAL_GRAPH,
    NodeProc,
    get_json,
    graph_config,
    wait_whole_graph,
    web_addr,
)
from tests.integration.test_admin import _own_links

pytestmark = pytest.mark.slow

SUBJECTS = {"A": ["chaos.a.0", "chaos.a.1"], "B": ["chaos.b.0", "chaos.b.1"]}
SUBSCRIBERS = ("C", "D")
FAULT_S = 10.0
TAIL = 150  # messages per subject after recovery, every one must arrive
ROUND_S = 0.01
LINKS = MANUAL_GRAPH.count("tcp_link")


@pytest.fixture
def chaos_net(tmp_path: Path) -> Iterator[tuple[dict[str, NodeProc], list[FaultProxy]]]:
    cfg, commands = graph_config(tmp_path, MANUAL_GRAPH, web=True)
    data = yaml.safe_load(cfg.read_text())
    proxies: list[FaultProxy] = []
    nodes: dict[str, NodeProc] = {}
    try:
        for i, t in enumerate(data["transports"]):
            if t["type"] == "tcp":  # the connector dials the proxy, which dials the listener
                proxy = FaultProxy(int(t["route"]["port"]), seed=100 + i)
                proxies.append(proxy)
                t["route"]["connect"] = f"127.0.0.1:{proxy.start()}"
        cfg.write_text(yaml.safe_dump(data, sort_keys=False))
        for command in commands:
            args = command.split()[1:] + ["web.listen"]
            args[args.index("-d") + 1] = str(cfg)
            node = NodeProc(args[args.index("-u") + 1], args, tmp_path)
            nodes[node.name] = node
            web_addr(node)
        for node in nodes.values():
            node.wait_for(CONVERGED.format(n=3), 30)
        wait_whole_graph([web_addr(n) for n in nodes.values()], MANUAL_GRAPH)
        yield nodes, proxies
    finally:
        for node in nodes.values():
            node.stop()
        for proxy in proxies:
            proxy.stop()


class Run:
    def __init__(self) -> None:
        self.next = {s: 0 for subs in SUBJECTS.values() for s in subs}  # next index to publish
        self.got: dict[str, dict[str, list[tuple[int, int]]]] = {n: {s: [] for s in self.next} for n in SUBSCRIBERS}
        self.publishing = True


async def _subscriber(ws: aiohttp.ClientWebSocketResponse, name: str, run: Run) -> None:
    async for msg in ws:
        if msg.type != aiohttp.WSMsgType.TEXT:
            break
        m = msg.json()
        if "subject" in m and m["subject"] in run.got[name]:
            run.got[name][m["subject"]].append((int(m["data"]), int(m["loss"])))


async def _publisher(ws: aiohttp.ClientWebSocketResponse, subjects: list[str], run: Run) -> None:
    while run.publishing:
        for s in subjects:
            await ws.send_json({"pub": s, "data": str(run.next[s])})
            await ws.receive_json(timeout=10)  # the node's "ok"
            run.next[s] += 1
        await asyncio.sleep(ROUND_S)


def _converged(addrs: dict[str, str]) -> bool:
    """Every node converged with every link of the graph up again (a link still in its
    reconnect back-off would change the routes under the tail)."""
    return all(get_json(a, "")[0] == 200 for a in addrs.values()) and \
        sum(_own_links(a) for a in addrs.values()) == 2 * LINKS


async def _until(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        await asyncio.sleep(0.1)


async def _scenario(addrs: dict[str, str], proxies: list[FaultProxy], run: Run) -> dict[str, Any]:
    rng = random.Random(18)
    async with aiohttp.ClientSession() as http:
        subs = {n: await http.ws_connect(f"http://{addrs[n]}/ws") for n in SUBSCRIBERS}
        for ws in subs.values():
            for s in run.next:
                await ws.send_json({"sub": s})
                assert (await ws.receive_json(timeout=5)) == {"ok": True}
        readers = [asyncio.create_task(_subscriber(ws, n, run)) for n, ws in subs.items()]
        pubs = {n: await http.ws_connect(f"http://{addrs[n]}/ws") for n in SUBJECTS}
        writers = [asyncio.create_task(_publisher(pubs[n], SUBJECTS[n], run)) for n in SUBJECTS]
        # every subscriber hears every subject before the faults start
        await _until(lambda: all(run.got[n][s] for n in SUBSCRIBERS for s in run.next), 20, "interest")
        for p in proxies:
            p.faults.delay_s, p.faults.corrupt_p, p.faults.truncate_p = 0.002, 0.02, 0.01
        t_end = time.monotonic() + FAULT_S
        while time.monotonic() < t_end:  # and now and then a link reset
            await asyncio.sleep(rng.uniform(0.5, 1.5))
            await asyncio.to_thread(rng.choice(proxies).cut)
        for p in proxies:
            p.faults.delay_s, p.faults.corrupt_p, p.faults.truncate_p = 0.0, 0.0, 0.0
        t_clean = time.monotonic()
        await _until(lambda: _converged(addrs), 45, "reconvergence")
        reconverged_s = time.monotonic() - t_clean
        # the tail: from a point every subscriber hears every subject again, TAIL more each
        mark = dict(run.next)
        await _until(lambda: all(run.got[n][s] and run.got[n][s][-1][0] >= mark[s]
                                 for n in SUBSCRIBERS for s in run.next), 30, "delivery after recovery")
        start = dict(run.next)
        await _until(lambda: all(run.next[s] >= start[s] + TAIL for s in run.next), 30, "tail published")
        run.publishing = False
        for w in writers:
            await w
        last = {s: run.next[s] - 1 for s in run.next}
        await _until(lambda: all(run.got[n][s] and run.got[n][s][-1][0] >= last[s]
                                 for n in SUBSCRIBERS for s in run.next), 20, "tail delivered")
        for ws in [*subs.values(), *pubs.values()]:
            await ws.close()
        for r in readers:
            r.cancel()
        return {"start": start, "reconverged_s": reconverged_s}


def test_faults_are_survived_counted_and_repaired(chaos_net: tuple[dict[str, NodeProc], list[FaultProxy]]) -> None:
    nodes, proxies = chaos_net
    addrs = {n: web_addr(p) for n, p in nodes.items()}
    run = Run()
    t0 = time.monotonic()
    result = asyncio.run(_scenario(addrs, proxies, run))
    assert time.monotonic() - t0 < 100
    for node in nodes.values():
        assert node.proc.poll() is None, f"{node.name} died:\n" + "\n".join(node.lines[-20:])
    # the faults happened, and the nodes saw and counted them
    assert sum(p.stats.corrupted for p in proxies) > 0 and sum(p.stats.cuts for p in proxies) > 0
    rejects: dict[str, int] = {}
    for a in addrs.values():
        _, rows = get_json(a, "show counters reject")
        for r in rows:  # type: ignore[union-attr]
            rejects[r["reason"]] = rejects.get(r["reason"], 0) + r["count"]  # type: ignore[index]
    closed = sum(1 for n in nodes.values() for line in n.lines if "closing link" in line)
    assert rejects.get("bad_mac", 0) > 0, rejects  # a flipped byte in a frame fails its MAC
    for name in SUBSCRIBERS:
        for s, got in run.got[name].items():
            idx = [i for i, _ in got]
            assert idx == sorted(set(idx)), f"{name} {s}: out of order or repeated"
            tail = [i for i in idx if i >= result["start"][s]]
            assert tail == list(range(result["start"][s], run.next[s])), f"{name} {s}: tail incomplete"
            assert all(loss == 0 for i, loss in got if i > result["start"][s])
            # every gap is reported with the message after it
            for (prev, _), (i, loss) in zip(got, got[1:], strict=False):
                if i > prev + 1:
                    assert loss > 0, f"{name} {s}: {i - prev - 1} lost before {i}, reported {loss}"
    print(f"chaos: {sum(p.stats.corrupted for p in proxies)} corrupted, {sum(p.stats.truncated for p in proxies)} "
          f"truncated, {sum(p.stats.cuts for p in proxies)} cuts; rejects {rejects}; {closed} links closed; "
          f"reconverged in {result['reconverged_s']:.1f} s")
