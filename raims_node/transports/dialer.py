"""Outbound links of the link transports (manual "TCP Mesh", "TCP Point-to-point").

A connecting transport runs one joiner (`Dialer.joiner`): each round it dials all its
`connect` addresses at once, and the first that succeeds cancels the others (manual: "the
first connection that is successful will cause the others to stop trying"); rounds that
all fail repeat with a back-off capped at RECONNECT_MAX_S. It tries for the transport's
`timeout` (unset: the `tcp_timeout` parameter when configured, else the manual's 15 s; 0:
for ever), then logs that it stopped; `connect T` on the console starts it again. A link
it made that is lost starts a new join with a new timeout. Mesh members and discovered
peers are dialed one address each (`connector`).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from raims_node.config.tree import ConfigTree, TransportConfig
from raims_node.transports.addr import WILDCARD, AddressError, split_address
from raims_node.transports.tcp import LinkProtocol

if TYPE_CHECKING:
    from raims_node.bridges.glue import BridgeServer
    from raims_node.transports.pgm import PgmTransport

log = logging.getLogger("raims.daemon")

RECONNECT_MIN_S = 0.1
RECONNECT_MAX_S = 2.0
DEFAULT_CONNECT_TIMEOUT_S = 15.0  # manual: the transport tables' `timeout` default
CONNECT_ATTEMPT_S = 10.0  # one dial of a join that tries for ever


class DialHost(Protocol):
    """What the dialer needs of the daemon."""

    stopping: bool
    tree: ConfigTree

    def say(self, text: str, level: int = logging.INFO) -> None: ...
    def _protocol(self, run: Running, outbound: bool) -> LinkProtocol: ...
    def _family(self) -> int: ...


class DaemonError(Exception):
    """Startup failed (bad transport, port in use, unknown user)."""


@dataclass
class Dial:
    """An outbound link to a member or a discovered peer: its link once up, and the
    start time of the peer's advertisement (0: not learned by discovery)."""

    start_ns: int = 0
    link: LinkProtocol | None = None


@dataclass
class Running:
    """A started transport: its listeners, connectors and links."""

    cfg: TransportConfig
    tport_id: int
    listen: bool
    connect: bool
    servers: list[asyncio.Server] = field(default_factory=list)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    bound: list[str] = field(default_factory=list)  # "host:port" of each listener
    bridge: BridgeServer | None = None  # a client-protocol transport (nats, redis)
    role: str | None = None  # advertised on its device: listen | connect | mesh | any
    device_ip: str | None = None
    dialing: dict[tuple[str, int], Dial] = field(default_factory=dict)  # once-only outbound links
    joiner: asyncio.Task[None] | None = None  # dials the configured `connect` addresses
    pgm: PgmTransport | None = None  # a `type: pgm` transport (transports/pgm.py)
    error: str = ""  # the last connect failure ("ECONNREFUSED 10.0.0.2:5000"), until a connect succeeds
    accepts: int = 0  # links its listeners accepted (show fds `ac`)


class Dialer:
    """The connectors of one daemon."""

    def __init__(self, host: DialHost) -> None:
        self.host = host

    def connect_addrs(self, cfg: TransportConfig) -> list[tuple[str, int]]:
        out = []
        for text in cfg.connect:
            try:
                host, port = split_address(text, cfg.port)
            except AddressError as exc:
                raise DaemonError(f"transport {cfg.tport!r} connect: {exc}") from None
            if port is None:
                raise DaemonError(f"transport {cfg.tport!r} connect {text!r} has no port")
            out.append(("127.0.0.1" if host == WILDCARD else host, port))
        return out

    def connect_timeout(self, cfg: TransportConfig) -> float:
        """The transport's `timeout`; unset: `tcp_timeout` when configured, else 15 s."""
        if cfg.timeout is not None:
            return cfg.timeout
        p = self.host.tree.parameters
        return p.time("tcp_timeout") if "tcp_timeout" in p.to_dict() else DEFAULT_CONNECT_TIMEOUT_S

    async def joiner(self, run: Running, addrs: list[tuple[str, int]]) -> None:
        """Join through the first of `addrs` that answers, keep that link; rejoin when it
        is lost; stop when a join outlasts the timeout (module docstring)."""
        loop = asyncio.get_running_loop()
        limit = self.connect_timeout(run.cfg)
        shown = ", ".join(f"{h}:{p}" for h, p in addrs)
        delay = RECONNECT_MIN_S
        while not self.host.stopping:
            deadline = None if limit <= 0 else loop.time() + limit
            proto = await self._race(run, addrs, deadline)
            if proto is None:
                if not self.host.stopping:
                    self.host.say(f"transport {run.cfg.tport} connect timeout {limit:g}s expired, "
                             f"stopped trying {shown} (console: connect {run.cfg.tport})", logging.WARNING)
                return
            opened = loop.time()
            while proto.closed_reason is None:
                await asyncio.sleep(0.1)
            delay = min(delay * 2, RECONNECT_MAX_S) if loop.time() - opened < 2 * RECONNECT_MAX_S else RECONNECT_MIN_S
            await asyncio.sleep(delay)

    async def _race(self, run: Running, addrs: list[tuple[str, int]], deadline: float | None) -> LinkProtocol | None:
        """Dial every address at once, rounds with back-off, until one links or `deadline`."""
        loop = asyncio.get_running_loop()
        delay = RECONNECT_MIN_S
        while not self.host.stopping:
            left = None if deadline is None else deadline - loop.time()
            if left is not None and left <= 0:
                return None
            attempt = CONNECT_ATTEMPT_S if left is None else min(left, CONNECT_ATTEMPT_S)
            tasks = [asyncio.ensure_future(asyncio.wait_for(loop.create_connection(
                lambda: self.host._protocol(run, True), host, port, family=self.host._family()), attempt))
                for host, port in addrs]
            won: LinkProtocol | None = None
            pending = set(tasks)
            while pending and won is None:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    exc = task.exception()
                    if exc is not None:
                        log.debug("connect failed: %s", exc)
                        run.error = connect_error(exc, addrs[tasks.index(task)])
                        continue
                    _, proto = task.result()
                    assert isinstance(proto, LinkProtocol)
                    if won is None:
                        won = proto
                        run.error = ""
                    else:  # two answered in one pass: keep the first
                        proto.close("another connect address won")
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
            if won is not None:
                return won
            left = None if deadline is None else deadline - loop.time()
            await asyncio.sleep(delay if left is None else max(0.0, min(delay, left)))
            delay = min(delay * 2, RECONNECT_MAX_S)
        return None

    async def connector(self, run: Running, addr: tuple[str, int], once: bool = False, tries: int = 0,
                         dial: Dial | None = None) -> None:
        """Keep one outbound link to `addr` up while the transport runs. `once`: a link
        to a mesh member or a discovered peer (`dial`, registered by the caller), not
        opened twice to one address and left when it closes (`tries` > 0: also after that
        many failed connects)."""
        if once and dial is None:
            if addr in run.dialing:
                return
            dial = run.dialing[addr] = Dial()
        try:
            await self._keep_link(run, addr, dial, tries)
        finally:
            if dial is not None and run.dialing.get(addr) is dial:
                del run.dialing[addr]

    async def _keep_link(self, run: Running, addr: tuple[str, int], dial: Dial | None, tries: int) -> None:
        loop = asyncio.get_running_loop()
        timeout = self.connect_timeout(run.cfg) or CONNECT_ATTEMPT_S
        delay = RECONNECT_MIN_S
        failed = 0
        while not self.host.stopping:
            try:
                _, proto = await asyncio.wait_for(
                    loop.create_connection(lambda: self.host._protocol(run, True), addr[0], addr[1],
                                           family=self.host._family()), timeout)
            except (TimeoutError, OSError) as exc:
                log.debug("connect %s:%d failed: %s", addr[0], addr[1], exc)
                run.error = connect_error(exc, addr)
                failed += 1
                if failed == tries:
                    return
                await asyncio.sleep(delay)
                delay = min(delay * 2, RECONNECT_MAX_S)
                continue
            assert isinstance(proto, LinkProtocol)
            run.error = ""
            if dial is not None:
                dial.link = proto
            opened = loop.time()
            while proto.closed_reason is None:
                await asyncio.sleep(0.1)
            if dial is not None:
                return
            # a link that fails at once (refused keys, bad stream) backs off like a refused connect
            delay = min(delay * 2, RECONNECT_MAX_S) if loop.time() - opened < 2 * RECONNECT_MAX_S else RECONNECT_MIN_S
            await asyncio.sleep(delay)


def connect_error(exc: BaseException, addr: tuple[str, int]) -> str:
    """show status: a failed connect as the system reported it, errno name first."""
    code = getattr(exc, "errno", None)
    name = errno.errorcode.get(code, "") if isinstance(code, int) else ""
    if isinstance(exc, TimeoutError) and not name:
        name = "ETIMEDOUT"
    return f"{name or type(exc).__name__} {addr[0]}:{addr[1]}"


def reachable(url: str) -> str:
    """A mesh url others can dial: a wildcard bind is advertised as this host's address."""
    host, _, port = url.rpartition(":")
    if host.strip("[]") not in ("0.0.0.0", "::"):
        return url
    try:
        addr = socket.gethostbyname(socket.gethostname())
    except OSError:
        addr = "127.0.0.1"
    return f"{addr}:{port}"
