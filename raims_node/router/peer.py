"""What a node keeps about each other node (the manual's peer db, "show peers").

The routing records (links, seqnos) live in the link-state database; a `Peer` holds
the rest: the session key that verifies its messages, the replica of its bloom filter,
the inbox sequence numbers in both directions, and the counters of `show loss`,
`show counters` and `show sync`.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from raims_node.bloom import BloomFilter, SubjectHashes
from raims_node.crypto.replay import SeqWindow
from raims_node.router.seqwin import LossCounters

INBOX_TYPES_KEPT = 32  # show inbox: the manual's "last 32 system RPC messages" each way
INBOX_WINDOW = 4096  # inbox seqnos a late one may trail by: a reply stream on the old path (state.py)


def _type_log() -> deque[tuple[int, str]]:
    return deque(maxlen=INBOX_TYPES_KEPT)


def _inbox_window() -> SeqWindow:
    return SeqWindow(size=INBOX_WINDOW)


@dataclass(slots=True)
class Peer:
    bridge: bytes
    user: str
    start_ns: int
    session_key: bytes | None = None  # None until learned (auth or sync_rpy)
    sub_seqno: int = 0
    bloom: object | None = None  # raims_node.bloom filter replica
    bloom_stale: bool = False  # a subscription update was missed; resync pending
    bloom_raw: bytes | None = None  # the bytes `bloom` was built from, while no delta changed it
    subjects: set[str] = field(default_factory=set)  # replicated from _S.JOIN / LEAV
    patterns: set[tuple[str, str]] = field(default_factory=set)  # (syntax, text) from _P.PSUB / STOP
    neighbor: bool = False  # authenticated over one of our own connections
    inbox_sent: int = 0
    inbox: SeqWindow = field(default_factory=_inbox_window)  # its inbox seqnos received (inbox_accept)
    inbox_sent_types: deque[tuple[int, str]] = field(default_factory=_type_log)  # (seqno, publish type)
    inbox_recv_types: deque[tuple[int, str]] = field(default_factory=_type_log)
    hb_seqno: int = 0
    hb_time_ns: int = 0
    hb_link_sum: int = 0
    hb_sub_sum: int = 0
    hb_diff: int = 0
    ping_sent: int = 0
    pong_recv: int = 0
    ping_recv: int = 0
    ping_time_ns: int = 0
    latency_ns: int = 0  # last ping round trip
    lat_max_ns: int = 0
    lat_sum_ns: int = 0  # over pong_recv round trips
    pong_skew_ns: int = 0  # its clock minus ours, from the last pong
    ping_skew_ns: int = 0  # the same from the last ping it sent (half the last round trip added)
    skew_time_ns: int = 0  # when one of the skews was last taken (show skew)
    ping_adj: int = 0  # adjacency requests a ping's seqnos caused
    skew_ns: int = 0  # the same from its last heartbeat on our own link
    loss: LossCounters = field(default_factory=LossCounters)
    zombie_since_ns: int = 0
    zombie_subs: int | None = None  # its filter's count when it died (the filter is let go)

    def bury(self, now_ns: int) -> None:
        """Dead: keep what `show peers zombie` shows, let its subscription tables go (a
        replica of a filter of 10,000 subjects and their set are 1.8 MB; a node keeps up
        to uids.ZOMBIES_KEPT zombies, one per incarnation of a restarted peer)."""
        self.zombie_since_ns = now_ns
        self.neighbor = False
        bloom = self.bloom
        self.zombie_subs = bloom.count if isinstance(bloom, BloomFilter) else None
        self.bloom = self.bloom_raw = None
        self.subjects = set()
        self.patterns = set()

    @property
    def inbox_recv(self) -> int:
        """The highest inbox seqno received from it."""
        return self.inbox.top

    def filter_passes(self, hashes: SubjectHashes) -> bool | None:
        """Whether the replica of its bloom filter passes a subject; None while it has not
        arrived (callers decide: a tree counts the peer as interested, the far side filters)."""
        bloom = self.bloom
        if bloom is None:
            return None
        return isinstance(bloom, BloomFilter) and bloom.might_match(hashes)
