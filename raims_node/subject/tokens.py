"""The common form every pattern syntax parses into: literal runs and wildcards.

Manual "Wildcard Matching": "A generic PCRE based conversion is used to enable multiple
wildcard styles to coexist between peers." Each syntax module turns its pattern into a
`Tokens` list; `pattern.py` then derives, the same way for all syntaxes, the regular
expression, the literal prefix (what a prefix hash can cover), the literal suffix (what the
bloom filter's suffix check covers) and whether the pattern is a plain literal.
"""

import re
from typing import NamedTuple


class Token(NamedTuple):
    """A literal run (`text` is the literal) or a wildcard (`text` is its regex fragment)."""

    text: str
    wild: bool

    def regex(self) -> str:
        return self.text if self.wild else re.escape(self.text)


class Tokens:
    """A token list that merges adjacent literals so prefix and suffix are one token each."""

    __slots__ = ("items",)

    def __init__(self) -> None:
        self.items: list[Token] = []

    def literal(self, text: str) -> None:
        if not text:
            return
        if self.items and not self.items[-1].wild:
            self.items[-1] = Token(self.items[-1].text + text, False)
        else:
            self.items.append(Token(text, False))

    def wildcard(self, fragment: str) -> None:
        self.items.append(Token(fragment, True))

    def last_is(self, fragment: str) -> bool:
        return bool(self.items) and self.items[-1] == Token(fragment, True)
