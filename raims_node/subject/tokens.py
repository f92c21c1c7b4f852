"""The common form every pattern syntax parses into: literal runs and wildcards.

Each syntax module turns its pattern into a `Tokens` list; `pattern.py` then derives, the
same way for all syntaxes, the literal prefix (what a prefix hash can cover), the literal
suffix (what the bloom filter's suffix check covers) and whether the pattern is a plain
literal. Matching itself uses each syntax's own compiled form (`segments.py` for rv and
sbus, `globmatch.py` for glob), not these tokens.
"""

from typing import NamedTuple


class Token(NamedTuple):
    """A literal run (`text` is the literal) or a wildcard (`text` is its source form)."""

    text: str
    wild: bool


class Tokens:
    """A token list that merges adjacent literals so prefix and suffix are one token each
    (literal pieces are joined once, when a wildcard or the end comes: no quadratic
    concatenation for long patterns)."""

    __slots__ = ("_items", "_run")

    def __init__(self) -> None:
        self._items: list[Token] = []
        self._run: list[str] = []

    def literal(self, text: str) -> None:
        if text:
            self._run.append(text)

    def _flush(self) -> None:
        if self._run:
            self._items.append(Token("".join(self._run), False))
            self._run.clear()

    def wildcard(self, source: str) -> None:
        self._flush()
        self._items.append(Token(source, True))

    def last_is(self, source: str) -> bool:
        return not self._run and bool(self._items) and self._items[-1] == Token(source, True)

    @property
    def items(self) -> list[Token]:
        self._flush()
        return self._items
