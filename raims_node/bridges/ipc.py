"""The sbus local bus (`type: ipc`): seed 001 on a Unix SOCK_SEQPACKET socket, bridged
into the Rai MS network like the NATS and Redis transports.

Transport record (decisions where the manual and the seed are silent):

    - tport: bus
      type: ipc
      route: {path: /run/x.sock, service: _ipc, max_queue_bytes: 8mb,
              max_queue_packets: 10000, max_packet: 192kb, mode: "0666", sndbuf: 256kb}

- `path` absent: the socket is `socket_path(NAME)`, NAME the `ipc_name` parameter or
  else the node's `user.service` (unique among the daemons of one host): `$XDG_RUNTIME_DIR/raims/NAME.sock`, else
  `${TMPDIR:-/tmp}/raims-<uid>/NAME.sock`. The parameter `ipc_name: NAME` alone (no ipc
  transport in the startup) makes the daemon start one such bus (`start_ipc_name`).
- The directory is created 0755; a path left by a dead daemon (connect refused) is
  replaced, a live one is "address in use". The socket is `mode` (default 0666): the
  bus is multi-user, secrets are `!/cred/` keys.
- `service` (default `_ipc`) is the namespace shared with NATS and Redis transports of
  the same service (sbus_proto: routing key `a/b/c` is subject `a.b.c`).
- `max_queue_*`: the per-client "too many queued" limit of flood control (sbus_proto
  `Outbox`), default 8 MiB or 10,000 packets. `max_packet` (default 192 KiB, under the
  kernel's default socket buffer): a larger packet is dropped and counted. `sndbuf`
  (default 256 KiB, 0 = the kernel's default): SO_SNDBUF asked for each client socket,
  which the kernel caps at `net.core.wmem_max` and doubles; it bounds the packets in
  flight to a reader before the outbox (and flood control) takes over (~670 small
  packets at 256 KiB against ~280 at Linux's usual 208 KiB default).

Server behaviour where the seed lets the server choose:
- A packet matching no grammar, a MSG with a misused '!' or a malformed `!/cred/` key,
  an UNSUB of a pattern the client does not hold, a SUB that does not compile or that
  `!/cred/` rules refuse: ignored and counted (`show ports` / `stats()`); the client
  stays connected. A zero-length packet reads like end-of-file on SOCK_SEQPACKET and
  closes the client.
- Each matching client gets one copy of a packet, however many of its patterns match.
- CMSG keys answered by the server: `!/cred/whoami` (the client's `!/cred/G/U/P`),
  the flood-control keys (no answer), and raims' own, outside the reserved '!':
  `raims/ping` (answered with the same payload after every packet sent before it:
  the client's flush) and `raims/visible` (payload a routing key; answer
  `KEY\\x00N`, N = 1 when a subscriber anywhere in the network would receive it, sbus
  clients on this bus included; the client's wait_visible). Other keys are counted.

The asyncio side is `loop.add_reader` / `add_writer` on non-blocking sockets (no
Transport exists for SOCK_SEQPACKET). Speed (issue 20: the kernel's per-packet work is
the floor, so the server spends as few syscalls and as little Python per packet as it
can): a readable client is drained with `recvmmsg` (bridges/mmsg.py), READ_BATCH packets
per call and up to READ_BURST per wakeup, into slots of one mmap; each batch is routed
with a cached routing key -> (receivers, bus subject) table, the deliveries collect in
each receiver's `pending` list and go out with one `sendmmsg` per receiver at the end of
the batch (the packets the socket refuses fall into its `Outbox`), and consecutive
packets to one bus subject enter the network as one `publish_run`. Deliveries from the
network are batched the same way and flushed on the next loop turn. Without
recvmmsg/sendmmsg (not Linux) the same paths use `recv_into` / `send` per packet.
Holding publishers uses the hub's FlowGate, so a blocked sbus reader holds NATS/Redis
publishers too and the daemon's congestion deadline bounds the stall.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import socket
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from raims_node.bridges import mmsg
from raims_node.bridges import sbus_proto as sp
from raims_node.bridges.glue import BridgeServer, BridgeSettings, BridgeStartError, parse_network
from raims_node.bridges.ipc_client import READ_BATCH, SEND_BATCH, IpcClient
from raims_node.config.params import parse_bytes, parse_count
from raims_node.subject import Pattern, SubjectError, compile_pattern, subject_text

if TYPE_CHECKING:
    from raims_node.bridges.glue import HubView, SessionProtocol
    from raims_node.config.tree import TransportConfig

log = logging.getLogger("raims.bridge.ipc")

DEFAULT_SERVICE = "_ipc"
DEFAULT_MAX_PACKET = 192 * 1024
DEFAULT_MODE = 0o666
DEFAULT_SNDBUF = 256 * 1024
ROUTE_CACHE_LIMIT = 65536
CTL_PING = b"raims/ping"
CTL_VISIBLE = b"raims/visible"


def socket_dir() -> Path:
    """Where named buses (and the endpoints files) live on this host for this user."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return Path(runtime) / "raims"
    return Path(os.environ.get("TMPDIR") or "/tmp") / f"raims-{os.getuid()}"


def socket_path(name: str) -> Path:
    return socket_dir() / f"{name}.sock"


@dataclass(frozen=True, slots=True)
class IpcSettings(BridgeSettings):
    path: str = ""
    max_queue_bytes: int = sp.DEFAULT_MAX_BYTES
    max_queue_packets: int = sp.DEFAULT_MAX_PACKETS
    max_packet: int = DEFAULT_MAX_PACKET
    mode: int = DEFAULT_MODE
    sndbuf: int = DEFAULT_SNDBUF

    @classmethod
    def of_ipc(cls, cfg: TransportConfig, name: str) -> IpcSettings:
        route = cfg.route

        def get(key: str, default: Any) -> Any:
            value = route.get(key)
            return default if value is None else value

        path = str(get("path", "")) or str(socket_path(name))
        mode = get("mode", DEFAULT_MODE)
        network = route.get("network")
        return cls((), 0, str(get("service", DEFAULT_SERVICE)),
                   parse_network(None if network is None else str(network)),
                   path=path,
                   max_queue_bytes=parse_bytes(get("max_queue_bytes", sp.DEFAULT_MAX_BYTES)),
                   max_queue_packets=parse_count(get("max_queue_packets", sp.DEFAULT_MAX_PACKETS)),
                   max_packet=parse_bytes(get("max_packet", DEFAULT_MAX_PACKET)),
                   sndbuf=parse_bytes(get("sndbuf", DEFAULT_SNDBUF)),
                   mode=int(str(mode), 8) if isinstance(mode, str) else int(mode))


class IpcServer(BridgeServer):
    """The sbus server of one `type: ipc` transport; the bus client of its service for
    everything its sbus clients subscribe in the network."""

    kind = "ipc"
    default_service = DEFAULT_SERVICE
    settings: IpcSettings
    echo = False  # what sbus clients publish is delivered to them here, not by the bus

    def __init__(self, hub: HubView, name: str, settings: BridgeSettings) -> None:
        super().__init__(hub, name, settings)
        assert isinstance(settings, IpcSettings)
        self.client_id = hub.next_client_id()
        self.loop = asyncio.get_running_loop()
        self.clients: dict[int, IpcClient] = {}
        self.rbuf = bytearray(settings.max_packet + 1)
        self.rview = memoryview(self.rbuf)
        self.counters = {name: 0 for name in (
            "bad_packets", "bad_bang", "bad_patterns", "cred_refused", "unknown_unsubs", "unknown_cmsgs",
            "too_large", "unmappable_in")}
        self._sock: socket.socket | None = None
        self._ids = 0
        # batched syscalls (mmsg.py) where the platform has them
        self.rx = mmsg.Receiver(READ_BATCH, settings.max_packet + 1) if mmsg.available() else None
        self.tx = mmsg.Sender(SEND_BATCH) if mmsg.available() else None
        self._dirty: list[IpcClient] = []  # clients with pending deliveries
        self._in_batch = False  # inside a client's read batch: its end flushes
        self._flush_soon = False
        # local fan-out: routing key -> (receivers, bus subject or None)
        self._routes: dict[bytes, tuple[tuple[IpcClient, ...], str | None]] = {}
        # bus subscriptions: NetSub -> [sid, holders, compiled RV pattern or None]
        self._net: dict[sp.NetSub, tuple[str, list[int], Pattern | None]] = {}
        self._net_seq = 0
        self._canon: dict[str, str] = {}  # bus subject -> the one sid that delivers it
        self._keys: dict[str, bytes] = {}  # bus subject -> routing key (b"": none)

    @property
    def limits(self) -> IpcSettings:
        return self.settings

    @classmethod
    def settings_of(cls, hub: HubView, cfg: TransportConfig) -> BridgeSettings:
        return IpcSettings.of_ipc(cfg, hub.host.tree.parameters.text("ipc_name")
                                  or f"{hub.host.node.user}.{hub.host.node.service}")

    # ------------------------------------------------------------ listening

    async def listen(self) -> list[str]:
        path = Path(self.settings.path)
        try:
            self._sock = _bind(path, self.settings.mode)
        except OSError as exc:
            raise BridgeStartError(f"transport {self.name!r} listen {path} failed: "
                                   f"{exc.strerror or exc}") from None
        self.loop.add_reader(self._sock.fileno(), self._accept)
        self.bound = [str(path)]
        await self.join_network()
        return self.bound

    def _accept(self) -> None:
        assert self._sock is not None
        for _ in range(64):
            try:
                sock, _ = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                log.warning("%s accept: %s", self.name, exc)
                return
            sock.setblocking(False)
            if self.settings.sndbuf:
                with contextlib.suppress(OSError):  # the kernel caps it at wmem_max, then doubles it
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.settings.sndbuf)
            try:
                client = IpcClient(self, sock, self.hub.next_client_id())
            except OSError:
                sock.close()
                continue
            self.clients[client.fd] = client
            self.hub.gate.conns.add(cast("SessionProtocol", client))
            client.update_reading()

    def close(self) -> None:
        if self._sock is not None:
            self.loop.remove_reader(self._sock.fileno())
            self._sock.close()
            self._sock = None
            with contextlib.suppress(OSError):
                os.unlink(self.settings.path)
        for client in list(self.clients.values()):
            client.close()

    def dropped(self, client: IpcClient) -> None:
        self.clients.pop(client.fd, None)
        self.hub.gate.remove(cast("SessionProtocol", client))
        for text, _ in client.patterns:
            self._net_release(text)
        client.patterns.clear()
        self._routes.clear()

    # ------------------------------------------------------------ packets

    def packets(self, client: IpcClient, packets: list[bytes | None]) -> None:
        """A batch of packets from `client`, in order (None: one too large; b"": the end).
        MSGs go to the local receivers' pending batches; consecutive MSGs to one bus
        subject go into the network as one run."""
        routes, bus = self._routes, self.bus
        run: list[bytes] = []
        run_subject = ""
        self._in_batch = True
        try:
            for packet in packets:
                if client.closed:
                    break
                if packet is None:
                    self.counters["too_large"] += 1
                    continue
                if packet[:4] == b"MSG ":
                    nul = packet.find(b"\x00", 4)
                    if nul >= 0:
                        key = packet[4:nul]
                        route = routes.get(key) or self._route(key)
                        if route is None:
                            continue
                        receivers, subject = route
                        for receiver in receivers:
                            receiver.send(packet)
                        if subject is not None:
                            if subject != run_subject and run:
                                bus.publish_run(self, run_subject, run)
                                run = []
                            run_subject = subject
                            run.append(packet[nul + 1:])
                        continue
                if run:  # what was published before goes first
                    bus.publish_run(self, run_subject, run)
                    run = []
                if not packet:
                    client.close()
                    break
                self.packet(client, packet)
            if run:
                bus.publish_run(self, run_subject, run)
        finally:
            self._in_batch = False

    def packet(self, client: IpcClient, packet: bytes) -> None:
        """One packet from `client` other than a well-formed MSG."""
        try:
            event = sp.parse(packet)
        except sp.SbusProtocolError:
            self.counters["bad_packets"] += 1
            return
        if isinstance(event, sp.Msg):
            self.counters["bad_packets"] += 1  # unreachable: `packets` takes every MSG
        elif isinstance(event, sp.Sub):
            self.subscribe(client, event.pattern)
        elif isinstance(event, sp.Unsub):
            self.unsubscribe(client, event.pattern)
        elif isinstance(event, sp.Cmsg):
            self.control(client, event.key, event.payload)

    def dirty(self, client: IpcClient) -> None:
        """`client` has its first pending delivery: flush it at the end of the current
        read batch, or soon when the delivery came from elsewhere (the bus)."""
        self._dirty.append(client)
        if not self._in_batch and not self._flush_soon:
            self._flush_soon = True
            self.loop.call_soon(self.flush)

    def flush(self) -> None:
        self._flush_soon = False
        dirty, self._dirty = self._dirty, []
        for client in dirty:
            client.flush()

    def _route(self, key: bytes) -> tuple[tuple[IpcClient, ...], str | None] | None:
        if b"!" in key:
            if key.startswith(sp.CRED_PREFIX):
                return self._cred_route(key)
            try:
                compile_pattern(subject_text(key), "sbus")  # the reserved-token rule, as for patterns
            except SubjectError:
                self.counters["bad_bang"] += 1
                return None
        text = subject_text(key)
        receivers = tuple(c for c in self.clients.values()
                          if any(p.matches(text) for _, p in c.patterns))
        route = (receivers, sp.subject_of(key))
        if len(self._routes) >= ROUTE_CACHE_LIMIT:
            self._routes.clear()
        self._routes[key] = route
        return route

    def _cred_route(self, key: bytes) -> tuple[tuple[IpcClient, ...], None] | None:
        creds = sp.key_creds(key)
        if creds is None:
            if not sp.is_cred_key(key):
                self.counters["bad_bang"] += 1
                return None
            return (), None  # an empty field names nobody
        text = subject_text(key)
        receivers = tuple(c for c in self.clients.values() if c.creds == creds
                          and any(p.matches(text) for _, p in c.patterns))
        route = (receivers, None)
        if len(self._routes) >= ROUTE_CACHE_LIMIT:
            self._routes.clear()
        self._routes[key] = route
        return route

    def subscribe(self, client: IpcClient, pattern: bytes) -> None:
        if pattern.startswith(sp.CRED_PREFIX):
            try:
                pattern = sp.cred_pattern(pattern, client.creds)
            except sp.CredRefused as exc:
                self.counters["cred_refused"] += 1
                log.debug("%s client %d: %s", self.name, client.client_id, exc)
                return
        try:
            compiled = compile_pattern(subject_text(pattern), "sbus")
        except SubjectError:
            self.counters["bad_patterns"] += 1
            return
        client.patterns.append((pattern, compiled))
        self._routes.clear()
        self._net_hold(pattern)

    def unsubscribe(self, client: IpcClient, pattern: bytes) -> None:
        if pattern.startswith(sp.CRED_PREFIX):
            try:
                pattern = sp.cred_pattern(pattern, client.creds)
            except sp.CredRefused:
                self.counters["unknown_unsubs"] += 1
                return
        for i, (text, _) in enumerate(client.patterns):
            if text == pattern:
                del client.patterns[i]
                self._routes.clear()
                self._net_release(pattern)
                return
        self.counters["unknown_unsubs"] += 1

    def control(self, client: IpcClient, key: bytes, payload: bytes | None) -> None:
        if client.control(key):
            return
        if key == sp.WHOAMI:
            client.answer(sp.encode_cmsg(sp.WHOAMI, client.creds.key()))
        elif key == CTL_PING:
            client.answer(sp.encode_cmsg(CTL_PING, payload or b""))
        elif key == CTL_VISIBLE:
            target = payload or b""
            answer = target + b"\x00" + (b"1" if self.visible(target) else b"0")
            client.answer(sp.encode_cmsg(CTL_VISIBLE, answer))
        else:
            self.counters["unknown_cmsgs"] += 1

    def visible(self, key: bytes) -> bool:
        """Whether a MSG on `key` would reach a subscriber: an sbus client here, or any
        subscriber the network knows of (bloom filters: a false positive says True)."""
        route = self._routes.get(key) or self._route(key)
        if route is None:
            return False
        receivers, subject = route
        return bool(receivers) or (subject is not None and self.bus.has_interest(subject))

    # ------------------------------------------------------------ the bus side

    def _net_hold(self, pattern: bytes) -> None:
        net = sp.network_sub(pattern)
        if net is None:
            return
        entry = self._net.get(net)
        if entry is not None:
            entry[1][0] += 1
            return
        self._net_seq += 1
        sid = f"{self._net_seq:012d}"  # ordered: the smallest matching sid delivers
        compiled = None
        try:
            if net.wild:
                compiled = compile_pattern(net.text, "rv")
                self.bus.psubscribe(self, sid, net.text, "rv")
            else:
                self.bus.subscribe(self, sid, net.text)
        except SubjectError:
            self.counters["bad_patterns"] += 1
            return
        self._net[net] = (sid, [1], compiled)
        self._canon.clear()

    def _net_release(self, pattern: bytes) -> None:
        net = sp.network_sub(pattern)
        entry = None if net is None else self._net.get(net)
        if net is None or entry is None:
            return
        entry[1][0] -= 1
        if entry[1][0] == 0:
            del self._net[net]
            self._canon.clear()
            self.bus.unsubscribe(self, entry[0])

    def _canonical(self, subject: str) -> str:
        sids = [sid for net, (sid, _, compiled) in self._net.items()
                if (compiled.matches(subject) if compiled is not None else net.text == subject)]
        canon = min(sids) if sids else ""
        if len(self._canon) >= ROUTE_CACHE_LIMIT:
            self._canon.clear()
        self._canon[subject] = canon
        return canon

    def deliver(self, sid: str, subject: str, reply: str | None,
                headers: bytes | None, payload: bytes) -> None:
        canon = self._canon.get(subject)
        if canon is None:
            canon = self._canonical(subject)
        if canon and sid != canon:
            return  # another of our subscriptions delivers this message
        key = self._keys.get(subject)
        if key is None:
            key = sp.key_of(subject) or b""
            if len(self._keys) >= ROUTE_CACHE_LIMIT:
                self._keys.clear()
            self._keys[subject] = key
        if not key:
            self.counters["unmappable_in"] += 1
            return
        route = self._routes.get(key) or self._route(key)
        if route is not None:
            packet = sp.encode_msg(key, payload)
            for receiver in route[0]:
                receiver.send(packet)

    def deliver_run(self, sid: str, subject: str, payloads: list[bytes]) -> None:
        for payload in payloads:
            self.deliver(sid, subject, None, None, payload)

    # ------------------------------------------------------------ introspection

    def stats(self) -> dict[str, int]:
        live = self.clients.values()
        return {**self.counters, "clients": len(self.clients),
                "slow_consumers": self.slow_consumers,
                "discarded": sum(c.outbox.discarded for c in live),
                "queued": sum(len(c.outbox) for c in live)}

    def port_row(self, label: str) -> dict[str, Any]:
        live = list(self.clients.values())
        return {
            "tport": label, "type": self.kind, "cost": "", "fd": len(live),
            "bs": sum(c.bytes_out for c in live), "br": sum(c.bytes_in for c in live),
            "ms": sum(c.msgs_out for c in live), "mr": sum(c.msgs_in for c in live), "lat": "", "idle": "",
            "fl": "L", "address": ", ".join(self.bound),
        }


def _bind(path: Path, mode: int) -> socket.socket:
    """A listening SOCK_SEQPACKET socket at `path` (module docstring: stale paths)."""
    path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    if path.exists() or path.is_symlink():
        if not stat.S_ISSOCK(path.lstat().st_mode):
            raise OSError(errno.EEXIST, f"{path} exists and is not a socket")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            probe.connect(str(path))
        except OSError:
            path.unlink()  # left by a daemon that is gone
        else:
            raise OSError(errno.EADDRINUSE, f"{path}: another server is listening")
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        sock.bind(str(path))
        os.chmod(path, mode)
        sock.listen(128)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


