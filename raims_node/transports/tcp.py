"""TCP links between nodes: one asyncio Protocol per connection.

Implements the manual's "TCP Point-to-point", "TCP Mesh" (the socket side) and "TCP
Encryption" (seed 000). The protocol owns the transport, the link cipher, the frame
reader and write flow control; frames go to its owner, which drives the router node.

Flow control (manual: `tcp_write_highwater`, `tcp_write_timeout`; decisions):
- The transport's buffer is kept near the high-water mark: above it (asyncio's
  pause_writing) the link stops handing bytes to the transport and queues the frames it
  is sent, control frames (heartbeats, link state, RPCs: every frame type but multicast
  data) apart from data. When the transport drains to a quarter of the mark, queued
  control frames are written first, then data, until the mark is reached again. So a
  heartbeat waits behind at most about one high-water mark of data, never behind a
  burst.
- Two levels are reported to the owner: `link_congested` from the moment the transport
  passes the mark until the link's queue is empty again (the owner stops reading the
  bridge clients, the sources of new traffic), and `link_full` while the queue holds
  more than QUEUE_FACTOR x the mark (the owner also stops reading its other links, so
  backpressure travels hop by hop to the publishing node, as TCP windows do). A frame
  is never refused for its size: one legal frame larger than the mark is queued whole.
- `tcp_write_timeout` drops a link that makes no progress: its output stayed above the
  mark and nothing drained for that long. A link that drains slowly under a long burst
  is not dropped.

The lone frame (issue 24, latency): a read that decrypts to exactly one whole multicast
data frame, with nothing buffered before it, skips the frame reader and the batching
and goes to the owner's `link_lone` (when it has one); what the owner sends on at once
for it goes out with `send_now`, written in the same pass when nothing is pending or
queued on the link (so order is kept), instead of waiting for the loop's next turn.
One message in flight crosses a node with one read, one write and no loop turn.

Refusals (hardening): until the owner says the link authenticated (`link_authenticated`),
at most PREAUTH_BUFFER bytes of a partial frame are held (a socket that announced a
16 MiB frame and trickled it on held it all: 1 GB from 60 sockets of one host on a
`tcp_noencrypt` port); a link closed for what its peer sent (a stream that is not
frames, a key exchange that fails, that cap) names the cause in `refusal`, which the
owner counts (`show counters reject`).
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol, cast

from raims_node.crypto.kdf import Kdf
from raims_node.crypto.link_cipher import LinkCipher, LinkCipherError, check_plaintext_start
from raims_node.transports.poll_stats import READ_BUFFER, SAMPLE, PollStats
from raims_node.wire import FrameReader, WireError
from raims_node.wire.frame import BRIDGE_DESC, FIXED_PREFIX, HEADER_SIZE, MAX_SIZE_24

log = logging.getLogger("raims.tcp")

PREAUTH_BUFFER = 1 << 20  # a partial frame held for a link not yet authenticated
QUEUE_FACTOR = 4  # a queue above highwater * this makes the link "full"
COALESCE_BYTES = 64 * 1024  # written at once when this much is pending
DRAIN_CHUNK = 256 * 1024  # queued data joined per write while draining
FRAME_BATCH = 256  # frames handed to the owner at once
SLICE_S = 0.02  # work on one read before the loop is given back
CLOSE_LINGER_S = 2.0  # a closing link's output is flushed for at most this long, then dropped
_MCAST_TYPE_BITS = 0x60  # header byte 0: version(1) type(2) opt(5); type 0 is multicast data
_LONE_HEAD = struct.Struct(">IIH")  # size word, hash, bridge descriptor
_unpack_lone = _LONE_HEAD.unpack_from
_LONE_TOP = 0b100  # the word's top three bits on a multicast data frame: version 1, type 0


class LinkOwner(Protocol):
    def link_made(self, link: LinkProtocol) -> int: ...
    def link_frames(self, conn_id: int, frames: list[bytes]) -> None: ...
    def link_lost(self, conn_id: int, reason: str) -> None: ...
    def link_congested(self, conn_id: int, congested: bool) -> None: ...
    def link_full(self, conn_id: int, full: bool) -> None: ...


class LoneOwner(LinkOwner, Protocol):
    def link_lone(self, conn_id: int, frame: bytes) -> None: ...


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
        self._congested_since: float | None = None  # above the mark (or frames queued) since
        self._write_paused = False  # between asyncio's pause_writing and resume_writing
        self._ctl: deque[bytes] = deque()  # frames queued while the transport is full
        self._data: deque[bytes] = deque()
        self.queued = 0  # bytes in _ctl and _data
        self._full = False
        self._progress_at = 0.0  # monotonic time of the last drain seen (write timeout)
        self._backlog: list[bytes] = []  # frames read, waiting for the next turn of the loop
        self._batch = FRAME_BATCH  # frames handed over at once (_deliver adapts it to their work)
        self._held = False  # reading held by the owner
        self._turn_held = False  # not read until the loop's next turn (_deliver)
        self._read_paused = False
        self._progress_size = 0
        self.closed_reason: str | None = None
        self.bytes_in = self.bytes_out = self.frames_in = self.frames_out = 0
        self.write_drops = 0
        self.wr_peak = self.rd_peak = 0  # the most output held, the largest read (show buffers wmax, rmax)
        # the lone-frame read (module docstring): the receiving decryptor once the key
        # exchange is done (`bytes` on a plaintext link after its first read)
        self._plain: Callable[[bytes], bytes] | None = None
        self._lone = cast("LoneOwner", owner).link_lone if hasattr(owner, "link_lone") else None
        self._must_yield: Callable[[], bool] | None = getattr(owner, "link_must_yield", None)
        self._is_authenticated: Callable[[int], bool] | None = getattr(owner, "link_authenticated", None)
        self.authenticated = False
        self._poll: PollStats = getattr(owner, "poll", None) or PollStats()  # show poll
        self.refusal: str | None = None  # why the peer's input closed the link (a reject counter's kind)

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
        poll = self._poll
        poll.read_cnt += 1
        if len(data) < READ_BUFFER:
            poll.rd_lo += 1
        if poll.read_cnt % SAMPLE:
            self._received(data)
            return
        start = time.perf_counter_ns()
        self._received(data)
        poll.read_ns += time.perf_counter_ns() - start
        poll.read_timed += 1

    def _received(self, data: bytes) -> None:
        self.bytes_in += len(data)
        if len(data) > self.rd_peak:
            self.rd_peak = len(data)
        plain = self._plain
        if plain is not None:
            data = plain(data)
            n = len(data)
            if n >= FIXED_PREFIX and self._lone is not None and not self._backlog and not self.reader.buffered:
                word, _, bdesc = _unpack_lone(data)
                if word >> 29 == _LONE_TOP and (word & MAX_SIZE_24) + HEADER_SIZE == n and bdesc == BRIDGE_DESC \
                        and n <= self.reader.max_frame:
                    self.frames_in += 1
                    self._lone(self.conn_id, data)
                    return
            self._plain_received(data)
            return
        try:
            if self.cipher is not None:
                data = self.cipher.feed(data)
                if self.cipher.ready:
                    self._plain = self.cipher.decryptor
                    if self._pre_cipher:
                        pending, self._pre_cipher = self._pre_cipher, []
                        for chunk in pending:
                            self._write(chunk)
                if not data:
                    return
            elif self._first:
                check_plaintext_start(data)
                self._plain = bytes
            self._first = False
        except LinkCipherError as exc:
            self.refuse("bad_key_exchange", str(exc))
            return
        self._plain_received(data)

    def _plain_received(self, data: bytes) -> None:
        """Received bytes, decrypted: split into frames for the owner."""
        try:
            frames = self.reader.feed(data)
        except WireError as exc:
            if exc.frames:
                self._deliver(exc.frames)
            if self.cipher is not None and self.frames_in == 0:
                # the first bytes after the key exchange decrypt to garbage: the KDF
                # mixes the salt in, so either the keys differ or the sender is no node
                self.refuse("bad_key_exchange",
                            f"the first bytes after the link key exchange do not decrypt to a frame ({exc}): "
                            "the peer's salt (service keys) is not ours, or it is not a raims node")
            else:
                self.refuse("bad_stream", f"bad stream from {self.peer_addr}: {exc}")
            return
        if frames:
            if self._backlog:  # read before the pause took effect
                self._backlog += frames
            else:
                self._deliver(frames)
        if not self.authenticated:
            if self._is_authenticated is not None and self._is_authenticated(self.conn_id):
                self.authenticated = True
            elif self.reader.buffered > PREAUTH_BUFFER and self.closed_reason is None:
                self.refuse("preauth_size", f"{self.reader.buffered} bytes of a frame from {self.peer_addr} "
                                            f"before it authenticated (at most {PREAUTH_BUFFER})")

    def _deliver(self, frames: list[bytes]) -> None:
        """Hand the frames over in batches (cut to what takes an eighth of SLICE_S when
        one took over a quarter, doubled back while one takes under a sixteenth: 256
        frames of batched subscription floods took 100 ms and more, and the slice was
        checked only after them); after SLICE_S of work, or when the owner says
        it must give the loop a turn (`link_must_yield`: its clients' output is over the
        node's budget, and the cut of slow consumers waits for that turn), the rest
        waits for the next turn of the loop and the link is not read meanwhile (uvloop
        reads a ready socket up to 32 times per turn: one turn must not route megabytes,
        nor bury 200 consumers that do not read in 8 MB each, as it did)."""
        start = last = time.perf_counter()
        n = len(frames)
        off = 0
        while off < n:
            size = self._batch
            batch = frames[off:off + size] if off or n > size else frames
            off += len(batch)
            self.frames_in += len(batch)
            self.owner.link_frames(self.conn_id, batch)
            if self.closed_reason is not None:
                return
            now = time.perf_counter()
            took, last = now - last, now
            if took > SLICE_S / 4 and size > 1:
                self._batch = max(1, int(size * SLICE_S / 8 / took))
            elif took < SLICE_S / 16 and size < FRAME_BATCH:
                self._batch = size * 2
            if off < n and now - start > SLICE_S or self._must_yield is not None and self._must_yield():
                self._backlog = frames[off:]
                self._turn_held = True
                self._update_reading()
                asyncio.get_running_loop().call_soon(self._continue)
                return

    def _continue(self) -> None:
        self._turn_held = False
        frames, self._backlog = self._backlog, []
        if frames and self.closed_reason is None:
            self._deliver(frames)
        self._update_reading()

    def hold_reading(self, held: bool) -> None:
        """The owner's backpressure: stop or restart reading this link."""
        self._held = held
        self._update_reading()

    def _update_reading(self) -> None:
        want = self._held or self._turn_held or bool(self._backlog)
        if want != self._read_paused and self.transport is not None and not self.transport.is_closing():
            self._read_paused = want
            (self.transport.pause_reading if want else self.transport.resume_reading)()

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
        if self._write_paused:
            self._enqueue(data)
            return
        if not self._pending:
            asyncio.get_running_loop().call_soon(self.flush)
        self._pending.append(data)
        self._pending_bytes += len(data)
        if self._pending_bytes >= COALESCE_BYTES:
            self.flush()  # a loop pass may read megabytes: let the high-water mark see them

    def send_now(self, data: bytes) -> None:
        """Send a frame and write it in this pass when nothing waits before it on the
        link (the lone-frame path); otherwise as `send`, behind what waits."""
        if self._pending or self._write_paused or self.cipher is not None and not self.cipher.ready:
            self.send(data)
            return
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        self.frames_out += 1
        self._write(data)

    def _enqueue(self, data: bytes) -> None:
        self._poll.wr_poll += 1
        (self._data if not data[0] & _MCAST_TYPE_BITS else self._ctl).append(data)
        self.queued += len(data)
        self._note_held()
        if not self._full and self.queued > self.highwater * QUEUE_FACTOR:
            self._full = True
            self.owner.link_full(self.conn_id, True)

    def flush(self) -> None:
        """Write what was sent in this pass of the loop (called soon after by itself)."""
        poll = self._poll
        poll.write_cnt += 1
        if poll.write_cnt % SAMPLE:
            self._flush()
            return
        start = time.perf_counter_ns()
        self._flush()
        poll.write_ns += time.perf_counter_ns() - start
        poll.write_timed += 1

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        self._pending_bytes = 0
        if not pending or self.transport is None or self.transport.is_closing():
            return
        if self._write_paused:  # paused by an earlier write of this pass: queue in order
            for data in pending:
                self._enqueue(data)
            return
        self._write(pending[0] if len(pending) == 1 else b"".join(pending))
        self._note_held()

    def _note_held(self) -> None:
        """Keep the peak of the output held (checked once a loop pass and when queueing,
        not on each lone frame)."""
        held = self.buffered
        if held > self.wr_peak:
            self.wr_peak = held

    def _write(self, data: bytes) -> None:
        assert self.transport is not None
        out = self.cipher.encrypt(data) if self.cipher is not None else data
        self.bytes_out += len(out)
        self.transport.write(out)  # may call pause_writing

    def _drain(self) -> None:
        """Write the queues, control frames first, until the transport is full again."""
        ctl, data = self._ctl, self._data
        while (ctl or data) and not self._write_paused and self.transport is not None \
                and not self.transport.is_closing():
            parts: list[bytes] = []
            size = 0
            while ctl:
                parts.append(ctl.popleft())
            size = sum(map(len, parts))
            while data and size < DRAIN_CHUNK:
                frame = data.popleft()
                parts.append(frame)
                size += len(frame)
            self.queued -= size
            self._write(parts[0] if len(parts) == 1 else b"".join(parts))
        if self._full and self.queued <= self.highwater * QUEUE_FACTOR // 2:
            self._full = False
            self.owner.link_full(self.conn_id, False)

    # asyncio flow control: above tcp_write_highwater the owner pauses the sources
    def pause_writing(self) -> None:
        self._poll.wr_hi += 1
        self._write_paused = True
        if self._congested_since is None:
            self._congested_since = self._progress_at = time.monotonic()
            self._progress_size = self.transport.get_write_buffer_size() if self.transport is not None else 0
            self.owner.link_congested(self.conn_id, True)

    def resume_writing(self) -> None:
        self._write_paused = False
        self._progress_at = time.monotonic()
        self._drain()
        if not self._write_paused and self._congested_since is not None:
            self._congested_since = None
            self.owner.link_congested(self.conn_id, False)

    def check_write_timeout(self, now: float) -> None:
        """Drop a link whose output made no progress for tcp_write_timeout while above
        the mark (its buffer did not shrink)."""
        if self._congested_since is None or self.transport is None:
            return
        size = self.transport.get_write_buffer_size()
        if size < self._progress_size:
            self._progress_at = now
        self._progress_size = size
        if now - self._progress_at > self.write_timeout_s:
            self.write_drops += 1
            self.close(f"write timeout: {size + self.queued} bytes waiting, none written for "
                       f"{now - self._progress_at:.1f} s (tcp_write_timeout {self.write_timeout_s} s)", abort=True)

    @property
    def buffered(self) -> int:
        """Output bytes held for this link: queued here and in the transport."""
        size = self.queued + self._pending_bytes
        if self.transport is not None:
            size += self.transport.get_write_buffer_size()
        return size

    @property
    def unread(self) -> int:
        """Input bytes held: a partial frame and the frames waiting for the next turn."""
        return self.reader.buffered + sum(map(len, self._backlog))

    @property
    def reading(self) -> bool:
        return not self._read_paused

    @property
    def writable(self) -> bool:
        return self._congested_since is None

    def refuse(self, kind: str, reason: str) -> None:
        """Close for what the peer sent; `kind` is counted by the owner."""
        if self.closed_reason is None:
            self.refusal = kind
        self.close(reason)

    def close(self, reason: str, abort: bool = False) -> None:
        """Close the link: what was sent in this pass and the queued control frames (BYE)
        are written, queued data is dropped. The transport then flushes its buffer for at
        most CLOSE_LINGER_S and is aborted (at once with `abort`): a peer that stopped
        reading held the socket, its buffer and, through the congestion it reported,
        every bridge client of the node, for as long as its kernel acknowledged window
        probes (forever for a stopped process). The owner sees the congestion end now."""
        if self.closed_reason is None:
            self.closed_reason = reason
            self._warn(f"closing link {self.peer_addr}: {reason}")
        transport = self.transport
        if transport is not None and not transport.is_closing():
            self.flush()
            if self._ctl and not abort:  # the last control frames (BYE) go out; queued data is dropped
                self._write(b"".join(self._ctl))
            self._ctl.clear()
            self._data.clear()
            self.queued = 0
            if abort:
                transport.abort()
            else:
                transport.close()
                if transport.get_write_buffer_size():
                    asyncio.get_running_loop().call_later(CLOSE_LINGER_S, _abort, transport)
        self._release_flow()

    def _release_flow(self) -> None:
        """A closing link stops holding the node's sources (its output is dropped)."""
        if self._full:
            self._full = False
            self.owner.link_full(self.conn_id, False)
        if self._congested_since is not None:
            self._congested_since = None
            self.owner.link_congested(self.conn_id, False)


def _abort(transport: asyncio.Transport) -> None:
    """The end of a closing link's linger: whatever it still holds is dropped."""
    transport.abort()  # (a no-op once the connection is lost)


def _warn(text: str) -> None:
    log.warning("%s", text)


def _addr(info: object) -> str:
    if isinstance(info, tuple) and len(info) >= 2:
        host = str(info[0])
        return f"[{host}]:{info[1]}" if ":" in host else f"{host}:{info[1]}"
    return str(info or "")
