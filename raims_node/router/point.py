"""Point-to-point publishes, in the manual's `any` envelope (`_I.<bridge>.any`, one per node).

Manual, "The _INBOX subject": an `_INBOX.` publish (after an optional namespace) "finds
the peers which are subscribers, typically just one, and sends the message point to
point for each one ... The point to point rule will still forward to all subscriptions
of an inbox subject". So a reply goes, in its own envelope, to every node whose filter
passes its subject (`each`), as nats-server delivers it to every subscriber (a `>` or
`_INBOX.>` monitor as well as the requester). A node whose filter matched falsely drops
it, counted (`Counters.inbox_false`, and as not subscribed in show loss); it is not
passed on, since every node that may subscribe has its copy already. Before (to
2026-11-27), one node was chosen by the subject's hash, a false match passed it on, and
a monitor on a third node could be the one chosen: the requester timed out. Each node
gets every message of the reply subject, on its inbox stream from the publisher, so the
subscription window and reorder.py keep a stream of replies in order as for multicast.

`any S M` (the manual's anycast, console command) goes to ONE node whose filter passes,
at random (`one`); a node with a false match passes it on to another, at most
ANYCAST_HOPS tries; a share ahead of a gap of its inbox stream waits while routes change
(share_hold.py).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from raims_node.bloom import SubjectHashes
from raims_node.router.localsubs import LocalSub
from raims_node.router.messages import MalformedMessage, get_int
from raims_node.router.no_responders import is_inbox_reply
from raims_node.router.peer import Peer
from raims_node.router.share_hold import ShareHold
from raims_node.router.state import NodeState
from raims_node.wire import Fid, Header, decode_message_fields, peek
from raims_node.wire.frame import SUBJECT_OFFSET

ANYCAST_HOPS = 4  # nodes an `any S M` frame may try before it is dropped

# Forward._deliver_local(source, subject, frame, now_ns, own): True when a subscription took it
DeliverLocal = Callable[[bytes, str, bytes, int, bool], bool]
# Forward._deliver(source, subject, seqno, subs, payload, reply, headers, loss, no_echo)
Deliver = Callable[[bytes, str, int, Sequence[LocalSub], bytes, str | None, bytes | None, int, object], None]


class PointToPoint:
    def __init__(self, st: NodeState, deliver_local: DeliverLocal, deliver: Deliver) -> None:
        self.st = st
        self._deliver_local = deliver_local
        self._deliver = deliver
        self.shares = ShareHold(st, self._deliver_share)  # `any S M` shares ahead of an inbox gap wait

    def send(self, frame: bytes, hashes: SubjectHashes, share: bool, local: bool, now_ns: int,
             to: bytes | None = None) -> None:
        """A frame published here: `any S M` (`share`) to one node, unless a subscriber
        here (`local`) took it; an `_INBOX.` reply to each node that may subscribe it
        (only `to`, when given: a 503 for the requester's node, no_responders.py)."""
        if not share:
            self.each(frame, hashes, now_ns, quiet=local, to=to)
        elif not local:
            self.one(frame, hashes, set(), now_ns, hops=0)

    def each(self, frame: bytes, hashes: SubjectHashes, now_ns: int, quiet: bool = False,
             to: bytes | None = None) -> int:
        """Send a frame to every other node whose filter passes its subject, each in its
        own envelope; how many (none: a no route unless `quiet`, delivered here)."""
        st = self.st
        nodes = [to] if to is not None else sorted(
            b for b, p in st.peers.items() if b != st.bridge and p.filter_passes(hashes))
        if not nodes:
            st.counters.no_route += not quiet
            return 0
        st.floods_first(now_ns)
        for dest in nodes:
            st.counters.anycast += 1
            st.send_inbox(dest, "any", [(Fid.DATA, frame), (Fid.REF_CNT, 0)], now_ns)
        return len(nodes)

    def one(self, frame: bytes, hashes: SubjectHashes, tried: set[bytes], now_ns: int, hops: int) -> bool:
        """Send a frame point to point to one untried node whose filter passes its subject,
        at random; False when none does (a no route)."""
        st = self.st
        nodes = sorted(b for b, p in st.peers.items() if b not in tried and p.filter_passes(hashes))
        if not nodes:
            st.counters.no_route += 1
            return False
        dest = _pick(nodes, st.rng)
        st.counters.anycast += 1
        st.floods_first(now_ns)
        st.send_inbox(dest, "any", [(Fid.DATA, frame), (Fid.REF_CNT, hops)], now_ns)
        return True

    def in_any(self, peer: Peer, d: dict[int, object], via: bytes, now_ns: int) -> None:
        """A point-to-point frame for us: an `_INBOX.` reply delivered, or dropped on a false
        match; an `any S M` share delivered, or passed to another matching node."""
        st = self.st
        inner = d.get(Fid.DATA)
        if not isinstance(inner, bytes):
            raise MalformedMessage("any without an encapsulated frame")
        head = peek(inner)
        key = st.mac_key(head.bridge) if head.bridge != st.bridge else st.mac
        if key is None or not key.verify(inner):
            st.counters.bad_mac += 1
            return
        subject = head.subject.decode("utf-8", "surrogateescape")
        if is_inbox_reply(subject):
            if not st.subs.match(subject):
                st.counters.inbox_false += 1  # every node that may subscribe got its own
            self._deliver_local(head.bridge, subject, inner, now_ns, False)
            return
        if st.subs.match(subject):  # in inbox order while routes change, else late (share_hold.py)
            return self.shares.take(peer, get_int(d, Fid.SEQNO), head.bridge, subject, inner, now_ns)
        self._deliver_local(head.bridge, subject, inner, now_ns, False)  # counted as not subscribed
        hops = get_int(d, Fid.REF_CNT) + 1
        if hops < ANYCAST_HOPS:
            self.one(inner, SubjectHashes(head.subject, head.subject_hash), {st.bridge, head.bridge, peer.bridge},
                     now_ns, hops)

    def _deliver_share(self, source: bytes, subject: str, frame: bytes, now_ns: int) -> None:
        """An `any S M` message to whom subscribes now (share_hold.py): one that comes after a later one
        is delivered late, not dropped as a repeat (the subscription window keeps the later one)."""
        subs = self.st.subs.match(subject)
        if subs:  # else unsubscribed while it was held
            msg = decode_message_fields(frame, *body(peek(frame)))
            self.st.sub_window.check(source, subject, msg.seqno, msg.stamp, now_ns)
            self._deliver(source, subject, msg.seqno, subs, msg.payload, msg.reply, msg.headers, 0, None)


def body(head: Header) -> tuple[int, int]:
    """Where a peeked frame's fields start and end."""
    slen = len(head.subject)
    return SUBJECT_OFFSET + slen + (slen & 1), head.frame_len


def _pick(nodes: list[bytes], rng: random.Random) -> bytes:
    """An `any S M`'s node, at random (the manual's "Randomly choose a subscription match";
    the node's generator, so that a simulation stays reproducible)."""
    return rng.choice(nodes)
