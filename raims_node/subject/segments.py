"""The compiled form of a token pattern (RV/NATS and sbus): a list of segment steps.

Both syntaxes cut subjects at a separator ('.' for RV/NATS, '/' for sbus) and their
wildcards stand for whole segments or for the rest of the subject, so a pattern is a
list of steps, one per segment, and an optional "rest" at the end:

- a literal step takes exactly its text;
- a wild step takes any segment that starts with its text: RV's '*' is a wild step with
  empty text that also needs a non-empty segment (manual: '*' matches one or more
  characters other than '.'); sbus's 'ab*' is a wild step 'ab' ('*' matches "until the
  next '/'", possibly nothing);
- the rest (RV's trailing '>', sbus's trailing '/', the empty sbus pattern) takes one or
  more further segments: for RV the rest of the subject must be non-empty ('>' matches
  one or more characters), for sbus a separator must follow (the trailing '/' matches a
  '/' and anything after it).

The same steps are the keys of `index.py`'s token tree, so one pattern and many patterns
match by the same rules. Splitting stops after `len(steps)` separators, so a long subject
costs no more than the pattern looks at.
"""

from __future__ import annotations

from typing import Final, NamedTuple


class Rules(NamedTuple):
    """How a syntax reads its segments."""

    separator: str
    wild_needs_text: bool  # RV '*' needs a non-empty segment
    rest_needs_text: bool  # RV '>' needs a non-empty rest; sbus '/' only the separator


RV_RULES: Final = Rules(".", True, True)
SBUS_RULES: Final = Rules("/", False, False)


class Segments:
    """A compiled RV or sbus pattern (see the module doc): step i is `texts[i]`, a
    literal, or when `wild[i]` a segment starting with it (two tuples rather than one
    object per step: 100,000 patterns are that many fewer objects)."""

    __slots__ = ("rules", "texts", "wild", "rest")

    def __init__(self, rules: Rules, texts: tuple[str, ...], wild: tuple[bool, ...], rest: bool) -> None:
        self.rules = rules
        self.texts = texts
        self.wild = wild
        self.rest = rest

    def ends(self) -> tuple[str, str, bool]:
        """(literal prefix, literal suffix, whether the pattern is all literal): the text
        before the first wildcard and after the last one ('a/x*/c' has 'a/x' and '/c')."""
        sep, texts, wild = self.rules.separator, self.texts, self.wild
        first = wild.index(True) if True in wild else len(texts)
        if first == len(texts):  # no wild step: a literal, or literal steps then the rest
            joined = sep.join(texts)
            if not self.rest:
                return joined, "", True
            return (joined + sep if texts else ""), "", False
        prefix = sep.join(texts[: first + 1])  # the wild step's own text ends it
        if self.rest:
            return prefix, "", False
        last = len(wild) - 1 - wild[::-1].index(True)
        suffix = "".join(sep + t for t in texts[last + 1:])
        return prefix, suffix, False

    def match(self, subject: str) -> bool:
        rules, texts = self.rules, self.texts
        n = len(texts)
        segs = subject.split(rules.separator, n)
        if self.rest:
            if len(segs) != n + 1 or (rules.rest_needs_text and not segs[n]):
                return False
        elif len(segs) != n:
            return False
        for text, wild, seg in zip(texts, self.wild, segs, strict=False):  # segs may hold the rest too
            if wild:
                if not seg.startswith(text) or (rules.wild_needs_text and not seg):
                    return False
            elif seg != text:
                return False
        return True
