"""While the routes change, a frame that arrives ahead of the ones before it waits for them.

A route change moves a stream from one path to another; the first frames of the new
path can overtake the last ones of the old (router/route_grace.py relays those on):
measured with the daemons on two shared vCPUs, 10-30 of ~2,500 messages reached D after
later ones had, and D's sequence window counted them lost, then dropped them as
repeats. So for `FLUX_NS` after this node's links change (`Node._flush` tells), a
received frame whose sequence leaves a gap waits, up to `HOLD_NS`, for the
frames before it; a frame that fills the gap is delivered and the held ones after it
follow in order. What is still missing when a held frame is due is lost: it is then
delivered with the loss counted, as without the hold. While a stream holds frames,
every frame of it with a gap waits, even after the flux (none may overtake them).
Outside a change nothing waits: a gap is loss at once, as the manual describes.

The hold was 50 ms until 2026-11-27: on a loaded host (the daemons' test beside two busy
loops, load 8) the old path's last frames came later than that once in 60 runs, and D
counted 170 lost, then dropped them as repeats; the simulator's stalled receivers did
the same in 5 of 100 runs with stalls up to 45 ms. A real gap (frames that died with a
node) now holds its stream up to 200 ms longer than before, after a failover that took
heartbeats to notice.
"""

from __future__ import annotations

from collections.abc import Callable

from raims_node.router.route_grace import ROUTE_GRACE_NS
from raims_node.router.seqwin import SubWindow
from raims_node.router.stream_start import SUB_KNOWN_NS

HOLD_NS = 200_000_000  # the longest a frame waits for the ones before it (below)
SHORT_HOLD_NS = 30_000_000  # for a start that may not have been sent here (`_unstarted`)
FLUX_NS = ROUTE_GRACE_NS  # after a change of the link state, as long as relays use old routes
HELD_LIMIT = 4096  # frames one stream may hold; past it the frame goes on at once

Key = tuple[bytes, str]  # (source, subject)
Held = tuple[int, int, bytes, int, int]  # (seqno, due_ns, frame, fields offset, end)
# redeliver(source, subject, frame, off, end, due_ns, now_ns): a held frame through delivery again
Redeliver = Callable[[bytes, str, bytes, int, int, int, int], object]


class ReorderHold:
    def __init__(self, window: SubWindow, redeliver: Redeliver) -> None:
        self.window = window
        self.redeliver = redeliver
        self.held: dict[Key, list[Held]] = {}
        self._flux_until_ns = 0
        self._changed_ns = -(1 << 62)  # when the links last changed
        self._releasing = False  # held frames are going through delivery: no release within
        self._due_ns: int | None = None  # the earliest due time, None: to be worked out again

    def routes_changed(self, now_ns: int) -> None:
        self._flux_until_ns = now_ns + FLUX_NS
        self._changed_ns = self.window.changed_ns = now_ns

    def busy(self, now_ns: int) -> bool:
        """Whether a received frame may have to wait (else: deliver, no need to ask)."""
        return bool(self.held) or now_ns <= self._flux_until_ns

    def wait(self, source: bytes, subject: str, seqno: int, stamp: int, frame: bytes, off: int, end: int,
             now_ns: int, due_ns: int, start: int = 0, since_ns: int = 0) -> bool:
        """Whether this frame (its first sequence `seqno`) waits; `due_ns` is its due time
        when it is a held one going through again (0: just received); `start`: the
        stream's start stamp the frame carries (stream_start.py, 0: none); `since_ns`:
        when the oldest subscription it goes to was made."""
        key = (source, subject)
        if due_ns:
            if now_ns >= due_ns:
                return False
        elif key not in self.held and now_ns > self._flux_until_ns:
            return False
        hold_ns = HOLD_NS if self.window.gap(source, subject, seqno, stamp) else \
            self._unstarted(key, stamp, start, since_ns)
        if not hold_ns:
            return False
        held = self.held.setdefault(key, [])
        if len(held) >= HELD_LIMIT:  # too many wait: they go on first, their gap counted
            self.release(key, now_ns, force=True)
            return False
        due = due_ns or now_ns + hold_ns
        held.append((seqno, due, frame, off, end))
        if self._due_ns is not None and due < self._due_ns or len(self.held) == 1 and len(held) == 1:
            self._due_ns = due
        return True

    def _unstarted(self, key: Key, stamp: int, start: int, since_ns: int) -> int:
        """How long a stream's first frame here without a stamp (not its start), or one
        behind it, waits for the start, which may be on its way by the old route
        (delivered after this one, it and the frames before this one would be dropped as
        repeats, seqwin.py); 0: not at all. The hold when the subscription was made before
        the change (the start may have taken the old route toward it) or, when the frame
        tells the stream's start (stream_start.py), `SUB_KNOWN_NS` before that start (the
        publisher knew it); `SHORT_HOLD_NS` when made less than that before the start (the
        start may or may not have been sent here). A subscription made after the change
        to a stream that does not tell its start joins it where its first frame comes, at
        once. Every such frame waited up to the hold until 2026-11-27 (test_admin's probes:
        a stream started just after the subscription, whose start went nowhere; or one in
        progress)."""
        if stamp or self.window.known(*key):
            return 0
        if key in self.held:
            return HOLD_NS
        if start:
            return HOLD_NS if start - SUB_KNOWN_NS >= since_ns else SHORT_HOLD_NS if start >= since_ns else 0
        return HOLD_NS if since_ns < self._changed_ns else 0

    def release(self, key: Key, now_ns: int, force: bool = False) -> None:
        """After a delivery on `key`: its held frames through delivery again, in sequence
        order (those that still leave a gap wait on until they are due; `force`: all go)."""
        if not self.held or self._releasing and not force:
            return
        held = self.held.pop(key, None)
        if held:
            self._due_ns = None
            releasing, self._releasing = self._releasing, True
            try:
                for _, due, frame, off, end in sorted(held, key=lambda h: h[0]):
                    self.redeliver(key[0], key[1], frame, off, end, 1 if force else due, now_ns)
            finally:
                self._releasing = releasing

    def release_due(self, now_ns: int) -> None:
        """The streams with a frame due: all their held frames through delivery again
        (what is still missing is counted lost)."""
        for key in [k for k, held in self.held.items() if any(h[1] <= now_ns for h in held)]:
            self.release(key, now_ns)

    def next_due_ns(self) -> int | None:
        """When the earliest held frame is due (asked after every input: kept, not searched)."""
        if not self.held:
            return None
        if self._due_ns is None:
            self._due_ns = min(h[1] for held in self.held.values() for h in held)
        return self._due_ns
