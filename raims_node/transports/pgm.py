"""The PGM transport on sockets (manual "Open PGM"; `type: pgm`).

A thin asyncio adapter of the sans-IO core (transports/pgm_core.py, where the protocol
and what of RFC 3208 it follows are described). One transport has two UDP sockets: the
group socket (bound to the wildcard address and the service `port`, joined to every
receive group on the network's interface, sending to the send group) and the unicast
inbox (the interface's address, a random port). Each peer discovered on the group is
one link of the router, a `PgmPeerLink`: the router sees it as it sees a TCP link.

Address syntax (manual): `network;recv1,recv2;send`; one multicast address is both the
send and the receive group; an empty network is the host name's interface. `network`
is an interface name, an address of a local interface, or an address in the network of
one (`192.168.1.0`). Only IPv4.

Decisions:
- `mcast_loop` 0 turns IP_MULTICAST_LOOP off; 1 and 2 leave it on (a node drops its own
  packets by their session id), and 2 also sets SO_REUSEPORT so that two nodes of one
  host can bind the same group port.
- The router's links are not encrypted on PGM (`fl` shows N): frames are authenticated
  by the router's handshake and per-message MACs, as on an unencrypted TCP link.
- UDP cannot be paused: backpressure (`hold_reading`) is a no-op here, and a PGM link is
  never congested; what the receive buffer drops is repaired by NAK.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from raims_node.config.params import parse_count, parse_time
from raims_node.config.records import TransportConfig
from raims_node.transports.link import RouterLink
from raims_node.transports.name import DeviceNotFound, resolve_device
from raims_node.transports.pgm_core import Frames, Loss, PeerDown, PeerUp, PgmCore, PgmParams

log = logging.getLogger("raims.pgm")

DEFAULT_ADDRESS = ";239.192.0.1"
DEFAULT_PORT = 9000
RCVBUF = 4 << 20
MCAST_TTL = 16
_MCAST_TYPE_BITS = 0x60  # frame header byte 0: type 0 is multicast data


class PgmError(ValueError):
    """A PGM address or socket that cannot be used."""


@dataclass(frozen=True, slots=True)
class PgmAddress:
    network: str
    recv: tuple[str, ...]
    send: str


def parse_address(text: str) -> PgmAddress:
    """`network;recv1,recv2;send`, `network;group` or `group` (manual "Open PGM")."""
    parts = text.strip().split(";")
    if len(parts) == 1:
        parts = ["", parts[0]]
    if len(parts) > 3:
        raise PgmError(f"PGM address {text!r}: at most network;recv1,..;send")
    network = parts[0].strip()
    recv = tuple(a.strip() for a in parts[1].split(",") if a.strip())
    send = parts[2].strip() if len(parts) == 3 else ""
    if not recv and not send:
        raise PgmError(f"PGM address {text!r} has no multicast address")
    if not send:
        send = recv[-1]
    if not recv:
        recv = (send,)
    for addr in (*recv, send):
        try:
            ip = ipaddress.IPv4Address(addr)
        except ValueError:
            raise PgmError(f"PGM address {text!r}: {addr!r} is not an IPv4 address") from None
        if not ip.is_multicast:
            raise PgmError(f"PGM address {text!r}: {addr} is not a multicast address")
    return PgmAddress(network, recv, send)


class PgmOwner(Protocol):
    def link_made(self, link: RouterLink) -> int: ...
    def link_frames(self, conn_id: int, frames: list[bytes]) -> None: ...
    def link_lost(self, conn_id: int, reason: str) -> None: ...
    def say(self, text: str, level: int = logging.INFO) -> None: ...


class _Socket(asyncio.DatagramProtocol):
    def __init__(self, owner: PgmTransport) -> None:
        self.owner = owner

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.owner.datagram(data)

    def error_received(self, exc: Exception) -> None:
        self.owner.errors += 1


class PgmPeerLink:
    """One peer on the group, as a router link (link.RouterLink)."""

    outbound = False
    transport = None  # no stream transport: the PGM transport owns the sockets
    write_drops = 0
    buffered = 0
    writable = True

    def __init__(self, pgm: PgmTransport, tsi: bytes, inbox: tuple[str, int]) -> None:
        self.pgm = pgm
        self.tsi = tsi
        self.tport_id = pgm.tport_id
        self.peer_addr = f"{inbox[0]}:{inbox[1]}"
        self.local_addr = pgm.inbox_url
        self.conn_id = -1
        self.closed_reason: str | None = None
        self.bytes_in = self.bytes_out = self.frames_in = self.frames_out = 0
        self.refusal: str | None = None  # (a PGM peer is not refused by the link)

    @property
    def url(self) -> str:
        return f"inbox://{self.peer_addr}"

    def send(self, data: bytes) -> None:
        if self.closed_reason is not None:
            return
        self.frames_out += 1
        self.bytes_out += len(data)
        self.pgm.send(self.tsi, data)

    def send_now(self, data: bytes) -> None:
        """As `send`: the frame waits for the pass's flush, so that one group datagram
        carries it for every peer it goes to (the lone-frame path, transports/lone.py)."""
        self.send(data)

    def flush(self) -> None:
        self.pgm.flush()

    def close(self, reason: str) -> None:
        if self.closed_reason is None:
            self.closed_reason = reason
            self.pgm.closed(self, reason)

    def hold_reading(self, held: bool) -> None:
        del held  # UDP: nothing to pause (module docstring)

    def check_write_timeout(self, now: float) -> None:
        del now


class PgmTransport:
    """The sockets, the core and the peer links of one `type: pgm` transport."""

    def __init__(self, owner: PgmOwner, tport_id: int, name: str, address: PgmAddress, port: int, ip: str,
                 params: PgmParams, mcast_loop: int = 2) -> None:
        self.owner = owner
        self.tport_id = tport_id
        self.name = name
        self.address = address
        self.port = port
        self.ip = ip
        self.params = params
        self.mcast_loop = mcast_loop
        self.core: PgmCore | None = None
        self.links: dict[bytes, PgmPeerLink] = {}
        self.inbox_url = ""
        self.errors = 0
        self._group_tr: asyncio.DatagramTransport | None = None
        self._inbox_tr: asyncio.DatagramTransport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self._flush_soon = False
        self._run_soon = False
        self._closed = False

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            gsock = self._group_socket()
            isock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            isock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
            isock.bind((self.ip, 0))
        except OSError as exc:
            raise PgmError(f"transport {self.name!r}: PGM sockets on {self.ip} port {self.port}: "
                           f"{exc.strerror or exc}") from None
        inbox = isock.getsockname()
        self.inbox_url = f"{inbox[0]}:{inbox[1]}"
        self.core = PgmCore(os.urandom(8), (inbox[0], inbox[1]), self.params, time.monotonic())
        self._group_tr, _ = await loop.create_datagram_endpoint(lambda: _Socket(self), sock=gsock)
        self._inbox_tr, _ = await loop.create_datagram_endpoint(lambda: _Socket(self), sock=isock)
        self._tick()

    def _group_socket(self) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if self.mcast_loop >= 2 and hasattr(socket, "SO_REUSEPORT"):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
        sock.bind(("", self.port))
        iface = socket.inet_aton(self.ip)
        for group in self.address.recv:
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, socket.inet_aton(group) + iface)
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, iface)
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1 if self.mcast_loop else 0)
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, MCAST_TTL)
        return sock

    def transports(self) -> tuple[asyncio.DatagramTransport | None, asyncio.DatagramTransport | None]:
        """The group and inbox sockets' transports (show fds)."""
        return self._group_tr, self._inbox_tr

    def close(self) -> None:
        if self._closed:
            return
        self.flush()
        self._closed = True
        self.owner.say(f"pgm {self.name} counters {json.dumps(self.counters())}")
        if self._timer is not None:
            self._timer.cancel()
        for tr in (self._group_tr, self._inbox_tr):
            if tr is not None:
                tr.close()

    async def wait_closed(self) -> None:
        await asyncio.sleep(0)

    @property
    def group_url(self) -> str:
        recv = ",".join(self.address.recv)
        return f"{self.ip};{recv};{self.address.send}:{self.port}"

    # ------------------------------------------------------------------ data

    def send(self, tsi: bytes, frame: bytes) -> None:
        core = self.core
        if core is None or self._closed:
            return
        if frame[0] & _MCAST_TYPE_BITS:
            core.send_unicast(tsi, frame, time.monotonic())
        else:
            core.send_group(tsi, frame)
        if not self._flush_soon:
            self._flush_soon = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        self._flush_soon = False
        if self.core is not None and not self._closed:
            self.core.flush(time.monotonic())
            self._run()

    def datagram(self, data: bytes) -> None:
        """One datagram into the core; its output is acted on once per loop pass (the
        datagrams read in one pass reach the router as one batch of frames)."""
        if self.core is not None and not self._closed:
            self.core.receive(data, time.monotonic())
            if not self._run_soon:
                self._run_soon = True
                asyncio.get_running_loop().call_soon(self._run)

    def _tick(self) -> None:
        if self.core is None or self._closed:
            return
        now = time.monotonic()
        self._timer = None
        self.core.tick(now)
        self._run()

    def _arm(self) -> None:
        """(Re)schedule the tick for when the core next has work (SPMs, NAKs)."""
        if self.core is None or self._closed:
            return
        now = time.monotonic()
        due = max(self.core.next_due(), now + 0.002)
        if self._timer is not None:
            if due >= self._timer_at - 0.001:
                return
            self._timer.cancel()
        self._timer_at = due
        loop = asyncio.get_running_loop()
        self._timer = loop.call_at(loop.time() + (due - now), self._tick)

    def _run(self) -> None:
        """Send what the core put out, act on its events."""
        self._run_soon = False
        if self.core is None or self._closed:
            return
        out, events = self.core.take()
        group = (self.address.send, self.port)
        for dest, pkt in out:
            tr = self._group_tr if dest is None else self._inbox_tr
            if tr is not None and not tr.is_closing():
                tr.sendto(pkt, group if dest is None else dest)
        for k, ev in enumerate(events):
            if isinstance(ev, Frames):
                nxt = events[k + 1] if k + 1 < len(events) else None
                if isinstance(nxt, Frames) and nxt.tsi == ev.tsi:  # one batch per peer and pass
                    nxt.frames[:0] = ev.frames
                    continue
                link = self.links.get(ev.tsi)
                if link is not None and link.closed_reason is None:
                    link.frames_in += len(ev.frames)
                    link.bytes_in += sum(map(len, ev.frames))
                    self.owner.link_frames(link.conn_id, ev.frames)
            elif isinstance(ev, PeerUp):
                link = self.links[ev.tsi] = PgmPeerLink(self, ev.tsi, ev.inbox)
                self.owner.say(f"pgm {self.name}: peer at inbox {link.peer_addr}")
                link.conn_id = self.owner.link_made(link)
            elif isinstance(ev, PeerDown):
                gone = self.links.pop(ev.tsi, None)
                if gone is not None:
                    gone.closed_reason = gone.closed_reason or ev.reason
                    self.owner.link_lost(gone.conn_id, ev.reason)
            elif isinstance(ev, Loss):
                kind = "inbox" if ev.unicast else "group"
                self.owner.say(f"pgm {self.name}: {ev.count} unrecoverable {kind} packets from "
                               f"{self._peer_name(ev.tsi)}", logging.WARNING)
        self._arm()

    def _peer_name(self, tsi: bytes) -> str:
        link = self.links.get(tsi)
        return link.peer_addr if link is not None else tsi.hex()

    def closed(self, link: PgmPeerLink, reason: str) -> None:
        """The router closed a peer's link: forget the peer for a while."""
        if self.links.get(link.tsi) is link and self.core is not None:
            del self.links[link.tsi]
            self.core.ban(link.tsi, time.monotonic())
            loop = asyncio.get_running_loop()
            loop.call_soon(self.owner.link_lost, link.conn_id, reason)

    # ------------------------------------------------------------------ show

    def counters(self) -> dict[str, int]:
        return dict(vars(self.core.counters)) if self.core is not None else {}

    def urls(self) -> dict[int, str]:
        return {lk.conn_id: lk.url for lk in self.links.values()}



def _number(route: Mapping[str, Any], name: str, default: int) -> int:
    value = route.get(name)
    return default if value is None else parse_count(value)


def _seconds(route: Mapping[str, Any], name: str, default: float) -> float:
    value = route.get(name)
    return default if value is None else parse_time(value)


def pgm_settings(cfg: TransportConfig, reliability_s: float) -> tuple[PgmAddress, int, PgmParams, int]:
    """The address, port, window parameters and `mcast_loop` of a `type: pgm` record
    (manual table: `txw_secs` defaults to the `reliability` parameter, `rxw_secs` to
    `txw_secs`)."""
    route = cfg.route
    texts = cfg.listen or cfg.connect or [DEFAULT_ADDRESS]
    address = parse_address(texts[0])
    port = cfg.port or DEFAULT_PORT
    txw_secs = _seconds(route, "txw_secs", reliability_s)
    params = PgmParams(mtu=_number(route, "mtu", 16384), txw_sqns=_number(route, "txw_sqns", 4096),
                       txw_secs=txw_secs, rxw_sqns=_number(route, "rxw_sqns", 4096),
                       rxw_secs=_seconds(route, "rxw_secs", txw_secs))
    if params.mtu < 576 or params.mtu > 65535:
        raise PgmError(f"transport {cfg.tport!r}: mtu {params.mtu} is outside 576..65535")
    if params.txw_sqns < 1 or params.rxw_sqns < 1:
        raise PgmError(f"transport {cfg.tport!r}: txw_sqns and rxw_sqns must be at least 1")
    return address, port, params, _number(route, "mcast_loop", 2)


async def start_pgm(owner: PgmOwner, tport_id: int, cfg: TransportConfig, reliability_s: float) -> PgmTransport:
    """Parse, resolve the network's interface, bind and start (PgmError on failure)."""
    address, port, params, loop_mode = pgm_settings(cfg, reliability_s)
    try:
        ip = await asyncio.get_running_loop().run_in_executor(None, resolve_device, address.network)
    except DeviceNotFound as exc:
        raise PgmError(f"transport {cfg.tport!r}: {exc}") from None
    pgm = PgmTransport(owner, tport_id, cfg.tport, address, port, ip, params, loop_mode)
    await pgm.start()
    return pgm
