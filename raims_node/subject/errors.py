"""Errors of the subject package: an invalid subject or pattern names the rule it breaks.

Every rule of the manual's "RV subject rules", "NATS subject rules", "Redis subject rules"
and of the sbus seed's "Routing keys" that raims enforces has a `Rule` member; the error
carries the rule, the syntax, the offending text and the character offset where it broke.
"""

from enum import StrEnum
from types import MappingProxyType

from raims_node import RaimsError


class Rule(StrEnum):
    """One checked rule; the value is a stable identifier, `describe()` the human text."""

    SUBJECT_TOO_LONG = "subject-too-long"
    EMPTY_SUBJECT = "empty-subject"
    LEADING_DOT = "leading-dot"
    TRAILING_DOT = "trailing-dot"
    EMPTY_SEGMENT = "empty-segment"
    FULL_WILDCARD_NOT_LAST = "full-wildcard-not-last"
    NUL_BYTE = "nul-byte"
    RESERVED_BANG = "reserved-bang"
    STAR_NOT_AT_SEGMENT_END = "star-not-at-segment-end"
    UNTERMINATED_BRACKET = "unterminated-bracket"
    EMPTY_BRACKET = "empty-bracket"
    DANGLING_ESCAPE = "dangling-escape"
    GLOB_TOO_COMPLEX = "glob-too-complex"
    UNKNOWN_SYNTAX = "unknown-syntax"

    def describe(self) -> str:
        return _RULE_TEXT[self]


_RULE_TEXT = MappingProxyType(
    {
        Rule.SUBJECT_TOO_LONG: "a subject is at most 65535 bytes (the frame's 16-bit length)",
        Rule.EMPTY_SUBJECT: "an RV/NATS subject has at least one segment",
        Rule.LEADING_DOT: "an RV/NATS subject cannot start with a period",
        Rule.TRAILING_DOT: "an RV/NATS subject cannot end with a period",
        Rule.EMPTY_SEGMENT: "an RV/NATS subject cannot have two periods without characters between",
        Rule.FULL_WILDCARD_NOT_LAST: "the RV/NATS '>' wildcard must be the last segment",
        Rule.NUL_BYTE: "an sbus routing key may contain any byte other than NUL",
        Rule.RESERVED_BANG: "the sbus token '!' (next to '/' or an end) may only start '!/cred/'",
        Rule.STAR_NOT_AT_SEGMENT_END: "an sbus '*' matches up to the next '/', so '/' or the end "
        "must follow it",
        Rule.UNTERMINATED_BRACKET: "a glob '[' needs a closing ']'",
        Rule.EMPTY_BRACKET: "a glob bracket expression names at least one character",
        Rule.DANGLING_ESCAPE: "a glob '\\' must be followed by the character it escapes",
        Rule.GLOB_TOO_COMPLEX: "the characters of a glob's pieces that hold '?' or '[...]' "
        "(between stars) number at most 1024",
        Rule.UNKNOWN_SYNTAX: "the syntax is one of 'rv', 'glob', 'sbus'",
    }
)

# Long subjects are cut in messages so a log line stays readable.
_SHOWN_CHARS = 80


class SubjectError(RaimsError):
    """Root of the subject package's errors."""


class RuleViolation(SubjectError):
    """A subject or pattern that breaks `rule` of `syntax` at character `offset`."""

    kind = "text"

    def __init__(self, rule: Rule, syntax: str, text: str, offset: int) -> None:
        self.rule = rule
        self.syntax = syntax
        self.text = text
        self.offset = offset
        shown = text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "..."
        super().__init__(
            f"{syntax} {self.kind} {shown!r} (length {len(text)}) breaks rule {rule.value} at "
            f"offset {offset}: {rule.describe()}"
        )


class InvalidSubject(RuleViolation):
    """A subject (a publish or a plain subscription) that its syntax does not allow."""

    kind = "subject"


class InvalidPattern(RuleViolation):
    """A wildcard pattern that its syntax does not allow."""

    kind = "pattern"
