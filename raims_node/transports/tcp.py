"""TCP links between nodes: one asyncio Protocol per connection.

Implements the manual's "TCP Point-to-point", "TCP Mesh" (the socket side) and "TCP
Encryption" (seed 000). The protocol owns the transport, the link cipher, the frame
reader and write flow control; frames go to its owner, which drives the router node.

Flow control (manual: `tcp_write_highwater`, `tcp_write_timeout`): above the
high-water mark of buffered output (asyncio's pause_writing) the link reports itself
congested and the daemon stops reading from the other links, the sources of what it
forwards, until the output drains to a quarter of the mark; a link whose buffer stays
above the mark for longer than the write timeout, or which exceeds the hard limit,
is dropped and counted.

Output is coalesced: frames sent during one pass of the event loop (a client's pipelined
publishes, a batch of forwarded frames) are joined and written by one call soon after,
one encryption and one syscall for all of them (or for each COALESCE_BYTES), which is what
lets a downstream node read them in large chunks. Closing the link writes what is pending
first.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Protocol, cast

from raims_node.crypto.kdf import Kdf
from raims_node.crypto.link_cipher import LinkCipher, LinkCipherError, check_plaintext_start
from raims_node.wire import FrameReader, WireError

log = logging.getLogger("raims.tcp")

HARD_LIMIT_FACTOR = 16  # past highwater * this, the link is dropped at once
COALESCE_BYTES = 64 * 1024  # written at once when this much is pending


class LinkOwner(Protocol):
    def link_made(self, link: LinkProtocol) -> int: ...
    def link_frames(self, conn_id: int, frames: list[bytes]) -> None: ...
    def link_lost(self, conn_id: int, reason: str) -> None: ...
    def link_congested(self, conn_id: int, congested: bool) -> None: ...


class LinkProtocol(asyncio.Protocol):
    def __init__(
        self,
        owner: LinkOwner,
        tport_id: int,
        kdf: Kdf | None,
        *,
        highwater: int = 1 << 20,
        write_timeout_s: float = 10.0,
        outbound: bool = False,
        warn: Callable[[str], object] | None = None,
    ) -> None:
        self.owner = owner
        self._warn = warn or _warn
        self.tport_id = tport_id
        self.cipher = LinkCipher(kdf) if kdf is not None else None
        self.reader = FrameReader()
        self.highwater = highwater
        self.write_timeout_s = write_timeout_s
        self.outbound = outbound
        self.transport: asyncio.Transport | None = None
        self.conn_id = -1
        self.peer_addr = ""
        self.local_addr = ""
        self._pre_cipher: list[bytes] = []
        self._pending: list[bytes] = []  # sent in this pass of the loop, written by flush
        self._pending_bytes = 0
        self._first = True
        self._congested_since: float | None = None
        self.closed_reason: str | None = None
        self.bytes_in = self.bytes_out = self.frames_in = self.frames_out = 0
        self.write_drops = 0

    # ------------------------------------------------------------------ asyncio

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        peer = transport.get_extra_info("peername")
        sock = transport.get_extra_info("sockname")
        self.peer_addr = _addr(peer)
        self.local_addr = _addr(sock)
        self.transport.set_write_buffer_limits(high=self.highwater, low=self.highwater // 4)
        if self.cipher is not None:
            self.transport.write(self.cipher.hello)
        self.conn_id = self.owner.link_made(self)

    def data_received(self, data: bytes) -> None:
        self.bytes_in += len(data)
        try:
            if self.cipher is not None:
                data = self.cipher.feed(data)
                if self.cipher.ready and self._pre_cipher:
                    pending, self._pre_cipher = self._pre_cipher, []
                    for chunk in pending:
                        self._write(chunk)
                if not data:
                    return
            elif self._first:
                check_plaintext_start(data)
            self._first = False
            frames = self.reader.feed(data)
        except LinkCipherError as exc:
            self.close(str(exc))
            return
        except WireError as exc:
            if exc.frames:
                self._deliver(exc.frames)
            if self.cipher is not None and self.frames_in == 0:
                # the first bytes after the key exchange decrypt to garbage: the KDF
                # mixes the salt in, so either the keys differ or the sender is no node
                self.close(f"the first bytes after the link key exchange do not decrypt to a frame ({exc}): "
                           "the peer's salt (service keys) is not ours, or it is not a raims node")
            else:
                self.close(f"bad stream from {self.peer_addr}: {exc}")
            return
        if frames:
            self._deliver(frames)

    def _deliver(self, frames: list[bytes]) -> None:
        self.frames_in += len(frames)
        self.owner.link_frames(self.conn_id, frames)

    def connection_lost(self, exc: Exception | None) -> None:
        reason = self.closed_reason or (f"connection lost: {exc}" if exc else "connection closed by peer")
        self.closed_reason = reason
        self.owner.link_lost(self.conn_id, reason)

    # ------------------------------------------------------------------ sending

    def send(self, data: bytes) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        self.frames_out += 1
        if self.cipher is not None and not self.cipher.ready:
            self._pre_cipher.append(data)
            return
        if not self._pending:
            asyncio.get_running_loop().call_soon(self.flush)
        self._pending.append(data)
        self._pending_bytes += len(data)
        if self._pending_bytes >= COALESCE_BYTES:
            self.flush()  # a loop pass may read megabytes: let the high-water mark see them

    def flush(self) -> None:
        """Write what was sent in this pass of the loop (called soon after by itself)."""
        pending, self._pending = self._pending, []
        self._pending_bytes = 0
        if pending and self.transport is not None and not self.transport.is_closing():
            self._write(pending[0] if len(pending) == 1 else b"".join(pending))

    def _write(self, data: bytes) -> None:
        assert self.transport is not None
        out = self.cipher.encrypt(data) if self.cipher is not None else data
        self.bytes_out += len(out)
        self.transport.write(out)
        buffered = self.transport.get_write_buffer_size()
        if buffered > self.highwater * HARD_LIMIT_FACTOR:
            self.write_drops += 1
            self.close(f"write buffer of {buffered} bytes exceeds {HARD_LIMIT_FACTOR} x tcp_write_highwater")

    # asyncio flow control: above tcp_write_highwater the owner pauses the sources
    def pause_writing(self) -> None:
        if self._congested_since is None:
            self._congested_since = time.monotonic()
            self.owner.link_congested(self.conn_id, True)

    def resume_writing(self) -> None:
        if self._congested_since is not None:
            self._congested_since = None
            self.owner.link_congested(self.conn_id, False)

    def check_write_timeout(self, now: float) -> None:
        """Drop a link whose output has not drained below the mark for tcp_write_timeout."""
        if self._congested_since is not None and now - self._congested_since > self.write_timeout_s:
            self.write_drops += 1
            buffered = self.transport.get_write_buffer_size() if self.transport is not None else 0
            self.close(f"write timeout: {buffered} bytes buffered for {now - self._congested_since:.1f} s "
                       f"(tcp_write_timeout {self.write_timeout_s} s)")

    @property
    def writable(self) -> bool:
        return self._congested_since is None

    def close(self, reason: str) -> None:
        if self.closed_reason is None:
            self.closed_reason = reason
            self._warn(f"closing link {self.peer_addr}: {reason}")
        if self.transport is not None and not self.transport.is_closing():
            self.flush()
            self.transport.close()


def _warn(text: str) -> None:
    log.warning("%s", text)


def _addr(info: object) -> str:
    if isinstance(info, tuple) and len(info) >= 2:
        host = str(info[0])
        return f"[{host}]:{info[1]}" if ":" in host else f"{host}:{info[1]}"
    return str(info or "")
