"""Replay checks: per-source, per-subject sequence numbers and time stamps.

Implements the replay rules of the manual's "Message Authentication", "Message Loss",
"Multicast sequence numbers" and "Subscription sequence window" (seed 000). A frame
whose digest verified is still refused when it repeats a sequence already seen for its
(source bridge, subject), or when it starts a stream the window does not know with a
time older than the window's trailing edge or the last network convergence.

Decisions where the manual is vague:
- A stream's time is the frame's stamp when present, else the time frame encoded in
  a multicast sequence number (`seqno >> 35 << 33` ns); a seqno below 2**35 carries no
  time frame, so an unknown stream with neither is refused (UNTIMED).
- A new-stream time is accepted down to max(convergence, trailing edge) minus the
  clock `skew` allowance (and minus one time frame, 2**33 ns, for times read from a
  seqno, whose frame is truncated).
- The window keeps two generations of streams and rotates when the current one is
  `window_ns` old or holds `max_streams` streams (the manual's size and time limits);
  the trailing edge is the start of the older generation.
- A stamped frame whose seqno is in another time frame than the last one seen starts
  the stream again (SYNC): the publisher restarted its sequence.
"""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple

SEQNO_FRAME_SHIFT = 35
TIME_FRAME_SHIFT = 33
TIME_FRAME_NS = 1 << TIME_FRAME_SHIFT
DEFAULT_WINDOW_NS = 10 * 1_000_000_000
DEFAULT_SKEW_NS = 1_000_000_000
DEFAULT_MAX_STREAMS = 100_000


def seqno_time_frame(seqno: int) -> int:
    """The time frame (ns) a multicast seqno was started in; 0 when it has none."""
    return (seqno >> SEQNO_FRAME_SHIFT) << TIME_FRAME_SHIFT


def first_seqno(now_ns: int) -> int:
    """The first seqno of a stream started at now_ns (the manual's formula)."""
    return ((now_ns >> TIME_FRAME_SHIFT) << SEQNO_FRAME_SHIFT) + 1


class Status(Enum):
    FIRST = "first"  # accepted: a new stream
    NEXT = "next"  # accepted: the next seqno
    GAP = "gap"  # accepted: seqnos were skipped, `lost` of them
    SYNC = "sync"  # accepted: a stamped restart in a new time frame
    REPLAY = "replay"  # refused: seqno not after the last one
    STALE = "stale"  # refused: new stream older than the window or convergence
    UNTIMED = "untimed"  # refused: new stream without a time


ACCEPTED = frozenset({Status.FIRST, Status.NEXT, Status.GAP, Status.SYNC})


class Check(NamedTuple):
    status: Status
    lost: int = 0

    @property
    def ok(self) -> bool:
        return self.status in ACCEPTED


_Key = tuple[bytes, str]


class ReplayGuard:
    """The sequence window of one node over every (source, subject) it receives."""

    def __init__(
        self,
        window_ns: int = DEFAULT_WINDOW_NS,
        max_streams: int = DEFAULT_MAX_STREAMS,
        skew_ns: int = DEFAULT_SKEW_NS,
        now_ns: int = 0,
    ) -> None:
        self.window_ns = window_ns
        self.max_streams = max_streams
        self.skew_ns = skew_ns
        self.converge_ns = 0
        self._cur: dict[_Key, int] = {}
        self._old: dict[_Key, int] = {}
        self._cur_start = now_ns
        self.trailing_edge = now_ns  # streams last seen before this are forgotten

    def converged(self, converge_ns: int) -> None:
        """Record the network convergence time (new streams must be newer)."""
        self.converge_ns = max(self.converge_ns, converge_ns)

    def _rotate(self, now_ns: int) -> None:
        if now_ns - self._cur_start >= self.window_ns or len(self._cur) >= self.max_streams:
            self._old = self._cur
            self._cur = {}
            self.trailing_edge = self._cur_start
            self._cur_start = now_ns

    def check(self, source: bytes, subject: str, seqno: int, stamp_ns: int | None, now_ns: int) -> Check:
        """Check (and on acceptance record) one frame's seqno and stamp."""
        self._rotate(now_ns)
        key = (source, subject)
        last = self._cur.get(key)
        if last is None:
            last = self._old.pop(key, None)
        if last is not None:
            if stamp_ns is not None and seqno_time_frame(seqno) != seqno_time_frame(last) and seqno > last:
                self._cur[key] = seqno
                return Check(Status.SYNC)
            if seqno <= last:
                self._cur[key] = last
                return Check(Status.REPLAY)
            self._cur[key] = seqno
            return Check(Status.NEXT) if seqno == last + 1 else Check(Status.GAP, seqno - last - 1)
        slack = self.skew_ns
        when = stamp_ns
        if when is None:
            when = seqno_time_frame(seqno)
            slack += TIME_FRAME_NS
            if when == 0:
                return Check(Status.UNTIMED)
        if when + slack < max(self.trailing_edge, self.converge_ns):
            return Check(Status.STALE)
        self._cur[key] = seqno
        return Check(Status.FIRST)

    def forget(self, source: bytes) -> None:
        """Drop every stream of a source (it left, or restarted with a new bridge)."""
        for table in (self._cur, self._old):
            for key in [k for k in table if k[0] == source]:
                del table[key]

    def __len__(self) -> int:
        return len(self._cur) + len(self._old)
