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
from collections.abc import Mapping

from raims_node.transports.link import RouterLink

PACE_BYTES = 64 << 10  # two batches of announcements (router/batch.py MAX_BATCH_BYTES)
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


def links_backlogged(links: Mapping[int, RouterLink], limit: int = PACE_BYTES) -> bool:
    """Whether some link holds more than `limit` bytes not yet sent (queued, in its
    transport or in its socket)."""
    for link in links.values():
        held = link.buffered
        if held > limit or held + kernel_unsent(link.transport) > limit:
            return True
    return False
