"""A window of received seqnos: the replay check of a peer's auth seqnos
(crypto/handshake.py, `AUTH_WINDOW`) and of its inbox stream (`Peer.inbox`,
`NodeState.inbox_accept`, `INBOX_WINDOW` wide; router/share_hold.py asks it for gaps).

A peer's auths to us go out on every link it has to us at once (a HELLO answered on
each new link, the auth 2 of one link, the challenge of another): two links deliver
them in the order each was written, not the order they were numbered; the inbox stream
likewise while the routes change. So a seqno is fresh when it is above the highest seen
or one of the `size` below it not seen yet; a seqno seen already, or older than the
window, is a replay, and so is 0 (no stream numbers from 0). Auths were checked against
a strictly rising floor until 2026-11: an auth that trailed one sent later on another
link was rejected as a replay, leaving that peer unauthenticated until its next HELLO
(one heartbeat, 10 s by default). The inbox stream kept its own copy of this window on
`Peer` until 2026-11-27 (it took a seqno 0, once).
"""

from __future__ import annotations

from dataclasses import dataclass, field

AUTH_WINDOW = 64


@dataclass(slots=True)
class SeqWindow:
    top: int = 0  # the highest seqno marked
    seen: int = 0  # bit i: top - i was marked
    size: int = AUTH_WINDOW  # how far below `top` a seqno may still come
    mask: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.mask = (1 << self.size) - 1

    def fresh(self, seqno: int) -> bool:
        off = self.top - seqno
        return seqno > 0 and (off < 0 or (off < self.size and not (self.seen >> off) & 1))

    def mark(self, seqno: int) -> None:
        """Take a seqno that `fresh` passed (a replay or 0: no change)."""
        self.accept(seqno)

    def accept(self, seqno: int) -> int | None:
        """`fresh` and `mark` at once: None for a replay, else what the seqno did to
        the gaps: the seqnos it skipped past the highest (none counted before the first
        seqno), 0 when next in order, -1 when it filled a gap below the highest."""
        top = self.top
        shift = seqno - top
        if shift > 0:
            self.seen = ((self.seen << shift) | 1) & self.mask if shift < self.size else 1
            self.top = seqno
            return shift - 1 if top else 0
        if seqno <= 0 or -shift >= self.size or (self.seen >> -shift) & 1:
            return None
        self.seen |= 1 << -shift
        return -1

    def has(self, seqno: int) -> bool:
        """Whether `seqno` arrived, at most `top`; one older than the window counts as
        arrived (its gap can no longer fill)."""
        off = self.top - seqno
        return off >= self.size or off >= 0 and bool((self.seen >> off) & 1)

    def __str__(self) -> str:
        return f"{self.top}"
