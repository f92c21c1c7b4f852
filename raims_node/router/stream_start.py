"""A young stream's start, told again after a route change, so that a subscriber can
count what it lost before its first message.

A stream's first message carries a stamp (seqwin.py); a subscriber that sees a later
one first cannot tell a subscription that joined mid-stream (nothing lost) from a
stream whose first frames died on a link that closed (lost). The manual validates "the
first message received" against the convergence time, but the seqno gives only the time
frame (8.6 s), so that check almost never applies; double link flaps early in two
streams (the simulator, 30 seeds, both paths) left 540 of 5,932 lost messages uncounted
that way (2026-11-27; docs/DESIGN-NOTES.md "The edges of a stream").

So, for `FLUX_NS` after this node's links change (`Forward.watch_links`), a message of a
stream that started at most `YOUNG_NS` before the change carries the stream's start
stamp in the `start` field (raims fid 26, otherwise unused in a message; a batch frame,
wire/batch.py, carries it once for its run, from branch batch-start); its first
message may still have been in flight on a closing link. A subscriber that has not seen
the stamp (`SubWindow.check`) then knows where the stream began: when its oldest
matching subscription was made `SUB_KNOWN_NS` or more before that stamp, the
publishers knew it, every message of the stream was sent toward it, and those before
the first one it saw are counted lost. A later subscription takes the stream from where
it joined, as before. The stamp is the publisher's clock and the subscription time
ours: clocks skewed by more than `SUB_KNOWN_NS` move the line.

The same field tells the reorder hold (reorder.py) whether the start was sent here
(the stream began after the subscription) and so is worth waiting for.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from raims_node.router.route_grace import ROUTE_GRACE_NS
from raims_node.router.seqwin import SEQ_MASK

FLUX_NS = ROUTE_GRACE_NS  # after a change, as long as relays use old routes and subscribers hold
YOUNG_NS = 250_000_000  # a start sent this long before a change may still have been on its way
SUB_KNOWN_NS = 50_000_000  # a subscription this old is known to the publishers (below)
_NEVER = -(1 << 62)


class Since(Protocol):
    @property
    def since_ns(self) -> int: ...


def owed(start: int, subs: Iterable[Since]) -> bool:
    """Whether the messages of a stream that started at `start` (0: not known) were sent
    to these subscriptions from its first: the oldest was made `SUB_KNOWN_NS` before."""
    return bool(start) and start - SUB_KNOWN_NS >= min(sub.since_ns for sub in subs)


class StreamStarts:
    """The start stamps of the streams this node started lately, told again after a change."""

    def __init__(self) -> None:
        self._starts: dict[str, int] = {}
        self._changed_ns = _NEVER
        self.until_ns = _NEVER  # till when messages are re-stamped (the publish paths test this first)
        self._limit = 1024

    def started(self, subject: str, stamp_ns: int) -> None:
        """A new stream of `subject` (its first message stamped `stamp_ns`)."""
        starts = self._starts
        starts[subject] = stamp_ns
        if len(starts) >= self._limit:  # forget the streams too old to be re-stamped by any change
            old = stamp_ns - FLUX_NS - YOUNG_NS
            self._starts = {s: t for s, t in starts.items() if t >= old}
            self._limit = max(1024, 2 * len(self._starts))

    def routes_changed(self, now_ns: int) -> None:
        self._changed_ns = now_ns
        self.until_ns = now_ns + FLUX_NS

    def told(self, subject: str, seqno: int, stamped: bool, now_ns: int) -> int:
        """The start stamp that the message `seqno` of `subject` published now carries
        (0: none; `stamped`: it has a stamp of its own, which a stream's first, with
        seqno 1 of its time frame, makes the stream's start)."""
        if stamped:
            if seqno & SEQ_MASK == 1:
                self.started(subject, now_ns)
            return 0
        if now_ns > self.until_ns:
            return 0
        start = self._starts.get(subject, 0)
        return start if start >= self._changed_ns - YOUNG_NS else 0
