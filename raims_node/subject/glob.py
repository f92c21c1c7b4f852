"""Redis glob subjects and wildcards (manual "Redis subject rules").

Subjects: "There are no limitations for the characters used in a subject" (only the
frame's length limit, checked by the caller). Patterns, as the manual states them:
'*' matches zero or more characters, '?' matches 0 or 1 characters, '[...]' matches one of
the enclosed characters and '[^...]' one character not enclosed, '\\' escapes the next
character. Ranges 'a-z' inside brackets work as in Redis (a reversed range 'z-a' is the
same range, as Redis swaps it); '-' first or last in a bracket is literal; '\\' escapes
inside brackets too.

Decisions:
- '?' follows the manual (0 or 1 characters), not Redis itself nor the C++ converter,
  which both match exactly one. The result is a superset of what Redis delivers, so a
  Redis client never misses a message it would get from Redis.
- A glob whose pieces with '?' or '[...]' (the runs between stars) hold more than
  `MAX_WILD_PIECE_CHARS` characters in all is refused (`GLOB_TOO_COMPLEX`): such a piece
  is matched by a bit-parallel automaton whose state has one bit per character, so this
  bounds the cost of one subject (65,535 bytes at most) to tens of milliseconds.
  Plain-text pieces have no limit (`str.find`). Redis has no such limit; no sensible
  pattern comes near it.
- Redis accepts and quietly interprets three malformed forms; raims rejects them with a
  typed error instead: a '[' without ']' (`UNTERMINATED_BRACKET`), an empty '[]' or '[^]'
  (`EMPTY_BRACKET`, which would match nothing) and a trailing lone '\\'
  (`DANGLING_ESCAPE`).
"""

from typing import Final

from raims_node.subject.errors import InvalidPattern, Rule
from raims_node.subject.globmatch import Atom, CharClass, GlobMatcher

SYNTAX: Final = "glob"
_SPECIAL: Final = "\\*?["
MAX_WILD_PIECE_CHARS: Final = 1024


def check_subject(text: str) -> None:
    """Every character is allowed in a glob subject; only the length limit applies."""


def _class_char(text: str, j: int, start: int) -> tuple[str, int]:
    """The character at `j` inside a bracket (resolving an escape) and the next index."""
    if text[j] == "\\":
        if j + 1 == len(text):
            raise InvalidPattern(Rule.UNTERMINATED_BRACKET, SYNTAX, text, start)
        return text[j + 1], j + 2
    return text[j], j + 1


def _bracket(text: str, start: int) -> tuple[CharClass, int]:
    """The class for the bracket opening at `start` and the index after its ']'."""
    j = start + 1
    negate = j < len(text) and text[j] == "^"
    if negate:
        j += 1
    chars: set[str] = set()
    ranges: list[tuple[str, str]] = []
    while j < len(text) and text[j] != "]":
        low, j = _class_char(text, j, start)
        high = low
        if j + 1 < len(text) and text[j] == "-" and text[j + 1] != "]":
            high, j = _class_char(text, j + 1, start)
            low, high = min(low, high), max(low, high)
        if low == high:
            chars.add(low)
        else:
            ranges.append((low, high))
    if j == len(text):
        raise InvalidPattern(Rule.UNTERMINATED_BRACKET, SYNTAX, text, start)
    if not chars and not ranges:
        raise InvalidPattern(Rule.EMPTY_BRACKET, SYNTAX, text, start)
    return CharClass(frozenset(chars), tuple(ranges), negate), j + 1


def compile_glob(text: str) -> GlobMatcher:
    """The matcher of glob `text`. Literal runs between special characters are taken
    whole (found with `str.find`, each special character's next offset remembered), so
    a mostly literal pattern compiles quickly."""
    pieces: list[list[Atom]] = [[]]  # between stars; a str item here is a literal run
    n = len(text)
    upcoming = {c: text.find(c) for c in _SPECIAL}
    i = 0
    while i < n:
        j = n
        for c, k in upcoming.items():
            if 0 <= k < i:
                upcoming[c] = k = text.find(c, i)
            if 0 <= k < j:
                j = k
        if j > i:
            pieces[-1].append(text[i:j])
            i = j
            continue
        c = text[i]
        if c == "\\":
            if i + 1 == n:
                raise InvalidPattern(Rule.DANGLING_ESCAPE, SYNTAX, text, i)
            pieces[-1].append(text[i + 1])
            i += 2
        elif c == "*":
            if pieces[-1] or len(pieces) == 1:  # '**' is the same as '*'
                pieces.append([])
            i += 1
        elif c == "?":
            pieces[-1].append(None)
            i += 1
        else:  # '['
            cls, end = _bracket(text, i)
            pieces[-1].append(cls)
            i = end
    wild_chars = sum(sum(len(a) if isinstance(a, str) else 1 for a in piece)
                     for piece in pieces if not all(isinstance(a, str) for a in piece))
    if wild_chars > MAX_WILD_PIECE_CHARS:
        raise InvalidPattern(Rule.GLOB_TOO_COMPLEX, SYNTAX, text, 0)
    return GlobMatcher(pieces)
