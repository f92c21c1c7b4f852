"""The outbound half of a client session: buffered output and flow control.

CONVENTIONS 5 (explicit backpressure), issue 8 point 4 (slow consumers). A session
never writes to a socket: replies and deliveries are appended to its outbound buffer
and the asyncio glue drains it with `pending_output()` while the transport accepts
more (between `pause_writing` and `resume_writing` it drains nothing, so unwritten
output stays here where the limits see it). The contract with the glue:

- `wakeup()` is called when the buffer goes from empty to non-empty, when it rises
  above the high-water mark, and when the session decides to close: deliveries arrive
  from the bus outside `data_received`, so the glue must be told to flush.
- `paused` is True from the moment the buffer exceeds `high_water` until a drain brings
  it down to `low_water`: while it is set the glue pauses reading from this client and
  the node may pause the publishers feeding it.
- Past `hard_limit` the output that would cross it is dropped, the protocol's error is
  appended (NATS `-ERR 'Slow Consumer'`; Redis sends nothing, it just closes, as
  redis-server does when `client-output-buffer-limit` is hit) and `closing` is set with
  `close_error` a SlowConsumer: the glue writes what is pending, closes and counts it.

Partial drains (`pending_output(max_bytes)`) let the glue hand the transport no more
than it will take, so that the limits keep seeing what is really unsent. A greeting
(NATS INFO) is queued at construction without a wakeup. The glue, in outline:

    connection_made:  session = NatsSession(bus, cid, config, wakeup=schedule_flush); flush()
    data_received:    session.data_received(data); flush()
    flush:            unless writing is paused, transport.write(session.pending_output());
                      pause/resume reading as session.paused says; once session.closing
                      and nothing is left buffered, transport.close()
    connection_lost:  session.connection_lost()

Defaults (decision): high water 1 MiB (16 times asyncio's transport mark, so a burst of
deliveries does not pause sources at once), low water 256 KiB, hard limit 64 MiB
(nats-server's default `max_pending`). The Redis bridge uses redis-server's pub/sub
`client-output-buffer-limit`: hard 32 MiB, soft 8 MiB for 60 s (`check_soft_limit`,
called by the glue once a second, closes a session whose output stayed above the soft
limit that long).

A slow consumer's queued output is discarded when it is cut (only the error line is
left to write), so its memory is released at once. Sessions may share an
`OutputLedger`: the node's total of queued client output. Past the ledger's budget the
glue cuts the sessions above their low-water mark, largest first, until the total is
under half the budget, so that many consumers that never read cannot together exhaust
the node's memory while each stays under its own limit (decision: budget 16 MiB by
default: measured with 200 stuck consumers and 1 KB messages, the node peaks near
225 MB with it and past 300 MB with 32 MiB, the allocator keeping more than the
budget; a consumer under its low-water mark, one that keeps up, is never cut for it).
A consumer over its high-water mark whose producers the glue stalls (gate.py) grows by
about STALL_GRANT (256 KiB) per stall of 0.1 s and more: from 1 MiB it takes 5-10 s to
reach the budget, so one subscriber blocked for a few seconds under a stalled
publisher is not cut by it (measured: 1, 3 and 8 s with 64 KB messages, DESIGN-NOTES
"Producer stalls"), and one that never reads is cut in about that time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from raims_node.bridges.errors import BadLimits, BridgeError, HandshakeTimeout, SlowConsumer

HIGH_WATER = 1024 * 1024
LOW_WATER = 256 * 1024
HARD_LIMIT = 64 * 1024 * 1024
OUTPUT_BUDGET = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class FlowLimits:
    high_water: int = HIGH_WATER
    low_water: int = LOW_WATER
    hard_limit: int = HARD_LIMIT
    soft_limit: int = 0  # 0: none
    soft_seconds: float = 0.0

    def __post_init__(self) -> None:
        if not 0 <= self.low_water <= self.high_water <= self.hard_limit:
            raise BadLimits(
                f"flow limits must satisfy 0 <= low_water ({self.low_water}) <= high_water "
                f"({self.high_water}) <= hard_limit ({self.hard_limit})")


class OutputLedger:
    """The queued output of a node's client sessions, against a budget. `on_over` is
    called (once until the total is back under the budget) when a write passes it."""

    __slots__ = ("total", "budget", "on_over", "_over")

    def __init__(self, budget: int = OUTPUT_BUDGET, on_over: Callable[[], None] | None = None) -> None:
        self.total = 0
        self.budget = budget
        self.on_over = on_over
        self._over = False

    def add(self, size: int) -> None:
        self.total += size
        if self.total > self.budget:
            if not self._over and self.on_over is not None:
                self._over = True
                self.on_over()
        else:
            self._over = False

    @property
    def over(self) -> bool:
        """Over the budget, and the owner's cut has not run since."""
        return self._over

    def rearm(self) -> None:
        """The owner handled the last call: the next write over the budget calls again."""
        self._over = False


class SessionOutput:
    """Base of the protocol sessions: the outbound buffer, its marks and closing."""

    ledger: OutputLedger | None = None  # set by `share_ledger` when the node keeps one
    on_fed: Callable[[], None] | None = None  # called on each write over the high-water mark (the glue's stalls)

    def share_ledger(self, ledger: OutputLedger) -> None:
        """Count this session's output (the greeting already queued too) in `ledger`."""
        self.ledger = ledger
        ledger.add(len(self._buf))

    def __init__(self, limits: FlowLimits, wakeup: Callable[[], None] | None,
                 overflow_reply: bytes, greeting: bytes = b"") -> None:
        self.limits = limits
        self._high = limits.high_water  # copied: read on every write
        self._hard = limits.hard_limit
        self._wakeup = wakeup
        self._overflow_reply = overflow_reply
        self._buf = bytearray(greeting)  # no wakeup: the glue flushes after construction
        self._paused = False
        self._closing = False
        self._close_error: BridgeError | None = None
        self._soft_since: float | None = None
        self.bytes_out = 0

    @property
    def buffered(self) -> int:
        """Bytes queued and not yet taken by `pending_output()`."""
        return len(self._buf)

    @property
    def paused(self) -> bool:
        return self._paused

    @property
    def closing(self) -> bool:
        """The glue must close the connection once the pending output is written."""
        return self._closing

    @property
    def close_error(self) -> BridgeError | None:
        """Why the session closes; None for a client's own QUIT or a lost connection."""
        return self._close_error

    def pending_output(self, max_bytes: int | None = None) -> bytes:
        """Take (at most `max_bytes` of) the queued output, for the transport."""
        buf = self._buf
        if max_bytes is None or max_bytes >= len(buf):
            out = bytes(buf)
            buf.clear()
        else:
            out = bytes(buf[:max_bytes])
            del buf[:max_bytes]
        self.bytes_out += len(out)
        if self.ledger is not None:
            self.ledger.add(-len(out))
        if self._paused and len(buf) <= self.limits.low_water:
            self._paused = False
        return out

    def _write(self, data: bytes) -> bool:
        """Queue `data`; False when the session is closing or has just overflowed."""
        if self._closing:
            return False
        buf = self._buf
        was_empty = not buf
        size = len(buf) + len(data)
        if size > self._hard:
            self._close(self._overflow_reply, SlowConsumer(size, self._hard))
            return False
        buf += data
        if self.ledger is not None:
            self.ledger.add(len(data))
        if size > self._high:
            if not self._paused:
                self._paused = True
                was_empty = True
            if self.on_fed is not None:
                self.on_fed()
        if was_empty and self._wakeup is not None:
            self._wakeup()
        return True

    def _close(self, reply: bytes, error: BridgeError | None) -> None:
        """Queue the last bytes (past any limit) and mark the session closing."""
        if self._closing:
            return
        self._closing = True
        self._close_error = error
        if isinstance(error, SlowConsumer):  # what it did not read is dropped, memory freed now
            self._release()
        self._buf += reply
        if self.ledger is not None:
            self.ledger.add(len(reply))
        self._on_close()
        if self._wakeup is not None:
            self._wakeup()

    def _release(self) -> None:
        """Drop the queued output (a slow consumer cut, a lost connection)."""
        if self.ledger is not None:
            self.ledger.add(-len(self._buf))
        self._buf.clear()

    def cut(self) -> None:
        """Close as a slow consumer now (the node's output budget is exhausted)."""
        self._close(self._overflow_reply, SlowConsumer(len(self._buf), self.ledger.budget if self.ledger else 0))

    def check_soft_limit(self, now: float) -> None:
        """Close a session whose output stayed above the soft limit for soft_seconds."""
        soft = self.limits.soft_limit
        if not soft or self._closing:
            return
        if len(self._buf) <= soft:
            self._soft_since = None
        elif self._soft_since is None:
            self._soft_since = now
        elif now - self._soft_since >= self.limits.soft_seconds:
            self._close(self._overflow_reply, SlowConsumer(len(self._buf), soft))

    handshake_timeout_reply = b""  # what a client late with its handshake is told before the close

    @property
    def established(self) -> bool:
        """Whether the client completed its protocol's handshake (a protocol without one:
        at once). The glue's handshake deadline closes a session that has not."""
        return True

    def expire_handshake(self, reason: str) -> bool:
        """The handshake deadline passed: close the session unless it is established or
        closing already; True when it closes."""
        if self._closing or self.established:
            return False
        self._close(self.handshake_timeout_reply, HandshakeTimeout(reason))
        return True

    def _on_close(self) -> None:
        """Subclasses release their subscriptions here."""

    def deliver(self, sid: str, subject: str, reply: str | None,
                headers: bytes | None, payload: bytes) -> None:
        raise NotImplementedError

    def deliver_run(self, sid: str, subject: str, payloads: list[bytes]) -> None:
        """`deliver` of each payload, without reply or headers (a session may write
        them at once)."""
        for payload in payloads:
            self.deliver(sid, subject, None, None, payload)
