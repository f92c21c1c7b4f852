"""A Redis glob matcher without backtracking: linear in the subject for each '*'-free piece.

Why not a regular expression: Python's `re` backtracks, so `a*a*a*a*a*a*a*a*a*a*b` against
thirty 'a's took seconds. Here the pattern is cut at every '*' into pieces; a piece is a
run of atoms that each take one character (a literal, a bracket class) or zero or one
character ('?', manual "Redis subject rules"). Because a '*' stands between consecutive
pieces, the set of subject offsets from which the rest of the pattern matches is
downward closed, so each piece may take its earliest possible end:

- the head piece is anchored at offset 0 (earliest end of an anchored match),
- each middle piece takes the earliest end of a match starting at or after the current
  offset (`str.find` when the piece is plain text, else a bit-parallel NFA scan),
- the tail piece must end at the subject's end and start at or after the current offset
  (only the last `max_len` characters are looked at).

Every subject character is read at most once per piece, so a match costs O(n * m) in
the worst case (n subject characters, m atoms) and O(n) for plain-text pieces, with no
blow-up whatever the number of stars. A pattern without '*' is one piece anchored at
both ends.

The NFA of a piece is the Shift-And of Baeza-Yates and Gonnet with optional positions:
bit i of the state means "the first i atoms are matched"; a character moves every state
whose atom accepts it one bit up, and a state before an optional atom also holds the
state after it (the epsilon closure, computed for every run of '?' at once with one
subtraction).
"""

from __future__ import annotations

from typing import Final, NamedTuple

# Characters whose accept mask a piece remembers (a piece sees few distinct characters;
# past this many the mask is computed each time instead of growing the table).
MASK_CACHE_LIMIT: Final = 256


class CharClass(NamedTuple):
    """A bracket expression: single characters, inclusive ranges, and a negation."""

    chars: frozenset[str]
    ranges: tuple[tuple[str, str], ...]
    negate: bool

    def accepts(self, c: str) -> bool:
        hit = c in self.chars or any(lo <= c <= hi for lo, hi in self.ranges)
        return hit != self.negate


# An atom: a literal character (str of length 1), a class, or None for '?' (any one
# character or none).
Atom = str | CharClass | None


def _accepts(atom: Atom, c: str) -> bool:
    if atom is None:
        return True
    if isinstance(atom, str):
        return atom == c
    return atom.accepts(c)


class _Piece:
    """A '*'-free run of atoms with wildcards in it (plain text pieces stay `str`)."""

    __slots__ = ("atoms", "accept", "optional", "min_len", "max_len", "_masks", "_start", "_starts",
                 "_ends", "_runs")

    def __init__(self, atoms: list[Atom]) -> None:
        self.atoms = tuple(atoms)
        self.accept = 1 << len(atoms)
        self.optional = sum(1 << i for i, a in enumerate(atoms) if a is None)
        self.min_len = sum(1 for a in atoms if a is not None)
        self.max_len = len(atoms)
        self._masks: dict[str, int] | None = None  # made at the first match
        self._starts = self._ends = self._runs = 0
        i = 0
        while i < len(atoms):  # each maximal run of optional atoms i..j-1
            if atoms[i] is None:
                j = i
                while j < len(atoms) and atoms[j] is None:
                    j += 1
                self._starts |= 1 << i
                self._ends |= 1 << j
                self._runs |= ((1 << (j + 1)) - 1) ^ ((1 << i) - 1)
                i = j
            else:
                i += 1
        self._start = self._closure(1)

    def _closure(self, d: int) -> int:
        """`d` plus every state reached through optional atoms, all runs at once: in a
        run of states i..j (atoms i..j-1 optional), the lowest state set is p, and the
        subtraction's borrow marks p+1..j (Navarro and Raffinot's optional positions)."""
        df = d | self._ends
        return d | (self._runs & (~(df - self._starts) ^ df))

    def _mask(self, c: str) -> int:
        masks = self._masks
        if masks is None:
            masks = self._masks = {}
        m = masks.get(c)
        if m is None:
            m = sum(1 << i for i, a in enumerate(self.atoms) if _accepts(a, c))
            if len(masks) < MASK_CACHE_LIMIT:
                masks[c] = m
        return m

    def _step(self, d: int, c: str) -> int:
        d = (d & self._mask(c)) << 1
        return self._closure(d) if d & self.optional else d

    def earliest_end(self, s: str, start: int, end: int, anchored: bool) -> int:
        """The smallest end of a match within s[start:end] starting at `start`
        (anchored) or at any offset from `start` on; -1 when there is none."""
        d = self._start
        if d & self.accept:
            return start
        restart = 0 if anchored else self._start
        for j in range(start, end):
            d = self._step(d, s[j]) | restart
            if d & self.accept:
                return j + 1
            if not d:
                return -1
        return -1

    def ends_at(self, s: str, start: int, end: int) -> bool:
        """Whether a match starting at or after `start` ends at `end`."""
        first = max(start, end - self.max_len)
        if end - first < self.min_len:
            return False
        d = self._start
        for j in range(first, end):
            d = self._step(d, s[j]) | self._start
        return bool(d & self.accept)

    def whole(self, s: str, start: int, end: int) -> bool:
        """Whether the piece matches all of s[start:end]."""
        if not self.min_len <= end - start <= self.max_len:
            return False
        d = self._start
        for j in range(start, end):
            d = self._step(d, s[j])
            if not d:
                return False
        return bool(d & self.accept)


Piece = str | _Piece


def _piece(items: list[Atom]) -> Piece:
    """A piece from atoms, where a str item may be a literal run of any length."""
    if all(isinstance(a, str) for a in items):
        return "".join(items)  # type: ignore[arg-type]
    atoms: list[Atom] = []
    for a in items:
        if isinstance(a, str):
            atoms.extend(a)
        else:
            atoms.append(a)
    return _Piece(atoms)


def _literal_run(items: list[Atom], from_end: bool) -> int:
    """How many items at the start (or end) of a piece are literal runs."""
    k = 0
    for a in reversed(items) if from_end else items:
        if not isinstance(a, str):
            break
        k += 1
    return k


class GlobMatcher:
    """The compiled form of one glob: `match(subject)` in time linear per piece.

    The literal text before the first wildcard (`lead`) and after the last (`trail`) is
    taken off the end pieces and checked with `startswith` / `endswith` first; they are
    also the pattern's literal prefix and suffix for the bloom filter and the index."""

    __slots__ = ("lead", "trail", "literal", "head", "middle", "tail", "starred")

    def __init__(self, pieces: list[list[Atom]]) -> None:
        """`pieces` are the atoms between stars, in order (one piece when no '*'); a str
        item in a piece is a literal run."""
        first, last = pieces[0], pieces[-1]
        self.starred = len(pieces) > 1
        k = _literal_run(first, False)
        self.literal = not self.starred and k == len(first)
        self.lead = "".join(first[:k])  # type: ignore[arg-type]
        first = first[k:]
        if not self.starred:
            last = first
        t = 0 if self.literal else _literal_run(last, True)
        self.trail = "".join(last[len(last) - t:])  # type: ignore[arg-type]
        last = last[:len(last) - t]
        if not self.starred:
            first = last
        self.head: Piece = _piece(first)
        self.middle: tuple[Piece, ...] = tuple(_piece(p) for p in pieces[1:-1])
        self.tail: Piece = _piece(last)

    def ends(self) -> tuple[str, str, bool]:
        """(literal prefix, literal suffix, whether the glob is all literal)."""
        return self.lead, self.trail, self.literal

    def match(self, s: str) -> bool:
        if self.literal:
            return s == self.lead
        lead, trail = self.lead, self.trail
        pos, end = len(lead), len(s) - len(trail)
        if end < pos or not s.startswith(lead) or not s.endswith(trail):
            return False
        head = self.head
        if not self.starred:  # head is a piece with a wildcard in it
            return head.whole(s, pos, end)  # type: ignore[union-attr]
        if not isinstance(head, str):  # else "": the lead was all of it
            pos = head.earliest_end(s, pos, end, anchored=True)
            if pos < 0:
                return False
        for piece in self.middle:
            if isinstance(piece, str):
                i = s.find(piece, pos, end)
                if i < 0:
                    return False
                pos = i + len(piece)
            else:
                pos = piece.earliest_end(s, pos, end, anchored=False)
                if pos < 0:
                    return False
        tail = self.tail
        return pos <= end if isinstance(tail, str) else tail.ends_at(s, pos, end)
