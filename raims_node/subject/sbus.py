"""sbus routing keys and routing key patterns (sbus seed "Routing keys").

A routing key may contain any byte other than NUL. '*' in a pattern "matches until the
next '/' or end if there are not more '/'s"; a pattern ending with '/' has that '/' match a
'/' and any subsequent bytes ('a/*/c/' matches 'a/b/c/' and 'a/b/c/d/e' but not 'a/b/c'
or 'a/c/d'); the empty pattern matches everything. The token '!' (a '!' with no byte
other than '/' next to it) is reserved for the protocol: it may only begin '!/cred/'.

Decisions where the seed is vague:
- '*' matches zero or more bytes other than '/' (so 'a/*' matches 'a/'): "until the next
  '/' or end" includes the empty run. (The reference sbusd does not match a trailing '*'
  against nothing at the very end; raims follows the text.)
- Because '*' consumes everything up to the next '/', a '*' followed by anything other
  than '/' or the end could never match; such a pattern is an error
  (`STAR_NOT_AT_SEGMENT_END`) instead of a subscription that silently gets nothing.
- A '*' inside a routing key (a publish) is allowed: the seed says it "should not" be
  there, and a publish is never interpreted as a wildcard (manual "Subjects").
- The '!/cred/' credential fields themselves (digits, no '*') are checked by the ipc
  bridge, which knows the peer's credentials.
"""

from typing import Final

from raims_node.subject.errors import InvalidPattern, InvalidSubject, Rule, RuleViolation
from raims_node.subject.segments import SBUS_RULES, Segments

SYNTAX: Final = "sbus"
SEPARATOR: Final = "/"
STAR: Final = "*"
BANG: Final = "!"
CRED_AFTER_BANG: Final = "/cred/"
NUL: Final = "\x00"


def _check_bytes(text: str, error: type[RuleViolation]) -> None:
    nul = text.find(NUL)
    if nul >= 0:
        raise error(Rule.NUL_BYTE, SYNTAX, text, nul)
    i = text.find(BANG)
    while i >= 0:
        alone_left = i == 0 or text[i - 1] == SEPARATOR
        alone_right = i + 1 == len(text) or text[i + 1] == SEPARATOR
        if alone_left and alone_right and not text.startswith(CRED_AFTER_BANG, i + 1):
            raise error(Rule.RESERVED_BANG, SYNTAX, text, i)
        i = text.find(BANG, i + 1)


def check_subject(text: str) -> None:
    _check_bytes(text, InvalidSubject)


def compile_sbus(text: str) -> Segments:
    """The segment steps of sbus pattern `text`: a segment ending in '*' is a wild step
    with the text before the '*'; a trailing '/' (and the empty pattern) is the rest."""
    _check_bytes(text, InvalidPattern)
    rest = not text or text.endswith(SEPARATOR)
    body = text[:-1] if rest else text
    texts: list[str] = []
    wild: list[bool] = []
    offset = 0
    for segment in body.split(SEPARATOR) if text else ():
        star = segment.find(STAR)
        if star >= 0 and star != len(segment) - 1:
            raise InvalidPattern(Rule.STAR_NOT_AT_SEGMENT_END, SYNTAX, text, offset + star)
        texts.append(segment[:-1] if star >= 0 else segment)
        wild.append(star >= 0)
        offset += len(segment) + 1
    return Segments(SBUS_RULES, tuple(texts), tuple(wild), rest)
