"""Which node delivers a message to its member of a queue group.

Manual "Anycast and Shardcast": a queue group is anycast to one member among all nodes.
Every node with members decides alone, from the replicated subject lists (each peer's
`_QUEUE.<queue>.<kind>.<subject>` marker), whether it is the one, so the choice must be
the same on every node that sees the same member set. It is rendezvous (highest random
weight) hashing: each member node's weight for a message is a hash of the node's bridge
seeded by a hash of (source, seqno); the heaviest delivers. When a member node leaves or
joins, only the messages it wins (or would win) change hands: nodes whose views differ
for a while disagree on those alone, where modulo hashing (`hash % len(nodes)`, before
2026-11-27) reshuffled almost every choice, so a BYE under a stream gave ~30 messages
to two members and ~16 to none (docs/DESIGN-NOTES.md "Queue groups while members come
and go").
"""

from __future__ import annotations

import mmh3

from raims_node.router.localsubs import LocalSub
from raims_node.router.state import NodeState
from raims_node.turns import Turns


def message_key(source: bytes, seqno: int) -> int:
    """The hash of a message (its source and sequence) that seeds every node's weight."""
    return mmh3.hash(source + seqno.to_bytes(8, "big"), 0, False)


def weight(bridge: bytes, key: int) -> tuple[int, bytes]:
    """A node's weight for the message `key`; ties (1 in 2**32) go to the greater bridge."""
    return mmh3.hash(bridge, key, False), bridge


def queue_chosen(st: NodeState, marker: str, source: bytes, seqno: int) -> bool:
    """Whether this node delivers a message to its member of the group `marker`: no
    peer with a member of it outweighs this node for the message. After our BYE, none
    does while a peer has a member: the peers that heard it take our share."""
    key = message_key(source, seqno)
    mine = weight(st.bridge, key)
    for bridge, peer in st.peers.items():
        if marker in peer.subjects and (st.said_bye or weight(bridge, key) > mine):
            return False
    return True




class QueueTurns:
    """Which of this node's members of a group gets the next message chosen here (in turn).
    A turn is kept per group marker ever used, so a node serving groups that come and go
    (a queue name per job) forgets them all at turns.TURNS_LIMIT rather than growing."""

    def __init__(self) -> None:
        self._turn: Turns[str] = Turns()

    def pick(self, st: NodeState, marker: str, members: list[LocalSub], source: bytes, seqno: int) -> LocalSub | None:
        """The member that gets a message, or None when another node delivers it."""
        if not queue_chosen(st, marker, source, seqno):
            return None
        return members[self._turn.next(marker) % len(members)]


def chosen_node(members: list[bytes], source: bytes, seqno: int) -> bytes:
    """The member node that delivers a message, among `members` (for tests)."""
    key = message_key(source, seqno)
    return max(members, key=lambda b: weight(b, key))
