"""The subject index (token trees, glob buckets, result cache) against brute-force
references for each syntax, over random patterns and subjects, with removals."""

from __future__ import annotations

import time
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raims_node.subject import InvalidPattern, Rule, compile_pattern
from raims_node.subject.index import PatternIndex, SubjectIndex
from raims_node.subject.text import Syntax
from tests.unit.test_subject_patterns import glob_reference, sbus_reference

# -- brute-force references, by the regular-expression meaning the manual gives -----------


def rv_reference(pattern: str, subject: str) -> bool:
    """RV '*' is one or more characters other than '.', a trailing '>' one or more of
    any; tried at every split point (exponential, fine for short texts). Unlike the
    segment reference of test_subject_patterns, it takes any subject, '..' included."""
    parts: list[str | None] = []  # a literal run, None for '*', '>' for the rest
    for i, seg in enumerate(pattern.split(".")):
        if i:
            parts.append(".")
        parts.append(None if seg == "*" else ">" if seg == ">" and i == pattern.count(".") else seg)

    @cache
    def at(k: int, j: int) -> bool:
        if k == len(parts):
            return j == len(subject)
        part = parts[k]
        if part is None:
            return any(at(k + 1, e) for e in range(j + 1, len(subject) + 1) if "." not in subject[j:e])
        if part == ">" and k == len(parts) - 1:
            return j < len(subject)
        return subject.startswith(part, j) and at(k + 1, j + len(part))

    return at(0, 0)


REFERENCE = {"rv": rv_reference, "glob": glob_reference, "sbus": sbus_reference}

RV_PATTERN = st.lists(st.sampled_from(["a", "b", "ab", "*", ">"]), min_size=1, max_size=4).map(".".join)
GLOB_PATTERN = st.lists(
    st.sampled_from(["a", "b", ".", "/", "*", "?", "[ab]", "[^a]", "[a-b]", "\\*", "\\?"]), max_size=6
).map("".join)
SBUS_PATTERN = st.lists(st.sampled_from(["a", "b", "/", "*/", "*", "a*"]), max_size=6).map("".join)
PATTERN_OF = {"rv": RV_PATTERN, "glob": GLOB_PATTERN, "sbus": SBUS_PATTERN}
SUBJECT = st.text(alphabet="ab./*", max_size=8)
SYNTAX = st.sampled_from(["rv", "glob", "sbus"])


@st.composite
def pattern_sets(draw: st.DrawFn) -> list[tuple[Syntax, str]]:
    out = []
    for syntax in draw(st.lists(SYNTAX, min_size=1, max_size=12)):
        out.append((syntax, draw(PATTERN_OF[syntax])))
    return out


def _compiled(patterns: list[tuple[Syntax, str]]) -> list[tuple[Syntax, str]]:
    valid = []
    for syntax, text in patterns:
        try:
            compile_pattern(text, syntax)
        except InvalidPattern:
            continue
        valid.append((syntax, text))
    return valid


def _expected(patterns: list[tuple[Syntax, str]], live: list[int], subject: str) -> list[int]:
    return sorted(i for i in live if REFERENCE[patterns[i][0]](patterns[i][1], subject))


@settings(max_examples=400, deadline=None)
@given(pattern_sets(), st.lists(SUBJECT, min_size=1, max_size=8), st.data())
def test_index_matches_references(raw: list[tuple[Syntax, str]], subjects: list[str],
                                  data: st.DataObject) -> None:
    """Every syntax in one index: the values found are those whose pattern the reference
    accepts; still so after removing a random part of them (the tree is pruned)."""
    patterns = _compiled(raw)
    index: PatternIndex[int] = PatternIndex()
    values = list(range(len(patterns)))  # small ints are shared objects: wrap for identity
    boxes = [[i] for i in values]
    for i, (syntax, text) in enumerate(patterns):
        index.add(compile_pattern(text, syntax), boxes[i])  # type: ignore[arg-type]
    live = list(values)
    for s in subjects:
        found: list[list[int]] = []
        index.match(s, found)  # type: ignore[arg-type]
        assert sorted(b[0] for b in found) == _expected(patterns, live, s), s
    gone = data.draw(st.sets(st.sampled_from(values))) if values else set()
    for i in gone:
        syntax, text = patterns[i]
        assert index.remove(compile_pattern(text, syntax), boxes[i])  # type: ignore[arg-type]
        assert not index.remove(compile_pattern(text, syntax), boxes[i])  # type: ignore[arg-type]
    live = [i for i in values if i not in gone]
    assert len(index) == len(live)
    for s in subjects:
        found = []
        index.match(s, found)  # type: ignore[arg-type]
        assert sorted(b[0] for b in found) == _expected(patterns, live, s), s


@pytest.mark.parametrize("syntax", ["rv", "glob", "sbus"])
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_single_pattern_matches_reference(syntax: Syntax, data: st.DataObject) -> None:
    text = data.draw(PATTERN_OF[syntax])
    subject = data.draw(SUBJECT)
    try:
        p = compile_pattern(text, syntax)
    except InvalidPattern:
        return
    assert p.matches(subject) == REFERENCE[syntax](text, subject)


def test_seed_examples_in_the_index() -> None:
    """sbus seed "Routing keys": 'a/*/c/' takes 'a/b/c/' and 'a/b/c/d/e', not 'a/b/c'
    or 'a/c/d'; the empty pattern takes everything. Manual: RV '*' and '>'."""
    index: SubjectIndex[str] = SubjectIndex()
    for syntax, text in [("sbus", "a/*/c/"), ("sbus", ""), ("rv", "X.*"), ("rv", "_INBOX.7F.>"),
                         ("rv", "A.*.B"), ("glob", "h?llo"), ("glob", "h[^e]llo")]:
        index.add_pattern(compile_pattern(text, syntax), f"{syntax}:{text}")  # type: ignore[arg-type]
    assert set(index.match("a/b/c/")) == {"sbus:a/*/c/", "sbus:"}
    assert set(index.match("a/b/c/d/e")) == {"sbus:a/*/c/", "sbus:"}
    assert set(index.match("a/b/c")) == {"sbus:"} == set(index.match("a/c/d"))
    assert set(index.match("X.Y")) == {"rv:X.*", "sbus:"}
    assert "rv:X.*" not in index.match("X.Y.Z") and "rv:X.*" not in index.match("X")
    assert "rv:_INBOX.7F.>" in index.match("_INBOX.7F.a.b") and "rv:_INBOX.7F.>" not in index.match("_INBOX.7F")
    assert "rv:A.*.B" in index.match("A.x.B") and "rv:A.*.B" not in index.match("A.x.y.B")
    assert {"glob:h?llo", "glob:h[^e]llo"} <= set(index.match("hallo"))
    assert "glob:h?llo" in index.match("hllo") and "glob:h[^e]llo" not in index.match("hello")


def test_cache_follows_changes() -> None:
    """A cached result is forgotten when a change may alter it: an exact subject forgets
    its own entry, a wildcard pattern every entry; the cache stays within its limit."""
    index: SubjectIndex[str] = SubjectIndex(cache_limit=4)
    index.add_subject("a.b", "exact")
    assert index.match("a.b") == ("exact",) and index.match("a.c") == ()
    star = compile_pattern("a.*", "rv")
    index.add_pattern(star, "star")
    assert index.match("a.b") == ("exact", "star") and index.match("a.c") == ("star",)
    index.add_subject("a.c", "c")
    assert index.match("a.c") == ("c", "star") and index.match("a.b") == ("exact", "star")
    assert index.remove_pattern(star, "star") and not index.remove_pattern(star, "star")
    assert index.match("a.b") == ("exact",)
    literal = compile_pattern("a.d", "rv")
    index.add_pattern(literal, "lit")
    assert index.match("a.d") == ("lit",)
    assert len(index) == 3
    assert index.remove_subject("a.b", "exact") and index.match("a.b") == ()
    assert not index.remove_subject("a.b", "exact") and len(index) == 2
    for i in range(10):
        index.match(f"x.{i}")
    assert index.cached <= 4


def test_equal_values_are_kept_apart() -> None:
    """Removal is by identity: two equal values on one pattern stay two."""
    index: PatternIndex[list[int]] = PatternIndex()
    p = compile_pattern("a.>", "rv")
    one, two = [1], [1]
    index.add(p, one)
    index.add(p, two)
    assert index.remove(p, two)
    found: list[list[int]] = []
    index.match("a.b", found)
    assert len(found) == 1 and found[0] is one


def test_shared_prefixes_and_pruning() -> None:
    """Many patterns under one literal path; removing all leaves an empty tree."""
    index: PatternIndex[str] = PatternIndex()
    texts = [f"svc.{i}.*.x" for i in range(200)] + [f"svc.{i}.>" for i in range(200)] + ["svc.*.*.x"]
    for t in texts:
        index.add(compile_pattern(t, "rv"), t)
    found: list[str] = []
    index.match("svc.7.q.x", found)
    assert sorted(found) == sorted(["svc.7.*.x", "svc.7.>", "svc.*.*.x"])
    for t in texts:
        assert index.remove(compile_pattern(t, "rv"), t)
    tree = next(iter(index._trees.values()))
    assert tree.root.empty() and tree.depth == 0


def test_glob_buckets_try_only_fitting_globs() -> None:
    """A glob is run only when its literal prefix and suffix fit the subject."""
    index: PatternIndex[str] = PatternIndex()
    for i in range(500):
        index.add(compile_pattern(f"k{i}:*:v", "glob"), f"k{i}")
    index.add(compile_pattern("*", "glob"), "all")
    calls = 0
    for group in index._globs.groups.values():
        for text, (matcher, values) in list(group.items()):
            def counted(s: str, m=matcher.match) -> bool:  # type: ignore[no-untyped-def]
                nonlocal calls
                calls += 1
                return m(s)
            group[text] = (type("M", (), {"match": staticmethod(counted)})(), values)  # type: ignore[assignment]
    found: list[str] = []
    index.match("k42:x:v", found)
    assert sorted(found) == ["all", "k42"] and calls == 2


def test_glob_wild_pieces_are_bounded() -> None:
    """A piece with '?' or classes costs one state bit per character: past 1024 such
    characters the glob is refused (a typed error), plain pieces are not limited, and
    the largest allowed glob against the longest subject stays fast."""
    with pytest.raises(InvalidPattern) as exc:
        compile_pattern("*" + "?a" * 600 + "*", "glob")
    assert exc.value.rule == Rule.GLOB_TOO_COMPLEX
    compile_pattern("*" + "ab" * 20000 + "*", "glob")
    p = compile_pattern("*" + "?a" * 511 + "x*c", "glob")
    t0 = time.process_time()
    assert not p.matches("a" * 65000 + "c")
    assert time.process_time() - t0 < 1.0


@pytest.mark.parametrize(("pattern", "subject", "expected"), [
    ("a*a*a*a*a*a*a*a*a*a*b", "a" * 30, False),
    ("a*a*a*a*a*a*a*a*a*a*b", "a" * 30 + "b", True),
    ("*a?a?a?a?a?a?a?a?a?a?*b", "a" * 5000, False),
    ("[ab]*[ab]*[ab]*[ab]*[ab]*[ab]*c", "ab" * 5000, False),
])
def test_glob_worst_cases_are_fast(pattern: str, subject: str, expected: bool) -> None:
    """Python's backtracking regex took 11 s on the first; a linear matcher takes far
    below a millisecond for short subjects, a few ms for 10,000 characters. CPU time, with
    room: a loaded machine's scheduler is not what this measures."""
    p = compile_pattern(pattern, "glob")
    t0 = time.process_time()
    assert p.matches(subject) is expected
    assert time.process_time() - t0 < (0.05 if len(subject) < 100 else 0.5)


def test_local_table_owners_queues_and_shards() -> None:
    """The node's table on the index: an owner's subscriptions go with it, references
    decide the network edges, a shardcast pattern takes only the subjects of its shard."""
    from raims_node.bloom import Shard, shard_of, subject_hash
    from raims_node.router.localsubs import LocalSubs

    table = LocalSubs()
    a, b = object(), object()
    assert table.add(a, "1", "x.*", "rv").text_edge
    assert not table.add(b, "1", "x.*", "rv").text_edge
    table.add(b, "2", "x.y", None, queue="q")
    table.add(a, "3", "s.*", "rv", shard=Shard(1, 2))
    assert len(table) == 4 and {s.sid for s in table.match("x.y")} == {"1", "2"}
    in_shard = [f"s.{i}" for i in range(40) if shard_of(subject_hash(f"s.{i}".encode()), 2) == 1]
    out_shard = [f"s.{i}" for i in range(40) if f"s.{i}" not in in_shard]
    assert in_shard and out_shard
    assert all(len(table.match(s)) == 1 for s in in_shard) and not any(table.match(s) for s in out_shard)
    changes = table.drop_owner(a)
    assert len(changes) == 2 and len(table) == 2
    assert not any(c.text_edge for c in changes if c.sub.text == "x.*")
    assert [s.owner for s in table.match("x.z")] == [b] and table.match("s.1") == ()
    assert table.remove(b, "2") is not None and table.remove(b, "2") is None
    assert table.remove(b, "1") is not None and len(table) == 0 and table.match("x.y") == ()


def test_an_owner_that_unsubscribed_its_queue_members_is_forgotten() -> None:
    """A client that joins a queue group, leaves it (UNSUB) and then closes: its id was
    kept in the table's queue owners for ever (6,000 NATS connect/sub/unsub/close
    cycles: 450 ids per node, growing; churn-leaks)."""
    from raims_node.router.localsubs import LocalSubs

    table = LocalSubs()
    owners = []
    for i in range(200):
        owner = object()
        owners.append(owner)  # alive: ids are not reused
        table.add(owner, "1", f"jobs.{i}", None, queue="workers")
        table.add(owner, "2", f"x.{i}", None)
        assert table.remove(owner, "1") is not None and table.remove(owner, "2") is not None
        assert table.drop_owner(owner) == []
    assert len(table) == 0 and not table._queue_owners and not table._by_owner
