"""The local subscription table: what this node's clients subscribed.

Clients (bridges, the console, tests) subscribe by subject or by pattern; the node
advertises the union in its bloom filter and delivers matching messages to each
subscription. Reference counting per subject or pattern decides when the node must
announce a change to the network (`_S.JOIN` on the first subscriber, `_S.LEAV` after
the last; `_P.PSUB` / `_P.STOP` likewise for patterns).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from raims_node.subject import Pattern, compile_pattern

Syntax = str  # "rv" | "glob" | "sbus"


@dataclass(slots=True)
class LocalSub:
    owner: object
    sid: str
    text: str  # the subject, or the pattern text
    syntax: Syntax | None  # None for an exact subject
    pattern: Pattern | None = None
    queue: str | None = None


class LocalSubs:
    def __init__(self) -> None:
        self._by_key: dict[tuple[int, str], LocalSub] = {}  # (id(owner), sid)
        self._exact: dict[str, list[LocalSub]] = {}
        self._patterns: dict[tuple[str, str], list[LocalSub]] = {}  # (syntax, text)

    def __len__(self) -> int:
        return len(self._by_key)

    def subscribe(self, owner: object, sid: str, subject: str, queue: str | None = None) -> bool:
        """Add a subscription; True when it is the subject's first (announce a join)."""
        self.unsubscribe(owner, sid)
        sub = LocalSub(owner, sid, subject, None, None, queue)
        self._by_key[(id(owner), sid)] = sub
        refs = self._exact.setdefault(subject, [])
        refs.append(sub)
        return len(refs) == 1

    def psubscribe(self, owner: object, sid: str, text: str, syntax: Syntax) -> bool:
        """Add a pattern subscription; True when it is the pattern's first."""
        pattern = compile_pattern(text, syntax)  # type: ignore[arg-type]
        self.unsubscribe(owner, sid)
        sub = LocalSub(owner, sid, text, syntax, pattern)
        self._by_key[(id(owner), sid)] = sub
        refs = self._patterns.setdefault((syntax, text), [])
        refs.append(sub)
        return len(refs) == 1

    def unsubscribe(self, owner: object, sid: str) -> LocalSub | None:
        """Remove one subscription; returns it when it was the last of its subject/pattern."""
        sub = self._by_key.pop((id(owner), sid), None)
        if sub is None:
            return None
        return sub if self._drop(sub) else None

    def drop_owner(self, owner: object) -> list[LocalSub]:
        """Remove every subscription of `owner`; returns those that were the last ones."""
        mine = [k for k in self._by_key if k[0] == id(owner)]
        last = []
        for key in mine:
            sub = self._by_key.pop(key)
            if self._drop(sub):
                last.append(sub)
        return last

    def _drop(self, sub: LocalSub) -> bool:
        if sub.syntax is None:
            refs = self._exact[sub.text]
            refs.remove(sub)
            if not refs:
                del self._exact[sub.text]
                return True
            return False
        key = (sub.syntax, sub.text)
        prefs = self._patterns[key]
        prefs.remove(sub)
        if not prefs:
            del self._patterns[key]
            return True
        return False

    def match(self, subject: str) -> list[LocalSub]:
        """Every subscription that a message on `subject` goes to."""
        out = list(self._exact.get(subject, ()))
        for refs in self._patterns.values():
            if refs[0].pattern is not None and refs[0].pattern.matches(subject):
                out.extend(refs)
        return out

    def subjects(self) -> Iterator[str]:
        return iter(self._exact)

    def patterns(self) -> Iterator[tuple[str, str]]:
        """(syntax, text) of every pattern subscribed."""
        return iter(self._patterns)

    def rows(self) -> list[dict[str, object]]:
        return [
            {"subject": s.text, "type": s.syntax or "sub", "sid": s.sid, "queue": s.queue or ""}
            for s in self._by_key.values()
        ]
