"""The daemon: one router node driven by asyncio sockets and the wall clock.

Owns the transports (TCP links and listeners, mesh, the web admin), feeds their frames
to the sans-IO `Node` and carries out the actions it returns. Local clients (the
console, websocket and bridge sessions) subscribe through `subscribe` / `psubscribe`
and receive `Deliver` actions through their `on_deliver` method.

Decisions where the manual is vague:
- Outbound links (the joiner of a `connect` list, its `timeout`, mesh members and
  discovered peers): transports/dialer.py. A listener that cannot bind is fatal at
  startup, as the manual says.
- `listen` defaults to `*` (every address), as the manual's tables say; a transport
  with a `device` listens on the device's address. `host:port` (and `eth0:port`, an
  interface name) in `listen` / `connect` overrides `port` (transports/addr.py).
- A mesh transport started with `connect` still listens, on an ephemeral port of the
  listen address, so that the members it learns of can reach it.
- A `mesh` or `tcp` transport with a `device` (manual "TCP Mesh", "TCP Point-to-point")
  listens on the device's address (port `port`, or ephemeral) unless `listen` says
  otherwise, and is advertised by the name service of that device (one per device, see
  transports/name.py): as `mesh`, as `listen` or `connect` for tcp as it was started,
  or `any` for a bridge's `dev;any` network. On a matching advertisement (same service,
  same transport name) a mesh member dials another mesh member when its bridge id is the
  lower one, as members learned from the mesh do, so that a pair makes one link; a tcp
  connector dials every tcp listener; `any` dials listeners and mesh members. A url
  dialed or linked already is not dialed again (links to mesh members learned either
  way included); an advertisement from a newer start of the peer behind a live link
  closes that link, which is then dialed again. A discovered address that refuses
  DISCOVERED_TRIES connects is left until its next advertisement.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from raims_node.bloom.shard import Shard
from raims_node.bridges.acks import AckWaits
from raims_node.bridges.glue import BridgeStartError
from raims_node.bridges.hub import BridgeHub
from raims_node.bridges.registry import CLIENT_PROTOCOLS
from raims_node.config.keyset import credentials, read_secrets
from raims_node.config.params import log_stamp
from raims_node.config.tree import ConfigTree, TransportConfig
from raims_node.handover import hand_over
from raims_node.names.glue import NamesGlue
from raims_node.nstats import NodeStats
from raims_node.router.actions import (
    Action,
    Close,
    Connect,
    Deliver,
    DeliverRun,
    Log,
    NodeEvent,
    Send,
)
from raims_node.router.node import NS, OPT_ACK, OPT_TRACE, Node, NodeParams
from raims_node.transports.addr import WILDCARD, AddressError, split_address
from raims_node.transports.backpressure import Backpressure
from raims_node.transports.dialer import DaemonError, Dial, Dialer, Running, reachable
from raims_node.transports.fds import daemon_fds, port_fds
from raims_node.transports.guard import LinkGuard
from raims_node.transports.idle_busy import IdleBusy
from raims_node.transports.link import RouterLink
from raims_node.transports.lone import LoneFrames
from raims_node.transports.name import (
    Advert,
    NameConfig,
    NameService,
    NameServiceError,
    resolve_device,
)
from raims_node.transports.poll_stats import PollStats
from raims_node.transports.ports import link_port_row
from raims_node.transports.tcp import LinkProtocol
from raims_node.transports.unsent import LinkBacklog
from raims_node.wake import NodeWake
from raims_node.wire.batch import Run

if TYPE_CHECKING:
    from raims_node.console.context import ConsoleContext
    from raims_node.console_ports import ConsolePorts

log = logging.getLogger("raims.daemon")

TICK_S = 0.05
STALL_GRACE_S = 0.5  # a tick this late restarts the links' heartbeat timeouts
DISCOVERED_TRIES = 3
LINK_TYPES = ("tcp", "mesh")
# the advertised roles each role dials, by name discovery
DIALS = {"mesh": ("mesh",), "connect": ("listen",), "any": ("listen", "mesh")}
BRIDGE_TYPES = tuple(CLIENT_PROTOCOLS)  # client protocols: listeners only, no links




def params_from(tree: ConfigTree) -> NodeParams:
    p = tree.parameters
    return NodeParams(
        heartbeat_ns=int(p.time("heartbeat") * NS),
        pub_window_size=p.size("pub_window_size"),
        sub_window_size=p.size("sub_window_size"),
        pub_window_time_ns=int(p.time("pub_window_time") * NS),
        sub_window_time_ns=int(p.time("sub_window_time") * NS),
    )


class Daemon:
    def __init__(self, tree: ConfigTree, user: str, svc: str | None = None, map_file: str | None = None) -> None:
        self.tree = tree
        self.map_file = map_file or tree.parameters.text("map_file")  # -m wins over the parameter
        self.creds = credentials(tree, user, svc)
        self.kdf = read_secrets(tree).kdf()
        self.node = Node(self.creds, now_ns=time.time_ns(), params=params_from(tree))
        self.nstats = NodeStats(self.node)
        self.dialer = Dialer(self)
        self.ack_waits = AckWaits()
        self.node.rem_handler = self.run_command
        self.naming = NamesGlue(self.node, self.publish, self._apply)  # service names, `_NAMES.*`
        self.links: dict[int, RouterLink] = {}
        self.running: dict[str, Running] = {}
        self._next_conn = 1
        self._ticker: asyncio.Task[None] | None = None
        self.stopping = False
        self.log_lines: list[str] = []
        self.on_log: list[Callable[[str], None]] = []
        self.extra_ports: list[Callable[[], list[dict[str, object]]]] = []
        self.console_ports: ConsolePorts | None = None  # telnet and web, served above us (server.py)
        self.idle = IdleBusy(tree.parameters.count("idle_busy"))  # turns before the loop blocks
        self.bridges = BridgeHub(self, self.idle)
        self.bridges.map_args = (self.map_file, tree.parameters.text("db_num"))
        self.flow = Backpressure(self.links, self.bridges.gate, self.node)
        self.discovery = DeviceDiscovery(self)
        self.extra_ports.append(self.discovery.port_rows)
        self.guard = LinkGuard(tree.parameters, self.node, self.say)  # unauthenticated links, log floods
        self.wake = NodeWake(self.node, self._apply, LinkBacklog(self.links))
        self.poll = PollStats()  # show poll: the links and the lone path add to it
        lone = LoneFrames(self.node, self.links, self._apply, self.bridges.gate, self.idle, self.poll)
        self.link_lone, self.publish_lone = lone.received, lone.publish  # tcp.py, router_bus.py
        self.link_must_yield, self.link_authenticated = self.bridges.output_over_budget, self.guard.authenticated

    # ------------------------------------------------------------------ lifecycle

    async def start(self, listen: list[str], connect: list[str]) -> None:
        """Start transports by name: listeners first, then connectors."""
        self.say(f"session {self.creds.user}.{self.creds.svc}[{self._b64()}] started, "
                  f"start time {self.node.start_ns / NS:.9f}")
        if self.map_file is not None:  # else opened with the first Redis transport (BridgeHub.open_kv)
            try:
                self.bridges.open_kv()
            except BridgeStartError as exc:
                raise DaemonError(str(exc)) from None
        for name in listen:
            await self.start_transport(name, listen=True)
        # numpy, scipy (first route, bloom resize), loaded while links come up; a stop must not wait
        threading.Thread(target=importlib.import_module, args=("scipy.sparse.csgraph",), daemon=True).start()
        for name in connect:
            await self.start_transport(name, listen=False)
        await self._start_ipc_name()
        self._ticker = asyncio.create_task(self._tick_loop())

    async def start_transport(self, name: str, listen: bool) -> Running:
        cfg = self._transport_cfg(name)
        if cfg.type in BRIDGE_TYPES:
            return await self._start_bridge(cfg, listen)
        if cfg.type == "pgm":
            return await self._start_pgm(cfg)
        if cfg.type not in LINK_TYPES:
            raise DaemonError(f"transport {name!r} has type {cfg.type!r}; "
                              f"ms_server starts {LINK_TYPES + BRIDGE_TYPES} here")
        return await self.start_link(cfg, listen)

    async def start_link(self, cfg: TransportConfig, listen: bool, role: str | None = None) -> Running:
        """Start link transport `cfg` (configured, or generated for a bridge's network);
        `role` overrides what its device advertises."""
        if cfg.type == "pgm":  # a bridge's multicast network
            return await self._start_pgm(cfg)
        name = cfg.tport
        run = self.running.get(name)
        fresh = run is None
        if run is None:
            tid = self.node.add_transport(name, cfg.type, cfg.cost)
            run = self.running[name] = Running(cfg, tid, False, False)
            self._apply(self.node.tick(time.time_ns()))
        try:
            names = await self.discovery.service(cfg.device) if cfg.device is not None else None
            if names is not None:
                run.device_ip = names.device_ip
            if listen or cfg.type == "mesh":
                await self._listen(run, ephemeral=not listen)
                run.listen = True
        except DaemonError:
            if fresh:  # not left half started (listed as running, listening on nothing)
                self.running.pop(name, None)
                for server in run.servers:
                    server.close()
            raise
        if not listen:
            run.connect = True
            addrs = self.dialer.connect_addrs(cfg)
            if addrs and (run.joiner is None or run.joiner.done()):  # a timed-out join starts again
                run.joiner = asyncio.create_task(self.dialer.joiner(run, addrs))
                run.tasks.append(run.joiner)
        if names is not None:
            self.discovery.advertise(names, run, role or ("mesh" if cfg.type == "mesh" else "listen" if listen else "connect"))
        return run

    async def _start_bridge(self, cfg: TransportConfig, listen: bool) -> Running:
        """A NATS or Redis listener (manual: the client side only listens, has no cost)."""
        if not listen:
            raise DaemonError(f"transport {cfg.tport!r} of type {cfg.type!r} only listens")
        run = self.running.get(cfg.tport)
        if run is None:
            try:
                bridge = await self.bridges.start(cfg)
            except BridgeStartError as exc:
                raise DaemonError(str(exc)) from None
            tid = self.node.add_transport(cfg.tport, cfg.type, cfg.cost)
            run = self.running[cfg.tport] = Running(cfg, tid, True, False, bridge.servers, bound=bridge.bound,
                                                     bridge=bridge)
            for addr in bridge.bound:
                self.say(f"listening on {addr}")
        return run

    async def _start_pgm(self, cfg: TransportConfig) -> Running:
        """A PGM multicast transport (transports/pgm.py); listen and connect are alike."""
        from raims_node.transports.pgm import PgmError, start_pgm  # loaded for the first only

        run = self.running.get(cfg.tport)
        if run is None:
            tid = self.node.add_transport(cfg.tport, cfg.type, cfg.cost)
            try:
                pgm = await start_pgm(self, tid, cfg, self.tree.parameters.reliability)
            except PgmError as exc:
                raise DaemonError(str(exc)) from None
            run = self.running[cfg.tport] = Running(cfg, tid, True, True, bound=[pgm.group_url], pgm=pgm)
            self.say(f"pgm {cfg.tport} on {pgm.group_url}, inbox {pgm.inbox_url}")
        return run

    async def _start_ipc_name(self) -> None:
        """Parameter `ipc_name` without an ipc transport started: the named sbus bus (bridges/ipc.py)."""
        name = self.tree.parameters.text("ipc_name")
        if name and not any(run.cfg.type == "ipc" for run in self.running.values()):
            await self._start_bridge(TransportConfig(f"ipc_{name}", "ipc", {}), listen=True)

    async def stop(self) -> None:
        """Graceful: `_X.BYE` on every link, flush, close."""
        if self.stopping:
            return
        self.stopping = True
        self.discovery.close()
        self._apply(self.node.shutdown(time.time_ns()))
        for run in self.running.values():
            for task in run.tasks:
                task.cancel()
            for server in run.servers:
                server.close()
            if run.bridge is not None:
                run.bridge.close()
            if run.pgm is not None:
                run.pgm.close()  # sends the BYE frames first
        self.bridges.close()
        if self._ticker is not None:
            self._ticker.cancel()
        self.wake.close()
        for link in list(self.links.values()):
            if link.transport is not None:
                link.flush()  # the BYE frames
                link.transport.close()  # close() flushes what is buffered first
        await asyncio.sleep(0.05)

    async def _tick_loop(self) -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(TICK_S)
            now = time.monotonic()
            if now - last > STALL_GRACE_S:
                # our own loop was held up (or the process not scheduled): what arrived
                # meanwhile is unread, so silence over that time is not the peers' fault
                now_ns = time.time_ns()
                for cid in self.links:
                    self.node.hold_liveness(cid, cid in self.flow.read_paused, now_ns)
            last = now
            start = time.perf_counter_ns()
            self._apply(self.node.tick(time.time_ns()))
            self.nstats.publish(time.time_ns(), self.running, self.links, self._apply)
            self._answer_acks()
            if self.bridges.node_kv is not None:
                self.bridges.node_kv.tick()
            self.naming.tick()
            now = time.monotonic()
            for link in list(self.links.values()):
                link.check_write_timeout(now)
            self.guard.tick(now, self.links)
            self.poll.ticked(start)

    # ------------------------------------------------------------------ sockets

    def _transport_cfg(self, name: str) -> TransportConfig:
        try:
            return self.tree.transport(name)
        except Exception as exc:
            raise DaemonError(str(exc)) from None

    def _family(self) -> int:
        """`tcp_ipv4only` / `tcp_ipv6only`: resolve host names to one address family."""
        p = self.tree.parameters
        if p.flag("tcp_ipv4only"):
            return socket.AF_INET
        if p.flag("tcp_ipv6only"):
            return socket.AF_INET6
        return socket.AF_UNSPEC

    def _encrypt(self, cfg: TransportConfig) -> bool:
        off = cfg.noencrypt
        if off is None:
            off = self.tree.parameters.flag("tcp_noencrypt")
        return not off

    def _protocol(self, run: Running, outbound: bool) -> LinkProtocol:
        p = self.tree.parameters
        run.accepts += not outbound
        return LinkProtocol(
            self, run.tport_id, self.kdf if self._encrypt(run.cfg) else None,
            highwater=p.size("tcp_write_highwater"), write_timeout_s=p.time("tcp_write_timeout"),
            outbound=outbound, warn=self.guard.warn,
        )

    async def _listen(self, run: Running, ephemeral: bool) -> None:
        cfg = run.cfg
        local = run.device_ip or "127.0.0.1"  # an ephemeral mesh listener's default
        hosts = cfg.listen or [run.device_ip or WILDCARD]
        loop = asyncio.get_running_loop()
        for text in hosts:
            try:
                host, own_port = split_address(text, cfg.port)
            except AddressError as exc:
                raise DaemonError(f"transport {cfg.tport!r} listen: {exc}") from None
            port = 0 if ephemeral else (own_port or 0)
            bind = None if host in (WILDCARD, "") else host
            if ephemeral and bind is None:
                bind = local
            try:
                server = await loop.create_server(lambda: self._protocol(run, False), bind, port,
                                                  family=self._family())
            except OSError as exc:
                raise DaemonError(f"transport {cfg.tport!r} listen {host}:{port} failed: {exc.strerror}") from None
            run.servers.append(server)
            for sock in server.sockets:
                name = sock.getsockname()
                addr = f"[{name[0]}]:{name[1]}" if ":" in name[0] else f"{name[0]}:{name[1]}"
                run.bound.append(addr)
                self.say(f"listening on {addr}")
        if cfg.type == "mesh" and run.bound:
            self.node.set_mesh_url(run.tport_id, reachable(run.bound[0]))

    # ------------------------------------------------------------------ LinkOwner

    def link_made(self, link: RouterLink) -> int:
        conn_id = self._next_conn
        self._next_conn += 1
        if self.guard.admit(conn_id, link):  # (one over a pending cap is closed, never shown to the node)
            self.links[conn_id] = link
            self._apply(self.node.on_connect(conn_id, link.tport_id, time.time_ns()))
        return conn_id

    def link_frames(self, conn_id: int, frames: list[bytes]) -> None:
        self.idle.activity()
        start = time.perf_counter_ns()
        self._apply(self.node.on_frames(conn_id, frames, time.time_ns()))
        self.poll.routed(start, len(frames))

    def link_congested(self, conn_id: int, congested: bool) -> None:
        self.flow.set_congested(conn_id, congested)  # transports/backpressure.py

    def link_full(self, conn_id: int, full: bool) -> None:
        self.flow.set_full(conn_id, full)

    def flow_counters(self) -> dict[str, int]:
        servers = [run.bridge for run in self.running.values() if run.bridge is not None]
        return self.flow.counters(self.bridges.buffered, servers) | self.nstats.counters()

    def link_lost(self, conn_id: int, reason: str) -> None:
        link = self.links.pop(conn_id, None)
        self.guard.lost(conn_id, link)
        self.flow.lost(conn_id, link)
        self._apply(self.node.on_disconnect(conn_id, time.time_ns()))

    # ------------------------------------------------------------------ actions

    def _apply(self, actions: list[Action]) -> None:
        """Carry out the node's actions in order (a link coalesces what it is sent in one
        pass of the loop into one write)."""
        links = self.links
        for act in actions:
            if isinstance(act, Send):
                link = links.get(act.conn_id)
                if link is not None:
                    link.send(act.data)
            elif isinstance(act, (Deliver, DeliverRun)):
                hand_over(act, self.node.counters)
            elif isinstance(act, Close):
                link = links.get(act.conn_id)
                if link is not None:
                    link.close(act.reason)
            elif isinstance(act, Log):
                self.guard.line(act.key, act.text)
            elif isinstance(act, NodeEvent):
                self.naming.on_event(act)
            elif isinstance(act, Connect):
                run = next((r for r in self.running.values() if r.tport_id == act.tport_id), None)
                if run is not None and not self.stopping:
                    host, _, port = act.url.rpartition(":")
                    run.tasks.append(asyncio.create_task(
                        self.dialer.connector(run, (host.strip("[]"), int(port)), once=True)))
        self.wake.check()  # what the node holds for a few ms (router/batch.py)

    apply = _apply  # public for the operator's console (operator.py)

    def say(self, text: str, level: int = logging.INFO) -> None:
        line = f"{log_stamp(time.time(), self.tree.parameters)}  {text}"
        self.log_lines.append(line)
        del self.log_lines[:-1000]
        log.log(level, "%s", text)
        for fn in self.on_log:
            fn(line)

    def _b64(self) -> str:
        from raims_node.wire.subjects import bridge_b64

        return bridge_b64(self.node.bridge)

    # ------------------------------------------------------------------ local pub/sub

    def subscribe(self, owner: object, sid: str, subject: str, queue: str | None = None) -> None:
        self._apply(self.node.subscribe(owner, sid, subject, time.time_ns(), queue))

    def psubscribe(self, owner: object, sid: str, pattern: str, syntax: str = "rv",
                   queue: str | None = None, shard: Shard | None = None) -> None:
        self._apply(self.node.psubscribe(owner, sid, pattern, syntax, time.time_ns(), queue, shard))

    def unsubscribe(self, owner: object, sid: str) -> None:
        self._apply(self.node.unsubscribe(owner, sid, time.time_ns()))

    def drop_owner(self, owner: object) -> None:
        self._apply(self.node.drop_owner(owner, time.time_ns()))

    def publish(self, subject: str, payload: bytes, reply: str | None = None, headers: bytes | None = None,
                no_echo: object | None = None, opt: int = 0) -> int:
        """Publish from a local client (never delivered back to `no_echo`; `opt` asks for
        acks or a trace); the number of local subscriptions it was delivered to."""
        before = self.node.counters.delivered
        self._apply(self.node.publish(subject, payload, time.time_ns(), reply, headers, no_echo=no_echo, opt=opt))
        return self.node.counters.delivered - before

    def publish_run(self, subject: str, payloads: Run, no_echo: object | None = None) -> int:
        """Publish a pipelined run of one subject (no reply, headers or options): batch
        frames to the other nodes (wire/batch.py); the local deliveries made."""
        before = self.node.counters.delivered
        self._apply(self.node.publish_run(subject, payloads, time.time_ns(), no_echo))
        return self.node.counters.delivered - before

    def publish_acked(self, subject: str, payload: bytes, headers: bytes | None, no_echo: object | None,
                      kind: str, inbox: str) -> int:
        """Publish asking for `kind` answers ("ack" | "trace") on node subject `inbox` (acks.py)."""
        now_ns, delivered = time.time_ns(), self.publish(subject, payload, None, headers, no_echo, OPT_TRACE if kind == "trace" else OPT_ACK)
        self.ack_waits.add(subject, inbox, now_ns, self.node.state.pub_window.last(subject))
        return delivered

    def _answer_acks(self) -> None:
        if self.ack_waits.waits:
            now_ns = time.time_ns()
            for inbox, payload in self.ack_waits.answers(self.node.acks, now_ns):
                self._apply(self.node.publish(inbox, payload, now_ns))

    # ------------------------------------------------------------------ state for show ports

    def port_rows(self, fds: list[dict[str, object]] | None = None) -> list[dict[str, object]]:
        rows: list[dict[str, object]] = []
        for name, run in self.running.items():
            if run.bridge is not None:
                rows.append(run.bridge.port_row(f"{name}.{run.tport_id}"))
            else:
                links = [lk for lk in self.links.values() if lk.tport_id == run.tport_id]
                rows.append(link_port_row(name, run, links, self._encrypt(run.cfg), self.node, time.time_ns()))
        for extra in self.extra_ports:
            rows.extend(extra())
        return port_fds(rows, daemon_fds(self) if fds is None else fds)  # each one's endpoint fd (transports/fds.py)

    def console_context(self) -> ConsoleContext:
        """What console commands see of this daemon (console/context.py)."""
        from raims_node.console import ConsoleContext

        fds = functools.cache(lambda: daemon_fds(self))  # one snapshot per command: show urls reads it 4 times
        return ConsoleContext(node=self.node, ports=lambda: self.port_rows(fds()), now_ns=time.time_ns,
                              config=self.tree, log_lines=lambda: list(self.log_lines), names=self.naming.service,
                              flow=self.flow_counters, poll=self.poll, fds=fds)

    def run_command(self, line: str) -> str:
        """One console command, rendered as text (`rem` requests from other nodes)."""
        from raims_node.console import execute, render_text

        return render_text(execute(self.console_context(), line))

    def healthy(self) -> bool:
        """Converged, or alone (no links configured to come up)."""
        return self.node.converged


class DeviceDiscovery:
    """Name services by device (started on first use), the transports each advertises,
    and dialing the matching peers they find (module docstring)."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.names: dict[str, NameService] = {}  # by device, as configured
        self.advertised: dict[str, list[Running]] = {}  # device -> transports it advertises

    def port_rows(self) -> list[dict[str, object]]:
        return [svc.port_row() for svc in self.names.values()]

    def close(self) -> None:
        for names in self.names.values():
            names.close()

    async def service(self, device: str) -> NameService:
        """The name service of `device`, started on first use."""
        svc = self.names.get(device)
        if svc is not None:
            return svc
        record = next((t for t in self.daemon.tree.transports if t.tport == device and t.type == "name"), None)
        try:
            conf = NameConfig.of(device, record)
            ip = await asyncio.get_running_loop().run_in_executor(None, resolve_device, conf.device)
            svc = NameService(device, conf, ip, bridge=self.daemon.node.bridge, user=self.daemon.creds.user,
                              service=self.daemon.creds.svc, start_ns=self.daemon.node.start_ns,
                              interval_s=self.daemon.tree.parameters.time("heartbeat"),
                              on_advert=lambda ad: self._discovered(device, ad))
            await svc.start()
        except NameServiceError as exc:
            raise DaemonError(str(exc)) from None
        self.names[device] = svc
        self.daemon.say(f"name {device} on {svc.address}")
        return svc

    def advertise(self, names: NameService, run: Running, role: str) -> None:
        run.role = role
        url = ""
        if run.bound:
            port = run.bound[0].rpartition(":")[2]
            url = f"{names.device_ip}:{port}"  # reachable on the device even when bound to "*"
            if run.cfg.type == "mesh":
                self.daemon.node.set_mesh_url(run.tport_id, url)
        listed = self.advertised.setdefault(names.name, [])
        if run not in listed:
            listed.append(run)
        names.advertise(run.cfg.tport, run.cfg.type, role, url if role in ("listen", "mesh") else "")

    def _discovered(self, device: str, ad: Advert) -> None:
        """An advertisement of another node of the service: dial it when it matches."""
        if self.daemon.stopping:
            return
        for run in self.advertised.get(device, ()):
            if run.cfg.tport != ad.tport or run.role is None or ad.role not in DIALS.get(run.role, ()):
                continue
            if run.role == "mesh" and self.daemon.node.bridge > ad.bridge:
                continue  # the other member dials
            addr = ad.address
            dial = run.dialing.get(addr)
            if dial is None:
                self.daemon.say(f"name {device}: {ad.user} {ad.role} {ad.tport} at {ad.url}, connecting")
                dial = run.dialing[addr] = Dial(ad.start_ns)
                run.tasks = [t for t in run.tasks if not t.done()]
                run.tasks.append(asyncio.create_task(
                    self.daemon.dialer.connector(run, addr, once=True, tries=DISCOVERED_TRIES, dial=dial)))
            elif dial.start_ns < ad.start_ns:
                if dial.start_ns and dial.link is not None:
                    dial.link.close(f"{ad.user} at {ad.url} restarted")
                dial.start_ns = ad.start_ns


async def wait_closed(servers: list[asyncio.Server]) -> None:
    for s in servers:
        with contextlib.suppress(Exception):
            await s.wait_closed()
