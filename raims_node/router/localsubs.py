"""The local subscription table: what this node's clients subscribed.

Clients (bridges, the console, tests) subscribe by subject or by pattern, optionally
in a queue group; the node advertises the union in its bloom filter and delivers
matching messages. Reference counting decides when the node must tell the network:
the first subscription of a subject (or pattern) announces it, the last one's removal
withdraws it; likewise the first and last member of a queue group on a subject.
Matching a subject against the table is the subject package's `SubjectIndex` (exact
subjects, the token trees and glob buckets, and the per-subject result cache).
"""

from __future__ import annotations

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
        return self._drop(sub)

    def drop_owner(self, owner: object) -> list[Change]:
        """Remove every subscription of `owner`."""
        mine = self._by_owner.pop(id(owner), {})
        return [self._drop(sub) for sub in mine.values()]

    def _drop(self, sub: LocalSub) -> Change:
        self._count -= 1
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
        return len(self._exact.get(subject, ()))

    def subjects(self) -> Iterator[str]:
        return iter(self._exact)

    def patterns(self) -> Iterator[tuple[str, str]]:
        """(syntax, text) of every pattern subscribed (shards of one pattern once)."""
        return iter(dict.fromkeys((syntax, text) for syntax, text, _ in self._patterns))

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
