"""TCP keepalive on the sockets of the node's clients (parameter `tcp_keepalive`).

An established client whose host vanished without a FIN or a reset (power loss, a VM
dropped, a NAT or firewall that forgot the flow) sends nothing more and, while nothing
is written to it, nothing fails: before (2026-11-27, branch keepalive) a NATS, Redis or
RV subscriber that got no message, or a telnet console, was held for ever, a web
connection for Linux's 2 h 11 min (aiohttp turns SO_KEEPALIVE on with the system's
7200 s idle, 75 s interval, 9 probes).

Decision: one parameter for every client port, `tcp_keepalive` in seconds, 0 off,
default 300: redis-server's `tcp-keepalive 300`, with its anetKeepAlive derivation on
Linux: SO_KEEPALIVE, TCP_KEEPIDLE = the value, TCP_KEEPINTVL = a third of it (at least
1 s), TCP_KEEPCNT = 3, so a vanished client is closed about twice the value after it
went silent (300 s: 10 min). Measured on redis-server 7.0.15: (on, 300, 100, 3). The
other reference, nats-server 2.9.10, leaves its client sockets without keepalive
(measured: off, the system's 7200/75/9), Go's 15 s default being switched off there:
its ping timer (2 min, 2 outstanding) finds a dead client, as the NATS bridge's does.
raims's NATS clients get the keepalive too (a backstop, one probe per idle period, not
visible to a client); Redis, RV and telnet clients have nothing else, and it is what
redis-server does. One value rather than one per protocol: nothing in a protocol makes
a dead peer worth finding sooner on one port than another, and the parameters are one
section. Applied at accept (bridges/glue.py for NATS, Redis and RV, console/telnet.py),
on the listening sockets of the web ports (web/admin.py, the NATS monitor), whose
accepted sockets take the listener's options on Linux (aiohttp's protocol offers no
hook before its own `connection_made`). A Redis transport's CONFIG GET / SET
`tcp-keepalive` reads and changes its own value, for the connections accepted after,
as redis-server.

The node's own links (transports/tcp.py, mesh) are not given keepalive: their
heartbeats (`heartbeat`, default 10 s) find a dead peer far sooner; nor the IPC
bridge's Unix sockets (no network between the ends).
"""

from __future__ import annotations

import socket
from typing import Protocol

DEFAULT_S = 300  # redis-server's `tcp-keepalive`
MAX_IDLE_S = 32767  # Linux refuses a TCP_KEEPIDLE or TCP_KEEPINTVL above this (MAX_TCP_KEEPIDLE)
PROBES = 3  # TCP_KEEPCNT, as redis-server's anetKeepAlive


class SockOpts(Protocol):
    """What is used of a socket: the stdlib's, asyncio's TransportSocket, uvloop's PseudoSocket."""

    @property
    def family(self) -> int: ...

    def setsockopt(self, level: int, option: int, value: int, /) -> None: ...


def keepalive_options(idle_s: float) -> tuple[int, int, int] | None:
    """(TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT) for a `tcp_keepalive` of `idle_s`; None: off."""
    if idle_s <= 0:
        return None
    idle = min(MAX_IDLE_S, max(1, round(idle_s)))
    return idle, max(1, idle // 3), PROBES


def set_keepalive(sock: SockOpts | None, idle_s: float) -> bool:
    """Turn keepalive on `sock` on with `idle_s`'s options (module docstring), or off
    for 0; False when not done (no socket, not TCP, or it closed already)."""
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return False
    options = keepalive_options(idle_s)
    try:
        if options is None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 0)
            return True
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        idle, interval, probes = options
        if hasattr(socket, "TCP_KEEPIDLE"):  # (Linux; elsewhere the system's timing)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, idle)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, interval)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, probes)
    except OSError:
        return False
    return True
