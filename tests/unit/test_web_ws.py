"""A websocket subscriber that stops reading is cut as a slow consumer by the bytes it
has not taken; one that reads gets every delivery in order. A websocket's requests and
its backlog's sends give the loop back after a few ms (2026-11-27, edge-measure)."""

from __future__ import annotations

import asyncio
import json
import time
from types import SimpleNamespace

import pytest
from aiohttp import WSMessage, WSMsgType, web

from raims_node.router.actions import Deliver
from raims_node.web.admin import WS_BACKLOG_BYTES, WebAdmin, _WsClient


class Socket:
    """A websocket whose sends complete only while `gate` is set (a peer that reads)."""

    def __init__(self, reading: bool) -> None:
        self.closed = False
        self.sent: list[str] = []
        self.gate = asyncio.Event()
        if reading:
            self.gate.set()

    async def send_str(self, text: str) -> None:
        await self.gate.wait()
        self.sent.append(text)


def _deliver(payload: bytes) -> Deliver:
    return Deliver(object(), "s", "subj", None, payload, bytes(16))


def test_a_websocket_that_stops_reading_is_cut_by_bytes_and_its_backlog_dropped() -> None:
    async def run() -> None:
        ws, aborted = Socket(reading=False), []
        client = _WsClient(ws, lambda: aborted.append(True))  # type: ignore[arg-type]
        big = _deliver(b"x" * 100_000)
        n = 0
        while not client.cut:
            client.on_deliver(big)
            n += 1
            await asyncio.sleep(0)
            assert n < 200
        assert aborted == [True] and n * 100_000 > WS_BACKLOG_BYTES >= (n - 2) * 100_000
        assert client.backlog == 0 and not client.queue
        client.on_deliver(big)  # after the cut: nothing queued
        assert not client.queue and ws.sent == []

    asyncio.run(run())


def test_a_reading_websocket_gets_every_delivery_in_order() -> None:
    async def run() -> None:
        ws = Socket(reading=True)
        client = _WsClient(ws, lambda: None)  # type: ignore[arg-type]
        for i in range(1000):
            client.on_deliver(_deliver(b"%d" % i))
        for _ in range(10):
            await asyncio.sleep(0)
        assert [json.loads(t)["data"] for t in ws.sent] == [str(i) for i in range(1000)]
        assert client.backlog == 0 and not client.cut

    asyncio.run(run())


def test_another_nodes_nats_503_status_is_no_reply_to_a_websocket_request() -> None:
    """A /ws client that publishes with an `_INBOX.` reply and listens on it: a node's
    NATS 503 (router/no_responders.py) is not an answer it can tell from an empty one,
    so it is not delivered (before: {"data": ""} arrived as the request's reply)."""
    from raims_node.router.no_responders import STATUS_503

    async def run() -> None:
        ws = Socket(reading=True)
        client = _WsClient(ws, lambda: None)  # type: ignore[arg-type]
        client.on_deliver(Deliver(object(), "s", "_INBOX.x", None, b"", bytes(16), headers=STATUS_503))
        client.on_deliver(_deliver(b"answer"))
        for _ in range(10):
            await asyncio.sleep(0)
        assert [json.loads(t)["data"] for t in ws.sent] == ["answer"]

    asyncio.run(run())


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class SlowSocket(Socket):
    """A reading peer whose every send costs COST_S of the loop's time."""

    async def send_str(self, text: str) -> None:
        _busy(COST_S)
        self.sent.append(text)


COST_S = 0.001  # what one request or send costs here (a busy wait)


def test_a_websocket_backlog_is_sent_a_few_ms_a_turn() -> None:
    """A send that needs no drain gives the loop no turn: the writer sent a subscriber's
    whole backlog (up to 8 MiB of small messages) in one turn."""
    async def run() -> None:
        ws = SlowSocket(reading=True)
        client = _WsClient(ws, lambda: None)  # type: ignore[arg-type]
        for i in range(100):
            client.on_deliver(_deliver(b"%d" % i))
        await asyncio.sleep(0)  # one turn of the writer
        assert len(ws.sent) < 20, f"{len(ws.sent)} sends ({len(ws.sent) * COST_S * 1e3:.0f} ms) in one turn"
        while client.queue or client._writer is not None:
            await asyncio.sleep(0)
        assert [json.loads(t)["data"] for t in ws.sent] == [str(i) for i in range(100)]

    asyncio.run(run())


class QueuedRequests:
    """aiohttp's WebSocketResponse with `n` requests already received (aiohttp returns
    queued messages without a loop turn); each acknowledgement sent at once."""

    def __init__(self, n: int) -> None:
        self.closed = False
        self.messages = [WSMessage(WSMsgType.TEXT, json.dumps({"pub": "S", "data": str(i)}), None) for i in range(n)]
        self.acks = 0

    def __call__(self, **kwargs: object) -> QueuedRequests:  # as web.WebSocketResponse(...)
        return self

    async def prepare(self, request: object) -> None:
        pass

    def __aiter__(self) -> QueuedRequests:
        return self

    async def __anext__(self) -> WSMessage:
        if not self.messages:
            raise StopAsyncIteration
        return self.messages.pop(0)

    async def send_json(self, obj: object) -> None:
        self.acks += 1


def test_a_websockets_queued_requests_give_the_loop_back_after_a_few_ms(monkeypatch: pytest.MonkeyPatch) -> None:
    """A flood of small `pub`s on one websocket held every other client of the node
    170-440 ms a turn (its PING round trip): the handler ran every request aiohttp had
    queued before the loop got a turn."""
    published: list[bytes] = []

    def publish(subject: str, payload: bytes, reply: object = None) -> None:
        _busy(COST_S)
        published.append(payload)

    ws = QueuedRequests(100)
    monkeypatch.setattr(web, "WebSocketResponse", ws)
    admin = WebAdmin.__new__(WebAdmin)
    admin.daemon = SimpleNamespace(publish=publish, drop_owner=lambda client: None,  # type: ignore[assignment]
                                   tree=SimpleNamespace(parameters=SimpleNamespace(size=lambda name: 1 << 20)))
    request = SimpleNamespace(headers={}, host="127.0.0.1", transport=None)

    async def run() -> None:
        at_first_turn: list[int] = []

        async def other_client() -> None:
            at_first_turn.append(len(published))

        other = asyncio.ensure_future(other_client())
        await admin.websocket(request)  # type: ignore[arg-type]
        await other
        assert len(published) == ws.acks == 100
        assert at_first_turn[0] < 20, f"the loop waited for {at_first_turn[0]} requests ({at_first_turn[0]} ms)"

    asyncio.run(run())
