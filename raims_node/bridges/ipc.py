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
  kernel's default socket buffer): a larger packet is dropped, counted and the sender told (`raims/error`). `sndbuf`
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
  `raims/ping` (answered with the same payload after every packet sent before it, and
  after what those packets delivered to other clients of the bus was written or queued
  for them: the client's flush) and `raims/visible` (payload a routing key; answer
  `KEY\\x00N`, N = 1 when a subscriber anywhere in the network would receive it, sbus
  clients on this bus included; the client's wait_visible), `raims/ack` and
  `raims/trace` (below), `raims/info` (answer `{"max_packet": N}`, JSON: what the
  client library asks on connect, as a NATS client reads max_payload from INFO). Other
  keys are counted.
- The server's own CMSG `raims/error` with payload `Maximum Payload Violation\x00N`
  (nats-server's -ERR words; N = max_packet) tells a client that a packet of its own
  over `max_packet` was dropped (counted in `too_large`); it comes in order with the
  client's other answers and the connection stays (the packet boundary is intact, unlike
  a NATS stream that -ERR then closes). `raims/error` with `Message Too Large\x00KEY\x00N`
  tells a receiver, in the dropped message's place, that a delivery of N bytes on KEY
  was larger than its socket takes (from the network: NATS allows 1 MiB).
  `raims/error` with `Slow Consumer\x00N` is the last packet of a client the server
  cuts (its flood modes' limits, sbus_proto `Outbox`): N deliveries were dropped with
  its queue; it comes behind what the socket holds, if there is room within 1 s
  (ipc_client.CUT_LINGER_S), then the connection closes (the client reports it).
  `raims/error` with `Server Shutdown` (nats-server's closed reason) is the last packet
  of every client when the transport stops (console `shutdown T`, the node's exit), if
  its socket has room: the client reports a lost connection, not a cut.

raims conventions for the manual's shardcast, ack and trace (issue 28; NATS and Redis
clients have theirs, bridges/router_bus.py):
- `SUB _SHARD/<i>/<n>/<pattern>` (1 <= i <= n <= 65536) takes shard i of n of what
  `<pattern>` matches, as the manual's "Anycast and Shardcast" describes: a key is
  delivered when the pattern matches and the shard holds the hash of its bus subject
  inside the node (`<service>.a.b.c`), the hash the network splits by, so sbus, NATS
  (`SUB foo.> _SHARD.1.2`) and Redis (`PSUBSCRIBE _SHARD.1.2.foo.*`) subscribers of one
  service share the shards consistently on every node. UNSUB names the pattern as it was
  subscribed; `!/cred/` patterns cannot be sharded (refused, counted); a bad shard is a
  bad pattern.
- `CMSG raims/ack\\x00INBOX\\x00KEY\\x00MESSAGE` (or `raims/trace`) publishes MESSAGE on KEY
  exactly as `MSG KEY\\x00MESSAGE` would and asks the network for the manual's acks
  (every node that delivers it to a subscriber answers) or trace (every router it passes
  answers); each answer comes back as a MSG packet on routing key INBOX, which the
  client subscribes first, with the JSON payload of bridges/acks.py. KEY and INBOX must
  map to bus subjects (else counted in `unmappable_acks`). As for NATS and Redis
  clients, the answers come from the network: deliveries to sbus clients of the
  publishing node's own bus are not acknowledged.

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
import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raims_node.bloom import InvalidShard, Shard
from raims_node.bridges import mmsg
from raims_node.bridges import sbus_proto as sp
from raims_node.bridges.acks import ACK_PREFIX, TRACE_PREFIX
from raims_node.bridges.glue import BridgeServer, BridgeSettings, BridgeStartError, parse_network
from raims_node.bridges.ipc_client import (
    CTL_ERROR,
    READ_BATCH,
    SEND_BATCH,
    SERVER_SHUTDOWN,
    IpcClient,
    Matcher,
)
from raims_node.bridges.ipc_net import NetSubs
from raims_node.bridges.ipc_shard import ShardMatch
from raims_node.bridges.ipc_socket import bind_socket, socket_dir, socket_path
from raims_node.config.params import parse_bytes, parse_count
from raims_node.subject import SubjectError, compile_pattern, subject_text

if TYPE_CHECKING:
    from raims_node.bridges.glue import HubView
    from raims_node.config.tree import TransportConfig

log = logging.getLogger("raims.bridge.ipc")

DEFAULT_SERVICE = "_ipc"
DEFAULT_MAX_PACKET = 192 * 1024
DEFAULT_MODE = 0o666
DEFAULT_SNDBUF = 256 * 1024
ROUTE_CACHE_LIMIT = 65536
SELECTIVE_FORGET = 1024  # a pattern's change forgets the cached routes it matches, up to this many cached
MAX_CLIENT_PATTERNS = 65536  # one client's patterns: ~3 KB each, and every route is matched against them
__all__ = ["IpcServer", "IpcSettings", "socket_dir", "socket_path"]

CTL_PING = b"raims/ping"
CTL_VISIBLE = b"raims/visible"
CTL_ACK = b"raims/ack"
CTL_TRACE = b"raims/trace"
CTL_INFO = b"raims/info"
MAX_PAYLOAD_VIOLATION = b"Maximum Payload Violation"  # nats-server's words for the same case


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
    """The sbus server of a `type: ipc` transport, and its service's bus client in the network."""

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
        self.lingering: set[IpcClient] = set()
        self.rbuf = bytearray(settings.max_packet + 1)
        self.rview = memoryview(self.rbuf)
        self.counters = {name: 0 for name in (
            "bad_packets", "bad_bang", "bad_patterns", "cred_refused", "unknown_unsubs", "unknown_cmsgs",
            "too_large", "unmappable_in", "unmappable_acks")}
        self._sock: socket.socket | None = None
        self._gone = [0, 0, 0, 0]  # bytes out/in, messages out/in of the clients that left (show ports)
        self._ids = 0
        # batched syscalls (mmsg.py) where the platform has them
        self.rx = mmsg.Receiver(READ_BATCH, settings.max_packet + 1) if mmsg.available() else None
        self.tx = mmsg.Sender(SEND_BATCH) if mmsg.available() else None
        self._dirty: list[IpcClient] = []  # clients with pending deliveries
        self._in_batch = False  # inside a client's read batch: its end flushes
        self._flush_soon = False
        # local fan-out: routing key -> (receivers, bus subject or None)
        self._routes: dict[bytes, tuple[tuple[IpcClient, ...], str | None]] = {}
        self.net = NetSubs(self, self.bus, self.counters)  # its bus subscriptions (ipc_net.py)
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
            self._sock = bind_socket(path, self.settings.mode)
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
            self.accepts += 1
            if self.settings.sndbuf:
                with contextlib.suppress(OSError):  # the kernel caps it at wmem_max, then doubles it
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.settings.sndbuf)
            try:
                client = IpcClient(self, sock, self.hub.next_client_id())
            except OSError:
                sock.close()
                continue
            self.clients[client.fd] = client
            self.hub.gate.conns.add(client)
            client.update_reading()

    def close(self) -> None:
        if self._sock is not None:
            self.loop.remove_reader(self._sock.fileno())
            self._sock.close()
            self._sock = None
            with contextlib.suppress(OSError):
                os.unlink(self.settings.path)
        notice = sp.encode_cmsg(CTL_ERROR, SERVER_SHUTDOWN)  # not a cut: the client reports a lost connection
        for client in list(self.clients.values()):
            client.close(notice)
        for client in list(self.lingering):
            client.end()

    def dropped(self, client: IpcClient) -> None:
        self.bus.drop_client(client)  # type: ignore[arg-type]  # its service names are withdrawn
        self.clients.pop(client.fd, None)
        self.hub.gate.remove(client)
        for i, n in enumerate((client.bytes_out, client.bytes_in, client.msgs_out, client.msgs_in)):
            self._gone[i] += n
        for text, _ in client.patterns:
            self.net.release(text)
        client.patterns.clear()
        self._routes.clear()

    # ------------------------------------------------------------ packets

    def packets(self, client: IpcClient, packets: list[bytes | None]) -> None:
        """A batch of packets from `client`, in order (None: one too large; b"": the end);
        consecutive MSGs on one key form a run for local receivers and the network (`_run`)."""
        routes = self._routes
        run: list[bytes] = []
        run_key: bytes | None = None
        run_route: tuple[tuple[IpcClient, ...], str | None] | None = None
        self._in_batch = True
        try:
            for packet in packets:
                if client.closed:
                    break
                if packet is not None and packet[:4] == b"MSG ":
                    nul = packet.find(b"\x00", 4)
                    if nul >= 0:
                        key = packet[4:nul]
                        if key != run_key:
                            if run:
                                self._run(run_route, run, len(run_key or b""), client)
                                run = []
                            run_key, run_route = key, routes.get(key) or self._route(key)
                        if run_route is not None:
                            run.append(packet)
                        continue
                if run:  # what was published before goes first
                    self._run(run_route, run, len(run_key or b""), client)
                    run = []
                run_key = None
                if packet is None:
                    self.too_large(client)
                    continue
                if not packet:
                    client.close()
                    break
                self.packet(client, packet)
            if run:
                self._run(run_route, run, len(run_key or b""), client)
        finally:
            self._in_batch = False

    def _run(self, route: tuple[tuple[IpcClient, ...], str | None] | None, run: list[bytes], key_len: int,
             client: IpcClient) -> None:
        """`client`'s MSG packets on one key (`key_len` bytes): to the local receivers, and as
        one run into the network if the key has a subject (`_NAMES.*` as the client's own)."""
        if route is None:
            return
        receivers, subject = route
        for receiver in receivers:
            receiver.send_many(run)
        if subject is not None:
            body = key_len + 5  # b"MSG " + key + b"\x00"
            owner: Any = client if subject.startswith("_NAMES.") else self
            self.bus.publish_run(owner, subject, [packet[body:] for packet in run])

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

    def too_large(self, client: IpcClient) -> None:
        """A packet over `max_packet`: dropped, counted, and the client told (`raims/error`,
        after what its earlier packets delivered), as nats-server's -ERR tells a NATS client."""
        self.counters["too_large"] += 1
        client.answer(sp.encode_cmsg(CTL_ERROR, MAX_PAYLOAD_VIOLATION + b"\x00%d" % self.settings.max_packet))

    def dirty(self, client: IpcClient) -> None:
        """`client`'s first pending delivery: flushed at the end of the read batch, or soon."""
        self._dirty.append(client)
        if not self._in_batch and not self._flush_soon:
            self._flush_soon = True
            self.loop.call_soon(self.flush)

    def flush(self) -> None:
        self._flush_soon = False
        dirty, self._dirty = self._dirty, []
        for client in dirty:
            client.flush()

    def _forget(self, pattern: bytes, matcher: Matcher) -> None:
        """The cached routes a pattern's subscription changes: those of the keys it
        matches, when few routes are cached (all of them otherwise, and for `!/cred/`).
        One client subscribing and unsubscribing a thousand times a second made every
        other client's publish find no route cached and match every pattern again."""
        routes = self._routes
        if len(routes) > SELECTIVE_FORGET or pattern.startswith(sp.CRED_PREFIX):
            routes.clear()
            return
        for key in [k for k in routes if k.startswith(sp.CRED_PREFIX) or matcher.matches(subject_text(k))]:
            del routes[key]

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
        split = sp.shard_split(pattern)
        shard = None
        if split is not None:  # `_SHARD/<i>/<n>/<pattern>`: shard i of n (module docstring)
            try:
                shard = Shard(split[0], split[1])
            except InvalidShard:
                self.counters["bad_patterns"] += 1
                return
            if split[2].startswith(sp.CRED_PREFIX):
                self.counters["cred_refused"] += 1  # secret keys are never sharded
                return
        elif pattern.startswith(sp.CRED_PREFIX):
            try:
                pattern = sp.cred_pattern(pattern, client.creds)
            except sp.CredRefused as exc:
                self.counters["cred_refused"] += 1
                log.debug("%s client %d: %s", self.name, client.client_id, exc)
                return
        body = pattern if split is None else split[2]
        try:
            compiled = compile_pattern(subject_text(body), "sbus")
        except SubjectError:
            self.counters["bad_patterns"] += 1
            return
        if len(client.patterns) >= MAX_CLIENT_PATTERNS:
            self.counters["bad_patterns"] += 1
            return
        matcher = compiled if shard is None else ShardMatch(compiled, shard, self.bus)
        client.patterns.append((pattern, matcher))
        self._forget(pattern, matcher)
        self.net.hold(pattern)

    def unsubscribe(self, client: IpcClient, pattern: bytes) -> None:
        if pattern.startswith(sp.CRED_PREFIX):
            try:
                pattern = sp.cred_pattern(pattern, client.creds)
            except sp.CredRefused:
                self.counters["unknown_unsubs"] += 1
                return
        for i, (text, matcher) in enumerate(client.patterns):
            if text == pattern:
                del client.patterns[i]
                self._forget(pattern, matcher)
                self.net.release(pattern)
                return
        self.counters["unknown_unsubs"] += 1

    def control(self, client: IpcClient, key: bytes, payload: bytes | None) -> None:
        if client.control(key):
            return
        if key == sp.WHOAMI:
            client.answer(sp.encode_cmsg(sp.WHOAMI, client.creds.key()))
        elif key == CTL_PING:
            self.flush()  # what its earlier packets delivered to other clients goes (or queues) first
            client.answer(sp.encode_cmsg(CTL_PING, payload or b""))
        elif key == CTL_INFO:
            client.answer(sp.encode_cmsg(CTL_INFO, b'{"max_packet": %d}' % self.settings.max_packet))
        elif key == CTL_VISIBLE:
            target = payload or b""
            answer = target + b"\x00" + (b"1" if self.visible(target) else b"0")
            client.answer(sp.encode_cmsg(CTL_VISIBLE, answer))
        elif key in (CTL_ACK, CTL_TRACE):
            publish_acked(self, key, payload)
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

    def deliver(self, sid: str, subject: str, reply: str | None,
                headers: bytes | None, payload: bytes) -> None:
        canon = self.net.canon.get(subject)
        if canon is None:
            canon = self.net.canonical(subject)
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
        """`show ports`: the totals since the bus started (the clients that left too);
        `bad` the packets refused, `ignored` those dropped (the web JSON's hidden columns)."""
        live = list(self.clients.values())
        gone, k = self._gone, self.counters
        return {
            "tport": label, "type": self.kind, "cost": "", "fd": None, "conns": len(live),  # fd: port_fds
            "bs": gone[0] + sum(cl.bytes_out for cl in live), "br": gone[1] + sum(cl.bytes_in for cl in live),
            "ms": gone[2] + sum(cl.msgs_out for cl in live), "mr": gone[3] + sum(cl.msgs_in for cl in live),
            "lat": "", "idle": "", "fl": "L", "address": ", ".join(self.bound),
            "bad": k["bad_packets"] + k["bad_bang"] + k["bad_patterns"] + k["cred_refused"] + k["too_large"],
            "ignored": sum(cl.outbox.discarded for cl in live) + k["unknown_unsubs"] + k["unknown_cmsgs"]
            + k["unmappable_in"] + k["unmappable_acks"],
        }


def publish_acked(server: IpcServer, ctl: bytes, payload: bytes | None) -> None:
    """`CMSG raims/ack|raims/trace` with payload `INBOX\x00KEY\x00MESSAGE`: MESSAGE is
    published on KEY as a MSG would be, asking the network for acks (trace) that come
    back as MSG packets on INBOX (module docstring)."""
    asked = sp.ack_request(payload)
    if asked is None:
        server.counters["bad_packets"] += 1
        return
    inbox, key, message = asked
    subject, inbox_subject = sp.subject_of(key), sp.subject_of(inbox)
    if subject is None or inbox_subject is None:
        server.counters["unmappable_acks"] += 1
        return
    route = server._routes.get(key) or server._route(key)
    if route is not None:
        packet = sp.encode_msg(key, message)
        for receiver in route[0]:
            receiver.send(packet)
    head = ACK_PREFIX if ctl == CTL_ACK else TRACE_PREFIX
    server.bus.publish(server, subject, head + inbox_subject, None, message)
