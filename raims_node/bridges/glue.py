"""The asyncio side of the client-protocol bridges: listeners, one Protocol per
connection, and backpressure between connections (issue 8 points 4 and 5).

CONVENTIONS 4 and 5: a `SessionProtocol` owns only its transport and flow control; the
sans-IO session (nats_session / redis_session) does the protocol. No task per
connection: input is fed from `data_received`, and output is written at the end of it.
A session woken by a delivery caused elsewhere joins the `FlowGate`'s list of
connections to flush: the list is flushed at the end of the `data_received` that caused
the deliveries (a publish reaches a local subscriber's socket without a loop turn, and
one burst of input makes one write per subscriber), or by one `call_soon` when the
deliveries came from a link to another node. Output goes to the transport in chunks of
at most WRITE_CHUNK and only while the transport accepts more (between `pause_writing`
and `resume_writing` nothing is taken), so unsent output stays in the session where its
limits see it.

Flow control (decisions; flow.py describes the session's side):
- Input is fed to the session in slices (adapted to the work they cost); once a read has taken SLICE_S of
  work, the rest of it waits (the connection is not read meanwhile) and is fed on the
  next turn of the loop, so one connection's large batch (a megabyte of PUBs, 50,000
  SUBs in one write) does not stall the other connections, the links or the heartbeats.
  (uvloop reads a ready socket up to 32 times per turn: without this, one turn could
  process 8 MB from one client.) The SLICE_S is per turn, over all the reads of that
  turn: a read that comes after it is spent waits whole for the next turn (2026-11-27,
  edge-adversary: an RV client's flood of small messages came in 256 KB reads of 4 ms
  each, each under the slice, and held the node's other clients 250 ms a turn).
- A connection whose session is `paused` (output above the high-water mark) is not read.
- A congested consumer stalls the local clients whose input feeds it, as nats-server
  does (gate.py has the rules): `FlowGate.producer` names the connection being fed; a
  stalled producer keeps the rest of its read for later, as past SLICE_S. It holds the
  links too (issue 24), for at most CONGESTION_DEADLINE_S, not the other clients.
- A closing session's last output is written and the transport closed; a client that
  does not read it is aborted after CLOSE_GRACE_S (SLOW_GRACE_S for a slow consumer,
  whose unread output was dropped). Closes with an error are counted per
  transport (slow consumers, other errors) and logged. Lame duck shuts a client down
  instead (`SessionProtocol.shutdown`), losing nothing it sent before it saw the close.
- A transport with a `handshake_timeout_s` (RV: `tcp_auth_timeout`, rv.py) closes a
  client that has not completed its handshake that long after connecting (one timer per
  connection, as nats-server's auth timer); counted in `error_closes` and
  `handshake_timeouts`, logged rate-limited. An established client may stay idle.
- Every accepted client socket gets TCP keepalive (`BridgeServer.keepalive_s`, the
  `tcp_keepalive` parameter when the transport starts, default 300 s, 0 off; redis-server's
  idle / idle/3 / 3 probes, raims_node/keepalive.py has the decision), so a client whose
  host vanished without a FIN is closed (~2x the value) instead of held for ever.

Transport fields (manual "NATS", "Redis"): `listen` (default 127.0.0.1 here, where the
manual says `*`: a bridge on every interface must be asked for), `port` (0 or absent: an
ephemeral port), `service` (default `_nats` / `_redis`), `network`, and for NATS `user` /
`password` / `token`.

`network`: its formats are in hub.py's docstring (`parse_network` reads them).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, cast

from raims_node.bridges.capacity import LOG_EVERY_S
from raims_node.bridges.errors import BridgeError, HandshakeTimeout, SlowConsumer
from raims_node.bridges.flow import OutputLedger, SessionOutput
from raims_node.bridges.gate import BridgeSession, FlowGate, stall_duration
from raims_node.keepalive import set_keepalive
from raims_node.lograte import RateLimitedLog

if TYPE_CHECKING:
    from raims_node.bridges.host import NodeHost
    from raims_node.bridges.router_bus import RouterBus
    from raims_node.config.tree import TransportConfig
    from raims_node.transports.idle_busy import IdleBusy

DEFAULT_HOST = "127.0.0.1"
WRITE_CHUNK = 64 * 1024  # with asyncio's 64 KiB mark, a stuck client holds at most ~128 KiB there
SLICE_BYTES = 1024  # input is fed to the session in slices of this size at first
MIN_SLICE_BYTES = 256
MAX_SLICE_BYTES = 256 * 1024
SLICE_S = 0.005  # ... and the loop is given back after this much work
KEEPALIVE_PARAMETER = "tcp_keepalive"
CLOSE_GRACE_S = 5.0
SLOW_GRACE_S = 1.0  # a slow consumer's last bytes: it reads nothing, its memory is wanted back


class BridgeStartError(BridgeError):
    """A bridge transport could not start (bad settings, address in use)."""


class BadNetwork(BridgeStartError):
    """A `network` field that names no network raims can join."""


NETWORK_KINDS = {"mesh": "mesh", "mesh.listen": "mesh", "mesh.connect": "mesh", "tcp": "tcp.listen",
                 "tcp.listen": "tcp.listen", "tcp.connect": "tcp.connect", "any": "any"}


@dataclass(frozen=True, slots=True)
class ClientNetwork:
    """A parsed `network`: the device (empty: the host name) and how to join."""

    device: str
    kind: str  # mesh | tcp.listen | tcp.connect | any | pgm
    group: str = ""  # pgm: the multicast part as written

    @property
    def tport_type(self) -> str:
        return self.kind if self.kind in ("mesh", "pgm") else "tcp"

    @property
    def listen(self) -> bool:
        """Started as a listener (a mesh listens either way)."""
        return self.kind in ("mesh", "tcp.listen")

    @property
    def role(self) -> str:
        """What the name protocol advertises."""
        return {"tcp.listen": "listen", "tcp.connect": "connect"}.get(self.kind, self.kind)

    def __str__(self) -> str:
        return f"{self.device};{self.group or self.kind}"


def parse_network(text: str | None) -> ClientNetwork | None:
    """The manual's network formats (module docstring); None for no network."""
    if text is None or not text.strip():
        return None
    device, _, spec = text.strip().partition(";")
    device, spec = device.strip(), spec.strip()
    if not spec and _multicast(device):  # a group without a device
        device, spec = "", device
    if not spec:
        return ClientNetwork(device, "any")
    kind = NETWORK_KINDS.get(spec.lower())
    if kind is not None:
        return ClientNetwork(device, kind)
    if _multicast(spec.partition(";")[0].partition(",")[0]):
        return ClientNetwork(device, "pgm", spec)
    raise BadNetwork(f"network {text!r}: {spec!r} is not mesh, tcp.listen, tcp.connect, any or a "
                     "multicast address")


def _multicast(text: str) -> bool:
    try:
        return ipaddress.ip_address(text.strip()).is_multicast
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class BridgeSettings:
    """The fields of one `type: nats | redis` transport record."""

    hosts: tuple[str, ...]
    port: int
    service: str
    network: ClientNetwork | None = None
    user: str | None = None
    password: str | None = None
    token: str | None = None
    http_port: int | None = None  # NATS monitoring (nats-server's option), off when unset

    @classmethod
    def of(cls, cfg: TransportConfig, default_service: str) -> BridgeSettings:
        route = cfg.route

        def text(key: str) -> str | None:
            value = route.get(key)
            return None if value is None else str(value)

        return cls(tuple(cfg.listen) or (DEFAULT_HOST,), cfg.port or 0,
                   text("service") or default_service, parse_network(text("network")),
                   text("user"), text("password"), text("token"),
                   int(str(route["http_port"])) if route.get("http_port") is not None else None)


class SessionProtocol(asyncio.Protocol):
    """One client connection: feeds its session, writes its output, applies flow control."""

    def __init__(self, server: BridgeServer) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.session: BridgeSession | None = None
        self.bytes_in = 0
        self.wr_peak = self.rd_peak = 0  # the most output held, the largest read (show buffers wmax, rmax)
        self._loop = asyncio.get_running_loop()
        self._write_paused = False
        self._read_paused = False
        self._flush_pending = False
        self._congested = False
        self._closing = False
        self._ended = False  # our side of the stream is ended (`shutdown`): output is dropped
        self._backlog: tuple[bytes, int] | None = None  # a read not fed yet, from its offset
        self._continuing = False  # _continue is scheduled
        self._slice = SLICE_BYTES
        self._spent = 0.0  # work fed this loop turn, over all its reads (reset by the next turn)
        self._deadline: asyncio.TimerHandle | None = None  # the handshake's

    def new_session(self, client_id: int, client_ip: str | None) -> BridgeSession:
        raise NotImplementedError

    # ------------------------------------------------------------ asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        self.server.accepts += 1
        if len(self.server.hub.gate.conns) >= self.server.hub.max_clients:  # bridges/capacity.py
            self.server.refuse_full(self.transport)
            return
        peer = self.transport.get_extra_info("peername")
        self.session = self.new_session(self.server.hub.next_client_id(),
                                        peer[0] if isinstance(peer, tuple) else None)
        if isinstance(self.session, SessionOutput):
            self.session.share_ledger(self.server.hub.ledger)
            self.session.on_fed = self._fed
        set_keepalive(self.transport.get_extra_info("socket"), self.server.keepalive_s)
        self.server.opened(self)
        if self.server.handshake_timeout_s > 0:
            self._deadline = self._loop.call_later(self.server.handshake_timeout_s, self._handshake_due)
        self.update_reading()
        self.flush()

    def _handshake_due(self) -> None:
        self._deadline = None
        session, server = self.session, self.server
        if self.transport is not None and isinstance(session, SessionOutput) and session.expire_handshake(
                f"no handshake within {server.handshake_timeout_name} {server.handshake_timeout_s:g} s"):
            self.flush()

    def data_received(self, data: bytes) -> None:
        if self.session is None:  # refused (connection_made)
            return
        self.bytes_in += len(data)
        if len(data) > self.rd_peak:
            self.rd_peak = len(data)
        self.server.hub.idle.activity()
        if self._backlog is not None:  # read before the pause took effect: after the rest
            rest, off = self._backlog
            self._backlog = (rest[off:] + data, 0)
            return
        gate = self.server.hub.gate
        if self._spent > SLICE_S or gate.stalled(self):  # this turn's share is taken (uvloop reads on)
            self._backlog = (data, 0)
            self.update_reading()
            return
        session = self.session
        if len(data) <= MIN_SLICE_BYTES and session is not None:  # a message alone: one slice, nothing timed
            if not session.closing:
                gate.producer = self
                try:
                    session.data_received(data)
                finally:
                    gate.producer = None
            gate.flush()  # its subscribers before its own answers (a PONG)
            self.flush()
            return
        self._feed(data, 0)

    def _feed(self, data: bytes, off: int) -> None:
        """Feed `data[off:]` in slices until done or SLICE_S of work; the rest waits. The
        slice size adapts to the work per byte (a slice of SUBs costs far more than one
        of PUBs): halved when one slice takes over a quarter of SLICE_S, doubled when it
        takes under a sixteenth."""
        session = self.session
        assert session is not None
        start = last = time.perf_counter()
        if not self._spent:
            self._loop.call_soon(self._new_turn)
        start -= self._spent
        n = len(data)
        gate = self.server.hub.gate
        gate.producer = self
        try:
            while off < n and not session.closing:
                end = off + self._slice
                session.data_received(data[off:end] if off or end < n else data)
                off = end
                now = time.perf_counter()
                took, last = now - last, now
                if took > SLICE_S / 4 and self._slice > MIN_SLICE_BYTES:
                    self._slice //= 2
                elif took < SLICE_S / 16 and self._slice < MAX_SLICE_BYTES:
                    self._slice *= 2
                if off < n and (now - start > SLICE_S or gate.stalled(self)):
                    self._backlog = (data, off)
                    break
        finally:
            gate.producer = None
        self._spent = max(time.perf_counter() - start, 1e-9)
        # the subscribers it delivered to, without a loop turn, then its own output: a PONG
        # follows the deliveries of the PUBs before its PING, as on nats-server
        gate.flush()
        self.flush()
        if self._backlog is not None:
            self.update_reading()

    def _new_turn(self) -> None:
        self._spent = 0.0

    def _continue(self) -> None:
        """The next turn of the loop: feed what waits, unless flow control holds it."""
        self._continuing = False
        self._spent = 0.0
        if self._backlog is None or self._flow_paused():
            return
        data, off = self._backlog
        self._backlog = None
        self._feed(data, off)
        self.update_reading()

    @property
    def buffered(self) -> int:
        """Bytes held for this client: output unsent, input unfed or unparsed."""
        return self.unsent + self.unread

    @property
    def unsent(self) -> int:
        """Output bytes held: the session's and the transport's (show fds `wq`)."""
        session, transport = self.session, self.transport
        return (session.buffered if session is not None else 0) + \
            (transport.get_write_buffer_size() if transport is not None else 0)

    @property
    def unread(self) -> int:
        """Input bytes held: unparsed by the session, or read and not fed yet (`rq`)."""
        session, backlog = self.session, self._backlog
        return (session.input_buffered if session is not None else 0) + \
            (len(backlog[0]) - backlog[1] if backlog is not None else 0)

    @property
    def reading(self) -> bool:
        return not self._read_paused

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self.flush()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if self._deadline is not None:
            self._deadline.cancel()
        session = self.session
        if session is not None:
            session.connection_lost()
            self.server.closed(self, session)

    # ------------------------------------------------------------ output and flow

    def _fed(self) -> None:
        """Output queued over the high-water mark: its producer waits (gate.py); none for a link's frames."""
        gate = self.server.hub.gate
        if gate.producer is not None:  # (called per delivery while over the mark)
            session = cast(SessionOutput, self.session)  # (only a SessionOutput has on_fed set)
            gate.fed(self, stall_duration(session.buffered, session.limits.high_water, session.limits.hard_limit))

    def wakeup(self) -> None:
        """The session has output (a delivery from elsewhere, or it is closing)."""
        if not self._flush_pending and self.transport is not None:
            self._flush_pending = True
            self.server.hub.gate.wake(self)

    def flush(self) -> None:
        self._flush_pending = False
        transport, session = self.transport, self.session
        if transport is None or session is None:
            return
        if self._ended:  # the client is told nothing more; what it sends is still carried out
            while session.buffered:
                session.pending_output(WRITE_CHUNK)
            return
        if session.closing:
            if self._congested:  # (a slow consumer's backlog is dropped) its producers run again
                self._congested = False
                self.server.hub.gate.drained(self)
            if not self._closing:
                self._closing = True
                self.server.closing(session)
                transport.write(session.pending_output())
                transport.close()
                slow = isinstance(session.close_error, SlowConsumer)
                self._loop.call_later(SLOW_GRACE_S if slow else CLOSE_GRACE_S, transport.abort)
            return
        while not self._write_paused and session.buffered:
            transport.write(session.pending_output(WRITE_CHUNK))
        held = session.buffered + transport.get_write_buffer_size()  # once a read or a delivery run
        if held > self.wr_peak:
            self.wr_peak = held
        if session.paused != self._congested:
            self._congested = session.paused
            gate = self.server.hub.gate  # congested: the links wait a moment (gate.py); else its producers run
            gate.hold_links(self) if self._congested else gate.drained(self)
            self.update_reading()

    def _flow_paused(self) -> bool:
        gate = self.server.hub.gate
        return self._congested or gate.closed or gate.stalled(self)

    def update_reading(self) -> None:
        transport = self.transport
        if transport is None or self.session is None:
            return
        flow = self._flow_paused()
        if self._backlog is not None and not flow and not self._continuing:
            self._continuing = True
            self._loop.call_soon(self._continue)
        want = flow or self._backlog is not None
        if want != self._read_paused:
            self._read_paused = want
            if want:
                transport.pause_reading()
            else:
                transport.resume_reading()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def shutdown(self, grace_s: float = CLOSE_GRACE_S) -> None:
        """Close without losing what the client sent (lame duck): our side of the stream
        ends (the client reconnects elsewhere) and reading goes on until the client's
        end, or `grace_s`. Output from then on is dropped."""
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        if not transport.can_write_eof():
            transport.close()
            return
        self.flush()
        self._ended = True
        transport.write_eof()
        self._loop.call_later(grace_s, transport.abort)


class HubView(Protocol):
    """What a bridge server uses of the hub that runs it (hub.py's BridgeHub)."""

    host: NodeHost
    gate: FlowGate
    ledger: OutputLedger
    idle: IdleBusy
    max_clients: int

    @property
    def max_payload(self) -> int: ...

    def next_client_id(self) -> int: ...

    def server_id(self) -> str: ...

    def bus(self, service: str) -> RouterBus: ...

    async def join_network(self, bridge: str, service: str, network: ClientNetwork,
                           tport: str | None = None) -> None: ...


class BridgeServer:
    """One running bridge transport: its listeners, connections and counters."""

    kind: ClassVar[str] = ""
    default_service: ClassVar[str] = ""
    full_reply: ClassVar[bytes] = b""  # to a client refused for the node's capacity
    protocol: ClassVar[type[SessionProtocol]] = SessionProtocol
    handshake_timeout_s = 0.0  # > 0: a client not `established` this long after connecting is closed
    handshake_timeout_name = ""  # the parameter it comes from, for the log line
    keepalive_s = 0.0  # the TCP keepalive of accepted clients: `tcp_keepalive` (listen); 0 off

    @classmethod
    def settings_of(cls, hub: HubView, cfg: TransportConfig) -> BridgeSettings:
        """This transport's fields of record `cfg`."""
        return BridgeSettings.of(cfg, cls.default_service)

    def __init__(self, hub: HubView, name: str, settings: BridgeSettings) -> None:
        self.hub = hub
        self.name = name
        self.settings = settings
        self.bus: RouterBus = hub.bus(settings.service)
        self.log = logging.getLogger(f"raims.bridge.{self.kind}")
        self.servers: list[asyncio.Server] = []
        self.bound: list[str] = []
        self.conns: set[SessionProtocol] = set()
        self.accepts = 0  # connections accepted on its listeners (show fds `ac`)
        self.slow_consumers = 0
        self.error_closes = 0  # closed for another error: protocol, authorization, stale, capacity
        self.handshake_timeouts = 0  # of those, closed by the handshake deadline
        self._full_log = RateLimitedLog(self.log.log, window_s=LOG_EVERY_S, burst=1)
        self._deadline_log = RateLimitedLog(self.log.log)
        self._deadline_flush: asyncio.TimerHandle | None = None
        # totals of the connections already closed
        self._closed = dict.fromkeys(("bytes_in", "bytes_out", "msgs_in", "msgs_out", "payload_in", "payload_out"), 0)

    def refuse_full(self, transport: asyncio.Transport) -> None:
        """A client past the node's capacity: its protocol's error, closed, counted, logged
        at most once a minute (bridges/capacity.py)."""
        self.error_closes += 1
        if self.full_reply:
            transport.write(self.full_reply)
        transport.close()
        self._full_log.log("full", logging.WARNING, f"refusing clients: {len(self.hub.gate.conns)} connections, "
                           f"the open-files limit allows {self.hub.max_clients}")

    async def listen(self) -> list[str]:
        """Bind every listen address; the bound "host:port" strings."""
        loop = asyncio.get_running_loop()
        port = self.settings.port
        self.keepalive_s = self.hub.host.tree.parameters.time(KEEPALIVE_PARAMETER)
        for host in self.settings.hosts:
            bind = None if host in ("*", "") else host
            try:
                server = await loop.create_server(lambda: self.protocol(self), bind, port)
            except OSError as exc:
                self.close()
                raise BridgeStartError(
                    f"transport {self.name!r} listen {host}:{port} failed: {exc.strerror}") from None
            self.servers.append(server)
            for sock in server.sockets:
                addr = sock.getsockname()
                self.bound.append(f"[{addr[0]}]:{addr[1]}" if ":" in addr[0] else f"{addr[0]}:{addr[1]}")
        await self.join_network()
        return self.bound

    async def join_network(self) -> None:
        """Join the transport's `network`, if it names one (hub.py); closed on failure."""
        if self.settings.network is not None:
            try:
                await self.hub.join_network(self.name, self.settings.service, self.settings.network)
            except BaseException:
                self.close()
                raise

    def opened(self, proto: SessionProtocol) -> None:
        self.conns.add(proto)
        self.hub.gate.conns.add(proto)

    def closed(self, proto: SessionProtocol, session: BridgeSession) -> None:
        self.conns.discard(proto)
        self.hub.gate.remove(proto)
        totals = self._closed
        totals["bytes_in"] += proto.bytes_in
        totals["bytes_out"] += session.bytes_out
        totals["msgs_in"] += session.msgs_in
        totals["msgs_out"] += session.msgs_out
        totals["payload_in"] += getattr(session, "payload_in", 0)  # (NATS sessions count them)
        totals["payload_out"] += getattr(session, "payload_out", 0)

    def closing(self, session: BridgeSession) -> None:
        """The session ends; count and log why when it is an error."""
        error = session.close_error
        if error is None:
            return
        if isinstance(error, SlowConsumer):
            self.slow_consumers += 1
        else:
            self.error_closes += 1
        if isinstance(error, HandshakeTimeout):  # a flood of half-open clients: a few lines and a count
            self.handshake_timeouts += 1
            limited = self._deadline_log
            if not limited.log("handshake", logging.INFO, f"{self.name} client {session.client_id} closed: {error}") \
                    and self._deadline_flush is None:  # the "... and N more" line once the window ends
                self._deadline_flush = asyncio.get_running_loop().call_later(limited.window_s, self._flush_deadlines)
            return
        self.log.info("%s client %d closed: %s", self.name, session.client_id, error)

    def _flush_deadlines(self) -> None:
        self._deadline_flush = None
        self._deadline_log.flush()

    def close(self) -> None:
        if self._deadline_flush is not None:
            self._deadline_flush.cancel()
        for server in self.servers:
            server.close()
        for proto in list(self.conns):
            proto.close()

    def payload_bytes(self) -> tuple[int, int]:
        """Message bytes in and out (headers and data) of live and closed clients."""
        live = [p.session for p in self.conns if p.session is not None]
        return (self._closed["payload_in"] + sum(getattr(s, "payload_in", 0) for s in live),
                self._closed["payload_out"] + sum(getattr(s, "payload_out", 0) for s in live))

    def port_row(self, label: str) -> dict[str, Any]:
        """The `show ports` row of this transport (counters of live and closed clients)."""
        totals = dict(self._closed)
        for proto in self.conns:
            s = proto.session
            if s is not None:
                totals["bytes_in"] += proto.bytes_in
                totals["bytes_out"] += s.bytes_out
                totals["msgs_in"] += s.msgs_in
                totals["msgs_out"] += s.msgs_out
        return {
            "tport": label, "type": self.kind, "cost": "", "fd": None, "conns": len(self.conns),  # fd: port_fds
            "bs": totals["bytes_out"], "br": totals["bytes_in"],
            "ms": totals["msgs_out"], "mr": totals["msgs_in"], "lat": "", "idle": "",
            "fl": "L", "address": ", ".join(self.bound),
        }

