"""Compiled wildcard patterns and subject validation for the three syntaxes.

Manual "Subjects / Wildcarding Subscriptions": plain subscriptions and pattern
subscriptions are separate operators; a pattern carries its syntax ("rv" for RV and NATS,
"glob" for Redis, "sbus" for the ipc bus) and is evaluated by that syntax's rules, while a
publish is never a wildcard. Manual "Wildcard Matching": every syntax converts to one
regular expression form so peers with different styles coexist, and the bloom filter
needs each pattern's literal prefix (hashed with the prefix length as seed) and literal
suffix (the suffix check that makes A.*.B need both ends).

Invariant the bloom filter relies on (tested): a subject matched by a pattern starts with
`prefix`, ends with `suffix`, and is at least `len(prefix) + len(suffix)` long, because a
pattern's first and last literal runs match disjoint ends of the subject. A `literal`
pattern (no wildcard at all) matches exactly the one subject `prefix`.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, NamedTuple

from raims_node.subject import glob, rv, sbus
from raims_node.subject.errors import InvalidPattern, InvalidSubject, Rule, RuleViolation
from raims_node.subject.text import MAX_SUBJECT_LEN, Syntax, subject_bytes, subject_text
from raims_node.subject.tokens import Token


class _SyntaxRules(NamedTuple):
    check_subject: Callable[[str], None]
    tokenize: Callable[[str], list[Token]]


_RULES: Final = MappingProxyType(
    {
        "rv": _SyntaxRules(rv.check_subject, rv.tokenize),
        "glob": _SyntaxRules(glob.check_subject, glob.tokenize),
        "sbus": _SyntaxRules(sbus.check_subject, sbus.tokenize),
    }
)


@dataclass(frozen=True, slots=True)
class Pattern:
    """A pattern compiled in its syntax; equal when text and syntax are equal."""

    text: str
    syntax: Syntax
    regex: re.Pattern[str] = field(compare=False, repr=False)
    prefix: str = field(compare=False)
    suffix: str = field(compare=False)
    literal: bool = field(compare=False)

    def matches(self, subject: str | bytes) -> bool:
        return self.regex.fullmatch(subject_text(subject)) is not None


def _checked(
    text: str | bytes, syntax: str, error: type[RuleViolation]
) -> tuple[str, _SyntaxRules]:
    shown = subject_text(text)
    rules = _RULES.get(syntax)
    if rules is None:
        raise error(Rule.UNKNOWN_SYNTAX, str(syntax), shown, 0)
    if len(subject_bytes(text)) > MAX_SUBJECT_LEN:
        raise error(Rule.SUBJECT_TOO_LONG, syntax, shown, MAX_SUBJECT_LEN)
    return shown, rules


def validate_subject(subject: str | bytes, syntax: Syntax) -> None:
    """Raise `InvalidSubject` naming the rule when `subject` is not valid in `syntax`."""
    text, rules = _checked(subject, syntax, InvalidSubject)
    rules.check_subject(text)


def compile_pattern(text: str | bytes, syntax: Syntax) -> Pattern:
    """Compile `text` in `syntax`; raise `InvalidPattern` naming the rule it breaks."""
    shown, rules = _checked(text, syntax, InvalidPattern)
    tokens = rules.tokenize(shown)
    regex = re.compile("".join(t.regex() for t in tokens), re.DOTALL)
    literal = not any(t.wild for t in tokens)
    if literal:
        prefix, suffix = "".join(t.text for t in tokens), ""
    else:
        prefix = "" if tokens[0].wild else tokens[0].text
        suffix = "" if tokens[-1].wild else tokens[-1].text
    return Pattern(shown, syntax, regex, prefix, suffix, literal)
