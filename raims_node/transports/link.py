"""What the daemon uses of a link to another node, whatever carries it: a TCP or mesh
connection (tcp.LinkProtocol) or a peer on a PGM group (pgm.PgmPeerLink). Every link the
daemon holds is one of these, so a path that writes to links (the lone-frame path's
`send_now`) works on all of them; backpressure (HeldLink), the guard (GuardedLink) and
the port statistics (LinkCounts) read narrower views of the same.
"""

from __future__ import annotations

import asyncio
from typing import Protocol


class RouterLink(Protocol):
    conn_id: int  # the node's (Node.conns), once the daemon made it
    tport_id: int
    outbound: bool
    peer_addr: str
    bytes_in: int
    bytes_out: int
    frames_in: int
    frames_out: int
    refusal: str | None  # why the peer's input closed it, counted as a reject

    @property
    def transport(self) -> asyncio.BaseTransport | None: ...  # None: not a stream (PGM)

    @property
    def buffered(self) -> int: ...

    @property
    def write_drops(self) -> int: ...

    def send(self, data: bytes) -> None: ...

    def send_now(self, data: bytes) -> None:
        """`send`, written in this pass when nothing waits before it (transports/lone.py)."""

    def flush(self) -> None: ...

    def close(self, reason: str) -> None: ...

    def hold_reading(self, held: bool) -> None: ...

    def check_write_timeout(self, now: float) -> None: ...
