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


class Step(NamedTuple):
    """One segment of a pattern: a literal, or (`wild`) a segment starting with `text`."""

    text: str
    wild: bool


class Rules(NamedTuple):
    """How a syntax reads its segments."""

    separator: str
    wild_needs_text: bool  # RV '*' needs a non-empty segment
    rest_needs_text: bool  # RV '>' needs a non-empty rest; sbus '/' only the separator


RV_RULES: Final = Rules(".", True, True)
SBUS_RULES: Final = Rules("/", False, False)


class Segments:
    """A compiled RV or sbus pattern (see the module doc)."""

    __slots__ = ("rules", "steps", "rest")

    def __init__(self, rules: Rules, steps: tuple[Step, ...], rest: bool) -> None:
        self.rules = rules
        self.steps = steps
        self.rest = rest

    def match(self, subject: str) -> bool:
        rules, steps = self.rules, self.steps
        n = len(steps)
        segs = subject.split(rules.separator, n)
        if self.rest:
            if len(segs) != n + 1 or (rules.rest_needs_text and not segs[n]):
                return False
        elif len(segs) != n:
            return False
        for step, seg in zip(steps, segs, strict=False):  # segs may hold the rest too
            if step.wild:
                if not seg.startswith(step.text) or (rules.wild_needs_text and not seg):
                    return False
            elif seg != step.text:
                return False
        return True
