"""COMMAND, COMMAND INFO | LIST | GETKEYS | GETKEYSANDFLAGS | DOCS | COUNT of a node's
Redis transport against Debian's redis-server 7.0.15, in RESP2 and RESP3 (kv_diff.py).

redis-server answers more commands than raims; where a reply lists commands (COMMAND
LIST, a container's subcommands) raims's is compared with redis-server's restricted to
the names raims answers, and replies in redis-server's hash order are compared as
sorted values."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.integration.kv_diff import Pair, cmds, parse
from tests.unit.test_kv_cmdinfo import command_tree

TREE = command_tree()
ALL = sorted(n for name, subs in TREE.items() for n in (name, *subs))
NEWER = {"client|setinfo"}  # redis 7.2's: not in redis-server 7.0.15
OLDER = [n for n in ALL if n not in NEWER]


def canon(v: Any, answered: set[bytes] | None = None) -> Any:
    """A parsed reply with its sets sorted; with `answered`, an info entry's subcommand
    array and a docs map's subcommands only keep those names, sorted."""
    if isinstance(v, tuple) and isinstance(v[1], list):
        kind, items = v
        if answered is not None and kind in (b"%", b"*") and b"subcommands" in items[::2]:
            i = items.index(b"subcommands") + 1
            subs = items[i][1]
            keep = [(subs[j], subs[j + 1]) for j in range(0, len(subs), 2) if subs[j] in answered]
            items = [*items[:i], (b"%", [x for pair in sorted(keep, key=repr) for x in pair]), *items[i + 1:]]
        if answered is not None and kind == b"*" and len(items) == 10 and items[0] in answered \
                and isinstance(items[9], tuple):
            subs = [e for e in items[9][1] if e[1][0] in answered]
            items = [*items[:9], (b"*", sorted(subs, key=repr))]
        items = [canon(x, answered) for x in items]
        if kind == b"~":
            items = sorted(items, key=repr)
        return kind, items
    return v


def check_canon(pair: Pair, cmd: list[bytes]) -> None:
    answered = {n.encode() for n in OLDER}
    ref, us = (canon(parse(c.call(cmd)), answered) for c in (pair.ref, pair.us))
    assert us == ref, f"{b' '.join(cmd)!r}: redis-server {ref!r}, raims {us!r}"


# ------------------------------------------------------------ COMMAND INFO, COMMAND

def test_command_info_of_every_command_byte_for_byte(pair: Pair) -> None:
    """A command without subcommands, and every subcommand by its full name: the same bytes."""
    pair.check([[b"COMMAND", b"INFO", name.encode()] for name in OLDER if not TREE.get(name)])


def test_command_info_of_containers(pair: Pair) -> None:
    for name in (n for n, subs in TREE.items() if subs):
        check_canon(pair, [b"COMMAND", b"INFO", name.encode()])


def test_command_info_several_unknown_and_case(pair: Pair) -> None:
    pair.check(cmds("""
    COMMAND INFO get nosuch set
    COMMAND INFO GET SeT ZADD
    COMMAND INFO nosuch
    COMMAND INFO client|nosuch
    COMMAND INFO CLIENT|LIST get|x
    COMMAND INFO get get
    command info xread xreadgroup sort sort_ro georadius bitfield lmpop zunionstore
    COMMAND NOSUCH
    COMMAND INFO ||
    """))


def test_command_and_command_info_list_every_command(pair: Pair) -> None:
    """COMMAND (hash order on redis-server): raims's entries are redis-server's for the
    commands raims answers, and one for each."""
    for cmd in ([b"COMMAND"], [b"COMMAND", b"INFO"]):
        answered = {n.encode() for n in OLDER}
        ref = canon(parse(pair.ref.call(cmd)), answered)
        us = canon(parse(pair.us.call(cmd)), answered)
        ref_entries = sorted((e for e in ref[1] if e[1][0] in answered), key=repr)
        us_entries = sorted((e for e in us[1] if e[1][0] in answered), key=repr)
        assert us[0] == ref[0] and us_entries == ref_entries
        assert sorted(e[1][0] for e in us[1]) == sorted(n.encode() for n in TREE)


# ------------------------------------------------------------ COMMAND LIST, COUNT

LIST_FILTERS = """
COMMAND LIST
COMMAND LIST FILTERBY PATTERN *
COMMAND LIST FILTERBY PATTERN x*
COMMAND LIST FILTERBY PATTERN *|*
COMMAND LIST FILTERBY PATTERN CLIENT*
COMMAND LIST FILTERBY PATTERN z[a-i]*
COMMAND LIST FILTERBY PATTERN [^a-y]???
COMMAND LIST FILTERBY PATTERN ?et
COMMAND LIST FILTERBY PATTERN nosuch
COMMAND LIST filterby pattern \\g*
COMMAND LIST FILTERBY ACLCAT read
COMMAND LIST FILTERBY ACLCAT WRITE
COMMAND LIST FILTERBY ACLCAT @read
COMMAND LIST FILTERBY ACLCAT keyspace
COMMAND LIST FILTERBY ACLCAT string
COMMAND LIST FILTERBY ACLCAT stream
COMMAND LIST FILTERBY ACLCAT blocking
COMMAND LIST FILTERBY ACLCAT connection
COMMAND LIST FILTERBY ACLCAT pubsub
COMMAND LIST FILTERBY ACLCAT dangerous
COMMAND LIST FILTERBY ACLCAT fast
COMMAND LIST FILTERBY ACLCAT slow
COMMAND LIST FILTERBY ACLCAT admin
COMMAND LIST FILTERBY ACLCAT nosuch
COMMAND LIST FILTERBY MODULE nosuch
COMMAND LIST FILTERBY MODULE redisgears
"""


@pytest.mark.parametrize("line", cmds(LIST_FILTERS), ids=lambda c: b" ".join(c[2:]).decode() or "all")
def test_command_list_filters(pair: Pair, line: list[bytes]) -> None:
    answered = {n.encode() for n in OLDER}
    ref, us = (parse(c.call(line)) for c in (pair.ref, pair.us))
    assert us[0] == ref[0] == b"*"
    assert sorted(n for n in us[1] if n.decode() not in NEWER) == sorted(n for n in ref[1] if n in answered)


def test_command_list_errors(pair: Pair) -> None:
    pair.check(cmds("""
    COMMAND LIST FILTERBY
    COMMAND LIST FILTERBY PATTERN
    COMMAND LIST FILTERBY PATTERN a b
    COMMAND LIST FILTERBY NOSUCH x
    COMMAND LIST NOSUCH
    COMMAND LIST FILTERBY PATTERN a FILTERBY PATTERN b
    COMMAND COUNT x
    COMMAND DOCS
    """)[:7])


def test_count_is_commands_and_list_adds_subcommands(pair: Pair) -> None:
    """COMMAND COUNT counts the top-level commands, as COMMAND lists them; COMMAND LIST
    also names the subcommands (redis-server's invariants, checked on both)."""
    for c in (pair.ref, pair.us):
        count = int(c.call([b"COMMAND", b"COUNT"])[1:-2])
        entries = parse(c.call([b"COMMAND"]))[1]
        listed = parse(c.call([b"COMMAND", b"LIST"]))[1]
        assert count == len(entries) == len(parse(c.call([b"COMMAND", b"INFO"]))[1])
        assert len(listed) == count + sum(len(e[1][9][1]) for e in entries)
    assert int(pair.us.call([b"COMMAND", b"COUNT"])[1:-2]) == len(TREE)


# ------------------------------------------------------------ GETKEYS, GETKEYSANDFLAGS

FILLERS = ([b"k1", b"k2", b"k3", b"k4", b"k5", b"k6", b"k7"],
           [b"2", b"k1", b"k2", b"k3", b"k4", b"k5", b"k6"],
           [b"k1", b"2", b"k2", b"k3", b"STORE", b"d", b"k4"],
           [b"k1", b"0", b"1", b"m", b"km", b"STORE", b"d"])


def generated_getkeys() -> list[list[bytes]]:
    """Every command raims answers, at its minimal argument count and a few more, with
    keys, a numkeys, a STORE: what redis-server's key specs and key functions read."""
    lines: dict[tuple[bytes, ...], None] = {}
    for name in OLDER:
        head = [part.encode() for part in name.split("|")]
        for fill in FILLERS:
            for extra in range(0, 8 - len(head)):
                lines[(b"COMMAND", b"GETKEYS", *head, *fill[:extra])] = None
    return [list(line) for line in lines]


GETKEYS = """
COMMAND GETKEYS
COMMAND GETKEYS nosuch a
COMMAND GETKEYS get
COMMAND GETKEYS get a b
COMMAND GETKEYS ping
COMMAND GETKEYS client list
COMMAND GETKEYS client
COMMAND GETKEYS client nosuch
COMMAND GETKEYS xinfo stream s
COMMAND GETKEYS xinfo nosuch s
COMMAND GETKEYS XGROUP CREATE s g $ MKSTREAM
COMMAND GETKEYS mset a 1 b 2 c 3
COMMAND GETKEYS mset a 1 b
COMMAND GETKEYS zunionstore d 2 a b WEIGHTS 1 2
COMMAND GETKEYS zunionstore d 0 a
COMMAND GETKEYS zunionstore d 3 a b
COMMAND GETKEYS zunionstore d -1 a b
COMMAND GETKEYS zunionstore d 2abc a b
COMMAND GETKEYS zunionstore d " 2" a b
COMMAND GETKEYS zunionstore d 02 a b
COMMAND GETKEYS zunionstore d +2 a b
COMMAND GETKEYS zunionstore d x a b
COMMAND GETKEYS zunion 2 a b WITHSCORES
COMMAND GETKEYS zinter 1 a
COMMAND GETKEYS zdiff 3 a b
COMMAND GETKEYS zintercard 2 a b LIMIT 1
COMMAND GETKEYS sintercard 2 a b
COMMAND GETKEYS sintercard 9999999999 a b
COMMAND GETKEYS lmpop 2 a b LEFT
COMMAND GETKEYS blmpop 0 2 a b LEFT COUNT 2
COMMAND GETKEYS blmpop 0 x a b LEFT
COMMAND GETKEYS zmpop 1 a MIN
COMMAND GETKEYS bzmpop 1 1 a MAX
COMMAND GETKEYS sort k
COMMAND GETKEYS sort k STORE d
COMMAND GETKEYS sort k BY w STORE d GET x LIMIT 0 1 STORE e
COMMAND GETKEYS sort k LIMIT store x STORE
COMMAND GETKEYS sort k by store
COMMAND GETKEYS sort_ro k BY w GET x
COMMAND GETKEYS georadius k 1 2 3 km STORE d
COMMAND GETKEYS georadius k 1 2 3 km STOREDIST d STORE e
COMMAND GETKEYS georadius k 1 2 3 km STORE
COMMAND GETKEYS georadius k 1 2 3 km WITHDIST
COMMAND GETKEYS georadiusbymember k m 3 km STOREDIST d
COMMAND GETKEYS geosearchstore d s FROMMEMBER m BYRADIUS 1 km
COMMAND GETKEYS xread STREAMS a b 0 0
COMMAND GETKEYS xread COUNT 1 BLOCK 0 STREAMS a 0
COMMAND GETKEYS xread STREAMS a b 0
COMMAND GETKEYS xread COUNT 1 STREAMS
COMMAND GETKEYS xread COUNT 1 x y
COMMAND GETKEYS xreadgroup GROUP g c NOACK STREAMS a 0
COMMAND GETKEYS xreadgroup GROUP g c STREAMS a
COMMAND GETKEYS set a b
COMMAND GETKEYS set a b NX GET
COMMAND GETKEYS bitfield k GET u8 0
COMMAND GETKEYS bitfield_ro k GET u8 0
COMMAND GETKEYS lcs a b
COMMAND GETKEYS blpop a b c 0
COMMAND GETKEYS del a b c
COMMAND GETKEYS rename a b
COMMAND GETKEYS copy a b DB 1
COMMAND GETKEYS pfcount a b
COMMAND GETKEYS bitop AND d a b
COMMAND GETKEYS object encoding k
COMMAND GETKEYS publish ch m
COMMAND GETKEYS subscribe a b
COMMAND GETKEYS multi
COMMAND GETKEYS watch a b
COMMAND GETKEYS command getkeys get a
"""


def test_getkeys_hand_written(pair: Pair) -> None:
    lines = cmds(GETKEYS)
    lines[18] = [b"COMMAND", b"GETKEYS", b"zunionstore", b"d", b" 2", b"a", b"b"]
    pair.check(lines)
    pair.check([[b"COMMAND", b"GETKEYSANDFLAGS", *line[2:]] for line in lines])


def test_getkeys_generated_for_every_command(pair: Pair) -> None:
    lines = generated_getkeys()
    pair.check(lines)
    pair.check([[b"COMMAND", b"GETKEYSANDFLAGS", *line[2:]] for line in lines])


# ------------------------------------------------------------ COMMAND DOCS

def test_command_docs_of_every_command(pair: Pair) -> None:
    """One command at a time (byte for byte without subcommands), containers with the
    subcommands raims answers."""
    pair.check([[b"COMMAND", b"DOCS", name.encode()] for name in sorted(TREE) if not TREE[name]])
    for name in (n for n, subs in TREE.items() if subs):
        check_canon(pair, [b"COMMAND", b"DOCS", name.encode()])


def test_command_docs_several_and_unknown(pair: Pair) -> None:
    pair.check(cmds("""
    COMMAND DOCS get nosuch set
    COMMAND DOCS nosuch
    COMMAND DOCS GET ZADD xadd
    COMMAND DOCS client|list
    COMMAND DOCS get get
    """))


TOKENS = [b"k", b"d", b"0", b"1", b"2", b"3", b"-1", b"2x", b"STORE", b"STOREDIST", b"STREAMS", b"GET", b"BY",
          b"LIMIT", b"GROUP", b"COUNT", b"SET", b"u8", b"km", b"WEIGHTS", b"stream", b"encoding"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(sorted(n for n in TREE if n not in NEWER)),
       rest=st.lists(st.sampled_from(TOKENS), max_size=8), flags=st.booleans())
def test_getkeys_hypothesis(pair: Pair, name: str, rest: list[bytes], flags: bool) -> None:
    """Any command raims answers with arguments drawn from keywords, numbers and keys."""
    pair.check([[b"COMMAND", b"GETKEYSANDFLAGS" if flags else b"GETKEYS", name.encode(), *rest]])
