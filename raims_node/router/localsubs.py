"""The local subscription table: what this node's clients subscribed.

Clients (bridges, the console, tests) subscribe by subject or by pattern, optionally
in a queue group; the node advertises the union in its bloom filter and delivers
matching messages. Reference counting decides when the node must tell the network:
the first subscription of a subject (or pattern) announces it, the last one's removal
withdraws it; likewise the first and last member of a queue group on a subject.

An owner with many subscriptions (a closing client, a Redis UNSUBSCRIBE of all) is
`detach`ed at once: from then no match, count or listing returns its subscriptions
(no message reaches it), while the index still holds them until `drain` removes them,
a slice per loop turn (router/interest.py): removing 100,000 took 130 ms (290 ms for
patterns) in one turn, which every other client of the node waited. Each removal's
`Change` is made when it leaves the index, so a subject another client subscribes in
between keeps its announcement (its subscription is not the first; the drained one
not the last).
Matching a subject against the table is the subject package's `SubjectIndex` (exact
subjects, the token trees and glob buckets, and the per-subject result cache).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from raims_node.bloom import Shard, subject_hash
from raims_node.subject import Pattern, compile_pattern, subject_bytes
from raims_node.subject.index import SubjectIndex, discard

QUEUE_PREFIX = "_QUEUE."
MATCH_CACHE_LIMIT = 65536  # subjects whose matching subscriptions are remembered


@dataclass(slots=True)
class LocalSub:
    owner: object
    sid: str
    text: str  # the subject, or the pattern text
    syntax: str | None  # None for an exact subject, else "rv" | "glob" | "sbus"
    pattern: Pattern | None = None
    queue: str | None = None
    shard: Shard | None = None  # shardcast: only subjects whose hash falls in this shard
    since_ns: int = 0  # when it was made (router/stream_start.py, reorder.py)

    @property
    def key(self) -> tuple[str | None, str]:
        return (self.syntax, self.text)

    @property
    def queue_marker(self) -> str | None:
        """The subject that tells the network this node has members of the queue group."""
        if self.queue is None:
            return None
        return queue_marker(self.queue, self.syntax, self.text)


def queue_marker(queue: str, syntax: str | None, text: str) -> str:
    return f"{QUEUE_PREFIX}{queue}.{syntax or 'sub'}.{text}"


@dataclass(frozen=True, slots=True)
class Change:
    """What adding or removing one subscription changes for the network."""

    sub: LocalSub
    text_edge: bool  # first of its subject/pattern added, or last removed
    queue_edge: bool  # likewise for its queue group


class LocalSubs:
    def __init__(self) -> None:
        # id(owner) -> sid -> subscription: an owner's subscriptions without a scan of all
        self._by_owner: dict[int, dict[str, LocalSub]] = {}
        self._count = 0
        self._exact: dict[str, list[LocalSub]] = {}
        self._patterns: dict[tuple[str, str, Shard | None], list[LocalSub]] = {}  # (syntax, text, shard)
        self._queues: dict[str, int] = {}  # queue marker -> members
        self._queue_owners: set[int] = set()  # id(owner) of owners that made a queue subscription
        self._draining: deque[Iterator[LocalSub]] = deque()  # detached, still in the index
        self._index: SubjectIndex[LocalSub] = SubjectIndex(MATCH_CACHE_LIMIT, _in_shard)
        # Every subscription that a message on a subject goes to (remembered per subject
        # until the subscriptions change: a message stream matches each pattern once);
        # bound here so that the per-message call is the index's own.
        self.match: Callable[[str], tuple[LocalSub, ...]] = self._index.match

    def __len__(self) -> int:
        return self._count

    def add(self, owner: object, sid: str, text: str, syntax: str | None, queue: str | None = None,
            shard: Shard | None = None, now_ns: int = 0) -> Change:
        """Add a subscription (the caller removed any earlier one with this sid)."""
        pattern = compile_pattern(text, syntax) if syntax is not None else None  # type: ignore[arg-type]
        sub = LocalSub(owner, sid, text, syntax, pattern, queue, shard if syntax is not None else None, now_ns)
        self._by_owner.setdefault(id(owner), {})[sid] = sub
        self._count += 1
        if queue is not None:
            self._queue_owners.add(id(owner))
        if pattern is None:
            refs = self._exact.setdefault(text, [])
            self._index.add_subject(text, sub)
        else:
            refs = self._patterns.setdefault((pattern.syntax, text, sub.shard), [])
            self._index.add_pattern(pattern, sub)
        refs.append(sub)
        queue_edge = False
        marker = sub.queue_marker
        if marker is not None:
            self._queues[marker] = self._queues.get(marker, 0) + 1
            queue_edge = self._queues[marker] == 1
        return Change(sub, len(refs) == 1, queue_edge)

    def remove(self, owner: object, sid: str) -> Change | None:
        mine = self._by_owner.get(id(owner))
        sub = None if mine is None else mine.pop(sid, None)
        if sub is None:
            return None
        if not mine:
            del self._by_owner[id(owner)]
            self._queue_owners.discard(id(owner))  # else kept after it leaves (detach finds none)
        return self._drop(sub)

    def drop_owner(self, owner: object) -> list[Change]:
        """Remove every subscription of `owner` at once."""
        return self.detach(owner, 1 << 62)

    def detach(self, owner: object, keep: int) -> list[Change]:
        """Take every subscription of `owner` out of use now; the index keeps them for
        `drain` when there are more than `keep`, but for queue group members, removed
        now (their changes returned: a withdrawal the network needs first)."""
        mine = self._by_owner.pop(id(owner), None)
        if not mine:
            return []
        self._count -= len(mine)
        changes: list[Change] = []
        if id(owner) in self._queue_owners:
            self._queue_owners.discard(id(owner))
            for sub in [sub for sub in mine.values() if sub.queue is not None]:
                del mine[sub.sid]
                changes.append(self._unindex(sub))
        if len(mine) <= keep:
            changes += [self._unindex(sub) for sub in mine.values()]
        elif mine:
            self._draining.append(iter(list(mine.values())))
            self.match = self._match_live
        return changes

    @property
    def draining(self) -> bool:
        """Whether detached subscriptions are still in the index (`drain` them)."""
        return bool(self._draining)

    def drain(self, n: int) -> list[Change]:
        """Remove up to `n` detached subscriptions from the index, the oldest first."""
        out: list[Change] = []
        draining = self._draining
        unindex = self._unindex
        while draining and len(out) < n:
            for sub in draining[0]:
                out.append(unindex(sub))
                if len(out) >= n:
                    break
            else:
                draining.popleft()
        if not draining:
            self.match = self._index.match
        return out

    def _live(self, sub: LocalSub) -> bool:
        mine = self._by_owner.get(id(sub.owner))
        return mine is not None and mine.get(sub.sid) is sub

    def _match_live(self, subject: str) -> tuple[LocalSub, ...]:
        """`match` while detached subscriptions are in the index: without them."""
        got = self._index.match(subject)
        live = self._live
        for sub in got:
            if not live(sub):
                return tuple(s for s in got if live(s))
        return got

    def _drop(self, sub: LocalSub) -> Change:
        self._count -= 1
        return self._unindex(sub)

    def _unindex(self, sub: LocalSub) -> Change:
        if sub.pattern is None:
            self._index.remove_subject(sub.text, sub)
            refs = self._exact[sub.text]
            discard(refs, sub)
            if not refs:
                del self._exact[sub.text]
        else:
            self._index.remove_pattern(sub.pattern, sub)
            key = (sub.pattern.syntax, sub.text, sub.shard)
            refs = self._patterns[key]
            discard(refs, sub)
            if not refs:
                del self._patterns[key]
        queue_edge = False
        marker = sub.queue_marker
        if marker is not None:
            self._queues[marker] -= 1
            if not self._queues[marker]:
                del self._queues[marker]
                queue_edge = True
        return Change(sub, not refs, queue_edge)

    def count(self, subject: str) -> int:
        """Literal subscriptions of `subject` (Redis NUMSUB)."""
        refs = self._exact.get(subject, ())
        return sum(map(self._live, refs)) if self._draining else len(refs)

    def subjects(self) -> Iterator[str]:
        if not self._draining:
            return iter(self._exact)
        live = self._live
        return (s for s, refs in self._exact.items() if any(map(live, refs)))

    def patterns(self) -> Iterator[tuple[str, str]]:
        """(syntax, text) of every pattern subscribed (shards of one pattern once)."""
        keys = self._patterns.items()
        if self._draining:
            live = self._live
            keys = [(key, refs) for key, refs in keys if any(map(live, refs))]  # type: ignore[assignment]
        return iter(dict.fromkeys((syntax, text) for (syntax, text, _), _refs in keys))

    def queue_markers(self) -> Iterator[str]:
        return iter(self._queues)

    def rows(self) -> list[dict[str, object]]:
        return [
            {"subject": s.text, "type": s.syntax or "sub", "sid": s.sid, "queue": s.queue or ""}
            for mine in self._by_owner.values() for s in mine.values()
        ]


def _in_shard(subject: str, matched: list[LocalSub]) -> list[LocalSub]:
    """The matched subscriptions without the shardcasts whose shard does not hold `subject`."""
    if all(sub.shard is None for sub in matched):
        return matched
    h = subject_hash(subject_bytes(subject))
    return [sub for sub in matched if sub.shard is None or sub.shard.holds(h)]
