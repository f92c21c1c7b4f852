"""Subjects and wildcard patterns: RV/NATS ('*', '>'), Redis glob ('*', '?', '[...]', '\\')
and sbus ('*', trailing '/'), each validated by its own rules and compiled to a matcher
without backtracking plus the literal prefix and suffix that the bloom filter hashes;
`SubjectIndex` matches a subject against many patterns of every syntax at once.

Seed sections: manual "Subjects", "The _INBOX subject", "RV subject rules", "NATS subject
rules", "Redis subject rules", "Wildcard Matching"; sbus seed "Routing keys".
"""

from raims_node.subject.errors import (
    InvalidPattern,
    InvalidSubject,
    Rule,
    RuleViolation,
    SubjectError,
)
from raims_node.subject.index import PatternIndex, SubjectIndex
from raims_node.subject.pattern import Pattern, compile_pattern, validate_subject
from raims_node.subject.text import (
    MAX_SUBJECT_LEN,
    SYNTAXES,
    Syntax,
    subject_bytes,
    subject_text,
)

__all__ = [
    "MAX_SUBJECT_LEN",
    "SYNTAXES",
    "InvalidPattern",
    "InvalidSubject",
    "Pattern",
    "PatternIndex",
    "Rule",
    "RuleViolation",
    "SubjectError",
    "SubjectIndex",
    "Syntax",
    "compile_pattern",
    "subject_bytes",
    "subject_text",
    "validate_subject",
]
