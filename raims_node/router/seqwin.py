"""Multicast sequence numbers, the publish and subscribe windows, loss counting.

Implements the manual's "Message Loss", "Multicast sequence numbers", "Publish
sequence window" and "Subscription sequence window" (seed 000).

A stream's first sequence is `(now_ns >> 33 << 35) + 1`: the upper 29 bits are a time
frame of about 8.6 s, the lower 35 bits count messages. A publisher keeps the last
sequence of each subject in a two-generation window; when the current generation
holds more than `window_size` bytes (subject length + PUB_ENTRY_OVERHEAD each) and is
older than `window_time`, it becomes the old generation and the previous old one is
dropped. A subject found in neither starts a new stream, and its first message carries
a time stamp.

A subscriber keeps, per (source, subject), the last sequence and the stamp of the
stream, in the same kind of window. Decisions where the manual is vague:
- A message with a stamp restarts the stream only when its stamp is newer than the
  stamp the window holds (so a replayed stream start is a repeat, not a restart), and
  its sequence is past the last one: a publisher starts a new
  stream of a subject in a later frame than the one before (it forgets the subject only
  after two window rotations of >= 10 s, a frame is 8.6 s), so a stamped sequence at or
  below the last of its frame is the start of this stream come late (a subscriber whose
  first message had no stamp holds 0; it came by a slower, older route): a repeat. It
  restarted the count until 2026-11-27, and the messages after it were delivered twice
  (a seven-node ring, a link up under a stream: 63 copies at one subscriber).
- A first message without a stamp whose time frame starts before the last network
  convergence may have been preceded by lost messages; that loss cannot be counted,
  so it is delivered without a loss notification (as the reference does), unless a
  message of the stream tells its start (`start`, router/stream_start.py: after a route
  change) and the subscription is older than it: then the messages before the first
  one seen are counted lost, once. One whose time frame begins after the last change of
  the links and after the subscription was known (`unseen_start`, the manual's check of
  "the first message received" against the convergence time) counts them lost too: the
  stream began there, every message of it was sent here. Not counted until 2026-11-27
  (a stable network, a stream's first frames dropped: none of 80 counted).
- Messages lost at a stream's tail are counted when a later message of the stream
  reveals the gap, as the manual's counters do: nothing on the wire tells a stream's
  last seqno before its next message.
- A gap inside one time frame is `seq - last - 1` lost messages; a jump to a later
  frame without a stamp counts as 1 lost (the count cannot be known).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")

FRAME_SHIFT = 35
TIME_SHIFT = 33
SEQ_MASK = (1 << FRAME_SHIFT) - 1
PUB_ENTRY_OVERHEAD = 48
SUB_ENTRY_OVERHEAD = 128
MIN_WINDOW_TIME_NS = 10 * 1_000_000_000


def new_stream_seqno(now_ns: int) -> int:
    """First sequence of a stream started at now_ns: (now >> 33 << 35) + 1."""
    return ((now_ns >> TIME_SHIFT) << FRAME_SHIFT) + 1


def time_frame(seqno: int) -> int:
    return seqno >> FRAME_SHIFT


def frame_start_ns(seqno: int) -> int:
    """The time stamp (ns) at which the stream's time frame begins."""
    return (seqno >> FRAME_SHIFT) << TIME_SHIFT


class _Window(Generic[K, V]):
    """Two generations of key -> value, rotated by size and age."""

    def __init__(self, size_limit: int, time_ns: int, overhead: int, now_ns: int) -> None:
        self.size_limit = size_limit
        self.time_ns = max(time_ns, MIN_WINDOW_TIME_NS)
        self.overhead = overhead
        self.cur: dict[K, V] = {}
        self.old: dict[K, V] = {}
        self.cur_bytes = 0
        self.started_ns = now_ns
        self.rotations = 0
        self.old_bytes = 0
        self.old_started_ns = 0
        self.max_bytes = 0

    def get(self, key: K, size: int) -> V | None:
        v = self.cur.get(key)
        if v is None:
            v = self.old.pop(key, None)
            if v is not None:
                self.cur[key] = v
                self._grow(size)
        return v

    def put(self, key: K, size: int, value: V) -> None:
        if key not in self.cur:
            self._grow(size)
        self.cur[key] = value

    def _grow(self, size: int) -> None:
        self.cur_bytes += size + self.overhead
        if self.cur_bytes > self.max_bytes:
            self.max_bytes = self.cur_bytes

    def maybe_rotate(self, now_ns: int) -> bool:
        """Rotate when over the size and old enough (the manual's rule); True if it did."""
        if self.cur_bytes > self.size_limit and now_ns - self.started_ns >= self.time_ns:
            self.old, self.old_bytes, self.old_started_ns = self.cur, self.cur_bytes, self.started_ns
            self.cur = {}
            self.cur_bytes = 0
            self.started_ns = now_ns
            self.rotations += 1
            return True
        return False

    def stats(self) -> WindowStats:
        return WindowStats(len(self.cur), self.cur_bytes, len(self.old), self.old_bytes if self.old else 0,
                           self.size_limit, self.max_bytes, self.started_ns, self.old_started_ns, self.time_ns)

    def __len__(self) -> int:
        return len(self.cur) + len(self.old)

    def items(self) -> list[tuple[K, V]]:
        """Every entry, current generation first."""
        return [*self.cur.items(), *self.old.items()]


class PubWindow:
    """Next sequence number for each subject this node publishes."""

    def __init__(self, size_limit: int, time_ns: int, now_ns: int) -> None:
        self._w: _Window[str, int] = _Window(size_limit, time_ns, PUB_ENTRY_OVERHEAD, now_ns)
        self._shared: set[str] = set()  # subjects whose last message was an anycast

    def next_seqno(self, subject: str, now_ns: int, share: bool = False) -> tuple[int, bool]:
        """(seqno, starts_stream): a new stream's first message carries a stamp. So does
        an anycast (`share`: one of many nodes gets it) and the message after one: a
        subscriber seeing a share of the stream restarts its count, no loss counted."""
        if share or (self._shared and subject in self._shared):
            seq = self._next(subject, now_ns)[0]
            if share:
                self._shared.add(subject)
            else:
                self._shared.discard(subject)
            return seq, True
        return self._next(subject, now_ns)

    def _next(self, subject: str, now_ns: int) -> tuple[int, bool]:
        last = self._w.get(subject, len(subject))
        if last is None or ((last + 1) & SEQ_MASK) == 0:
            seq = new_stream_seqno(now_ns)
            if last is not None and seq <= last:
                seq = (((last >> FRAME_SHIFT) + 1) << FRAME_SHIFT) + 1
            self._w.put(subject, len(subject), seq)
            if self._w.maybe_rotate(now_ns) and self._shared:  # a subject rotated out starts a new stream
                w = self._w
                self._shared = {s for s in self._shared if s in w.cur or s in w.old}
            return seq, True
        seq = last + 1
        self._w.put(subject, len(subject), seq)
        return seq, False

    def next_seqnos(self, subject: str, n: int, now_ns: int) -> tuple[int, bool] | None:
        """(first seqno, starts_stream) of a run of `n` messages (seqnos first..first+n-1,
        wire/batch.py); None when the run would wrap the stream's counter (the caller
        publishes one by one, and the wrap starts a new stream as usual)."""
        last = self._w.get(subject, len(subject))
        if last is not None and ((last + 1) & SEQ_MASK) and (last & SEQ_MASK) + n > SEQ_MASK:
            return None
        first, start = self.next_seqno(subject, now_ns)
        self._w.put(subject, len(subject), first + n - 1)
        return first, start

    def last(self, subject: str) -> int | None:
        """The seqno of the last message published on `subject` (None: none in the window)."""
        return self._w.get(subject, len(subject))

    def entries(self) -> list[tuple[str, int]]:
        """(subject, last seqno published) of every subject in the window."""
        return self._w.items()

    def __len__(self) -> int:
        return len(self._w)

    def stats(self) -> WindowStats:
        return self._w.stats()


class Verdict(Enum):
    OK = "ok"
    FIRST = "first"  # first message of a stream this subscriber sees
    RESTART = "restart"  # the publisher started a new stream (stamp)
    LOSS = "loss"  # delivered, with `lost` messages missing before it
    REPEAT = "repeat"  # already seen: drop


@dataclass(frozen=True, slots=True)
class WindowStats:
    """A window's two generations as `show windows` prints them (bytes: the entries' estimate)."""

    count: int
    size: int
    old_count: int
    old_size: int
    win_size: int  # the size past which the current generation rotates
    max_size: int  # the largest the current generation has been
    rotate_ns: int  # when the current generation started
    old_rotate_ns: int  # when the old one did (0: never rotated)
    interval_ns: int  # the least age at which it rotates


@dataclass(slots=True)
class _SubEntry:
    seqno: int
    stamp: int  # the stream's start stamp; 0: not known (its first message seen had none)
    first: int = 0  # while the stamp is not known, the first seqno seen


class SubWindow:
    """Last sequence per (source bridge, subject) this node received."""

    def __init__(self, size_limit: int, time_ns: int, now_ns: int) -> None:
        self._w: _Window[tuple[bytes, str], _SubEntry] = _Window(size_limit, time_ns, SUB_ENTRY_OVERHEAD, now_ns)
        self.changed_ns = now_ns  # when this node's links last changed (reorder.ReorderHold.routes_changed)

    def check(self, source: bytes, subject: str, seqno: int, stamp: int, now_ns: int, start: int = 0,
              owed: bool = False) -> tuple[Verdict, int]:
        """Classify one received message; returns (verdict, messages lost before it).
        `start`: the stream's start stamp, which a publisher adds after a route change
        (router/stream_start.py); `owed`: the stream started after this node's
        subscription was known, so the messages before the first one seen were sent
        here, and those missing are lost (counted once, when the start becomes known)."""
        key = (source, subject)
        entry = self._w.get(key, len(subject))
        if entry is None:
            self._w.put(key, len(subject), _SubEntry(seqno, stamp or start, 0 if stamp or start else seqno))
            self._w.maybe_rotate(now_ns)
            before = (seqno & SEQ_MASK) - 1 if start and owed and not stamp else 0
            return (Verdict.LOSS, before) if before else (Verdict.FIRST, 0)
        if entry.first and start and not stamp:
            before = (entry.first & SEQ_MASK) - 1 if owed else 0
            verdict, lost = self._classify(entry, seqno, stamp)
            if verdict is not Verdict.REPEAT:
                entry.stamp, entry.first = start, 0
                if before:
                    return Verdict.LOSS, lost + before
            return verdict, lost
        return self._classify(entry, seqno, stamp)

    @staticmethod
    def _classify(entry: _SubEntry, seqno: int, stamp: int) -> tuple[Verdict, int]:
        last = entry.seqno
        if seqno == last + 1:
            entry.seqno = seqno
            return Verdict.OK, 0
        if stamp and stamp > entry.stamp and seqno > last:
            entry.seqno, entry.stamp, entry.first = seqno, stamp, 0
            return Verdict.RESTART, 0
        if seqno <= last:
            return Verdict.REPEAT, 0
        lost = seqno - last - 1 if time_frame(seqno) == time_frame(last) else 1
        entry.seqno = seqno
        if stamp:
            entry.stamp, entry.first = stamp, 0
        return Verdict.LOSS, lost

    def unseen_start(self, source: bytes, subject: str, seqno: int, known_ns: int) -> int:
        """After `check` said FIRST for `seqno` (no stamp): the messages before it, when
        the stream's time frame began after `known_ns`, by which the links had last
        changed (the manual's convergence time) and from which the window has kept every
        stream it saw (none was rotated out: the stream was never seen here), else 0.
        Counted once: a start told later (stream_start.py) counts nothing more."""
        if self.changed_ns > known_ns or self._w.old_started_ns > known_ns:
            return 0
        entry = self._w.get((source, subject), len(subject))
        if entry is None or entry.first != seqno:
            return 0
        entry.first = 0
        return (seqno & SEQ_MASK) - 1

    def gap(self, source: bytes, subject: str, seqno: int, stamp: int) -> bool:
        """Whether a message (or a run starting) at `seqno` would leave messages missing
        before it (`check` would count loss); the window is not changed."""
        entry = self._w.get((source, subject), len(subject))
        if entry is None or seqno <= entry.seqno + 1:
            return False
        return not (stamp and stamp > entry.stamp and seqno > entry.seqno)

    def known(self, source: bytes, subject: str) -> bool:
        """Whether a message of (source, subject) was received (the window has it)."""
        return self._w.get((source, subject), len(subject)) is not None

    def check_run(self, source: bytes, subject: str, seqno: int, n: int, stamp: int,
                  now_ns: int, start: int = 0, owed: bool = False) -> tuple[Verdict, int, int]:
        """Classify a run of `n` messages seqno..seqno+n-1 (a batch frame): (verdict of
        the first, messages lost before it, how many of the run repeat what was already
        delivered: only the rest is delivered). `start`, `owed`: as for `check` (a
        batch tells the start as a single message does)."""
        key = (source, subject)
        entry = self._w.get(key, len(subject))
        last_in = seqno + n - 1
        if entry is not None and stamp <= entry.stamp and seqno <= entry.seqno:  # overlaps what was seen
            seen = entry.seqno - seqno + 1
            if seen >= n:
                return Verdict.REPEAT, 0, n
            entry.seqno = last_in
            if entry.first and start:  # its new tail tells the start (`check`'s rule)
                before = (entry.first & SEQ_MASK) - 1 if owed else 0
                entry.stamp, entry.first = start, 0
                if before:
                    return Verdict.LOSS, before, seen
            return Verdict.OK, 0, seen
        verdict, lost = self.check(source, subject, seqno, stamp, now_ns, start, owed)
        if verdict is not Verdict.REPEAT:
            found = self._w.get(key, len(subject))
            if found is not None:
                found.seqno = last_in
            return verdict, lost, 0
        return verdict, lost, n

    def entries(self) -> list[tuple[tuple[bytes, str], int]]:
        """((source, subject), last seqno received) of every stream in the window."""
        return [(k, e.seqno) for k, e in self._w.items()]

    def __len__(self) -> int:
        return len(self._w)

    def stats(self) -> WindowStats:
        return self._w.stats()


@dataclass(slots=True)
class LossCounters:
    """One row of `show loss`: per source peer."""

    repeat: int = 0
    repeat_time: int = 0
    not_sub: int = 0
    not_sub_time: int = 0
    msg_loss: int = 0
    loss_time: int = 0
    ibx_loss: int = 0
    ibx_time: int = 0

    def not_subscribed(self, now_ns: int) -> None:
        """A message from this peer that no subscription here took and that went on nowhere."""
        self.not_sub += 1
        self.not_sub_time = now_ns
