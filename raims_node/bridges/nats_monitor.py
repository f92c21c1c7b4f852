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
- `/subsz`: `num_subscriptions` and the node's wider counts.
- `/healthz`: `{"status": "ok"}`.
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
        conns = sorted(self._sessions(), key=lambda p: p.session.client_id)
        out = []
        for proto in conns[offset: offset + limit]:
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
            out.append(entry)
        return web.json_response({
            "server_id": self.server.config.server_id, "now": _iso(now), "num_connections": len(out),
            "total": len(conns), "offset": offset, "limit": limit, "connections": out,
        })

    async def subsz(self, request: web.Request) -> web.Response:
        sessions = self._sessions()
        return web.json_response({
            "server_id": self.server.config.server_id, "now": _iso(time.time_ns()),
            "num_subscriptions": sum(p.session.subscriptions for p in sessions),
            "num_cache": 0, "num_inserts": 0, "num_removes": 0, "num_matches": 0,
        })

    async def healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})
