"""Subscription interest: our own subscriptions announced to the network, and the
replicas of every peer's bloom filter and subject lists.

Manual "Subscription Subjects": `_S.JOIN.<subject>` / `_S.LEAV.<subject>` and
`_P.PSUB.<pattern>` / `_P.STOP.<pattern>` carry each change with the node's
subscription seqno, so a replica follows by deltas; `_Z.BLM` carries the whole filter
when it was resized (or a delta was missed, answered by an adjacency request).

Our changes leave the local table at once (a subscription confirmed to its client is
effective here, no message reaches a dropped one, no queue group picks it), but their
announcements (a bloom update and a `_S.JOIN` / `_S.LEAV` / `_P.PSUB` / `_P.STOP` each)
are made for at most ANNOUNCE_BUDGET_S of each loop turn (and at least ANNOUNCE_MIN) by
the daemon's clock (`clock`; without one, the simulator's, ANNOUNCE_SLICE a turn):
the rest wait in `pending`, in the order made, for `announce_pending`, a slice per
`Node.tick`, which `Node.next_wake_ns` asks for at once (wake.py: the next loop turn).
Announcing 100,000 at once stalled the node, every client and link, for 2 s (a closing
client) to 4 s (one Redis SUBSCRIBE of 100,000 channels); a slice of 256 by count held
it 5-80 ms a turn, depending on the machine's load. A change made while others are
pending waits behind them, so peers see our changes in the order made. Our own peer
record takes the last sub seqno once per slice, not per announcement.

Paced by the links (`backlog`, the daemon's: some link holds more than
transports/unsent.py's PACE_BYTES not yet sent, its kernel send queue included), a turn
announces nothing and the node looks again PACE_NS later: a burst of 100,000 made its
announcements faster than the peer applied them, 2 MB of them waited in the link's
socket buffers, and every message behind them on that link with them (a request across
the link waited up to 1.1 s; tests/integration/test_bridges_announce_pacing.py). The
floods keep their order: what is pending is announced later.

A dropped owner's subscriptions (a closing client) leave matching at once, and the
local table for DROP_BUDGET_S of each turn (localsubs.py `detach` / `drain`; 100,000
took 130 ms in one turn): each withdrawal joins `pending` when its subscription leaves
the table, so a subject another client subscribes in between is neither withdrawn nor
announced twice.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from raims_node.bloom import BloomError, BloomFilter, Shard, SubjectHashes, shared_replica
from raims_node.linkstate.records import PeerRecord
from raims_node.router.events import Ev
from raims_node.router.localsubs import Change
from raims_node.router.messages import FMT_SYNTAX, SYNTAX_FMT, get_int, sub_list_value
from raims_node.router.peer import Peer
from raims_node.router.state import NodeState
from raims_node.subject import SubjectError, compile_pattern
from raims_node.wire import Fid, Fields
from raims_node.wire import subjects as S

ANNOUNCE_SLICE = 256  # announcements one loop turn makes without a clock (simulations, tests)
ANNOUNCE_BUDGET_S = 0.002  # with one, announcing stops for the turn after this long (~100 of them)
ANNOUNCE_MIN = 32  # ... but not before this many: progress on a loaded machine
DROP_SLICE = 1024  # a dropped owner's subscriptions leaving the local table a turn without a clock
DROP_BUDGET_S = 0.002  # with one, for this long a turn (~1,300 subjects, ~700 patterns)
DROP_MIN = 64  # ... but not before this many; an owner with no more leaves at once
_DROP_CHUNK = 32  # removals between looks at the clock
_CLOCK_EVERY = 16  # announcements between looks at the clock
PACE_NS = 2_000_000  # paced by a link's unsent bytes: look again after this long
# A peer's filter larger than this is refused unread (docs/DESIGN-NOTES.md, "Link
# adversary"): decoding costs ~0.1 s a MB (and a replica ~100 bytes of memory a
# position), so one `_Z.BLM` near the 64 MiB frame cap stalled every node for seconds.
# Measured: 1M subjects take 1.76 MB, 4M subjects 6.3 MB at the last level (2**32 bits).
MAX_BLOOM_BYTES = 8 << 20


class Interest:
    def __init__(self, st: NodeState) -> None:
        self.st = st
        self.pending: deque[tuple[Change, bool]] = deque()  # (change, added) not announced yet
        # the driver's clock (seconds): the daemon's bounds slices by time; None (the
        # simulator, tests) by count, so that a run does not depend on the machine's speed
        self.clock: Callable[[], float] | None = None
        self.turn_end = 0.0  # when this turn's budget ends, by the clock
        self.turn_made = 0  # announcements this turn made
        # the driver's: whether a link holds too much not yet sent (None: never paced)
        self.backlog: Callable[[], bool] | None = None
        self.paced_ns: int | None = None  # this turn announces nothing: when it was paced
        self.batch_of: Peer | None = None  # the peer whose origin batch is being applied

    # ------------------------------------------------------------------ ours

    def subscribe(self, owner: object, sid: str, subject: str, now_ns: int, queue: str | None) -> None:
        self.remove(owner, sid, now_ns)
        self._announce_ours(self.st.subs.add(owner, sid, subject, None, queue, now_ns=now_ns), True, now_ns)

    def psubscribe(self, owner: object, sid: str, pattern: str, syntax: str, now_ns: int, queue: str | None,
                   shard: Shard | None) -> None:
        compile_pattern(pattern, syntax)  # type: ignore[arg-type]  # a bad pattern raises before any change
        self.remove(owner, sid, now_ns)
        self._announce_ours(self.st.subs.add(owner, sid, pattern, syntax, queue, shard, now_ns), True, now_ns)

    def remove(self, owner: object, sid: str, now_ns: int) -> None:
        change = self.st.subs.remove(owner, sid)
        if change is not None:
            self._announce_ours(change, False, now_ns)

    def _announce_ours(self, change: Change, added: bool, now_ns: int) -> None:
        """One change of ours: announced now, or after every change still pending once
        this turn's slice is spent (peers see our changes in the order made)."""
        if self.pending or not self._more(self.turn_made):
            self.pending.append((change, added))
        else:
            self.turn_made += 1
            self._announce_change(change, added, now_ns)
            self._put_own()

    def _more(self, made: int) -> bool:
        """Whether this turn's slice allows another announcement after `made` (the clock
        read every _CLOCK_EVERY)."""
        if self.paced_ns is not None:
            return False
        clock = self.clock
        if clock is None:
            return made < ANNOUNCE_SLICE
        return made < ANNOUNCE_MIN or made % _CLOCK_EVERY != 0 or clock() < self.turn_end

    def drop_owner(self, owner: object, now_ns: int) -> None:
        # queue groups' withdrawals first (detach makes them now): until one is announced,
        # a publisher may still pick this node for the group, which has no member here
        changes = self.st.subs.detach(owner, DROP_SLICE if self.clock is None else DROP_MIN)
        self.pending.extend((c, False) for c in changes)
        self._drain()
        self.announce_pending(now_ns)

    def _drain(self) -> None:
        """A slice of the dropped subscriptions leaves the local table; their changes
        join `pending` in the order made."""
        subs = self.st.subs
        if not subs.draining:
            return
        pending, clock = self.pending, self.clock
        if clock is None:
            pending.extend((c, False) for c in subs.drain(DROP_SLICE))
            return
        end, made = clock() + DROP_BUDGET_S, 0
        while subs.draining and (made < DROP_MIN or clock() < end):
            changes = subs.drain(_DROP_CHUNK)
            pending.extend((c, False) for c in changes)
            made += len(changes)

    @property
    def busy(self) -> bool:
        """Whether a later turn has work: changes to announce or to drop (`new_turn`)."""
        return bool(self.pending) or self.st.subs.draining

    def new_turn(self, now_ns: int) -> None:
        """A loop turn (`Node.tick`): a new slice, spent first on what is pending."""
        if self.clock is not None:
            self.turn_end = self.clock() + ANNOUNCE_BUDGET_S
        self.turn_made = 0
        self._drain()
        backlog = self.backlog
        self.paced_ns = now_ns if self.pending and backlog is not None and backlog() else None
        self.announce_pending(now_ns)

    def due_ns(self) -> int | None:
        """When the next turn has work (`Node.next_wake_ns`): at once, or PACE_NS after
        a paced turn (the links drain meanwhile)."""
        if not self.busy:
            return None
        paced = self.paced_ns
        return 0 if paced is None or self.st.subs.draining else paced + PACE_NS

    def announce_pending(self, now_ns: int) -> None:
        """Announce the pending changes, the oldest first, as far as this turn's slice goes."""
        pending = self.pending
        if not pending:
            return
        made = self.turn_made
        more = self._more
        while pending and more(made):
            change, added = pending.popleft()
            self._announce_change(change, added, now_ns)
            made += 1
        self.turn_made = made
        self._put_own()

    def _announce_change(self, change: Change, added: bool, now_ns: int) -> None:
        sub = change.sub
        bloom = self.st.bloom
        resized = False
        if change.text_edge:
            if sub.syntax is None:
                resized |= bloom.add_subject(sub.text) if added else bloom.remove_subject(sub.text)
                self._announce_sub((S.S_JOIN if added else S.S_LEAV) + sub.text, now_ns)
            else:
                assert sub.pattern is not None
                resized |= (bloom.add_pattern(sub.pattern, sub.shard) if added
                            else bloom.remove_pattern(sub.pattern, sub.shard))
                shard: Fields = [] if sub.shard is None else [(Fid.SHARD_ID, sub.shard.index),
                                                              (Fid.SHARD_CNT, sub.shard.count)]
                self._announce_sub((S.P_PSUB if added else S.P_STOP) + sub.text, now_ns,
                                   [(Fid.FMT, SYNTAX_FMT[sub.syntax]), *shard])
        marker = sub.queue_marker
        if change.queue_edge and marker is not None:
            resized |= bloom.add_subject(marker) if added else bloom.remove_subject(marker)
            self._announce_sub((S.S_JOIN if added else S.S_LEAV) + marker, now_ns)
        if resized:
            self._send_bloom(now_ns)

    def _announce_sub(self, subject: str, now_ns: int, extra: Fields = ()) -> None:  # type: ignore[assignment]
        st = self.st
        st.sub_seqno += 1
        st.bcast(subject, [(Fid.SUB_SEQNO, st.sub_seqno), *extra], now_ns)

    def _put_own(self) -> None:
        """Our peer record takes the last sub seqno (once per slice: a record each cost
        as much as the bloom update)."""
        st = self.st
        st.db.put_peer(PeerRecord(st.bridge, st.user, st.start_ns, st.sub_seqno))

    def _send_bloom(self, now_ns: int) -> None:
        """`_Z.BLM`: the filter was resized, so replicas cannot follow by deltas."""
        self.st.events.add(now_ns, Ev.RESIZE_BLOOM, user=self.st.user)
        self.bcast_bloom(now_ns)

    def bcast_bloom_soon(self, now_ns: int) -> None:
        """`_Z.BLM` after one batch hold (router/batch.py): the neighbours a node
        authenticates with at start-up come within a few ms, and one filter flood serves
        them all."""
        st = self.st
        if st.bloom_due_ns is None:
            st.bloom_due_ns = now_ns + st.batch.hold_ns

    def bcast_bloom(self, now_ns: int) -> None:
        st = self.st
        st.bcast(S.Z_BLM, [(Fid.SUB_SEQNO, st.sub_seqno), (Fid.BLOOM, st.bloom.to_bytes())], now_ns)

    # ------------------------------------------------------------------ replicas

    def on_sub_change(self, peer: Peer, subj: str, d: dict[int, object], via: bytes, now_ns: int) -> None:
        seqno = get_int(d, Fid.SUB_SEQNO)
        if seqno <= peer.sub_seqno:
            return
        st = self.st
        if seqno != peer.sub_seqno + 1 or peer.bloom is None:
            peer.bloom_stale = True
            st.request("adj", peer.bridge, via, now_ns)
            return
        bloom = peer.bloom
        assert isinstance(bloom, BloomFilter)
        if peer.bloom_raw is not None:  # the filter as received may be shared (shared_replica)
            bloom = peer.bloom = bloom.copy()
        text = subj[len(S.S_JOIN):]
        syntax = FMT_SYNTAX.get(get_int(d, Fid.FMT, 0), "rv")
        try:
            if subj.startswith(S.S_JOIN):
                bloom.add_subject(text)
                peer.subjects.add(text)
            elif subj.startswith(S.S_LEAV):
                bloom.remove_subject(text)
                peer.subjects.discard(text)
            elif subj.startswith(S.P_PSUB):
                bloom.add_pattern(compile_pattern(text, syntax), _shard(d))  # type: ignore[arg-type]
                peer.patterns.add((syntax, text))
            else:
                bloom.remove_pattern(compile_pattern(text, syntax), _shard(d))  # type: ignore[arg-type]
                peer.patterns.discard((syntax, text))
        except (BloomError, SubjectError):
            peer.bloom_stale = True
            st.request("adj", peer.bridge, via, now_ns)
            return
        peer.sub_seqno = seqno
        peer.bloom_raw = None
        st.filters_version += 1
        if self.batch_of is not peer:
            st.put_sub_seqno(peer)

    def origin_batch(self, peer: Peer | None) -> None:
        """`peer`'s origin batch begins (None: it ended): its sub seqno goes into its
        database record once, at the end (a record each cost a third of the update)."""
        done, self.batch_of = self.batch_of, peer
        if done is not None and peer is None:
            self.st.put_sub_seqno(done)

    def set_bloom(self, peer: Peer, seqno: int, raw: object, via: bytes | None = None, now_ns: int = 0) -> None:
        """`peer`'s whole filter (`_Z.BLM`, a sync or adjacency reply). One over
        MAX_BLOOM_BYTES, or that does not decode, is a bad frame: counted, not applied,
        the replica marked for resync as after a bad delta (asked of `via` at once for a
        flood; for a reply, the next summary or heartbeat claim asks again)."""
        if isinstance(raw, bytes) and seqno >= peer.sub_seqno:
            if raw == peer.bloom_raw and seqno == peer.sub_seqno and peer.bloom is not None:
                peer.bloom_stale = False
                return  # the filter held (floods and sync replies repeat it while converging)
            st = self.st
            try:
                if len(raw) > MAX_BLOOM_BYTES:
                    raise BloomError(f"filter of {len(raw)} bytes is over {MAX_BLOOM_BYTES}")
                bloom = shared_replica(raw)
            except BloomError:
                st.counters.bad_frames += 1
                st.count_reject("bad_bloom")
                peer.bloom_stale = True
                st.request("adj", peer.bridge, via, now_ns)
                return
            peer.bloom = bloom
            peer.bloom_raw = raw
            self.st.filters_version += 1
            peer.sub_seqno = seqno
            peer.bloom_stale = False
            self.st.put_sub_seqno(peer)

    def state_fields(self, about: bytes) -> Fields:
        """The filter and subject lists of `about` (us or a peer) for a sync/adj reply."""
        st = self.st
        bloom = st.bloom if about == st.bridge else st.peers[about].bloom
        fields: Fields = []
        if isinstance(bloom, BloomFilter):
            # a peer's filter as it came (set_bloom keeps it): no re-encoding per reply
            raw = None if about == st.bridge else st.peers[about].bloom_raw
            fields.append((Fid.BLOOM, raw if raw is not None else bloom.to_bytes()))
        if about == st.bridge:
            subjects, patterns = list(st.subs.subjects()) + list(st.subs.queue_markers()), st.subs.patterns()
        else:
            subjects, patterns = list(st.peers[about].subjects), iter(st.peers[about].patterns)
        fields.append((Fid.SUB_LIST, sub_list_value(subjects, patterns)))
        return fields

    def interest(self, subject: str) -> tuple[int, int]:
        """(local subscriptions, remote nodes) a message on `subject` would reach."""
        hashes = SubjectHashes(subject.encode("utf-8", "surrogateescape"))
        remote = sum(1 for p in self.st.peers.values() if p.filter_passes(hashes))
        return len(self.st.subs.match(subject)), remote


def _shard(d: dict[int, object]) -> Shard | None:
    count = get_int(d, Fid.SHARD_CNT)
    return Shard(get_int(d, Fid.SHARD_ID), count) if count else None
