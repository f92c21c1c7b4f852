"""NATS monitoring endpoints on a NATS transport's `http_port` (nats-server's option and
endpoint names), answering as nats-server 2.9.10's do for what monitoring tools read
(prometheus-nats-exporter, nats-top, `nats server report`); differential-tested against
the binary (tests/integration/test_nats_monitor_diff.py). Formats and query decoding are
nats_monitor_info.py's.

- HTTP as Go's: any method; JSON indented by two spaces (`/healthz` compact), `<>&`
  escaped; `?callback=f` answers JSONP (`application/javascript`); unknown paths get
  Go's `404 page not found`; bad options a 400 with nats-server's text (strconv's
  for booleans and integers, `invalid sorting option`, `sort by stop only valid on
  closed connections` ...). No CORS header (nats-server sends none).
- `/varz`: nats-server's keys in its order; `http_req_stats` counts requests per
  endpoint, `mem` is the resident size, `cpu` the process's CPU % since start, `cores`
  the CPUs, `max_connections` the node's client capacity, `max_pending` the slow
  consumer limit, `ping_interval`/`ping_max` nats.py's pinger.
- `/connz`: nats-server's ConnInfo (`kind`, `type`, `last_activity` = the last PUB,
  SUB, UNSUB or CONNECT, `rtt` = INFO to CONNECT then our PING to its PONG, `idle`,
  `authorized_user` with `auth=1`, `subscriptions_list` / `subscriptions_list_detail`
  with `subs=1` / `subs=detail`); `state=closed|any` reads a ring of the last 10,000
  closed connections (nats-server's max_closed_clients) with `stop` and `reason`
  (Client Closed, Authentication Failure, Maximum Message Payload Exceeded, Maximum
  Control Line Exceeded, Protocol Violation, Bad Client Protocol Version, No Responders
  Requires Headers, Slow Consumer (Pending Bytes), Stale Connection, Parse Error, and
  Server Shutdown for lame duck); sorts, `offset`, `limit` (<= 0: 1024), `cid` (limit
  1; with state=any only closed ones are searched, as nats-server), `user`, `acc` ($G,
  nats-server's global account; another: its empty answer) and `mqtt_client` (none).
- `/subsz`: the subscription count; `subs=1` lists them (account $G) filtered by a
  literal `test` subject, paged by `offset`/`limit`, `total` being the page's length
  (as nats-server); with nothing listed only the statistics are answered.
- `/healthz`: `{"status":"ok"}`; `/routez`, `/gatewayz`, `/leafz`, `/accountz`, `/jsz`:
  what a nats-server with no cluster, gateways, leaf nodes, accounts or JetStream
  answers; `/` lists the endpoints.

Kept differences: no system account (`system_account` absent, nor the `$SYS`
subscriptions nats-server counts in `subscriptions`/`num_subscriptions`); the sublist
cache fields of /subsz are 0 (no such cache); `go` is "raims", `gomaxprocs` 1 (one event
loop), `tls_timeout` and `write_deadline` 0 (none: slow consumers are
cut on bytes); a token's `authorized_user` is "[REDACTED]" (nats-server 2.9.10 shows the
token); connections refused for the node's capacity never had a session and are not in
the closed ring; subscription order within a list is raims's (Go's map order is random);
ties of a sort are by cid.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, cast

from aiohttp import web

from raims_node.bridges.glue import BridgeSettings, HubView, SessionProtocol
from raims_node.bridges.nats_monitor_info import (
    GLOBAL_ACCOUNT,
    Conn,
    QueryError,
    close_reason,
    go_bool,
    go_int,
    go_json,
    go_state,
    go_time,
    go_uptime,
    literal_subject,
    matches,
    sort_conns,
    sort_key,
    sub_detail,
)
from raims_node.bridges.nats_session import AUTH_TIMEOUT_S, NatsConfig
from raims_node.keepalive import set_keepalive
from raims_node.procmem import rss_bytes


class MonitoredServer(Protocol):
    """What the monitor reads of the NATS transport (nats.py's NatsServer)."""

    config: NatsConfig
    settings: BridgeSettings
    hub: HubView
    conns: set[SessionProtocol]
    slow_consumers: int
    lame_duck_mode: bool
    keepalive_s: float

    def port_row(self, label: str) -> dict[str, Any]: ...

    def payload_bytes(self) -> tuple[int, int]: ...


LIST_LIMIT = 1024  # nats-server's DefaultConnListSize and DefaultSubListSize
MAX_CLOSED = 10_000  # nats-server's max_closed_clients default
# subscriptions listed by the closed ring in all: past it the oldest closed connections'
# lists are let go (their counts stay), so clients that close with many subscriptions
# over and over cannot make the ring hold 10,000 such lists (nats-server keeps them all)
CLOSED_SUBS_KEPT = 65_536
PING_INTERVAL_NS = 120 * 1_000_000_000  # nats.py's PING_INTERVAL_S
# what nats-server answers for what raims never has (no cluster, gateway, leaf nodes,
# accounts or JetStream), beside server_id and now
NOTHING_CONFIGURED: dict[str, dict[str, Any]] = {
    "/routez": {"num_routes": 0, "routes": []},
    "/gatewayz": {"outbound_gateways": {}, "inbound_gateways": {}},
    "/leafz": {"leafnodes": 0, "leafs": []},
    "/accountz": {"system_account": "", "accounts": []},
    "/jsz": {"disabled": True, "config": None, "memory": 0, "storage": 0, "reserved_memory": 0,
             "reserved_storage": 0, "accounts": 0, "ha_assets": 0, "api": {"total": 0, "errors": 0}},
}
ENDPOINTS = ("varz", "connz", "subsz", "healthz", *(p.strip("/") for p in NOTHING_CONFIGURED))
NOT_FOUND = "404 page not found\n"  # Go's http.NotFound

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class NatsMonitor:
    def __init__(self, server: MonitoredServer) -> None:
        self.server = server
        self.started_ns = time.time_ns()
        self.total_connections = 0
        self.closed_conns: deque[Conn] = deque()  # oldest first, at most MAX_CLOSED
        self._listing: deque[Conn] = deque()  # the closed ones still listing subscriptions, oldest first
        self._listed = 0  # subscriptions they list
        self.req_stats: dict[str, int] = {}
        self.http_host = ""
        self._peers: dict[SessionProtocol, tuple[str, int]] = {}
        self._shut_down: set[SessionProtocol] = set()  # closed by lame duck mode: "Server Shutdown"
        self._runner: web.AppRunner | None = None
        self.bound: list[str] = []

    async def start(self, host: str, port: int) -> list[str]:
        app = web.Application(middlewares=[self._go_http])
        routes: dict[str, Handler] = {"/varz": self.varz, "/connz": self.connz, "/subsz": self.subsz,
                                      "/subscriptionsz": self.subsz, "/healthz": self.healthz, "/": self.index}
        routes.update((path, self._nothing(fields)) for path, fields in NOTHING_CONFIGURED.items())
        for path, handler in routes.items():
            app.router.add_route("*", path, handler)  # any method, as Go's ServeMux
        keepalive = self.server.keepalive_s  # the transport's (raims_node/keepalive.py), on the listener
        self._runner = web.AppRunner(app, access_log=None, tcp_keepalive=keepalive > 0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        self.http_host = host
        server = cast(asyncio.Server | None, site._server)
        for sock in server.sockets if server is not None else ():
            set_keepalive(sock, keepalive)  # its accepted sockets take these options (Linux)
            name = sock.getsockname()
            self.bound.append(f"{name[0]}:{name[1]}")
        return self.bound

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    # ------------------------------------------------------------ connection hooks (nats.py)

    def opened(self, proto: SessionProtocol) -> None:
        self.total_connections += 1
        peer = proto.transport.get_extra_info("peername") if proto.transport is not None else None
        self._peers[proto] = (str(peer[0]), int(peer[1])) if isinstance(peer, tuple) else ("", 0)

    def shutting_down(self, proto: SessionProtocol) -> None:
        self._shut_down.add(proto)

    def closed(self, proto: SessionProtocol, session: Any) -> None:
        """Keep the closed connection as nats-server's ring of closed clients does."""
        conn = Conn.of(session, self._peers.pop(proto, ("", 0)), proto.unsent)
        conn.stop = time.time_ns()
        conn.reason = close_reason(session.close_error, proto in self._shut_down)
        self._shut_down.discard(proto)
        self._keep_closed(conn)

    def _keep_closed(self, conn: Conn) -> None:
        ring = self.closed_conns
        if len(ring) >= MAX_CLOSED:
            gone = ring.popleft()
            if gone.subs:  # both are oldest first: it is the first that lists
                self._listing.popleft()
                self._listed -= len(gone.subs)
        ring.append(conn)
        if conn.subs:
            self._listing.append(conn)
            self._listed += len(conn.subs)
        while self._listed > CLOSED_SUBS_KEPT:
            old = self._listing.popleft()
            self._listed -= len(old.subs)
            old.subs = []

    # ------------------------------------------------------------ HTTP as nats-server's

    @web.middleware
    async def _go_http(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Go's 404, JSONP `callback`, the 400 texts, nats-server's request counts."""
        if request.match_info.http_exception is not None:
            return web.Response(status=404, text=NOT_FOUND, content_type="text/plain", charset="utf-8",
                                headers={"X-Content-Type-Options": "nosniff"})
        if request.path != "/subscriptionsz":
            self.req_stats[request.path] = self.req_stats.get(request.path, 0) + 1
        else:
            self.req_stats["/subsz"] = self.req_stats.get("/subsz", 0) + 1
        try:
            response = await handler(request)
        except QueryError as exc:
            return web.Response(status=400, text=str(exc), content_type="text/plain", charset="utf-8")
        callback = request.query.get("callback", "")
        if callback and isinstance(response, web.Response) and response.content_type == "application/json":
            body = cast(bytes, response.body)
            return web.Response(body=b"%s(%s)" % (callback.encode(), body), content_type="application/javascript")
        return response

    @staticmethod
    def _json(value: Any, indent: bool = True) -> web.Response:
        import json

        body = go_json(value) if indent else json.dumps(value, separators=(",", ":")).encode()
        return web.Response(body=body, content_type="application/json")

    def _sessions(self) -> list[Any]:  # the live NatsSessions' protocols
        return [p for p in self.server.conns if p.session is not None]

    async def varz(self, request: web.Request) -> web.Response:
        s = self.server
        now = time.time_ns()
        row = s.port_row("")
        payload_in, payload_out = s.payload_bytes()  # nats-server's in/out_bytes: message bytes, not wire
        cfg = s.config
        elapsed = max(1e-9, (now - self.started_ns) / 1e9)
        out: dict[str, Any] = {
            "server_id": cfg.server_id, "server_name": cfg.server_name, "version": cfg.version,
            "proto": 1, "go": "raims", "host": cfg.host, "port": cfg.port}
        if cfg.auth_required:
            out["auth_required"] = True
        out.update({
            "max_connections": s.hub.max_clients, "ping_interval": PING_INTERVAL_NS, "ping_max": cfg.max_pings_out,
            "http_host": self.http_host, "http_port": s.settings.http_port, "http_base_path": "", "https_port": 0,
            "auth_timeout": AUTH_TIMEOUT_S, "max_control_line": cfg.max_control_line, "max_payload": cfg.max_payload,
            "max_pending": cfg.limits.hard_limit, "cluster": {}, "gateway": {}, "leaf": {}, "mqtt": {},
            "websocket": {}, "jetstream": {}, "tls_timeout": 0, "write_deadline": 0,
            "start": go_time(self.started_ns), "now": go_time(now), "uptime": go_uptime(now - self.started_ns),
            "mem": rss_bytes(), "cores": os.cpu_count() or 1, "gomaxprocs": 1,
            "cpu": round(100 * time.process_time() / elapsed, 2),
            "connections": len(s.conns), "total_connections": self.total_connections,
            "routes": 0, "remotes": 0, "leafnodes": 0,
            "in_msgs": row["mr"], "out_msgs": row["ms"], "in_bytes": payload_in, "out_bytes": payload_out,
            "slow_consumers": s.slow_consumers, "subscriptions": sum(
                getattr(p.session, "subscriptions", 0) for p in self._sessions()),
            "http_req_stats": dict(sorted(self.req_stats.items())), "config_load_time": go_time(self.started_ns),
        })
        return self._json(out)

    def _open(self, listed: bool) -> list[Conn]:
        return [Conn.of(p.session, self._peers.get(p, ("", 0)), p.unsent, listed) for p in self._sessions()]

    async def connz(self, request: web.Request) -> web.Response:
        q = request.query
        auth = go_bool(q, "auth")
        detail = q.get("subs", "").lower() == "detail"
        subs = not detail and go_bool(q, "subs")
        offset, limit, cid = go_int(q, "offset"), go_int(q, "limit"), go_int(q, "cid", unsigned=True)
        state = go_state(q)
        sort = q.get("sort", "") or "cid"
        now = time.time_ns()
        if sort_key(sort, now) is None:
            raise QueryError(f"invalid sorting option: {sort}")
        if sort in ("stop", "reason") and state != "closed":
            raise QueryError(f"sort by {sort} only valid on closed connections")
        offset, limit = max(0, offset), limit if limit > 0 else LIST_LIMIT
        if cid > 0:
            limit = 1
        user, acc, mqtt = q.get("user", ""), q.get("acc", ""), q.get("mqtt_client", "")
        head = {"server_id": self.server.config.server_id, "now": go_time(now)}
        if acc and acc != GLOBAL_ACCOUNT:  # no such account: nats-server's empty answer
            return self._json({"server_id": "", "now": head["now"], "num_connections": 0, "total": 0,
                               "offset": offset, "limit": limit, "connections": None})
        open_ = self._open(subs or detail) if state != "closed" else []
        closed = list(self.closed_conns) if state != "open" else []
        total = len(open_) + len(closed)
        if cid > 0:  # as nats-server: with state=any only the closed ones are searched
            open_ = [c for c in open_ if c.cid == cid] if state == "open" else []
            closed = [c for c in closed if c.cid == cid][:1]
        conns = [c for c in open_ + closed if (not user or c.user == user) and not mqtt]
        sort_conns(conns, sort, now)
        page = conns[min(offset, len(conns)): min(offset + limit, len(conns))]
        return self._json({**head, "num_connections": len(page), "total": total, "offset": offset,
                           "limit": limit, "connections": [c.info(now, subs, detail, auth) for c in page]})

    async def subsz(self, request: web.Request) -> web.Response:
        q = request.query
        subs = go_bool(q, "subs")
        offset, limit = go_int(q, "offset"), go_int(q, "limit")
        offset, limit = max(0, offset), limit if limit > 0 else LIST_LIMIT
        test = q.get("test", "")
        if test and not literal_subject(test):
            raise QueryError(f"invalid test subject, must be valid publish subject: {test}")
        acc = q.get("acc", "")
        sessions = [] if acc and acc != GLOBAL_ACCOUNT else self._sessions()
        stats = {"num_subscriptions": sum(p.session.subscriptions for p in sessions), "num_cache": 0,
                 "num_inserts": 0, "num_removes": 0, "num_matches": 0, "cache_hit_rate": 0,
                 "max_fanout": 0, "avg_fanout": 0}
        listed: list[dict[str, Any]] = []
        if subs:
            for proto in sorted(sessions, key=lambda p: p.session.client_id):
                cid = proto.session.client_id
                listed += [sub_detail(cid, sub, True) for sub in proto.session.subscription_details()
                           if not test or matches(sub[0], test)]
        page = listed[min(offset, len(listed)): offset + limit]
        if not page:  # nats-server then answers its sublist statistics alone
            return self._json(stats)
        return self._json({"server_id": self.server.config.server_id, "now": go_time(time.time_ns()), **stats,
                           "total": len(page), "offset": offset, "limit": limit, "subscriptions_list": page})

    async def healthz(self, request: web.Request) -> web.Response:
        return self._json({"status": "ok"}, indent=False)

    def _nothing(self, fields: dict[str, Any]) -> Handler:
        async def handler(request: web.Request) -> web.Response:
            return self._json({"server_id": self.server.config.server_id, "now": go_time(time.time_ns()), **fields})
        return handler

    async def index(self, request: web.Request) -> web.Response:
        links = "".join(f'<a href="/{e}">{e}</a><br>\n' for e in ENDPOINTS)
        return web.Response(text=f"<html><body>\n{links}</body></html>\n", content_type="text/html")
