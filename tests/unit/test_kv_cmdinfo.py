"""COMMAND INFO's / DOCS' table (redis_docs.py) and COMMAND GETKEYS' key finding
(redis_command_info.py), without a network."""

from __future__ import annotations

import pytest

from raims_node.bridges import redis_docs
from raims_node.bridges.redis_admin import data_tree
from raims_node.bridges.redis_command_info import _atoi, _strict_int, get_keys
from raims_node.bridges.redis_session import _COMMANDS, session_command_tree
from raims_node.kv.commands import COMMANDS, load_families
from raims_node.kv.reply import Map, SetReply, Simple, encode


def command_tree() -> dict[str, list[str]]:
    """Every top-level command a connection with a map runs -> its subcommands."""
    load_families()
    tree = session_command_tree()
    for name, subs in data_tree().items():
        tree.setdefault(name, subs)
    return tree


def test_table_covers_exactly_the_commands_raims_answers() -> None:
    """A command added to the session table or the map's COMMANDS (or a container's
    subcommands) without its entry fails here: rerun scripts/gen_redis_commands.py."""
    tree = command_tree()
    answered = set(tree) | {sub for subs in tree.values() for sub in subs}
    assert redis_docs.names() == answered
    assert set(redis_docs._raw()["docs"]) == answered
    assert redis_docs._raw()["version"] == "7.0.15"


def test_arities_are_the_tables() -> None:
    """The dispatch's arity is the one COMMAND INFO reports (PUBLISH takes raims's optional
    reply subject: -3 where redis-server has 3)."""
    for cmd in _COMMANDS.values():
        for c in (cmd, *(cmd.subcommands or {}).values()):
            entry = redis_docs.raw_info(c.fullname)
            assert entry is not None and (entry[1] == c.arity or c.fullname == "publish"), c.fullname
    load_families()
    for data in COMMANDS.values():
        entry = redis_docs.raw_info(data.name)
        assert entry is not None and entry[1] == data.arity, data.name


def test_stored_values_become_reply_values() -> None:
    v = redis_docs.reply_value(["a", 1, None, {"+": "ok"}, {"~": ["x"]}, {"%": ["k", 2]}])
    assert v == [b"a", 1, None, Simple(b"ok"), SetReply([b"x"]), Map([(b"k", 2)])]
    assert encode(v, 2) == b"*6\r\n$1\r\na\r\n:1\r\n$-1\r\n+ok\r\n*1\r\n$1\r\nx\r\n*2\r\n$1\r\nk\r\n:2\r\n"
    assert encode(v, 3) == b"*6\r\n$1\r\na\r\n:1\r\n_\r\n+ok\r\n~1\r\n$1\r\nx\r\n%1\r\n$1\r\nk\r\n:2\r\n"


def test_entries_carry_the_subcommands_asked_for() -> None:
    entry = redis_docs.command_info("client", ["client|id"])
    assert entry[0] == b"client" and len(entry) == 10 and entry[9].items[0][0] == b"client|id"
    assert redis_docs.command_info("client|id", [])[9] == SetReply([])
    doc = redis_docs.command_doc("client", ["client|id"])
    assert doc.pairs[-1][0] == b"subcommands" and doc.pairs[0] == (b"summary", b"A container for client "
                                                                   b"connection commands")
    assert redis_docs.command_doc("client", ["client|id"]) == doc  # the cached entries are not changed


def _keys(line: str) -> list[tuple[bytes, tuple[str, ...]]] | str:
    argv = line.encode().split()
    keys = get_keys(command_tree(), argv)
    return keys if isinstance(keys, str) else [(argv[i], flags) for i, flags in keys]


@pytest.mark.parametrize(("line", "want"), [
    ("get k", [(b"k", ("RO", "access"))]),
    ("mset a 1 b 2", [(b"a", ("OW", "update")), (b"b", ("OW", "update"))]),
    ("zunionstore d 2 a b WEIGHTS 1 2", [(b"d", ("OW", "update")), (b"a", ("RO", "access")),
                                         (b"b", ("RO", "access"))]),
    ("zunionstore d 2x a b", [(b"a", ()), (b"b", ()), (b"d", ())]),  # atoi: the key function's order
    ("zunionstore d 3 a b", "Invalid arguments specified for command"),
    ("xread COUNT 2 STREAMS a b 0 0", [(b"a", ("RO", "access")), (b"b", ("RO", "access"))]),
    ("sort k BY w STORE d LIMIT 0 1 STORE e", [(b"k", ("RO", "access")), (b"e", ("OW", "update"))]),
    ("set k v GET", [(b"k", ("RW", "access", "update"))]),
    ("bitfield k GET u8 0", [(b"k", ("RO", "access"))]),
    ("georadius k 1 2 3 km STORE", [(b"k", ("RO", "access"))]),  # the last argument is never a keyword
    ("georadius k 1 2 3 km STORE d WITHDIST", [(b"k", ("RO", "access")), (b"d", ("OW", "update"))]),
    ("xinfo stream s", [(b"s", ("RO", "access"))]),
    ("xinfo nosuch s", "Invalid command specified"),
    ("nosuch k", "Invalid command specified"),
    ("ping", "The command has no key arguments"),
    ("get", "Invalid number of arguments specified for command"),
])
def test_get_keys(line: str, want: object) -> None:
    assert _keys(line) == want


def test_integer_readers() -> None:
    assert [_strict_int(b) for b in (b"0", b"12", b"-3", b"-0", b"01", b"+1", b" 1", b"", b"9" * 20)] == [
        0, 12, -3, None, None, None, None, None, None]
    assert [_atoi(b) for b in (b" 2x", b"-3", b"+4", b"x", b"", b"9" * 30)] == [2, -3, 4, 0, 0, (1 << 31) - 1]
