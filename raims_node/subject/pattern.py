"""Compiled wildcard patterns and subject validation for the three syntaxes.

Manual "Subjects / Wildcarding Subscriptions": plain subscriptions and pattern
subscriptions are separate operators; a pattern carries its syntax ("rv" for RV and NATS,
"glob" for Redis, "sbus" for the ipc bus) and is evaluated by that syntax's rules, while a
publish is never a wildcard. Manual "Wildcard Matching": the C++ server converts every
syntax to one PCRE form so peers with different styles coexist. raims keeps the syntax
with the pattern instead and compiles it to a matcher without backtracking: RV and sbus
to segment steps (`segments.py`, also the keys of the token tree in `index.py`), globs to
a linear-time piece matcher (`globmatch.py`). Python regular expressions backtrack
(a Redis glob `a*a*a*a*a*a*a*a*a*a*b` against thirty 'a's took 11 s), so none is used.
The bloom filter needs each pattern's literal prefix (hashed with the prefix length as
seed) and literal suffix (the suffix check that makes A.*.B need both ends).

Invariant the bloom filter relies on (tested): a subject matched by a pattern starts with
`prefix`, ends with `suffix`, and is at least `len(prefix) + len(suffix)` long, because a
pattern's first and last literal runs match disjoint ends of the subject. A `literal`
pattern (no wildcard at all) matches exactly the one subject `prefix`.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType
from typing import Final, NamedTuple, Protocol

from raims_node.subject import glob, rv, sbus
from raims_node.subject.errors import InvalidPattern, InvalidSubject, Rule, RuleViolation
from raims_node.subject.text import MAX_SUBJECT_LEN, Syntax, subject_bytes, subject_text

# Patterns compiled lately, kept so that the same pattern met again (a node validates a
# pattern, then stores it; a peer's _P.PSUB then its _P.STOP) is not parsed twice.
COMPILE_CACHE_SIZE: Final = 4096


class Form(Protocol):
    """A syntax's compiled pattern: whether it takes a subject (as str), and its literal
    prefix, literal suffix and whether it is all literal."""

    def match(self, subject: str) -> bool: ...

    def ends(self) -> tuple[str, str, bool]: ...


class _SyntaxRules(NamedTuple):
    check_subject: Callable[[str], None]
    compile: Callable[[str], Form]


_RULES: Final = MappingProxyType(
    {
        "rv": _SyntaxRules(rv.check_subject, rv.compile_rv),
        "glob": _SyntaxRules(glob.check_subject, glob.compile_glob),
        "sbus": _SyntaxRules(sbus.check_subject, sbus.compile_sbus),
    }
)


@dataclass(frozen=True, slots=True)
class Pattern:
    """A pattern compiled in its syntax; equal when text and syntax are equal. `form` is
    the syntax's matcher (`segments.Segments` or `globmatch.GlobMatcher`)."""

    text: str
    syntax: Syntax
    form: Form = field(compare=False, repr=False)
    prefix: str = field(compare=False)
    suffix: str = field(compare=False)
    literal: bool = field(compare=False)

    def matches(self, subject: str | bytes) -> bool:
        return self.form.match(subject_text(subject))

    @property
    def regex(self) -> "WholeMatch":
        """Compatibility for code written when patterns were regular expressions:
        `p.regex.fullmatch(text) is not None` is `p.matches(text)` (prefer that)."""
        return WholeMatch(self.form)


class WholeMatch:
    """`fullmatch(text)`: True when the whole text matches, else None (as `re` did)."""

    __slots__ = ("form",)

    def __init__(self, form: Form) -> None:
        self.form = form

    def fullmatch(self, text: str) -> bool | None:
        return True if self.form.match(text) else None


def _checked(
    text: str | bytes, syntax: str, error: type[RuleViolation]
) -> tuple[str, _SyntaxRules]:
    shown = subject_text(text)
    rules = _RULES.get(syntax)
    if rules is None:
        raise error(Rule.UNKNOWN_SYNTAX, str(syntax), shown, 0)
    # a str of at most MAX/4 characters fits whatever it encodes to (UTF-8: 4 bytes a
    # character at most), so only longer ones are encoded to be measured
    if (len(text) > MAX_SUBJECT_LEN // 4 or isinstance(text, bytes)) and len(subject_bytes(text)) > MAX_SUBJECT_LEN:
        raise error(Rule.SUBJECT_TOO_LONG, syntax, shown, MAX_SUBJECT_LEN)
    return shown, rules


def validate_subject(subject: str | bytes, syntax: Syntax) -> None:
    """Raise `InvalidSubject` naming the rule when `subject` is not valid in `syntax`."""
    text, rules = _checked(subject, syntax, InvalidSubject)
    rules.check_subject(text)


def compile_pattern(text: str | bytes, syntax: Syntax) -> Pattern:
    """Compile `text` in `syntax`; raise `InvalidPattern` naming the rule it breaks."""
    return _compile(text, syntax)


@lru_cache(maxsize=COMPILE_CACHE_SIZE)
def _compile(text: str | bytes, syntax: Syntax) -> Pattern:
    shown, rules = _checked(text, syntax, InvalidPattern)
    form = rules.compile(shown)
    prefix, suffix, literal = form.ends()
    return Pattern(shown, syntax, form, prefix, suffix, literal)
