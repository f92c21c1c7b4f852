"""RV and NATS subjects and wildcards (manual "RV subject rules", "NATS subject rules").

A subject is segments separated by '.'; it cannot start or end with a period or have two
periods without characters between (so it is never empty). NATS uses the same
segmentation and wildcards, so both bridges use this syntax, named "rv".

Wildcards: a segment that is exactly '*' matches one segment (one or more characters
other than '.'); a last segment that is exactly '>' matches one or more trailing segments.
Decisions where the manual is silent, following what RV and NATS do: '*' or '>' inside a
longer segment ('a*', 'b>') are literal characters; a '>' segment that is not the last one
is an error (`Rule.FULL_WILDCARD_NOT_LAST`) rather than a silent literal. Publishing to a
subject that contains wildcards is allowed and routes as a normal subject (rule 3).
"""

from typing import Final

from raims_node.subject.errors import InvalidPattern, InvalidSubject, Rule, RuleViolation
from raims_node.subject.segments import RV_RULES, Segments, Step
from raims_node.subject.tokens import Token, Tokens

SYNTAX: Final = "rv"
SEPARATOR: Final = "."
ONE_SEGMENT: Final = "*"
TRAILING_SEGMENTS: Final = ">"


def _segments(text: str, error: type[RuleViolation]) -> list[str]:
    if not text:
        raise error(Rule.EMPTY_SUBJECT, SYNTAX, text, 0)
    if text[0] == SEPARATOR:
        raise error(Rule.LEADING_DOT, SYNTAX, text, 0)
    if text[-1] == SEPARATOR:
        raise error(Rule.TRAILING_DOT, SYNTAX, text, len(text) - 1)
    double = text.find(SEPARATOR * 2)
    if double >= 0:
        raise error(Rule.EMPTY_SEGMENT, SYNTAX, text, double + 1)
    return text.split(SEPARATOR)


def check_subject(text: str) -> None:
    _segments(text, InvalidSubject)


def compile_rv(text: str) -> tuple[list[Token], Segments]:
    """The tokens (for prefix and suffix) and the segment steps of RV pattern `text`."""
    segments = _segments(text, InvalidPattern)
    tokens = Tokens()
    steps: list[Step] = []
    rest = False
    offset = 0
    for i, segment in enumerate(segments):
        if i:
            tokens.literal(SEPARATOR)
        if segment == ONE_SEGMENT:
            tokens.wildcard(ONE_SEGMENT)
            steps.append(Step("", True))
        elif segment == TRAILING_SEGMENTS:
            if i != len(segments) - 1:
                raise InvalidPattern(Rule.FULL_WILDCARD_NOT_LAST, SYNTAX, text, offset)
            tokens.wildcard(TRAILING_SEGMENTS)
            rest = True
        else:
            tokens.literal(segment)
            steps.append(Step(segment, False))
        offset += len(segment) + 1
    return tokens.items, Segments(RV_RULES, tuple(steps), rest)


def tokenize(text: str) -> list[Token]:
    return compile_rv(text)[0]
