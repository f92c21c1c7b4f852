"""While the routes change, an `any S M` share that comes ahead of a gap in its inbox stream waits.

An `any S M` message goes to one node point to point (PointToPoint.one), on the inbox
stream from the sending node to it: the only order the shares of one pair have (the
subject's seqnos skip those given to other nodes). A route change (a link up, a node
joining) moves the stream to a shorter path, whose first frames overtake the old path's
last ones: delivered late (Forward._deliver_share), 350-830 of 30,000 reached their
subscriber out of order per scenario (simulator, 30 seeds with Jitter). So for
`FLUX_NS` after this node's links change, as reorder.py does for multicast streams, a
share whose inbox seqno leaves a gap (a seqno of the same sender not yet here, of any
inbox kind) waits up to `HOLD_NS`; when the gap fills, the held shares go in inbox
order; when one is due, the gap before it is given up (already counted as inbox loss by
`NodeState.inbox_accept`) and it and those after it without a gap go. A share below
that point (later than the bound) is delivered late, as before. While a sender holds
shares, every share of it waits for the ones before it, even after the flux. Outside a
change nothing waits (and nothing is looked at).

The gap is seen from `Peer.inbox` (the replay window, `SeqWindow.has`), above a floor per sender:
its highest inbox seqno when the change was noticed (gaps older than that are not
waited for), or for the sender whose share told the change, its highest before it.
"""

from __future__ import annotations

from collections.abc import Callable

from raims_node.router.peer import INBOX_WINDOW, Peer
from raims_node.router.reorder import FLUX_NS, HOLD_NS
from raims_node.router.state import NodeState

HELD_LIMIT = INBOX_WINDOW  # shares one sender may hold; past it they go, their gaps given up

Held = tuple[int, int, bytes, str, bytes]  # (inbox seqno, due_ns, source, subject, frame)
# deliver(source, subject, frame, now_ns): a share to whom subscribes now
Deliver = Callable[[bytes, str, bytes, int], None]


class ShareHold:
    def __init__(self, st: NodeState, deliver: Deliver) -> None:
        self.st = st
        self.deliver = deliver
        self.held: dict[bytes, list[Held]] = {}  # by sender (the inbox stream's source)
        self._floor: dict[bytes, int] = {}  # by sender: every inbox seqno up to it is here or given up
        self._links_seen = st.db.links_version
        self._flux_until_ns = 0
        self._due_ns: int | None = None  # the earliest due time, None: to be worked out again

    def routes_changed(self, now_ns: int, skip: bytes = b"") -> None:
        """The links changed (once per link state version): floors from the senders'
        highest seqnos, but for those holding (theirs stay) and `skip`, the sender of
        the share being taken (its highest is that share: its floor is found then)."""
        if self.st.db.links_version == self._links_seen:
            return
        self._links_seen = self.st.db.links_version
        self._flux_until_ns = now_ns + FLUX_NS
        floors = {b: p.inbox.top for b, p in self.st.peers.items()
                  if b != skip and b not in self.held and p.inbox.top}  # (none yet: no old route to wait for)
        floors.update((b, f) for b, f in self._floor.items() if b in self.held)
        self._floor = floors

    def take(self, peer: Peer, seqno: int, source: bytes, subject: str, frame: bytes, now_ns: int) -> None:
        """A share that came on `peer`'s inbox stream as `seqno`: delivered, or held."""
        sender = peer.bridge
        self.routes_changed(now_ns, skip=sender)
        if sender not in self.held and now_ns > self._flux_until_ns:
            self.deliver(source, subject, frame, now_ns)  # the usual case
            return
        floor = self._floor.get(sender)
        if floor is None:  # its highest before this one, or none: nothing came by an old route
            floor = seqno - 1
            while floor > 0 and seqno - floor < INBOX_WINDOW and not peer.inbox.has(floor):
                floor -= 1
            floor = floor or seqno - 1
        floor = self._floor[sender] = self._advance(peer, floor)
        if seqno <= floor and sender not in self.held:
            self.deliver(source, subject, frame, now_ns)
            return
        held = self.held.setdefault(sender, [])
        due = now_ns + HOLD_NS
        held.append((seqno, due, source, subject, frame))
        if self._due_ns is not None and due < self._due_ns or len(self.held) == 1 and len(held) == 1:
            self._due_ns = due
        self.release(peer, now_ns, upto=seqno if len(held) > HELD_LIMIT else 0)

    @staticmethod
    def _advance(peer: Peer, floor: int) -> int:
        """The floor past the seqnos that are here."""
        while floor < peer.inbox.top and peer.inbox.has(floor + 1):
            floor += 1
        return floor

    def release(self, peer: Peer | None, now_ns: int, sender: bytes = b"", upto: int = 0) -> None:
        """After an inbox message of `peer` (Node._on_inbox) or when one is due: its held
        shares whose gaps are filled, or given up to `upto`, delivered in inbox order."""
        sender = peer.bridge if peer is not None else sender
        held = self.held.get(sender)
        if not held:
            return
        floor = max(self._floor.get(sender, 0), upto)
        if peer is not None:
            floor = self._advance(peer, floor)
        self._floor[sender] = floor
        ready = sorted((h for h in held if h[0] <= floor), key=lambda h: h[0])
        if not ready:
            return
        rest = [h for h in held if h[0] > floor]
        if rest:
            self.held[sender] = rest
        else:
            del self.held[sender]
        self._due_ns = None
        for _, _, source, subject, frame in ready:
            self.deliver(source, subject, frame, now_ns)

    def release_due(self, now_ns: int) -> None:
        """The senders with a share due: the gaps before it given up (Node.tick)."""
        if self._due_ns is None and not self.held or self._due_ns is not None and self._due_ns > now_ns:
            return
        for sender, held in list(self.held.items()):
            upto = max((h[0] for h in held if h[1] <= now_ns), default=0)
            if upto:
                peer = self.st.peers.get(sender)
                self.release(peer, now_ns, sender, upto if peer is not None else max(h[0] for h in held))

    def next_due_ns(self, other: int | None = None) -> int | None:
        """When the earliest held share is due, or `other` (reorder.py's) if earlier
        (asked after every input: kept, not searched)."""
        if not self.held:
            return other
        if self._due_ns is None:
            self._due_ns = min(h[1] for held in self.held.values() for h in held)
        return self._due_ns if other is None or self._due_ns < other else other
