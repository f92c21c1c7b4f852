"""NATS monitoring endpoints on a NATS transport's `http_port` (nats-server's option and
endpoint names): `/varz`, `/connz`, `/subsz`, `/healthz`, with nats-server's field
names where raims has the concept.

- `/varz`: the server (id, name, version, host, port, max_payload, connections and
  totals, messages and bytes in and out, slow consumers, subscriptions, start, now,
  uptime, lame duck state).
- `/connz`: one entry per client connection (`cid`, `ip`, `port`, `start`, `uptime`,
  `pending_bytes`, `in_msgs`, `out_msgs`, `in_bytes`, `out_bytes`, `subscriptions`,
  `name`, `lang`, `version`); `?subs=1` adds `subscriptions_list`; `offset` and `limit`
  page it (default limit 1024, as nats-server).
  `sort` orders them as nats-server does (cid and start ascending; subs, pending,
  msgs_to, msgs_from, bytes_to, bytes_from descending; uptime oldest first; idle,
  last and rtt, which raims does not time, by cid); `cid` picks one; `state` is
  open, closed or any (raims keeps no closed connections: closed lists none). A bad
  sort, state or cid, or a stop/reason sort of open connections, is a 400 with
  nats-server's text.
- `/subsz`: `num_subscriptions` and the node's wider counts; a `test` subject with a
  wildcard is a 400, as nats-server's.
- `/healthz`: `{"status": "ok"}`.
- `/routez`, `/gatewayz`, `/leafz`, `/accountz`, `/jsz`: what a nats-server with no
  cluster, gateways, leaf nodes, accounts or JetStream answers, so that monitoring tools
  that poll them (the Prometheus exporter, nats-top) work; `/` lists the endpoints.
"""

from __future__ import annotations

import asyncio
import datetime
import time
from typing import Any, Protocol, cast

from aiohttp import web

from raims_node.bridges.glue import BridgeSettings, SessionProtocol
from raims_node.bridges.nats_session import NatsConfig


class MonitoredServer(Protocol):
    """What the monitor reads of the NATS transport (nats.py's NatsServer)."""

    config: NatsConfig
    settings: BridgeSettings
    conns: set[SessionProtocol]
    slow_consumers: int
    lame_duck_mode: bool

    def port_row(self, label: str) -> dict[str, Any]: ...

    def payload_bytes(self) -> tuple[int, int]: ...

CONNZ_LIMIT = 1024
# /connz?sort=: the entry field, descending (nats-server's orders); None: by cid
CONNZ_SORTS: dict[str, tuple[str, bool] | None] = {
    "cid": ("cid", False), "start": ("cid", False), "subs": ("subscriptions", True),  # cids grow with start
    "pending": ("pending_bytes", True), "msgs_to": ("out_msgs", True), "msgs_from": ("in_msgs", True),
    "bytes_to": ("out_bytes", True), "bytes_from": ("in_bytes", True), "uptime": ("cid", False),
    "idle": None, "last": None, "rtt": None, "stop": None, "reason": None,
}
CLOSED_ONLY_SORTS = ("stop", "reason")
CONNZ_STATES = ("open", "closed", "any")
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


def _iso(ns: int) -> str:
    return datetime.datetime.fromtimestamp(ns / 1e9, datetime.UTC).isoformat().replace("+00:00", "Z")


def _uptime(ns: int) -> str:
    secs = int(ns / 1e9)
    d, rem = divmod(secs, 86400)
    h, rem = divmod(rem, 3600)
    m, s = divmod(rem, 60)
    return (f"{d}d" if d else "") + (f"{h}h" if h or d else "") + (f"{m}m" if m or h or d else "") + f"{s}s"


class NatsMonitor:
    def __init__(self, server: MonitoredServer) -> None:
        self.server = server
        self.started_ns = time.time_ns()
        self.total_connections = 0
        self._runner: web.AppRunner | None = None
        self.bound: list[str] = []

    async def start(self, host: str, port: int) -> list[str]:
        app = web.Application()
        app.router.add_get("/varz", self.varz)
        app.router.add_get("/connz", self.connz)
        app.router.add_get("/subsz", self.subsz)
        app.router.add_get("/healthz", self.healthz)
        for path, fields in NOTHING_CONFIGURED.items():
            app.router.add_get(path, self._nothing(fields))
        app.router.add_get("/", self.index)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        server = cast(asyncio.Server | None, site._server)
        for sock in server.sockets if server is not None else ():
            name = sock.getsockname()
            self.bound.append(f"{name[0]}:{name[1]}")
        return self.bound

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def _sessions(self) -> list[Any]:  # the live NatsSessions' protocols
        return [p for p in self.server.conns if p.session is not None]

    async def varz(self, request: web.Request) -> web.Response:
        s = self.server
        now = time.time_ns()
        row = s.port_row("")
        payload_in, payload_out = s.payload_bytes()  # nats-server's in/out_bytes: message bytes, not wire
        cfg = s.config
        return web.json_response({
            "server_id": cfg.server_id, "server_name": cfg.server_name, "version": cfg.version,
            "proto": 1, "go": "raims", "host": cfg.host, "port": cfg.port, "http_port": s.settings.http_port,
            "max_payload": cfg.max_payload, "max_control_line": cfg.max_control_line,
            "connections": len(s.conns), "total_connections": self.total_connections,
            "in_msgs": row["mr"], "out_msgs": row["ms"], "in_bytes": payload_in, "out_bytes": payload_out,
            "slow_consumers": s.slow_consumers, "subscriptions": sum(
                getattr(p.session, "subscriptions", 0) for p in self._sessions()),
            "start": _iso(self.started_ns), "now": _iso(now), "uptime": _uptime(now - self.started_ns),
            "lame_duck_mode": s.lame_duck_mode,
        })

    async def connz(self, request: web.Request) -> web.Response:
        now = time.time_ns()
        subs = request.query.get("subs", "") in ("1", "true", "detail")
        try:
            offset = max(0, int(request.query.get("offset", "0")))
            limit = max(0, int(request.query.get("limit", str(CONNZ_LIMIT))))
        except ValueError:
            raise web.HTTPBadRequest(text="offset and limit are integers") from None
        sort, state = request.query.get("sort", "cid"), request.query.get("state", "open")
        if sort not in CONNZ_SORTS:
            raise web.HTTPBadRequest(text=f"invalid sorting option: {sort}")
        if state not in CONNZ_STATES:
            raise web.HTTPBadRequest(text=f"Error decoding state for {state}")
        if sort in CLOSED_ONLY_SORTS and state != "closed":
            raise web.HTTPBadRequest(text=f"Sort by {sort} only valid on closed connections")
        cid: int | None = None
        if "cid" in request.query:
            try:
                cid = int(request.query["cid"])
            except ValueError:
                raise web.HTTPBadRequest(text=f"Error decoding uint64 for 'cid': {request.query['cid']!r}") from None
        conns = [] if state == "closed" else sorted(self._sessions(), key=lambda p: p.session.client_id)
        if cid is not None:
            conns = [p for p in conns if p.session.client_id == cid]
        entries = [self._entry(proto, subs, now) for proto in conns]
        order = CONNZ_SORTS[sort]
        if order is not None:
            entries.sort(key=lambda e: (e[order[0]], e["cid"]) if not order[1] else (-e[order[0]], e["cid"]))
        out = entries[offset: offset + limit]
        return web.json_response({
            "server_id": self.server.config.server_id, "now": _iso(now), "num_connections": len(out),
            "total": len(entries), "offset": offset, "limit": limit, "connections": out,
        })

    def _entry(self, proto: Any, subs: bool, now: int) -> dict[str, Any]:
        """One /connz connection."""
        sess = proto.session
        peer = proto.transport.get_extra_info("peername") if proto.transport is not None else None
        entry: dict[str, Any] = {
            "cid": sess.client_id, "ip": peer[0] if isinstance(peer, tuple) else "",
            "port": peer[1] if isinstance(peer, tuple) else 0,
            "start": _iso(sess.started_ns), "uptime": _uptime(now - sess.started_ns),
            "pending_bytes": sess.buffered, "in_msgs": sess.msgs_in, "out_msgs": sess.msgs_out,
            "in_bytes": sess.payload_in, "out_bytes": sess.payload_out, "subscriptions": sess.subscriptions,
            "name": sess.name, "lang": sess.lang, "version": sess.version,
        }
        if subs:
            entry["subscriptions_list"] = sess.subjects()
        return entry

    async def subsz(self, request: web.Request) -> web.Response:
        test = request.query.get("test")
        if test is not None and (not test or any(t in ("*", ">") or not t for t in test.split("."))):
            raise web.HTTPBadRequest(text=f"invalid test subject, must be valid publish subject: {test}")
        sessions = self._sessions()
        return web.json_response({
            "server_id": self.server.config.server_id, "now": _iso(time.time_ns()),
            "num_subscriptions": sum(p.session.subscriptions for p in sessions),
            "num_cache": 0, "num_inserts": 0, "num_removes": 0, "num_matches": 0,
        })

    async def healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    def _nothing(self, fields: dict[str, Any]) -> Any:
        async def handler(request: web.Request) -> web.Response:
            return web.json_response({"server_id": self.server.config.server_id, "now": _iso(time.time_ns()),
                                      **fields})
        return handler

    async def index(self, request: web.Request) -> web.Response:
        links = "".join(f'<a href="/{e}">{e}</a><br>\n' for e in ENDPOINTS)
        return web.Response(text=f"<html><body>\n{links}</body></html>\n", content_type="text/html")
