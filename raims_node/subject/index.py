"""One subject index for every pattern syntax: which values (subscriptions) a subject reaches.

Issue 19: with 10,000 wildcard subscriptions a node tested every pattern for every new
subject, and a Redis glob was a backtracking regular expression. Here, after nats-server's
"sublist" (a token tree with a result cache) and with a linear glob matcher:

- Literal patterns (no wildcard in any syntax) sit in a dict by their text.
- RV/NATS and sbus patterns sit in one token tree per syntax (`_Tree`): a level per
  segment with a dict of literal children, one `*` child (RV's '*', sbus's '*' alone), a
  dict of sbus 'ab*' children by the text before the '*', and the values whose pattern
  ends there, exactly (`here`) or with the rest wildcard (`rest`: RV's '>', sbus's
  trailing '/'). Insert and remove walk one path: O(segments). A match walks
  only the branches the subject's segments take, so its cost does not grow with the
  number of patterns, only with those that share its segments.
- Globs sit in groups by their literal prefix and literal suffix (`_GlobTable`); a
  subject looks up one group per pair of prefix and suffix lengths in use, so only the
  globs whose both ends fit the subject are run (`globmatch.GlobMatcher`, no
  backtracking). A glob with neither a prefix nor a suffix (`*x*`) is tried for every
  subject, as Redis does for all of its patterns.
- `SubjectIndex` adds exact subjects and a bounded cache of results per subject: a
  change of an exact subject (or of a literal pattern) forgets only that subject's entry,
  a change of a wildcard pattern forgets them all; at `cache_limit` entries the cache
  starts over.

Values are kept in insertion order per pattern and removed by identity (`is`), so two
equal subscriptions stay two.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Generic, TypeVar

from raims_node.subject.globmatch import GlobMatcher
from raims_node.subject.pattern import Pattern
from raims_node.subject.segments import Rules, Segments

V = TypeVar("V")
K = TypeVar("K")

MATCH_CACHE_LIMIT: Final = 65536


def discard(values: list[V], value: V) -> bool:
    """Remove `value` from `values` by identity; False when it is not there."""
    for i, v in enumerate(values):
        if v is value:
            del values[i]
            return True
    return False


def _bump(counts: dict[K, int], key: K, delta: int) -> bool:
    """Count `key` up or down; True when it appeared or disappeared."""
    c = counts.get(key, 0) + delta
    if c:
        counts[key] = c
    else:
        del counts[key]
    return c == 0 or (c == 1 and delta > 0)


class _Level(Generic[V]):
    """One level of the token tree (see the module doc); empty parts stay None. A wild
    step with empty text (RV '*', sbus '*' alone) is the `star` child; one with text
    (sbus 'ab*') is in `wild` by its text, whose lengths `wild_lens` lists."""

    __slots__ = ("lit", "star", "wild", "wild_lens", "wild_len_count", "here", "rest")

    def __init__(self) -> None:
        self.lit: dict[str, _Level[V]] | None = None
        self.star: _Level[V] | None = None
        self.wild: dict[str, _Level[V]] | None = None
        self.wild_lens: tuple[int, ...] = ()  # lengths of the keys of `wild`, ascending
        self.wild_len_count: dict[int, int] | None = None
        self.here: list[V] | None = None
        self.rest: list[V] | None = None

    def empty(self) -> bool:
        return not (self.lit or self.star or self.wild or self.here or self.rest)

    def child(self, text: str, wild: bool) -> _Level[V] | None:
        if not wild:
            return None if self.lit is None else self.lit.get(text)
        if not text:
            return self.star
        return None if self.wild is None else self.wild.get(text)

    def make_child(self, text: str, wild: bool) -> _Level[V]:
        node = self.child(text, wild)
        if node is not None:
            return node
        node = _Level()
        if not wild:
            if self.lit is None:
                self.lit = {}
            self.lit[text] = node
        elif not text:
            self.star = node
        else:
            if self.wild is None:
                self.wild, self.wild_len_count = {}, {}
            self.wild[text] = node
            self._count_len(len(text), 1)
        return node

    def drop_child(self, text: str, wild: bool) -> None:
        if not wild:
            assert self.lit is not None
            del self.lit[text]
            if not self.lit:
                self.lit = None
        elif not text:
            self.star = None
        else:
            assert self.wild is not None
            del self.wild[text]
            self._count_len(len(text), -1)
            if not self.wild:
                self.wild = self.wild_len_count = None

    def _count_len(self, length: int, delta: int) -> None:
        assert self.wild_len_count is not None
        if _bump(self.wild_len_count, length, delta):
            self.wild_lens = tuple(sorted(self.wild_len_count))


class _Tree(Generic[V]):
    """The token tree of one segment syntax (RV/NATS or sbus)."""

    __slots__ = ("rules", "root", "depth", "_depths")

    def __init__(self, rules: Rules) -> None:
        self.rules = rules
        self.root: _Level[V] = _Level()
        self.depth = 0  # the most steps of any pattern held: subjects split no further
        self._depths: dict[int, int] = {}

    def add(self, form: Segments, value: V) -> None:
        node = self.root
        for text, wild in zip(form.texts, form.wild, strict=True):
            node = node.make_child(text, wild)
        if form.rest:
            if node.rest is None:
                node.rest = []
            node.rest.append(value)
        else:
            if node.here is None:
                node.here = []
            node.here.append(value)
        if _bump(self._depths, len(form.texts), 1):
            self.depth = max(self._depths)

    def remove(self, form: Segments, value: V) -> bool:
        path: list[_Level[V]] = [self.root]
        for text, wild in zip(form.texts, form.wild, strict=True):
            node = path[-1].child(text, wild)
            if node is None:
                return False
            path.append(node)
        node = path[-1]
        values = node.rest if form.rest else node.here
        if values is None or not discard(values, value):
            return False
        if not values:
            if form.rest:
                node.rest = None
            else:
                node.here = None
        for i in range(len(form.texts), 0, -1):  # prune the levels left empty
            if not path[i].empty():
                break
            path[i - 1].drop_child(form.texts[i - 1], form.wild[i - 1])
        if _bump(self._depths, len(form.texts), -1):
            self.depth = max(self._depths, default=0)
        return True

    def match(self, subject: str, out: list[V]) -> None:
        rules = self.rules
        segs = subject.split(rules.separator, self.depth)
        n = len(segs)
        rest_needs_text, wild_needs_text = rules.rest_needs_text, rules.wild_needs_text
        stack: list[tuple[_Level[V], int]] = [(self.root, 0)]
        while stack:
            node, i = stack.pop()
            if i == n:
                if node.here:
                    out.extend(node.here)
                continue
            if node.rest and not (rest_needs_text and i == n - 1 and not segs[i]):
                out.extend(node.rest)
            seg = segs[i]
            if node.lit is not None:
                child = node.lit.get(seg)
                if child is not None:
                    stack.append((child, i + 1))
            if node.star is not None and (seg or not wild_needs_text):
                stack.append((node.star, i + 1))
            wild = node.wild
            if wild is not None:
                for length in node.wild_lens:
                    if length > len(seg):
                        break
                    child = wild.get(seg[:length])
                    if child is not None:
                        stack.append((child, i + 1))


class _GlobTable(Generic[V]):
    """Globs grouped by (literal prefix, literal suffix), then by pattern text; `plan`
    lists the prefix lengths in use, each with the suffix lengths used beside it, so a
    subject probes one group per pair of lengths that fits it. Two objects a glob (its
    group and its value list) keep 100,000 globs light on memory and on the collector."""

    __slots__ = ("groups", "plan", "_pairs")

    def __init__(self) -> None:
        self.groups: dict[tuple[str, str], dict[str, tuple[GlobMatcher, list[V]]]] = {}
        self.plan: tuple[tuple[int, tuple[int, ...]], ...] = ()
        self._pairs: dict[tuple[int, int], int] = {}  # (prefix len, suffix len) -> groups

    def _count(self, key: tuple[str, str], delta: int) -> None:
        if _bump(self._pairs, (len(key[0]), len(key[1])), delta):
            plan: dict[int, list[int]] = {}
            for plen, slen in sorted(self._pairs):
                plan.setdefault(plen, []).append(slen)
            self.plan = tuple((plen, tuple(slens)) for plen, slens in plan.items())

    def add(self, pattern: Pattern, matcher: GlobMatcher, value: V) -> None:
        key = (pattern.prefix, pattern.suffix)
        group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = {}
            self._count(key, 1)
        entry = group.get(pattern.text)
        if entry is None:
            entry = group[pattern.text] = (matcher, [])
        entry[1].append(value)

    def remove(self, pattern: Pattern, value: V) -> bool:
        key = (pattern.prefix, pattern.suffix)
        group = self.groups.get(key)
        entry = None if group is None else group.get(pattern.text)
        if entry is None or not discard(entry[1], value):
            return False
        assert group is not None
        if not entry[1]:
            del group[pattern.text]
            if not group:
                del self.groups[key]
                self._count(key, -1)
        return True

    def match(self, subject: str, out: list[V]) -> None:
        n = len(subject)
        groups = self.groups
        for plen, slens in self.plan:
            if plen > n:
                break
            head = subject[:plen]
            for slen in slens:
                if plen + slen > n:
                    break
                group = groups.get((head, subject[n - slen:]))
                if group is not None:
                    for matcher, values in group.values():
                        if matcher.match(subject):
                            out.extend(values)


class PatternIndex(Generic[V]):
    """Patterns of every syntax with their values; `match` collects the values of every
    pattern that takes a subject (no cache: see `SubjectIndex`)."""

    __slots__ = ("_literal", "_trees", "_globs", "_size")

    def __init__(self) -> None:
        self._literal: dict[str, list[V]] = {}
        self._trees: dict[Rules, _Tree[V]] = {}
        self._globs: _GlobTable[V] = _GlobTable()
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def add(self, pattern: Pattern, value: V) -> None:
        form = pattern.form
        if pattern.literal:
            self._literal.setdefault(pattern.prefix, []).append(value)
        elif isinstance(form, Segments):
            tree = self._trees.get(form.rules)
            if tree is None:
                tree = self._trees[form.rules] = _Tree(form.rules)
            tree.add(form, value)
        else:
            assert isinstance(form, GlobMatcher)
            self._globs.add(pattern, form, value)
        self._size += 1

    def remove(self, pattern: Pattern, value: V) -> bool:
        """Remove `value` (by identity) from `pattern`; False when it was not there."""
        form = pattern.form
        if pattern.literal:
            values = self._literal.get(pattern.prefix)
            done = values is not None and discard(values, value)
            if done and not values:
                del self._literal[pattern.prefix]
        elif isinstance(form, Segments):
            tree = self._trees.get(form.rules)
            done = tree is not None and tree.remove(form, value)
        else:
            done = self._globs.remove(pattern, value)
        self._size -= done
        return done

    def match(self, subject: str, out: list[V]) -> None:
        """Append to `out` the values of every pattern that takes `subject`."""
        values = self._literal.get(subject)
        if values:
            out.extend(values)
        for tree in self._trees.values():
            tree.match(subject, out)
        if self._globs.groups:
            self._globs.match(subject, out)


class SubjectIndex(Generic[V]):
    """Exact subjects and patterns with a bounded per-subject cache of `match` results.

    `refine`, when given, filters the values that patterns matched (not the exact ones)
    before they are cached: the router drops there the shardcast subscriptions whose
    shard does not hold the subject.
    """

    __slots__ = ("_exact", "_exact_count", "_patterns", "_cache", "_limit", "_refine")

    def __init__(self, cache_limit: int = MATCH_CACHE_LIMIT,
                 refine: Callable[[str, list[V]], list[V]] | None = None) -> None:
        self._exact: dict[str, list[V]] = {}
        self._exact_count = 0
        self._patterns: PatternIndex[V] = PatternIndex()
        self._cache: dict[str, tuple[V, ...]] = {}
        self._limit = cache_limit
        self._refine = refine

    def __len__(self) -> int:
        return self._exact_count + len(self._patterns)

    @property
    def cached(self) -> int:
        return len(self._cache)

    def add_subject(self, subject: str, value: V) -> None:
        self._exact.setdefault(subject, []).append(value)
        self._exact_count += 1
        self._cache.pop(subject, None)

    def remove_subject(self, subject: str, value: V) -> bool:
        values = self._exact.get(subject)
        if values is None or not discard(values, value):
            return False
        if not values:
            del self._exact[subject]
        self._exact_count -= 1
        self._cache.pop(subject, None)
        return True

    def add_pattern(self, pattern: Pattern, value: V) -> None:
        self._patterns.add(pattern, value)
        self._forget(pattern)

    def remove_pattern(self, pattern: Pattern, value: V) -> bool:
        if not self._patterns.remove(pattern, value):
            return False
        self._forget(pattern)
        return True

    def _forget(self, pattern: Pattern) -> None:
        if pattern.literal:
            self._cache.pop(pattern.prefix, None)
        else:
            self._cache.clear()

    def match(self, subject: str) -> tuple[V, ...]:
        """The values a message on `subject` goes to: exact ones first, then the
        patterns' (remembered until a change that may alter them)."""
        found = self._cache.get(subject)
        if found is None:
            if len(self._cache) >= self._limit:
                self._cache.clear()
            found = self._cache[subject] = tuple(self.lookup(subject))
        return found

    def lookup(self, subject: str) -> list[V]:
        """`match` without the cache."""
        out = list(self._exact.get(subject, ()))
        if len(self._patterns):
            matched: list[V] = []
            self._patterns.match(subject, matched)
            if matched:
                out += matched if self._refine is None else self._refine(subject, matched)
        return out
