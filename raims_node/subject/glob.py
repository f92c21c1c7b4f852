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
- Redis accepts and quietly interprets three malformed forms; raims rejects them with a
  typed error instead: a '[' without ']' (`UNTERMINATED_BRACKET`), an empty '[]' or '[^]'
  (`EMPTY_BRACKET`, which would match nothing) and a trailing lone '\\'
  (`DANGLING_ESCAPE`).
"""

from typing import Final

from raims_node.subject.errors import InvalidPattern, Rule
from raims_node.subject.globmatch import Atom, CharClass, GlobMatcher
from raims_node.subject.tokens import Token, Tokens

SYNTAX: Final = "glob"
ANY_RUN: Final = "*"
ANY_ONE_OR_NONE: Final = "?"


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


def compile_glob(text: str) -> tuple[list[Token], GlobMatcher]:
    """The tokens (for prefix and suffix) and the matcher of glob `text`."""
    tokens = Tokens()
    pieces: list[list[Atom]] = [[]]  # the atoms between stars
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            if i + 1 == len(text):
                raise InvalidPattern(Rule.DANGLING_ESCAPE, SYNTAX, text, i)
            c = text[i + 1]
            tokens.literal(c)
            pieces[-1].append(c)
            i += 2
        elif c == "*":
            if not tokens.last_is(ANY_RUN):  # '**' is the same as '*'
                tokens.wildcard(ANY_RUN)
                pieces.append([])
            i += 1
        elif c == "?":
            tokens.wildcard(ANY_ONE_OR_NONE)
            pieces[-1].append(None)
            i += 1
        elif c == "[":
            cls, end = _bracket(text, i)
            tokens.wildcard(text[i:end])
            pieces[-1].append(cls)
            i = end
        else:
            tokens.literal(c)
            pieces[-1].append(c)
            i += 1
    return tokens.items, GlobMatcher(pieces)


def tokenize(text: str) -> list[Token]:
    return compile_glob(text)[0]
