"""Name discovery: `_X.NAME` advertisements multicast on a device.

Implements the manual's "_X.NAME" ("messages multicast to a device for presence
detection; links between peers are only established when the type and name of a
transport is matched within a service"), the `device` option of "Description of
Transports", "TCP Mesh" and "TCP Point-to-point", the `type: name` transport of the
`show tport` example (`name://eth0;239.23.22.217:8327`) and the device forms of
"Services and Networks" (seed 000).

Three parts: the pure advertisement codec (`encode_advert` / `decode_advert`, a Rai MS
frame on `_X.NAME`), device resolution (`resolve_device`: interface name, IPv4 address,
network address or host name) and the asyncio `NameService`, one per device, which
multicasts this node's advertisements and reports the other nodes' to a callback. Which
advertisements lead to a link is the daemon's business.

Decisions where the manual is vague:
- An advertisement carries the sender's bridge id (frame header), user, service, the
  transport's name, type and role (`listen`, `connect`, `mesh`, or `any` for a connector
  of either kind), its url (`host:port` on the device, required for `listen` and `mesh`,
  empty otherwise), the node's start time, a sequence number and the send time. Field
  `tport_role` is a raims fid; the others are the manual's.
- Advertisements are not signed: a forged one can only make a node dial an address, and
  every link authenticates its peer with the service keys before it carries anything.
- Defaults as in the manual's example: group 239.23.22.217, port 8327, TTL 1 (the
  broadcast domain, as the manual requires). A `type: name` transport whose `tport` is
  the device overrides them: `connect` (or `listen`) is `[device][;group]` and `port`
  the group's port, as the reference writes them (`connect: lo;239.23.22.217`).
- Sending: at start and whenever the advertisements change, a burst of BURST_COUNT sends
  BURST_GAP_S apart (a datagram may be lost), then one per heartbeat interval; a node
  heard for the first time is answered within REPLY_DELAY_S, so that discovery never
  waits for a heartbeat. Peers not heard for PEER_EXPIRE_INTERVALS intervals are
  forgotten (a restarted peer has a new bridge id anyway).
- Receiving: one socket bound to the group and port (SO_REUSEADDR, so that every node
  of a host hears the group) and joined on the device; sending from a second socket
  bound to the device (IP_MULTICAST_IF, IP_MULTICAST_LOOP on), whose port is the one in
  the `show ports` address `name://ip:port;group:port`. Own advertisements (same bridge
  id) are skipped; `recv` counts the others, among them `bad` (malformed) and `ignored`
  (another service); a repeated or older sequence number for a peer's transport is
  dropped.
- Devices: an interface name is looked up first (SIOCGIFADDR), then an IPv4 address
  (a local interface's own address, or a network such as 192.168.1.0 holding one), then a
  host name resolved to IPv4 and matched the same way; empty means the host name. Only
  IPv4: multicast discovery is IPv4 in the reference too.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import ipaddress
import logging
import socket
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from raims_node import RaimsError
from raims_node.config.tree import TransportConfig
from raims_node.wire.errors import BadField, FrameTooLarge, WireError
from raims_node.wire.fields import Fid
from raims_node.wire.frame import MsgType, decode_frame, encode_frame
from raims_node.wire.subjects import X_NAME

log = logging.getLogger("raims.name")

DEFAULT_GROUP = "239.23.22.217"
DEFAULT_PORT = 8327
MULTICAST_TTL = 1
BURST_COUNT = 3
BURST_GAP_S = 0.2
REPLY_DELAY_S = 0.02
PEER_EXPIRE_INTERVALS = 3
MAX_ADVERT = 4096  # bytes of one datagram; an advertisement is ~200
ROLES = ("listen", "connect", "mesh", "any")
URL_ROLES = ("listen", "mesh")  # the roles others connect to, which need a url
MAX_PORT = 0xFFFF

_SIOCGIFADDR = 0x8915
_SIOCGIFNETMASK = 0x891B
_IFREQ = struct.Struct("256s")  # ifr_name[16] then the sockaddr_in at byte 16 (address at 20)


class NameServiceError(RaimsError):
    """Name discovery could not start: a device, group or socket problem."""


class DeviceNotFound(NameServiceError):
    """A device names no local IPv4 interface."""


# ---------------------------------------------------------------- advertisements


@dataclass(frozen=True, slots=True)
class Advert:
    """One transport advertised by one node: who, which transport, where to reach it."""

    bridge: bytes
    user: str
    service: str
    tport: str
    tport_type: str
    role: str
    url: str  # "host:port" for the listen and mesh roles, "" otherwise
    start_ns: int
    seqno: int
    stamp_ns: int

    @property
    def address(self) -> tuple[str, int]:
        """The url as (host, port); BadField when it is not one."""
        return split_url(self.url)


def split_url(url: str) -> tuple[str, int]:
    host, sep, port = url.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) <= MAX_PORT:
        raise BadField(f"url {url!r} is not host:port")
    return host, int(port)


def _check(ad: Advert) -> None:
    if ad.role not in ROLES:
        raise BadField(f"role {ad.role!r} is not one of {', '.join(ROLES)}")
    if ad.role in URL_ROLES:
        split_url(ad.url)


def encode_advert(ad: Advert) -> bytes:
    """The `_X.NAME` datagram of `ad`; BadField when a value does not fit."""
    _check(ad)
    fields: list[tuple[int, object]] = [
        (Fid.USER, ad.user), (Fid.SERVICE, ad.service), (Fid.TPORT, ad.tport),
        (Fid.TPORT_TYPE, ad.tport_type), (Fid.TPORT_ROLE, ad.role), (Fid.MESH_URL, ad.url),
        (Fid.START, ad.start_ns), (Fid.SEQNO, ad.seqno), (Fid.STAMP, ad.stamp_ns),
    ]
    return bytes(encode_frame(MsgType.HEARTBEAT, X_NAME, ad.bridge, fields))


def decode_advert(data: bytes) -> Advert:
    """Decode one datagram; raises only WireError subclasses."""
    if len(data) > MAX_ADVERT:
        raise FrameTooLarge(f"name datagram of {len(data)} bytes exceeds {MAX_ADVERT}")
    frame = decode_frame(data)
    if frame.subject != X_NAME:
        raise BadField(f"subject {frame.subject!r} is not {X_NAME}")
    values = frame.as_dict()

    def text(fid: Fid, required: bool = True) -> str:
        value = values.get(fid)
        if value is None and not required:
            return ""
        if not isinstance(value, str) or not value:
            raise BadField(f"{fid.name.lower()}: expected a string, got {value!r:.40}")
        return value

    def number(fid: Fid) -> int:
        value = values.get(fid)
        if not isinstance(value, int) or isinstance(value, bool):
            raise BadField(f"{fid.name.lower()}: expected an integer, got {value!r:.40}")
        return value

    ad = Advert(frame.bridge, text(Fid.USER), text(Fid.SERVICE), text(Fid.TPORT), text(Fid.TPORT_TYPE),
                text(Fid.TPORT_ROLE), text(Fid.MESH_URL, required=False), number(Fid.START),
                number(Fid.SEQNO), number(Fid.STAMP))
    _check(ad)
    return ad


# ---------------------------------------------------------------- devices


@dataclass(frozen=True, slots=True)
class Interface:
    name: str
    address: ipaddress.IPv4Address
    network: ipaddress.IPv4Network


def _ioctl_address(sock: socket.socket, request: int, name: str) -> ipaddress.IPv4Address:
    raw = fcntl.ioctl(sock.fileno(), request, _IFREQ.pack(name.encode()[:15]))
    return ipaddress.IPv4Address(raw[20:24])


def local_interfaces() -> list[Interface]:
    """The IPv4 interfaces of this host (Linux ioctls; empty where they do not exist)."""
    out: list[Interface] = []
    try:
        names = [name for _, name in socket.if_nameindex()]
    except OSError:
        return out
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for name in names:
            try:
                addr = _ioctl_address(sock, _SIOCGIFADDR, name)
                mask = _ioctl_address(sock, _SIOCGIFNETMASK, name)
            except OSError:  # no IPv4 address on this interface
                continue
            out.append(Interface(name, addr, ipaddress.IPv4Network(f"{addr}/{mask}", strict=False)))
    return out


def resolve_device(
    device: str,
    interfaces: Sequence[Interface] | None = None,
    resolve: Callable[[str], str] = socket.gethostbyname,
) -> str:
    """The local IPv4 address of `device` (module docstring: the order of the forms)."""
    text = device.strip() or socket.gethostname()
    ifaces = local_interfaces() if interfaces is None else list(interfaces)
    for iface in ifaces:
        if iface.name == text:
            return str(iface.address)
    try:
        ip = ipaddress.IPv4Address(text)
    except ValueError:
        try:
            ip = ipaddress.IPv4Address(resolve(text))
        except (OSError, UnicodeError, ValueError):
            raise DeviceNotFound(f"device {text!r} is not an interface ({_names(ifaces)}), an IPv4 address "
                                 "or a host name that resolves to one") from None
    if not ifaces:  # interfaces cannot be listed here: trust the address
        return str(ip)
    for iface in ifaces:
        if iface.address == ip:
            return str(ip)
    for iface in ifaces:
        if ip in iface.network:
            return str(iface.address)
    raise DeviceNotFound(f"device {text!r} ({ip}) is neither the address of a local interface nor in the "
                         f"network of one ({_names(ifaces)})")


def _names(ifaces: Sequence[Interface]) -> str:
    return ", ".join(f"{i.name} {i.address}/{i.network.prefixlen}" for i in ifaces) or "none found"


# ---------------------------------------------------------------- configuration


@dataclass(frozen=True, slots=True)
class NameConfig:
    """Where the name protocol of one device runs."""

    device: str
    group: str = DEFAULT_GROUP
    port: int = DEFAULT_PORT

    @classmethod
    def of(cls, device: str, record: TransportConfig | None = None) -> NameConfig:
        """The settings of `device`, overridden by its `type: name` record if any."""
        if record is None:
            return cls(device)
        spec = (record.connect or record.listen or [""])[0]
        dev, _, group = spec.partition(";")
        group = group.strip() or DEFAULT_GROUP
        try:
            ok = ipaddress.IPv4Address(group).is_multicast
        except ValueError:
            ok = False
        if not ok:
            raise NameServiceError(f"name transport {record.tport!r}: {group!r} is not an IPv4 multicast group")
        return cls(dev.strip() or device, group, record.port or DEFAULT_PORT)  # port checked when loaded


# ---------------------------------------------------------------- the service


@dataclass(slots=True)
class _Local:
    tport: str
    tport_type: str
    role: str
    url: str


@dataclass(slots=True)
class _Heard:
    seqno: int
    seen: float  # monotonic


@dataclass
class NameCounters:
    recv: int = 0
    sent: int = 0
    bad: int = 0
    ignored: int = 0
    bytes_in: int = 0
    bytes_out: int = 0


class NameService(asyncio.DatagramProtocol):
    """The name protocol on one device: advertises this node's transports and reports
    the advertisements of the other nodes of `service` to `on_advert`."""

    def __init__(
        self,
        name: str,
        config: NameConfig,
        device_ip: str,
        *,
        bridge: bytes,
        user: str,
        service: str,
        start_ns: int,
        interval_s: float,
        on_advert: Callable[[Advert], None],
    ) -> None:
        self.name = name
        self.config = config
        self.device_ip = device_ip
        self.bridge = bridge
        self.user = user
        self.service = service
        self.start_ns = start_ns
        self.interval_s = interval_s
        self.on_advert = on_advert
        self.counters = NameCounters()
        self.seqno = 0
        self.send_port = 0
        self._local: dict[str, _Local] = {}
        self._heard: dict[tuple[bytes, str], _Heard] = {}  # (bridge, tport) -> newest seqno
        self._transport: asyncio.DatagramTransport | None = None
        self._send_sock: socket.socket | None = None
        self._timers: list[asyncio.TimerHandle] = []
        self._reply: asyncio.TimerHandle | None = None
        self._tick_handle: asyncio.TimerHandle | None = None

    @property
    def address(self) -> str:
        return f"name://{self.device_ip}:{self.send_port};{self.config.group}:{self.config.port}"

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Open both sockets and start advertising; NameServiceError when the device
        cannot join the group."""
        group, port = self.config.group, self.config.port
        try:
            recv = self._recv_socket(group, port)
        except OSError as exc:
            raise NameServiceError(f"name {self.name}: cannot join {group}:{port} on {self.device_ip}: "
                                   f"{exc.strerror}") from None
        try:
            self._send_sock = self._sender()
        except OSError as exc:
            recv.close()
            raise NameServiceError(f"name {self.name}: cannot multicast from {self.device_ip}: "
                                   f"{exc.strerror}") from None
        self.send_port = self._send_sock.getsockname()[1]
        loop = asyncio.get_running_loop()
        await loop.create_datagram_endpoint(lambda: self, sock=recv)
        self._burst()
        self._tick_handle = loop.call_later(self.interval_s, self._tick)

    def _recv_socket(self, group: str, port: int) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if hasattr(socket, "SO_REUSEPORT"):  # BSDs need it for several receivers of one group
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind((group, port))  # bound to the group: no other group's datagrams on this port
            mreq = socket.inet_aton(group) + socket.inet_aton(self.device_ip)
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        return sock

    def _sender(self) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(self.device_ip))
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)  # nodes on this host
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, MULTICAST_TTL)
            sock.bind((self.device_ip, 0))
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        return sock

    def transports(self) -> tuple[asyncio.DatagramTransport | None, socket.socket | None]:
        """The receiving transport and the sending socket (show fds)."""
        return self._transport, self._send_sock

    def close(self) -> None:
        for handle in [*self._timers, self._reply, self._tick_handle]:
            if handle is not None:
                handle.cancel()
        self._timers.clear()
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        if self._send_sock is not None:
            self._send_sock.close()
            self._send_sock = None

    # ------------------------------------------------------------------ sending

    def advertise(self, tport: str, tport_type: str, role: str, url: str = "") -> None:
        """Advertise (or change) transport `tport`; sent at once, in a burst."""
        _check(Advert(self.bridge, self.user, self.service, tport, tport_type, role, url, 0, 0, 0))
        local = _Local(tport, tport_type, role, url)
        if self._local.get(tport) == local:
            return
        self._local[tport] = local
        if self._send_sock is not None:
            self._burst()

    def _burst(self) -> None:
        for handle in self._timers:
            handle.cancel()
        loop = asyncio.get_running_loop()
        self._timers = [loop.call_later(i * BURST_GAP_S, self._send_all) for i in range(1, BURST_COUNT)]
        self._send_all()

    def _tick(self) -> None:
        self._tick_handle = asyncio.get_running_loop().call_later(self.interval_s, self._tick)
        horizon = time.monotonic() - PEER_EXPIRE_INTERVALS * self.interval_s
        for key in [k for k, h in self._heard.items() if h.seen < horizon]:
            del self._heard[key]
        self._send_all()

    def _reply_now(self) -> None:
        self._reply = None
        self._send_all()

    def _send_all(self) -> None:
        sock = self._send_sock
        if sock is None:
            return
        now = time.time_ns()
        dest = (self.config.group, self.config.port)
        for local in self._local.values():
            self.seqno += 1
            data = encode_advert(Advert(self.bridge, self.user, self.service, local.tport, local.tport_type,
                                        local.role, local.url, self.start_ns, self.seqno, now))
            try:
                sock.sendto(data, dest)
            except OSError as exc:  # a full buffer or a downed device: the next send retries
                log.debug("name %s: send to %s:%d failed: %s", self.name, dest[0], dest[1], exc)
                continue
            self.counters.sent += 1
            self.counters.bytes_out += len(data)

    # ------------------------------------------------------------------ receiving

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str | Any, int]) -> None:
        c = self.counters
        try:
            ad = decode_advert(data)
        except WireError as exc:
            c.recv += 1
            c.bad += 1
            c.bytes_in += len(data)
            log.debug("name %s: bad datagram from %s: %s", self.name, addr, exc)
            return
        if ad.bridge == self.bridge:
            return
        c.recv += 1
        c.bytes_in += len(data)
        if ad.service != self.service:
            c.ignored += 1
            return
        key = (ad.bridge, ad.tport)
        heard = self._heard.get(key)
        if heard is not None and ad.seqno <= heard.seqno:
            return
        self._heard[key] = _Heard(ad.seqno, time.monotonic())
        if heard is None and self._local and self._reply is None:
            # a newcomer: answer before the next heartbeat, so that it can connect now
            self._reply = asyncio.get_running_loop().call_later(REPLY_DELAY_S, self._reply_now)
        log.debug("name %s: %s %s %s %s at %r", self.name, ad.user, ad.tport_type, ad.tport, ad.role, ad.url)
        self.on_advert(ad)

    def error_received(self, exc: Exception) -> None:
        log.debug("name %s: %s", self.name, exc)

    # ------------------------------------------------------------------ show ports

    def port_row(self) -> dict[str, object]:
        """The `show ports` row: ms / mr the datagrams sent / received, `bad` and `ignored`
        (JSON only) among those received, `heard` (JSON only) the nodes heard lately; fd is
        the receive socket's (transports/fds.py port_fds)."""
        c = self.counters
        return {
            "tport": self.name, "type": "name", "cost": "", "fd": None, "heard": len({b for b, _ in self._heard}),
            "bs": c.bytes_out, "br": c.bytes_in, "ms": c.sent, "mr": c.recv, "lat": "", "idle": "",
            "fl": "", "address": self.address, "bad": c.bad, "ignored": c.ignored,
        }


__all__ = [
    "DEFAULT_GROUP", "DEFAULT_PORT", "ROLES", "Advert", "DeviceNotFound", "Interface", "NameConfig",
    "NameCounters", "NameService", "NameServiceError", "decode_advert", "encode_advert", "local_interfaces",
    "resolve_device", "split_url",
]
