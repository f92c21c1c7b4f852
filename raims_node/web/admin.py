"""The `web` transport: console commands as JSON, health, metrics and websocket pub/sub.

Implements the manual's "Web" section (seed 000): `GET /?show ports` answers the
command's rows as a JSON array, the same rows the console renders as a table.
Additions the Spark collector and tests rely on:

- `GET /healthz`: 200 with {"converged": true, ...} once the node has converged (or is
  alone), 503 otherwise.
- `GET /metrics`: Prometheus text exposition of the node's counters.
- `GET /ws`: a websocket speaking JSON: {"sub": S} / {"psub": P, "syntax": "rv"|"glob"}
  / {"unsub": S} / {"pub": S, "data": text, "reply": R}; messages arrive as
  {"subject", "data", "reply", "loss", "source"}. A `pub` whose data is over
  `max_payload` (UTF-8 bytes) gets {"error": ...}, the connection kept, as a Redis
  PUBLISH over it; a message over 4 MiB (or max_payload + 64 KiB) is closed 1009 by
  aiohttp before its payload is read (2026-11-27, edge-measure).

- HTML: `/index.html`, `/show/<command words>`, `/graph` (web/pages.py), files of
  `http_dir` overriding them with `@(show ...)` templates.
- `http_username` / `http_password` / `http_realm` / `htdigest`: HTTP digest
  authentication on everything but `/healthz` (web/digest.py).

Listens on 127.0.0.1 unless the transport says otherwise.

Slow and half-open clients (2026-11-27, half-open; aiohttp has no request-header
deadline, and its keep-alive timer defaults to 3,630 s outside `run_app`): measured
before, 500 connections that sent nothing or half a request were all held (500
descriptors, nothing logged). Now, as nginx's `client_header_timeout` (60 s), Apache's
`RequestReadTimeout header=20` and Go's `ReadHeaderTimeout`:
- a connection must complete its first request (line and headers) within the
  transport's `header_timeout` (raims's field, default HEADER_TIMEOUT_S): otherwise it
  is closed, counted (`header_timeouts`, /metrics `raims_web_header_timeouts_total`) and
  logged, rate-limited (lograte.py). A request that reached a handler counts as done.
- an idle keep-alive connection is closed after KEEPALIVE_S (aiohttp's `run_app` default
  and nginx's `keepalive_timeout`); its timer runs from the last response and only while
  no handler runs, so a later request trickled on a kept-alive connection is bounded by
  it too (not counted).
- a websocket is a handler that runs until it closes: neither deadline applies (its
  heartbeat, 30 s, finds a dead peer).

TCP keepalive (2026-11-27, keepalive): aiohttp turned SO_KEEPALIVE on with the system's
timing (Linux: 7200 s idle, 75 s interval, 9 probes: a vanished client held 2 h 11 min);
now the `tcp_keepalive` parameter's (raims_node/keepalive.py, default 300 s / 100 s / 3),
set on the listening socket, whose options an accepted socket takes on Linux (aiohttp's
protocol is the connection's from accept: no hook before its `connection_made`); 0 turns
it off (aiohttp's `tcp_keepalive` too).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote_plus

from aiohttp import WSMsgType, web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.typedefs import Handler
from aiohttp.web_protocol import RequestHandler

from raims_node.config.params import parse_time
from raims_node.config.records import TransportConfig
from raims_node.console import CommandResult, ConsoleContext, execute
from raims_node.console.session import command_of
from raims_node.keepalive import set_keepalive
from raims_node.linkstate import graph_from_db
from raims_node.lograte import RateLimitedLog
from raims_node.router.actions import Deliver
from raims_node.router.no_responders import is_no_responders
from raims_node.web.digest import DigestAuth
from raims_node.web.http_policy import cross_site, refusal
from raims_node.web.pages import (
    from_dir,
    graph_html,
    graph_nodes_html,
    index_html,
    page,
    table_html,
)
from raims_node.wire.subjects import bridge_b64

if TYPE_CHECKING:
    from raims_node.daemon import Daemon

log = logging.getLogger("raims.web")

WS_BACKLOG_BYTES = 8 * 1024 * 1024  # unsent deliveries that make a websocket a slow consumer
WS_MAX_MSG = 4 * 1024 * 1024  # aiohttp's default: a larger message is closed 1009 (max_payload's if larger)
WS_SLICE_S = 0.005  # a websocket's requests run this long before the loop is given back (glue's SLICE_S)
HEADER_TIMEOUT_S = 20.0  # to complete the first request's line and headers (`header_timeout`)
KEEPALIVE_S = 75.0  # an idle keep-alive connection


class _BadRequestLines(logging.Filter):
    """aiohttp logs a request it cannot parse (a URL over 8 KB, a bad header line) with a
    traceback on stderr; here it is one rate-limited line in the node's log (the client
    has its 400 already)."""

    def __init__(self) -> None:
        super().__init__()
        self.limited = RateLimitedLog(lambda level, text: log.log(level, "%s", text))

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            self.limited.log("web.bad_request", logging.WARNING,
                             f"web: bad request refused ({exc.code}): {str(exc.message).splitlines()[0][:120]}")
            return False
        return True


logging.getLogger("aiohttp.server").addFilter(_BadRequestLines())


class WebAdmin:
    def __init__(self, daemon: Daemon, cfg: TransportConfig | None = None) -> None:
        self.daemon = daemon
        route = cfg.route if cfg is not None else {}
        base = getattr(daemon.tree, "base_dir", None)
        self.auth = DigestAuth.from_route(route, base)
        self.http_dir = Path(str(route["http_dir"])) if route.get("http_dir") else None
        self.header_timeout_s = parse_time(route.get("header_timeout", HEADER_TIMEOUT_S))
        self.header_timeouts = 0
        # connections in their header deadline (no request yet), each with its timer
        self._waiting: dict[RequestHandler, asyncio.TimerHandle] = {}
        self._deadline_log = RateLimitedLog(lambda level, text: log.log(level, "%s", text))
        self._flush_due = False
        self.app = web.Application(middlewares=[self._mark_served, *([self.auth.middleware] if self.auth else [])])
        self.app.router.add_get("/", self.command)
        self.app.router.add_get("/healthz", self.healthz)
        self.app.router.add_get("/metrics", self.metrics)
        self.app.router.add_get("/ws", self.websocket)
        self.app.router.add_get("/graph", self.graph)
        self.app.router.add_get("/show/{words:.*}", self.show_page)
        self.app.router.add_get("/{name:[^/]+}", self.file_page)
        self.runner: web.AppRunner | None = None
        self.listener: asyncio.AbstractServer | None = None
        self.bound: list[str] = []
        self.sockets: list[object] = []  # the listening sockets (show fds)

    def context(self) -> ConsoleContext:
        return self.daemon.console_context()

    async def start(self, host: str, port: int) -> list[str]:
        tcp_keepalive = self.daemon.tree.parameters.time("tcp_keepalive")
        self.runner = web.AppRunner(self.app, access_log=None, keepalive_timeout=KEEPALIVE_S,
                                    tcp_keepalive=tcp_keepalive > 0)
        await self.runner.setup()
        loop = asyncio.get_running_loop()
        self.listener = await loop.create_server(self._connection, host, port, reuse_address=True)
        self.sockets = list(self.listener.sockets)  # show fds
        for sock in self.listener.sockets:
            set_keepalive(sock, tcp_keepalive)  # what its accepted sockets start with (docstring)
            name = sock.getsockname()
            self.bound.append(f"{name[0]}:{name[1]}")
        return self.bound

    def _connection(self) -> asyncio.BaseProtocol:
        """aiohttp's protocol for a new connection, its header deadline started (and
        cancelled when it completes a request or closes: class _Watched)."""
        assert self.runner is not None and self.runner.server is not None
        handler = self.runner.server()
        self._waiting[handler] = asyncio.get_running_loop().call_later(
            self.header_timeout_s, self._header_due, handler)
        return _Watched(handler, self._waiting)

    def _header_due(self, handler: RequestHandler) -> None:
        if self._waiting.pop(handler, None) is None:  # it completed a request (or closed)
            return
        transport = handler.transport
        if transport is None or transport.is_closing():
            return
        self.header_timeouts += 1
        peer = transport.get_extra_info("peername")
        handler.force_close()
        limited = self._deadline_log
        if not limited.log("web.header_timeout", logging.INFO, f"web: closed a connection from "
                           f"{peer[0] if peer else '?'} without a complete request within header_timeout "
                           f"{self.header_timeout_s:g} s") and not self._flush_due:
            self._flush_due = True  # the "... and N more" line once the window ends
            asyncio.get_running_loop().call_later(limited.window_s, self._flush_deadlines)

    def _flush_deadlines(self) -> None:
        self._flush_due = False
        self._deadline_log.flush()

    @web.middleware
    async def _mark_served(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        deadline = self._waiting.pop(request.protocol, None)
        if deadline is not None:
            deadline.cancel()  # its handler is no longer held by the loop's timer
        return await handler(request)

    def connections(self) -> list[object]:
        """The open HTTP and websocket connections, each with its `transport` (show fds)."""
        server = self.runner.server if self.runner is not None else None
        return list(server.connections) if server is not None else []

    async def stop(self) -> None:
        if self.listener is not None:
            self.listener.close()
        if self.runner is not None:
            await self.runner.cleanup()

    def _html(self, name: str, builtin: str) -> web.Response:
        text = None
        if self.http_dir is not None:
            text = from_dir(self.http_dir, name, lambda line: table_html(execute(self.context(), line)))
        return web.Response(text=text if text is not None else builtin, content_type="text/html")

    async def show_page(self, request: web.Request) -> web.Response:
        words = "show " + request.match_info["words"].replace("/", " ")
        result = execute(self.context(), words)
        response = self._html(f"show_{request.match_info['words'].replace('/', '_')}.html",
                              page(words, table_html(result)))
        if result.error:  # the page says why; the status says it is no table
            response.set_status(400)
        return response

    async def graph(self, request: web.Request) -> web.Response:
        return self._html("graph.html", graph_html(self.daemon.node))

    async def file_page(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name == "index.html":
            return self._html(name, index_html(self.daemon.node))
        if name == "graph_nodes.html":
            node = self.daemon.node
            graph = request.query.get("graph") or graph_from_db(node.db, node.bridge).text()
            return self._html(name, graph_nodes_html(graph))
        text = from_dir(self.http_dir, name, None) if self.http_dir is not None else None
        if text is None:
            raise web.HTTPNotFound()
        return web.Response(text=text, content_type="text/html" if name.endswith(".html") else "text/plain")

    async def command(self, request: web.Request) -> web.Response:
        line = unquote_plus(request.query_string).strip()
        if not line:
            if "text/html" in request.headers.get("Accept", ""):
                return self._html("index.html", index_html(self.daemon.node))
            return web.json_response({"node": self.daemon.node.user, "usage": "GET /?show peers"})
        found = command_of(line.split())
        result: CommandResult | None
        refused = refusal(*found, request.headers, request.host) if found is not None else None
        if refused is not None:
            return web.json_response({"error": refused}, status=403)
        if found is not None and found[2]:
            result = await self._session_command(line)
        else:
            result = execute(self.context(), line)  # and what is no command: its error
        if result is None:
            return web.json_response([])
        if result.error:
            return web.json_response({"error": result.error}, status=400)
        return web.json_response(result.rows, dumps=_dumps)

    async def _session_command(self, line: str) -> CommandResult | None:
        """A command that acts on the network (ping, mping, pub, connect, configure, ...),
        run in a console session of its own for this request (the manual: every console
        command is exposed on the http endpoint; messages for its subscriptions are the
        websocket's, /ws). `remote U C` waits for U's answer as the console does."""
        from raims_node.console.session import ConsoleSession
        from raims_node.operator import OperatorHost

        session = ConsoleSession(OperatorHost(self.daemon, None), lambda text: None)
        try:
            return await session.result_of(line)
        finally:
            session.close()

    async def healthz(self, request: web.Request) -> web.Response:
        node = self.daemon.node
        body = {
            "converged": node.converged, "user": node.user, "bridge": bridge_b64(node.bridge),
            "peers": len(node.peers), "converge_ns": node.converge_ns,
        }
        return web.json_response(body, status=200 if self.daemon.healthy() else 503)

    async def metrics(self, request: web.Request) -> web.Response:
        node = self.daemon.node
        c = node.counters
        lines = []
        for name in ("frames_in", "frames_out", "bad_frames", "bad_mac", "unknown_source", "dup_bcast",
                     "forwarded", "delivered", "published", "auth_rejected", "no_route", "anycast",
                     "inbox_false", "no_responders"):
            lines.append(f"# TYPE raims_{name}_total counter")
            lines.append(f'raims_{name}_total{{user="{node.user}"}} {getattr(c, name)}')
        lines.append("# TYPE raims_rejected_total counter")
        for reason, count in sorted(c.rejects.items()):
            lines.append(f'raims_rejected_total{{user="{node.user}",reason="{reason}"}} {count}')
        for name, value in self.daemon.flow_counters().items():  # flow control
            kind = "counter" if name.endswith(("_events", "_links", "_consumers", "_errors")) else "gauge"
            metric = f"raims_{name}_total" if kind == "counter" else f"raims_{name}_bytes" \
                if name.endswith("buffered") else f"raims_links_{name}"
            lines.append(f"# TYPE {metric} {kind}")
            lines.append(f'{metric}{{user="{node.user}"}} {value}')
        lines.append("# TYPE raims_web_header_timeouts_total counter")
        lines.append(f'raims_web_header_timeouts_total{{user="{node.user}"}} {self.header_timeouts}')
        lines.append("# TYPE raims_peers gauge")
        lines.append(f'raims_peers{{user="{node.user}"}} {len(node.peers)}')
        lines.append("# TYPE raims_converged gauge")
        lines.append(f'raims_converged{{user="{node.user}"}} {int(node.converged)}')
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")

    async def websocket(self, request: web.Request) -> web.StreamResponse:
        if cross_site(request.headers, request.host):  # a page elsewhere must not publish through it
            return web.json_response({"error": "a websocket from another site's page is refused"}, status=403)
        max_payload = self.daemon.tree.parameters.size("max_payload")
        ws = web.WebSocketResponse(heartbeat=30, autoping=False,  # pings answered below, in the slice
                                   max_msg_size=max(WS_MAX_MSG, max_payload + 64 * 1024))
        await ws.prepare(request)
        transport = request.transport
        client = _WsClient(ws, transport.abort if transport is not None else lambda: None)
        try:
            await self._serve(client, max_payload)
        finally:
            self.daemon.drop_owner(client)
        return ws

    async def _serve(self, client: _WsClient, max_payload: int) -> None:
        """A websocket's requests and pings until it closes. Messages aiohttp has queued are
        received without a loop turn: the loop is given back after WS_SLICE_S of work (a
        flood of small `pub`s held every other client 170-440 ms a turn, pings 80 ms)."""
        ws = client.ws
        busy = 0.0  # work since the loop was last given back
        try:
            async for msg in ws:
                took = time.perf_counter()
                if msg.type == WSMsgType.PING:
                    await ws.pong(msg.data)
                elif msg.type == WSMsgType.TEXT:
                    await self._ws_request(client, msg.data, max_payload)
                busy += time.perf_counter() - took
                if busy > WS_SLICE_S:  # queued messages are received without a loop turn
                    busy = 0.0
                    await asyncio.sleep(0)
        except ConnectionError:  # the peer left under a reply or pong (a traceback in the log before)
            pass

    async def _ws_request(self, client: _WsClient, text: str, max_payload: int) -> None:
        ws, d = client.ws, self.daemon
        try:
            req = json.loads(text)
            if "sub" in req:
                d.subscribe(client, str(req["sub"]), str(req["sub"]))
            elif "psub" in req:
                d.psubscribe(client, str(req["psub"]), str(req["psub"]), str(req.get("syntax", "rv")))
            elif "unsub" in req:
                d.unsubscribe(client, str(req["unsub"]))
            elif "pub" in req:
                data = str(req.get("data", "")).encode()
                if len(data) > max_payload:  # as a Redis PUBLISH over it: refused, the connection kept
                    await ws.send_json({"error": f"message of {len(data)} bytes exceeds max_payload {max_payload}"})
                    return
                d.publish(str(req["pub"]), data, req.get("reply"))
            else:
                await ws.send_json({"error": "expected one of sub, psub, unsub, pub"})
                return
            await ws.send_json({"ok": True})
        except ConnectionError:
            raise
        except Exception as exc:  # a bad request costs only this reply
            await ws.send_json({"error": str(exc)})


class _Watched(asyncio.Protocol):
    """What the transport sees of one web connection: aiohttp's protocol, every call passed
    on, and, when the connection goes, its header deadline cancelled. Before (2026-11-27,
    churn-memory) the deadline's timer ran its `header_timeout` (20 s) whatever happened:
    each connection, served or closed, held its handler that long (a websocket: its
    request, response and transport, ~10 KB; 1,000 websockets opened and closed a second
    held 200 MB). A request served cancels it too (WebAdmin._mark_served). aiohttp's
    protocol keeps no reference back (it has slots), and its server tracks connections
    by the handler, not by this: only the loop's transport holds this object."""

    __slots__ = ("handler", "waiting")

    def __init__(self, handler: RequestHandler, waiting: dict[RequestHandler, asyncio.TimerHandle]) -> None:
        self.handler = handler
        self.waiting = waiting

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.handler.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        self.handler.data_received(data)

    def eof_received(self) -> bool | None:
        return self.handler.eof_received()  # type: ignore[func-returns-value]  # None today: passed on as is

    def pause_writing(self) -> None:
        self.handler.pause_writing()

    def resume_writing(self) -> None:
        self.handler.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        deadline = self.waiting.pop(self.handler, None)
        if deadline is not None:
            deadline.cancel()
        self.handler.connection_lost(exc)


class _WsClient:
    """A websocket subscriber. Its deliveries are encoded at once and sent in order by one
    writer task; with more than WS_BACKLOG_BYTES of them unsent it is a slow consumer:
    what waits is dropped and the connection aborted (a close frame would wait behind
    the unsent bytes), so a page that stops reading cannot grow the node's memory (it
    did: 1 GB from 5,000 messages of 100 KB, never cut, when the limit counted messages)."""

    def __init__(self, ws: web.WebSocketResponse, abort: Callable[[], None]) -> None:
        self.ws = ws
        self.abort = abort
        self.queue: deque[str] = deque()
        self.backlog = 0  # bytes queued or being sent
        self.cut = False
        self._writer: asyncio.Future[None] | None = None

    def on_deliver(self, d: Deliver) -> None:
        if self.cut or self.ws.closed:
            return
        if d.headers is not None and is_no_responders(d.headers, d.payload):
            return  # a node's NATS 503 for an `_INBOX.` reply: not an answer (router/no_responders.py)
        text = _dumps({"subject": d.subject, "data": d.payload.decode(errors="replace"), "reply": d.reply,
                       "loss": d.loss, "source": bridge_b64(d.source)})
        self.backlog += len(text)
        if self.backlog > WS_BACKLOG_BYTES:
            log.warning("closing websocket: slow consumer, %d bytes behind", self.backlog)
            self.cut = True
            self.queue.clear()
            self.backlog = 0
            if self._writer is not None:
                self._writer.cancel()
            self.abort()
            return
        self.queue.append(text)
        if self._writer is None:
            self._writer = asyncio.ensure_future(self._write())

    async def _write(self) -> None:
        busy = 0.0
        try:
            while self.queue:
                took = time.perf_counter()
                text = self.queue.popleft()
                await self.ws.send_str(text)
                self.backlog -= len(text)  # (a cut, cancelling this, has zeroed it)
                busy += time.perf_counter() - took
                if busy > WS_SLICE_S:  # a send that needs no drain does not give the loop back
                    busy = 0.0
                    await asyncio.sleep(0)
        except (ConnectionError, RuntimeError):  # the socket closed under the sends
            self.queue.clear()
            self.backlog = 0
        finally:
            self._writer = None


def _dumps(obj: object) -> str:
    return json.dumps(obj, default=str)
