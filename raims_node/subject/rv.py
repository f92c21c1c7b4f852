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
from raims_node.subject.segments import RV_RULES, Segments

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


def compile_rv(text: str) -> Segments:
    """The segment steps of RV pattern `text`: '*' a wild step, a last '>' the rest."""
    segments = _segments(text, InvalidPattern)
    texts: list[str] = []
    wild: list[bool] = []
    rest = False
    offset = 0
    for i, segment in enumerate(segments):
        if segment == ONE_SEGMENT:
            texts.append("")
            wild.append(True)
        elif segment == TRAILING_SEGMENTS:
            if i != len(segments) - 1:
                raise InvalidPattern(Rule.FULL_WILDCARD_NOT_LAST, SYNTAX, text, offset)
            rest = True
        else:
            texts.append(segment)
            wild.append(False)
        offset += len(segment) + 1
    return Segments(RV_RULES, tuple(texts), tuple(wild), rest)
