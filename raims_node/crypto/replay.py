"""The replay window of a peer's auth seqnos (crypto/handshake.py).

A peer's auths to us go out on every link it has to us at once (a HELLO answered on
each new link, the auth 2 of one link, the challenge of another): two links deliver
them in the order each was written, not the order they were numbered. So an auth is
fresh when its seqno is above the highest seen or one of the AUTH_WINDOW below it not
seen yet, as the inbox stream's replay check (router/state.py) does; a seqno seen
already, or older than the window, is a replay. Before: a strictly rising floor, and
an auth that trailed one sent later on another link was rejected as a replay, leaving
that peer unauthenticated until its next HELLO (one heartbeat, 10 s by default).
"""

from __future__ import annotations

from dataclasses import dataclass

AUTH_WINDOW = 64


@dataclass(slots=True)
class SeqWindow:
    top: int = 0  # the highest seqno marked
    seen: int = 0  # bit i: top - i was marked

    def fresh(self, seqno: int) -> bool:
        off = self.top - seqno
        return seqno > 0 and (off < 0 or (off < AUTH_WINDOW and not (self.seen >> off) & 1))

    def mark(self, seqno: int) -> None:
        shift = seqno - self.top
        if shift > 0:
            self.seen = ((self.seen << shift) | 1) & ((1 << AUTH_WINDOW) - 1) if shift < AUTH_WINDOW else 1
            self.top = seqno
        else:
            self.seen |= 1 << -shift

    def __str__(self) -> str:
        return f"{self.top}"
