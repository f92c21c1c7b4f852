"""nats-server 2.9.10's monitoring endpoints and a raims node's, side by side: the same
nats-py clients and raw connections on both, then the endpoints' key sets and the values
that must agree (counts, close reasons, sorts, subscription details, HTTP behaviour).
The kept differences are nats_monitor.py's docstring's."""

from __future__ import annotations

import asyncio
import json
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.msg import Msg

from raims_node.config.test_adj import free_port
from tests.integration.nats_diff import NatsServer
from tests.integration.test_bridges_net import BridgeNet, start_network
from tests.integration.test_nats_monitor import MONITORED, _monitor_url

ONLY_NATS_SERVER = {"system_account"}  # raims has no system account (varz omits it then)
Side = tuple[int, str]  # client port, monitor url


def _http(url: str, method: str = "GET") -> tuple[int, str, bytes]:
    req = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), exc.read()


async def _get(url: str) -> Any:
    status, _, body = await asyncio.to_thread(_http, url)
    assert status == 200, (url, body)
    return json.loads(body)


@pytest.fixture
def sides(tmp_path: Path) -> Iterator[tuple[Side, Side]]:
    mport = free_port()
    (tmp_path / "ref").mkdir()
    try:
        ref = NatsServer(tmp_path / "ref", f"http: 127.0.0.1:{mport}")
    except FileNotFoundError:
        pytest.skip("nats-server is not installed")
    try:
        net: BridgeNet = start_network(tmp_path, "node A\n", [MONITORED])
        try:
            yield (ref.port, f"http://127.0.0.1:{mport}"), (net.port("A", "natsmon"), _monitor_url(net, "A"))
        finally:
            net.stop()
    finally:
        ref.stop()


async def _closed_count(url: str, n: int) -> None:
    for _ in range(200):
        if (await _get(url + "/connz?state=closed"))["total"] >= n:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{url}: fewer than {n} closed connections")


async def _raw(port: int, script: bytes) -> None:
    def run() -> None:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.recv(4096)
            s.sendall(script)
            s.settimeout(2)
            try:
                while s.recv(4096):
                    pass
            except OSError:
                pass
    await asyncio.to_thread(run)


async def _scenario(side: Side) -> tuple[int, nats.NATS, nats.NATS]:
    """The client actions; a and b stay open, four connections end one after another.
    Also the connections closed before (the harness's readiness probe of nats-server)."""
    port, url = side
    before = (await _get(url + "/connz?state=closed"))["total"]
    a = await nats.connect(f"nats://127.0.0.1:{port}", name="a")
    b = await nats.connect(f"nats://127.0.0.1:{port}", name="b")
    await a.subscribe("foo.bar")
    await a.subscribe("foo.*", queue="q")
    lim = await a.subscribe("lim")
    await lim.unsubscribe(limit=5)

    async def respond(msg: Msg) -> None:
        await msg.respond(b"ok")

    await b.subscribe("svc", cb=respond)
    await a.flush()
    await b.flush()
    for _ in range(3):
        await b.publish("foo.bar", b"hello")
    await a.request("svc", b"x", timeout=5)
    await a.flush()
    await b.flush()
    c = await nats.connect(f"nats://127.0.0.1:{port}", name="c")
    await c.subscribe("c.sub")
    await c.publish("foo.bar", b"12345")
    await c.flush()
    await c.close()
    await _closed_count(url, before + 1)
    for n, script in enumerate((b'CONNECT {"verbose":false}\r\nPUB x 2000000\r\n', b"CONNECT {}\r\nFOO\r\n",
                                b'CONNECT {"protocol":2}\r\n'), start=2):
        await _raw(port, script)
        await _closed_count(url, before + n)
    await a.flush()
    await b.flush()
    return before, a, b


def _by_name(conns: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {c.get("name", c.get("reason", "")): c for c in conns}


def _inbox(subject: str) -> str:
    return "_INBOX.*" if subject.startswith("_INBOX.") else subject  # nats-py's random inbox


COUNTS = ("in_msgs", "out_msgs", "in_bytes", "out_bytes", "subscriptions")
BAD_QUERIES = ("/connz?sort=foo", "/connz?sort=rtt", "/connz?state=weird", "/connz?cid=abc", "/connz?sort=stop",
               "/connz?state=any&sort=reason", "/connz?subs=yes", "/connz?offset=x", "/connz?auth=2",
               "/subsz?test=a.*", "/subsz?subs=maybe", "/subsz?limit=1.5", "/nope", "/varz/")


async def test_monitoring_endpoints_answer_as_nats_server(sides: tuple[Side, Side]) -> None:
    """Before: /connz had no closed connections (state=closed listed none), no kind,
    type, last_activity, rtt, idle, authorized_user or subscription details, accepted
    sort=rtt and sorted uptime oldest first; /subsz had no list and always its server
    fields; /varz lacked max_connections, ping_interval, mem, cpu, http_req_stats ...;
    the 400 texts differed and JSONP, Go's 404 and other methods than GET were not served."""
    (ref_port, ref), (our_port, ours) = sides
    ref_before, *clients = await _scenario((ref_port, ref))
    our_before, *more = await _scenario((our_port, ours))
    clients += more
    try:
        got: dict[str, list[Any]] = {}
        for query in ("/connz?subs=detail&auth=1", "/connz?state=closed&sort=stop&subs=1&limit=4",
                      "/connz?state=closed&sort=reason", "/connz?state=any", "/connz?sort=uptime",
                      "/connz?sort=msgs_from", "/connz?state=closed&sort=stop&limit=2&offset=1",
                      "/connz?state=closed&cid=999999", "/connz?acc=other", "/connz?mqtt_client=x",
                      "/subsz", "/subsz?subs=1&test=foo.bar", "/subsz?subs=1&test=nomatch.zz", "/healthz",
                      "/varz"):
            got[query] = [await _get(ref + query), await _get(ours + query)]
        for query, (theirs, mine) in got.items():
            assert set(theirs) - ONLY_NATS_SERVER == set(mine), query
        theirs, mine = got["/connz?subs=detail&auth=1"]
        t, m = _by_name(theirs["connections"]), _by_name(mine["connections"])
        assert set(t) == set(m) == {"a", "b"}
        for name in t:
            assert set(t[name]) == set(m[name]), name
            assert [t[name][k] for k in COUNTS] == [m[name][k] for k in COUNTS], name
            detail = [sorted((_inbox(d["subject"]), d.get("qgroup"), d["sid"], d["msgs"], d.get("max"), tuple(sorted(d)))
                             for d in side[name]["subscriptions_list_detail"]) for side in (t, m)]
            assert detail[0] == detail[1]
            assert m[name]["kind"] == "Client" and m[name]["rtt"].endswith("s")
        theirs, mine = got["/connz?state=closed&sort=stop&subs=1&limit=4"]  # the scenario's, newest first
        assert [c["reason"] for c in theirs["connections"]] == [c["reason"] for c in mine["connections"]] == [
            "Bad Client Protocol Version", "Protocol Violation", "Maximum Message Payload Exceeded", "Client Closed"]
        for tc, mc in zip(theirs["connections"], mine["connections"], strict=True):
            assert set(tc) == set(mc) and [tc[k] for k in COUNTS] == [mc[k] for k in COUNTS], (tc, mc)
        by_reason = [c["reason"] for c in got["/connz?state=closed&sort=reason"][1]["connections"]]
        assert by_reason == sorted(c["reason"] for c in theirs["connections"])
        for query in ("/connz?sort=uptime", "/connz?sort=msgs_from"):
            names = [[c["name"] for c in side["connections"]] for side in got[query]]
            assert names[0] == names[1], query
        for query in ("/connz?state=any", "/connz?state=closed&sort=stop&limit=2&offset=1",
                      "/connz?state=closed&cid=999999", "/connz?acc=other", "/connz?mqtt_client=x"):
            theirs, mine = got[query]
            if "state=" in query:
                theirs["total"] -= ref_before
                mine["total"] -= our_before
                if query == "/connz?state=any":
                    theirs["num_connections"] -= ref_before
                    mine["num_connections"] -= our_before
            assert [theirs[k] for k in ("num_connections", "total", "offset", "limit")] == \
                [mine[k] for k in ("num_connections", "total", "offset", "limit")], query
            assert (theirs["connections"] is None) == (mine["connections"] is None), query
        theirs, mine = got["/subsz?subs=1&test=foo.bar"]
        listed = [sorted(json.dumps({**d, "cid": 0}, sort_keys=True) for d in side["subscriptions_list"])
                  for side in (theirs, mine)]  # (the servers number their clients differently)
        assert listed[0] == listed[1]
        assert theirs["total"] == mine["total"] == 2
        theirs, mine = got["/varz"]
        theirs["total_connections"] -= ref_before
        for side in (theirs, mine):  # (the scenario polls /connz until the closes are seen)
            side["http_req_stats"]["/connz"] = side["http_req_stats"]["/connz"] > 0
        mine["total_connections"] -= our_before
        for key in ("connections", "total_connections", "in_msgs", "out_msgs", "in_bytes", "out_bytes",
                    "slow_consumers", "max_payload", "max_control_line", "max_pending", "ping_interval",
                    "ping_max", "http_req_stats", "http_base_path", "https_port"):
            assert theirs[key] == mine[key], key
    finally:
        for nc in clients:
            await nc.close()


async def test_http_behaviour_as_nats_server(sides: tuple[Side, Side]) -> None:
    """Go's 404 and 400 texts, JSONP, any method, compact /healthz. Before: aiohttp's
    404 and 405, other 400 texts (sort=rtt accepted), no JSONP."""
    (_, ref), (_, ours) = sides
    for path in BAD_QUERIES:
        t_status, t_type, t_body = await asyncio.to_thread(_http, ref + path)
        m_status, m_type, m_body = await asyncio.to_thread(_http, ours + path)
        assert (m_status, m_type, m_body) == (t_status, t_type, t_body), path
    for method in ("POST", "HEAD", "OPTIONS"):
        assert (await asyncio.to_thread(_http, ours + "/varz", method))[0] == 200
    for side in (ref, ours):
        status, ctype, body = await asyncio.to_thread(_http, side + "/varz?callback=cb")
        assert (status, ctype, body[:5], body[-1:]) == (200, "application/javascript", b'cb({\n', b")")
    healthz = [await asyncio.to_thread(_http, side + "/healthz") for side in (ref, ours)]
    assert healthz[0] == healthz[1]
