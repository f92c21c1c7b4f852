"""What a client subscription holds for its application, against its pending limits.

The sbus client (client/sync.py, client/aio.py) queues each iterator subscription's
messages until the application takes them out. `Pending` counts them, messages and
payload bytes, and decides, as the NATS clients do (nats-py: `pending_msgs_limit`,
`pending_bytes_limit`), whether a new message may join the queue:

- A message is admitted when, with it, the queue holds at most `msgs_limit` messages
  and `bytes_limit` payload bytes; otherwise it is dropped (never queued) and counted
  in `dropped`. Messages that fit are never dropped, so a subscription's queue keeps
  the order in which they came. A message whose payload alone is larger than
  `bytes_limit` never fits (as in nats.go and nats-py, the bound is a hard one).
- A limit <= 0 switches that limit off (nats-py's 0).
- The first drop after a time of admitting starts a slow-consumer *episode*: `admit`
  answers `NOTICE` once, so that the client reports it once, and `DROP` for the drops
  that follow. The episode ends at the low-water mark: when the application has taken
  messages out until the queue holds at most half of each limit (LOW_WATER); a later
  overflow is a new episode. (It used to end as soon as one message fitted again, so a
  consumer a little slower than its publisher, the queue at its limit, started an
  episode, and got a notice, with every drop: 4,901 notices for 4,901 drops, where a
  notice per episode was meant. nats.go flaps so; nats-py notices every drop.)
- `release` is the application taking a message out: its bytes are given back.

Thread-safe: the client's reader thread admits, application threads (or the event
loop's thread) release. Pure otherwise: no I/O, no logging, no clock. `Limited` is what
the subscriptions of both clients share: the counts, admitting a message and telling
the client of a drop, releasing one taken out.
"""

from __future__ import annotations

import threading
from typing import Final, Protocol, TypeVar

DEFAULT_PENDING_MSGS_LIMIT: Final = 512 * 1024  # nats-py's DEFAULT_SUB_PENDING_MSGS_LIMIT
DEFAULT_PENDING_BYTES_LIMIT: Final = 128 * 1024 * 1024  # nats-py's DEFAULT_SUB_PENDING_BYTES_LIMIT

ADMIT: Final = 0
DROP: Final = 1
NOTICE: Final = 2  # dropped, and the first drop of an episode
LOW_WATER: Final = 0.5  # an episode ends once the queue holds at most this share of each limit


class Pending:
    """Counters of one subscription's queue (module docstring)."""

    __slots__ = ("_lock", "bytes", "bytes_limit", "dropped", "msgs", "msgs_limit", "slow")

    def __init__(self, msgs_limit: int = DEFAULT_PENDING_MSGS_LIMIT,
                 bytes_limit: int = DEFAULT_PENDING_BYTES_LIMIT) -> None:
        self._lock = threading.Lock()
        self.msgs_limit = msgs_limit
        self.bytes_limit = bytes_limit
        self.msgs = 0
        self.bytes = 0
        self.dropped = 0
        self.slow = False

    def _fits(self, msgs: int, nbytes: int) -> bool:
        return (self.msgs_limit <= 0 or msgs <= self.msgs_limit) and \
            (self.bytes_limit <= 0 or nbytes <= self.bytes_limit)

    def admit(self, size: int) -> int:
        """ADMIT (count the message in), DROP or NOTICE (count a drop)."""
        with self._lock:
            if self._fits(self.msgs + 1, self.bytes + size):
                self.msgs += 1
                self.bytes += size
                return ADMIT
            self.dropped += 1
            if self.slow:
                return DROP
            self.slow = True
            return NOTICE

    def release(self, size: int) -> None:
        """The application took a message of `size` payload bytes out of the queue."""
        with self._lock:
            self.msgs -= 1
            self.bytes -= size
            if self.slow and self._low():
                self.slow = False

    def _low(self) -> bool:
        """At or under the low-water mark of both limits (a limit <= 0 is off)."""
        return (self.msgs_limit <= 0 or self.msgs <= self.msgs_limit * LOW_WATER) and \
            (self.bytes_limit <= 0 or self.bytes <= self.bytes_limit * LOW_WATER)


class _Payload(Protocol):
    @property
    def payload(self) -> bytes: ...
    @property
    def subject(self) -> str: ...


class _DropSink(Protocol):
    def _dropped(self, owner: object, pattern: bytes, subject: str, pending: Pending, notice: bool) -> None: ...


M = TypeVar("M", bound=_Payload)


class Limited:
    """The pending side of a subscription of either client: its counts, the admission
    of a message the reader thread brings, and the release of one taken out."""

    pending: Pending
    pattern: bytes

    @property
    def dropped(self) -> int:
        """Messages dropped because the queue was full."""
        return self.pending.dropped

    @property
    def pending_msgs(self) -> int:
        return self.pending.msgs

    @property
    def pending_bytes(self) -> int:
        return self.pending.bytes

    def _admit(self, msg: _Payload, client: _DropSink) -> bool:
        """True: queue `msg`; False: it was dropped and `client` told (reader thread)."""
        verdict = self.pending.admit(len(msg.payload))
        if verdict == ADMIT:
            return True
        client._dropped(self, self.pattern, msg.subject, self.pending, verdict == NOTICE)
        return False

    def _take(self, msg: M | None) -> M | None:
        """`msg` taken out of the queue (None: the end of the subscription)."""
        if msg is not None:
            self.pending.release(len(msg.payload))
        return msg
