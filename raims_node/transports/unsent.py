"""What a link has not sent yet, the kernel's send queue included: the pacing of our
subscription announcements (router/interest.py `backlog`).

A link's asyncio transport hands its bytes to the kernel at once while the socket
takes them, and a TCP socket's send buffer grows (tcp_wmem autotuning) to megabytes:
the transport's high-water mark (tcp.py) never saw a burst of announcements that the
peer applied slower than we made them, while 2 MB of them waited in the socket for the
peer to read, and every message written after them with them. TIOCOUTQ is the socket's
bytes not yet acknowledged by the peer's kernel (what its reader has not taken beyond
its receive window). A link whose held bytes pass PACE_BYTES holds our announcements
back (they wait in `Interest.pending`), so a message behind them waits for about
PACE_BYTES and what the peer's kernel took unread (its receive window autotunes: 72-453
KB seen on loopback) of announcements, not megabytes.
"""

from __future__ import annotations

import asyncio
import fcntl
import struct
import termios
import time
from collections.abc import Callable, Mapping

from raims_node.transports.link import RouterLink

PACE_BYTES = 64 << 10  # two batches of announcements (router/batch.py MAX_BATCH_BYTES)
STUCK_S = 1.0  # a link whose peer took nothing for this long paces nothing (LinkBacklog)
_INT = struct.Struct("i")
_ZERO = bytes(_INT.size)


def kernel_unsent(transport: asyncio.BaseTransport | None) -> int:
    """The bytes in the socket's send queue not acknowledged yet (0 when unknown)."""
    if transport is None:
        return 0
    sock = transport.get_extra_info("socket")
    if sock is None:
        return 0
    try:
        return int(_INT.unpack(fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, _ZERO))[0])
    except (OSError, ValueError):  # closed meanwhile, or not a socket that queues
        return 0


class LinkBacklog:
    """Whether some link holds more than `limit` bytes not yet sent (queued, in its
    transport or in its socket) and is still sending them: a link whose peer took none
    of its bytes for `stuck_s` (a peer stopped or hung: the write timeout or the
    heartbeats drop it later) paces nothing, so that one stuck peer does not hold our
    announcements back from every other for as long as it lives. Progress is the bytes
    the peer's kernel acknowledged (written, less what the transport and socket hold)."""

    def __init__(self, links: Mapping[int, RouterLink], limit: int = PACE_BYTES, stuck_s: float = STUCK_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._links, self._limit, self._stuck_s, self._clock = links, limit, stuck_s, clock
        self._moved: dict[int, tuple[int, float]] = {}  # link -> (bytes acknowledged, when that last grew)

    def __call__(self) -> bool:
        limit, moved = self._limit, self._moved
        now = self._clock()
        backlog = False
        for key, link in self._links.items():
            transport = link.transport
            kernel = kernel_unsent(transport)
            if link.buffered + kernel <= limit:
                moved.pop(key, None)
                continue
            in_transport = getattr(transport, "get_write_buffer_size", None)
            acked = link.bytes_out - kernel - (in_transport() if in_transport is not None else 0)
            last = moved.get(key)
            if last is None or acked > last[0]:
                moved[key] = (acked, now)
                backlog = True
            elif now - last[1] < self._stuck_s:
                backlog = True
        if moved:  # forget links gone (few: only links above the limit are kept)
            for key in [k for k in moved if k not in self._links]:
                del moved[key]
        return backlog
