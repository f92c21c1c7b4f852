"""Clients that connect and then send nothing, or half a handshake or request (2026-11-27,
branch half-open; DESIGN-NOTES "Client edges"). Before: on the RV and web ports they
were held for ever (500 of each: 500 descriptors, nothing logged). Now an RV client has
`tcp_auth_timeout` to complete its handshake and a web connection its transport's
`header_timeout` to complete its first request; an established RV subscriber, a kept-alive
HTTP connection and a websocket may stay idle. Deadlines of 1 s here (10 s and 20 s by
default). Real ms_server, raw sockets, the test RV client and aiohttp's."""

from __future__ import annotations

import asyncio
import os
import select
import socket
import time
from collections.abc import Iterator

import aiohttp
import pytest

from tests.integration.harness import poll
from tests.integration.rv_client import RvClient
from tests.integration.test_bridges_net import WEB, BridgeNet, start_network

DEADLINE_S = 1.0
RV = {"tport": "rv", "type": "rv", "route": {"port": 0}}
WEB_DEADLINE = {**WEB, "route": {**WEB["route"], "header_timeout": f"{DEADLINE_S:g} secs"}}


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BridgeNet]:
    n = start_network(tmp_path_factory.mktemp("half_open"), "node A\n", extra=[RV, WEB_DEADLINE],
                      params={"tcp_auth_timeout": f"{DEADLINE_S:g} secs"})
    yield n
    n.stop()


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _all_closed(socks: list[socket.socket], timeout: float) -> float:
    """Seconds until the node closed every socket of `socks` (whatever it sent before);
    AssertionError past `timeout`."""
    t0 = time.monotonic()
    open_ = set(socks)
    while open_:
        left = t0 + timeout - time.monotonic()
        assert left > 0, f"{len(open_)} of {len(socks)} connections still open after {timeout:g} s"
        ready, _, _ = select.select(list(open_), [], [], left)
        for s in ready:
            try:
                if s.recv(65536):
                    continue
            except ConnectionError:
                pass
            open_.discard(s)
    return time.monotonic() - t0


def _connect(port: int, data: bytes = b"") -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    if data:
        s.sendall(data)
    return s


def test_a_half_open_rv_client_is_closed_an_idle_subscriber_is_not(net: BridgeNet) -> None:
    node = net.nodes["A"]
    port = net.port("A", "rv")
    start = len(node.lines)

    async def run() -> None:
        sub = await RvClient.connect(port)  # established: it may be idle as long as it likes
        await sub.listen("HALF.OPEN")
        fds = _fds(node.proc.pid)
        silent = [_connect(port) for _ in range(20)]  # connected, nothing sent
        partial = [_connect(port, bytes(12)) for _ in range(20)]  # a version record, no more
        took = _all_closed(silent + partial, 10 * DEADLINE_S)
        assert DEADLINE_S * 0.8 <= took < DEADLINE_S + 5, took
        assert poll(lambda: _fds(node.proc.pid) <= fds, 5), "their descriptors were not released"
        for s in silent + partial:
            s.close()
        await asyncio.sleep(DEADLINE_S)  # the subscriber is now idle well past the deadline
        pub = await RvClient.connect(port)
        await pub.publish("HALF.OPEN", b"still here")
        m = await sub.next(5, "HALF.OPEN")
        assert m.data == b"still here"
        await pub.close()
        await sub.close()

    asyncio.run(run())
    node.wait_for(r"rv client \d+ closed: no handshake within tcp_auth_timeout 1 s", 5, after=start)
    lines = [line for line in node.lines[start:] if "no handshake within" in line]
    assert len(lines) <= 5, "the deadline closes were not rate-limited"
    assert node.new_traceback() is None


def test_a_partial_http_request_is_closed_a_request_and_a_websocket_are_not(net: BridgeNet) -> None:
    node = net.nodes["A"]
    port = net.port("A", "web")
    start = len(node.lines)

    async def run() -> None:
        async with aiohttp.ClientSession() as http, http.ws_connect(f"http://127.0.0.1:{port}/ws") as ws:
            kept = _connect(port, b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n")  # served, then idle
            assert kept.recv(65536).startswith(b"HTTP/1.1 200")
            partial = [_connect(port, b"GET /healthz HTTP/1.1\r\nHost: a\r\n") for _ in range(20)]
            silent = [_connect(port) for _ in range(20)]
            took = _all_closed(partial + silent, 10 * DEADLINE_S)
            assert DEADLINE_S * 0.8 <= took < DEADLINE_S + 5, took
            for s in partial + silent:
                s.close()
            await asyncio.sleep(DEADLINE_S)
            await ws.send_json({"sub": "HALF.WS"})  # the websocket, open past the deadline, still served
            assert (await ws.receive_json(timeout=5)) == {"ok": True}
            kept.sendall(b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n")  # the kept-alive connection too
            kept.settimeout(5)
            answer = b""
            while b"raims_web_header_timeouts_total" not in answer:
                chunk = kept.recv(65536)
                assert chunk, "the kept-alive connection was closed"
                answer += chunk
            kept.close()
            assert answer.startswith(b"HTTP/1.1 200")
            counted = next(line for line in answer.decode().splitlines()
                           if line.startswith("raims_web_header_timeouts_total"))
            assert counted.endswith(" 40"), counted
            async with http.get(f"http://127.0.0.1:{port}/healthz") as r:  # a new request
                assert r.status == 200

    asyncio.run(run())
    node.wait_for(r"web: closed a connection from 127\.0\.0\.1 without a complete request within "
                  r"header_timeout 1 s", 5, after=start)
    assert sum("without a complete request" in line for line in node.lines[start:]) <= 5
    assert node.new_traceback() is None

