"""Subject validation and pattern compilation for the rv, glob and sbus syntaxes."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raims_node import RaimsError
from raims_node.subject import (
    MAX_SUBJECT_LEN,
    InvalidPattern,
    InvalidSubject,
    Rule,
    SubjectError,
    compile_pattern,
    subject_bytes,
    subject_text,
    validate_subject,
)

# -- reference matchers written without regular expressions ------------------------------


def rv_reference(pattern: str, subject: str) -> bool:
    p, s = pattern.split("."), subject.split(".")
    for i, seg in enumerate(p):
        if seg == ">" and i == len(p) - 1:
            return len(s) > i
        if i >= len(s) or (seg != "*" and seg != s[i]) or (seg == "*" and not s[i]):
            return False
    return len(s) == len(p)


def glob_reference(pattern: str, subject: str) -> bool:
    """Backtracking glob with the manual's rules ('?' is 0 or 1 characters)."""
    if not pattern:
        return not subject
    c = pattern[0]
    if c == "*":
        return any(glob_reference(pattern[1:], subject[i:]) for i in range(len(subject) + 1))
    if c == "?":
        return glob_reference(pattern[1:], subject) or (
            bool(subject) and glob_reference(pattern[1:], subject[1:])
        )
    if c == "[":
        end = pattern.index("]", 2)
        body, negate = pattern[1:end], pattern[1] == "^"
        if negate:
            body = body[1:]
        members = set()
        i = 0
        while i < len(body):
            lo = body[i]
            if i + 2 < len(body) and body[i + 1] == "-":
                hi = body[i + 2]
                lo, hi = min(lo, hi), max(lo, hi)
                members |= {chr(x) for x in range(ord(lo), ord(hi) + 1)}
                i += 3
            else:
                members.add(lo)
                i += 1
        return (
            bool(subject)
            and (subject[0] in members) != negate
            and glob_reference(pattern[end + 1 :], subject[1:])
        )
    if c == "\\":
        c, pattern = pattern[1], pattern[1:]
    return bool(subject) and subject[0] == c and glob_reference(pattern[1:], subject[1:])


def sbus_reference(pattern: str, key: str) -> bool:
    """The sbus README rules, walked byte by byte."""
    if not pattern:
        return True
    i = j = 0
    while i < len(pattern):
        if pattern[i] == "*":
            while j < len(key) and key[j] != "/":
                j += 1
            i += 1
        elif i == len(pattern) - 1 and pattern[i] == "/":
            return j < len(key) and key[j] == "/"
        elif j < len(key) and pattern[i] == key[j]:
            i += 1
            j += 1
        else:
            return False
    return j == len(key)


# -- the seeds' own examples ---------------------------------------------------------------


def test_sbus_readme_example() -> None:
    p = compile_pattern("a/*/c/", "sbus")
    assert p.matches("a/b/c/") and p.matches("a/b/c/d/e")
    assert not p.matches("a/b/c") and not p.matches("a/c/d")
    assert (p.prefix, p.suffix, p.literal) == ("a/", "", False)


def test_sbus_empty_pattern_matches_everything() -> None:
    p = compile_pattern("", "sbus")
    assert all(p.matches(k) for k in ["", "a", "a/b/c", "!/cred/1/2/3/x", "\n/"])
    assert (p.prefix, p.suffix) == ("", "")


def test_sbus_star_stops_at_slash_and_may_be_empty() -> None:
    p = compile_pattern("a/*/c", "sbus")
    assert p.matches("a/xyz/c") and p.matches("a//c")
    assert not p.matches("a/x/y/c")
    assert compile_pattern("a/*", "sbus").matches("a/")
    assert not compile_pattern("a/*", "sbus").matches("a/b/c")
    assert compile_pattern("*/c", "sbus").suffix == "/c"


def test_sbus_literal_pattern_matches_only_itself() -> None:
    p = compile_pattern("a/b", "sbus")
    assert p.literal and p.prefix == "a/b"
    assert p.matches("a/b") and not p.matches("a/b/c") and not p.matches("a/bc")


def test_sbus_cred_keys_and_reserved_bang() -> None:
    for ok in [
        "!/cred/100/1000/1111",
        "!/cred/whoami",
        "!/cred/1/2/3/!/cred/4/5/6/x",
        "a!",
        "b/!x",
    ]:
        validate_subject(ok, "sbus")
        compile_pattern(ok, "sbus")
    for bad, offset in [("!", 0), ("!/x", 0), ("a/!", 2), ("a/!/b", 2), ("!/cred", 0)]:
        with pytest.raises(InvalidSubject) as exc:
            validate_subject(bad, "sbus")
        assert (exc.value.rule, exc.value.offset) == (Rule.RESERVED_BANG, offset)
        with pytest.raises(InvalidPattern):
            compile_pattern(bad, "sbus")


def test_sbus_nul_and_star_placement() -> None:
    with pytest.raises(InvalidSubject) as exc:
        validate_subject("a\x00b", "sbus")
    assert (exc.value.rule, exc.value.offset) == (Rule.NUL_BYTE, 1)
    with pytest.raises(InvalidPattern) as pexc:
        compile_pattern("a/*b/c", "sbus")
    assert (pexc.value.rule, pexc.value.offset) == (Rule.STAR_NOT_AT_SEGMENT_END, 2)
    validate_subject("a/*b", "sbus")  # a publish may carry '*'; it is never a wildcard


def test_rv_manual_examples() -> None:
    inbox = compile_pattern("_INBOX.7F000001.2202C25FE975070A48320.>", "rv")
    assert inbox.prefix == "_INBOX.7F000001.2202C25FE975070A48320."
    assert inbox.matches("_INBOX.7F000001.2202C25FE975070A48320.1")
    assert inbox.matches("_INBOX.7F000001.2202C25FE975070A48320.a.b.c")
    assert not inbox.matches("_INBOX.7F000001.2202C25FE975070A48320")
    x = compile_pattern("X.*", "rv")
    assert x.matches("X.Y") and x.matches("X.Z") and not x.matches("X.Y.Z")
    assert not x.matches("X")
    ab = compile_pattern("A.*.B", "rv")
    assert (ab.prefix, ab.suffix, ab.literal) == ("A.", ".B", False)
    assert ab.matches("A.x.B") and not ab.matches("A.x.y.B") and not ab.matches("A.B")
    validate_subject("_7500.RSF.REC.AVP.N", "rv")
    assert compile_pattern("_M.>", "rv").matches("_M.PING")


def test_rv_wildcards_inside_segments_are_literal() -> None:
    p = compile_pattern("A*.b>", "rv")
    assert p.literal and p.matches("A*.b>") and not p.matches("Ax.b>")
    assert compile_pattern(">", "rv").matches("a.b")
    assert compile_pattern("*", "rv").matches("a") and not compile_pattern("*", "rv").matches("a.b")


@pytest.mark.parametrize(
    ("text", "rule", "offset"),
    [
        ("", Rule.EMPTY_SUBJECT, 0),
        (".a", Rule.LEADING_DOT, 0),
        ("a.", Rule.TRAILING_DOT, 1),
        ("a..b", Rule.EMPTY_SEGMENT, 2),
        (".", Rule.LEADING_DOT, 0),
    ],
)
def test_rv_segment_rules(text: str, rule: Rule, offset: int) -> None:
    with pytest.raises(InvalidSubject) as exc:
        validate_subject(text, "rv")
    assert (exc.value.rule, exc.value.offset, exc.value.syntax) == (rule, offset, "rv")
    assert rule.value in str(exc.value) and repr(text) in str(exc.value)
    with pytest.raises(InvalidPattern) as pexc:
        compile_pattern(text, "rv")
    assert pexc.value.rule == rule


def test_rv_full_wildcard_must_be_last() -> None:
    with pytest.raises(InvalidPattern) as exc:
        compile_pattern("a.>.b", "rv")
    assert (exc.value.rule, exc.value.offset) == (Rule.FULL_WILDCARD_NOT_LAST, 2)
    validate_subject("a.>.b", "rv")  # publishing to wildcard text routes as a subject


def test_glob_manual_rules() -> None:
    q = compile_pattern("h?llo", "glob")
    assert q.matches("hello") and q.matches("hllo") and not q.matches("heello")
    s = compile_pattern("h*llo", "glob")
    assert s.matches("hllo") and s.matches("heeeello") and not s.matches("hll")
    b = compile_pattern("h[ae]llo", "glob")
    assert b.matches("hello") and b.matches("hallo") and not b.matches("hillo")
    n = compile_pattern("h[^e]llo", "glob")
    assert n.matches("hallo") and not n.matches("hello") and not n.matches("hllo")
    e = compile_pattern("h\\*llo", "glob")
    assert e.literal and e.prefix == "h*llo" and e.matches("h*llo") and not e.matches("hxllo")
    r = compile_pattern("[c-a]x", "glob")
    assert r.matches("bx") and not r.matches("dx")
    assert compile_pattern("[-a]", "glob").matches("-")
    assert compile_pattern("[a-]", "glob").matches("-")
    assert compile_pattern("[\\]]", "glob").matches("]")
    dot = compile_pattern("a.b", "glob")
    assert dot.literal and not dot.matches("axb")
    star = compile_pattern("ab*cd*ef", "glob")
    assert (star.prefix, star.suffix) == ("ab", "ef")


@pytest.mark.parametrize(
    ("text", "rule", "offset"),
    [
        ("a[bc", Rule.UNTERMINATED_BRACKET, 1),
        ("a[b\\", Rule.UNTERMINATED_BRACKET, 1),
        ("[]", Rule.EMPTY_BRACKET, 0),
        ("x[^]", Rule.EMPTY_BRACKET, 1),
        ("ab\\", Rule.DANGLING_ESCAPE, 2),
    ],
)
def test_glob_malformed(text: str, rule: Rule, offset: int) -> None:
    with pytest.raises(InvalidPattern) as exc:
        compile_pattern(text, "glob")
    assert (exc.value.rule, exc.value.offset) == (rule, offset)


def test_glob_subjects_have_no_rules_but_length() -> None:
    for s in ["", "a..b", ".", "*?[", "\x00"]:
        validate_subject(s, "glob")


@pytest.mark.parametrize("syntax", ["rv", "glob", "sbus"])
def test_length_limit(syntax: str) -> None:
    ok = "a" * MAX_SUBJECT_LEN
    validate_subject(ok, syntax)  # type: ignore[arg-type]
    with pytest.raises(InvalidSubject) as exc:
        validate_subject(ok + "b", syntax)  # type: ignore[arg-type]
    assert exc.value.rule == Rule.SUBJECT_TOO_LONG and str(MAX_SUBJECT_LEN + 1) in str(exc.value)
    with pytest.raises(InvalidPattern):
        compile_pattern("\u00e9" * (MAX_SUBJECT_LEN // 2 + 1), syntax)  # type: ignore[arg-type]


def test_unknown_syntax_and_error_hierarchy() -> None:
    with pytest.raises(InvalidPattern) as exc:
        compile_pattern("a", "pcre")  # type: ignore[arg-type]
    assert exc.value.rule == Rule.UNKNOWN_SYNTAX
    assert issubclass(InvalidSubject, SubjectError) and issubclass(SubjectError, RaimsError)


def test_bytes_subjects_round_trip() -> None:
    raw = b"\xff\xfe.a"
    assert subject_bytes(subject_text(raw)) == raw
    p = compile_pattern(b"\xff\xfe.*", "rv")
    assert p.matches(raw) and not p.matches(b"\xff.a")
    assert subject_bytes(p.prefix) == b"\xff\xfe."
    assert compile_pattern("\u00e9.*", "rv").matches("\u00e9.x".encode())


def test_regex_compatibility() -> None:
    """Code written against the regex form keeps working: `regex.fullmatch`."""
    p = compile_pattern("a/*/c/", "sbus")
    assert p.regex.fullmatch("a/b/c/d") is not None and p.regex.fullmatch("a/b/c") is None


def test_pattern_equality_is_text_and_syntax() -> None:
    assert compile_pattern("a.*", "rv") == compile_pattern("a.*", "rv")
    assert compile_pattern("a.*", "rv") != compile_pattern("a.*", "glob")
    assert len({compile_pattern("a.*", "rv"), compile_pattern("a.*", "rv")}) == 1


# -- properties against the references -----------------------------------------------------

RV_SEGMENT = st.text(alphabet="ab*>", min_size=1, max_size=3)
RV_TEXT = st.lists(RV_SEGMENT, min_size=1, max_size=4).map(".".join)


@settings(max_examples=300, deadline=None)
@given(RV_TEXT, RV_TEXT)
def test_rv_matches_reference(pattern: str, subject: str) -> None:
    try:
        p = compile_pattern(pattern, "rv")
    except InvalidPattern as exc:
        assert exc.rule == Rule.FULL_WILDCARD_NOT_LAST
        return
    assert p.matches(subject) == rv_reference(pattern, subject)


GLOB_PATTERN = st.lists(
    st.sampled_from(["a", "b", ".", "*", "?", "[ab]", "[^a]", "[a-b]", "\\*", "\\?", "\\["]),
    max_size=6,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(GLOB_PATTERN, st.text(alphabet="ab.*?[c", max_size=6))
def test_glob_matches_reference(pattern: str, subject: str) -> None:
    assert compile_pattern(pattern, "glob").matches(subject) == glob_reference(pattern, subject)


SBUS_PATTERN = st.lists(st.sampled_from(["a", "b", "/", "*/", "*", "!a"]), max_size=6).map("".join)


@settings(max_examples=300, deadline=None)
@given(SBUS_PATTERN, st.text(alphabet="ab/", max_size=7))
def test_sbus_matches_reference(pattern: str, key: str) -> None:
    try:
        p = compile_pattern(pattern, "sbus")
    except InvalidPattern as exc:
        assert exc.rule in (Rule.STAR_NOT_AT_SEGMENT_END, Rule.RESERVED_BANG)
        return
    assert p.matches(key) == sbus_reference(pattern, key)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(["rv", "glob", "sbus"]),
    st.text(alphabet="ab./*>?[]^\\-", max_size=8),
    st.text(alphabet="ab./*>?[]^\\-", max_size=8),
)
def test_prefix_suffix_invariant(syntax: str, pattern: str, subject: str) -> None:
    """What the bloom filter relies on: a match starts with prefix, ends with suffix and
    holds both without overlap; a literal pattern matches only its prefix."""
    try:
        p = compile_pattern(pattern, syntax)  # type: ignore[arg-type]
    except InvalidPattern:
        return
    if p.literal:
        assert p.suffix == "" and p.matches(subject) == (subject == p.prefix)
        assert p.matches(p.prefix)
    if p.matches(subject):
        assert subject.startswith(p.prefix) and subject.endswith(p.suffix)
        assert len(subject) >= len(p.prefix) + len(p.suffix)
