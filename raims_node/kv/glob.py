"""Redis glob matching for KEYS / SCAN MATCH / CONFIG GET, in one place.

`glob_match(pattern, key)` follows redis-server's stringmatchlen: `*`, `?`, `[abc]`,
`[^a]`, `[a-z]`, and `\\` escaping the next character. Linear in |key| x |pattern| in the
worst case (no backtracking: a set of pattern positions advances over the key, like an
NFA), so a hostile pattern cannot hang the node. The subject index of issue 19 will take
this function's place on merge; callers only know this signature.
"""

from __future__ import annotations


def _class_match(pattern: bytes, i: int, ch: int) -> tuple[bool, int]:
    """Match `ch` against the class starting after `[` at index i; (matched, index after `]`)."""
    n = len(pattern)
    negate = i < n and pattern[i] == 94  # ^
    if negate:
        i += 1
    matched = False
    while i < n and pattern[i] != 93:  # ]
        if pattern[i] == 92 and i + 1 < n:  # \x
            i += 1
            if pattern[i] == ch:
                matched = True
        elif i + 2 < n and pattern[i + 1] == 45 and pattern[i + 2] != 93:  # a-z
            lo, hi = pattern[i], pattern[i + 2]
            if lo > hi:
                lo, hi = hi, lo
            if lo <= ch <= hi:
                matched = True
            i += 2
        elif pattern[i] == ch:
            matched = True
        i += 1
    # an unterminated class ends at the pattern's end, as in stringmatchlen
    return matched != negate, (i + 1 if i < n else n)


def glob_match(pattern: bytes, key: bytes) -> bool:
    n = len(pattern)
    states = {0}
    for ch in key:
        nxt: set[int] = set()
        for p in _closure(pattern, states):
            if p >= n:
                continue
            c = pattern[p]
            if c == 42:  # *
                nxt.add(p)
            elif c == 63:  # ?
                nxt.add(p + 1)
            elif c == 91:  # [
                ok, after = _class_match(pattern, p + 1, ch)
                if ok:
                    nxt.add(after)
            elif c == 92 and p + 1 < n:
                if pattern[p + 1] == ch:
                    nxt.add(p + 2)
            elif c == ch:
                nxt.add(p + 1)
        if not nxt:
            return False
        states = nxt
    return any(p >= n for p in _closure(pattern, states))


def _closure(pattern: bytes, states: set[int]) -> set[int]:
    """States plus those reached by letting a `*` match nothing."""
    out = set(states)
    todo = list(states)
    n = len(pattern)
    while todo:
        p = todo.pop()
        if p < n and pattern[p] == 42 and p + 1 not in out:
            out.add(p + 1)
            todo.append(p + 1)
    return out
