"""RESP request parser and encoders: fixtures, redis-server's error texts, limits,
split invariance, fuzzing."""

from __future__ import annotations

import random
import shutil
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raims_node.bridges import resp
from raims_node.bridges.resp import (
    MAX_INLINE,
    ArrayTooLong,
    BulkTooLarge,
    MalformedRequest,
    RequestTooLong,
    RespParser,
    RespProtocolError,
    UnbalancedQuotes,
    encode_array_header,
    encode_bulk,
    encode_bulks,
    encode_command,
    encode_error,
    encode_int,
    encode_map_header,
    encode_null,
    encode_push_header,
    encode_simple,
    parse_ll,
    split_inline,
)


@pytest.fixture(autouse=True, scope="module", params=["compiled", "python"])
def scan(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every test of this module on both batch scans: the compiled one and Python's."""
    before = resp.compiled_scan
    if request.param == "compiled" and resp._compiled_scan is None:
        pytest.skip("the compiled scan is not built (no C compiler at install)")
    resp.compiled_scan = resp._compiled_scan if request.param == "compiled" else None
    yield request.param
    resp.compiled_scan = before


def test_the_scan_is_compiled_where_a_compiler_is() -> None:
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if shutil.which("cc") is not None and headers.exists():
        assert resp._compiled_scan is not None, "make deps should have built raims_node/bridges/_resp_scan.c"


def parse(data: bytes, **kw: int) -> list[list[bytes]]:
    return RespParser(**kw).feed(data)


@pytest.mark.parametrize(("data", "commands"), [
    (b"*1\r\n$4\r\nPING\r\n", [[b"PING"]]),
    (b"*3\r\n$7\r\nPUBLISH\r\n$2\r\nch\r\n$4\r\n\r\n\x00\xff\r\n", [[b"PUBLISH", b"ch", b"\r\n\x00\xff"]]),
    (b"*2\r\n$4\r\nECHO\r\n$0\r\n\r\n", [[b"ECHO", b""]]),
    (b"PING\r\nECHO a  b\n", [[b"PING"], [b"ECHO", b"a", b"b"]]),
    (b"\r\n\n  \r\n*0\r\n*-1\r\nPING\r\n", [[b"PING"]]),
    (b"*2\r\n$4\r\nECHO\r\n$3\r\nabcXY*1\r\n$4\r\nPING\r\n", [[b"ECHO", b"abc"], [b"PING"]]),  # CRLF skipped
])
def test_parses_requests(data: bytes, commands: list[list[bytes]]) -> None:
    assert parse(data) == commands


@pytest.mark.parametrize(("line", "args"), [
    (b'ECHO "a\\x41\\n\\q"', [b"ECHO", b"aA\nq"]),
    (b"ECHO 'it\\'s'", [b"ECHO", b"it's"]),
    (b'SET "a b" \'c "d\'', [b"SET", b"a b", b'c "d']),
    (b'ECHO a"b c" d', [b"ECHO", b"ab c", b"d"]),
    (b"ECHO ''", [b"ECHO", b""]),
    (b"a\tb\x0bc \x0c d", [b"a", b"b\x0bc", b"d"]),
    (b"ECHO a\x00b", [b"ECHO", b"a"]),
    (b'"\\t\\r\\b\\a\\\\\\"\\xzz"', [b"\t\r\b\a\\\"xzz"]),
    (b"   ", []),
])
def test_inline_splitting_follows_sdssplitargs(line: bytes, args: list[bytes]) -> None:
    assert split_inline(line) == args


@pytest.mark.parametrize("line", [b'ECHO "a"b', b'ECHO a"b c"d', b"ECHO 'a'b", b'ECHO "abc', b"ECHO 'abc", b'"\\"'])
def test_inline_bad_quoting(line: bytes) -> None:
    assert split_inline(line) is None


# redis-server 7's replies to the same bytes
@pytest.mark.parametrize(("data", "error", "reply"), [
    (b"*a\r\n", MalformedRequest, b"-ERR Protocol error: invalid multibulk length\r\n"),
    (b"*+1\r\n", MalformedRequest, b"-ERR Protocol error: invalid multibulk length\r\n"),
    (b"*2\r\n+x\r\n", MalformedRequest, b"-ERR Protocol error: expected '$', got '+'\r\n"),
    (b"*1\r\n\r\n", MalformedRequest, b"-ERR Protocol error: expected '$', got ' '\r\n"),
    (b"*1\r\n$-5\r\n", MalformedRequest, b"-ERR Protocol error: invalid bulk length\r\n"),
    (b"*1\r\n$01\r\n", MalformedRequest, b"-ERR Protocol error: invalid bulk length\r\n"),
    (b"*1\r\n$999999999999\r\n", BulkTooLarge, b"-ERR Protocol error: invalid bulk length\r\n"),
    (b'"unbalanced\r\n', UnbalancedQuotes, b"-ERR Protocol error: unbalanced quotes in request\r\n"),
    (b"x" * (MAX_INLINE + 1), RequestTooLong, b"-ERR Protocol error: too big inline request\r\n"),
    (b"*" + b"1" * MAX_INLINE, RequestTooLong, b"-ERR Protocol error: too big mbulk count string\r\n"),
    (b"*1\r\n$" + b"1" * MAX_INLINE, RequestTooLong, b"-ERR Protocol error: too big bulk count string\r\n"),
])
def test_protocol_errors_reply_like_redis(data: bytes, error: type[RespProtocolError], reply: bytes) -> None:
    with pytest.raises(error) as err:
        parse(data)
    assert err.value.reply == reply


def test_limits_are_typed_and_carry_the_numbers() -> None:
    with pytest.raises(BulkTooLarge, match="bulk of 11 bytes exceeds max_bulk 10"):
        parse(b"*1\r\n$11\r\n", max_bulk=10)
    assert parse(b"*1\r\n$10\r\n0123456789\r\n", max_bulk=10) == [[b"0123456789"]]
    with pytest.raises(ArrayTooLong, match="multibulk of 4 elements exceeds max_args 3"):
        parse(b"*4\r\n", max_args=3)


def test_error_carries_earlier_commands_and_poisons_the_parser() -> None:
    p = RespParser()
    with pytest.raises(MalformedRequest) as err:
        p.feed(b"PING\r\n*1\r\n$4\r\nECHO\r\n*x\r\nPING\r\n")
    assert err.value.events == [[b"PING"], [b"ECHO"]]
    with pytest.raises(MalformedRequest):
        p.feed(b"PING\r\n")


def test_a_long_multibulk_in_tiny_reads() -> None:
    args = [b"SUBSCRIBE"] + [b"ch%d" % i for i in range(500)]
    data = encode_command(*args)
    p = RespParser()
    out: list[list[bytes]] = []
    for i in range(0, len(data), 3):
        out += p.feed(data[i:i + 3])
    assert out == [args]


@settings(max_examples=200, deadline=None)
@given(commands=st.lists(st.lists(st.binary(max_size=30), min_size=1, max_size=5), min_size=1, max_size=8),
       cuts=st.lists(st.integers(0, 4000), max_size=10))
def test_any_split_gives_the_same_commands(commands: list[list[bytes]], cuts: list[int]) -> None:
    data = b"".join(encode_command(*c) for c in commands)
    p = RespParser()
    got: list[list[bytes]] = []
    bounds = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    for a, b in zip(bounds, bounds[1:], strict=False):
        got += p.feed(data[a:b])
    assert got == commands


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=300) | st.lists(st.sampled_from(
    [b"*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n", b"PING\r\n", b'ECHO "x\\x41"\r\n', b"*0\r\n"]),
    max_size=6).map(b"".join), seed=st.integers(0, 2**32), split=st.integers(1, 40))
def test_fuzzed_input_yields_commands_or_protocol_errors(data: bytes, seed: int, split: int) -> None:
    rnd = random.Random(seed)
    buf = bytearray(data)
    for _ in range(rnd.randint(0, 4)):
        if buf:
            buf[rnd.randrange(len(buf))] = rnd.choice(b"*$\r\n\"'\\-0123456789x")
    p = RespParser(max_bulk=64, max_args=16)
    try:
        for i in range(0, len(buf), split):
            for cmd in p.feed(bytes(buf[i:i + split])):
                assert cmd and all(isinstance(a, bytes) for a in cmd)
    except RespProtocolError as exc:
        assert exc.reply.startswith(b"-ERR Protocol error: ") and exc.reply.endswith(b"\r\n")
        assert exc.reply.count(b"\n") == 1


@pytest.mark.parametrize(("text", "value"), [
    (b"0", 0), (b"12", 12), (b"-7", -7), (b"9223372036854775807", 2**63 - 1),
    (b"-9223372036854775808", -(2**63)), (b"9223372036854775808", None), (b"01", None),
    (b"+1", None), (b"-0", None), (b" 1", None), (b"", None), (b"1e3", None), (b"-", None),
])
def test_integers_are_parsed_like_string2ll(text: bytes, value: int | None) -> None:
    assert parse_ll(text) == value


def test_encoders() -> None:
    assert encode_simple("OK") == b"+OK\r\n"
    assert encode_error("bad\r\nthing") == b"-ERR bad  thing\r\n"
    assert encode_error(b"unsupported", "NOPROTO") == b"-NOPROTO unsupported\r\n"
    assert encode_int(-3) == b":-3\r\n"
    assert encode_bulk(b"") == b"$0\r\n\r\n"
    assert (encode_null(2), encode_null(3)) == (b"$-1\r\n", b"_\r\n")
    assert encode_array_header(2) == b"*2\r\n"
    assert (encode_push_header(3, 2), encode_push_header(3, 3)) == (b"*3\r\n", b">3\r\n")
    assert (encode_map_header(2, 2), encode_map_header(2, 3)) == (b"*4\r\n", b"%2\r\n")
    assert encode_bulks([b"a", b"bc"]) == b"*2\r\n$1\r\na\r\n$2\r\nbc\r\n"
    assert encode_command(b"PING") == b"*1\r\n$4\r\nPING\r\n"


class GeneralParser(RespParser):
    """The parser without its batch scan: the reference for the scan."""

    def _scan(self, data: bytes, pos: int, commands: list[list[bytes]]) -> int:
        return pos


def _outcome(p: RespParser, data: bytes, split: int) -> tuple[list[list[bytes]], bytes | None, int]:
    got: list[list[bytes]] = []
    try:
        for i in range(0, len(data), split):
            got += p.feed(data[i:i + split])
    except RespProtocolError as exc:
        return got + exc.events, exc.reply, p.buffered
    return got, None, p.buffered


_PIECES = [b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\nxxx\r\n", b"*2\r\n$3\r\nGET\r\n$4\r\na\r\nb\r\n",
           b"*2\r\n$4\r\nECHO\r\n$03\r\nabc\r\n", b"*2\r\n$4\r\nECHO\r\n$+3\r\nabc\r\n", b"*02\r\n$1\r\na\r\n$0\r\n\r\n",
           b"*1\r\n$4\r\nPING\r\n", b"PING\r\n", b"*0\r\n", b"*-1\r\n", b"*2\r\n$4\r\nECHO\r\n$2000\r\n" + b"y" * 2000 + b"\r\n",
           b"*2\r\n$4\r\nECHO\r\n$3\r\nabcXY", b"*1\r\n$1\r\nx\r\n\r\n", b"*2\r\n$1\r\na\r\n$70\r\n" + b"z" * 70 + b"\r\n",
           b"*1\r\n$99999999999999999999\r\n", b"*1\r\n$0\r\n\r\n", b"*1025\r\n" + b"$1\r\nq\r\n" * 1025,
           b"*1\r\n$-1\r\n", b"*1\r\n$1\r\n\r\r\n"]


@settings(max_examples=200, deadline=None)
@given(pieces=st.lists(st.sampled_from(_PIECES), max_size=10), split=st.integers(1, 3000),
       limits=st.sampled_from([{}, {"max_bulk": 64, "max_args": 2}, {"max_query": 80}]))
def test_the_batch_scan_parses_as_the_general_parser(pieces: list[bytes], split: int, limits: dict[str, int]) -> None:
    """Canonical and odd multibulks (a bulk holding CR LF, lengths with a sign or a
    leading zero, bulks past the limits, a bulk not followed by CR LF), inline and empty
    requests: the same commands, errors and buffered bytes with or without the scan."""
    data = b"".join(pieces)
    assert _outcome(RespParser(**limits), data, split) == _outcome(GeneralParser(**limits), data, split)


_RUN = [b"*3\r\n$7\r\nPUBLISH\r\n$4\r\nchan\r\n$3\r\nabc\r\n", b"*3\r\n$3\r\nSET\r\n$2\r\nk1\r\n$0\r\n\r\n"]


@settings(max_examples=100, deadline=None)
@given(base=st.sampled_from(_RUN), n=st.integers(30, 80), odd=st.sampled_from(_PIECES + _RUN),
       at=st.integers(0, 80), split=st.integers(1, 6000), limits=st.sampled_from([{}, {"max_bulk": 2}]))
def test_long_runs_of_one_shape_parse_as_the_general_parser(base: bytes, n: int, odd: bytes, at: int, split: int,
                                                           limits: dict[str, int]) -> None:
    """The column-by-column cut of a long pipeline of one shape (_scan_repeats), with one
    other request somewhere in it."""
    pieces = [base] * n
    pieces.insert(at % (n + 1), odd)
    data = b"".join(pieces)
    assert _outcome(RespParser(**limits), data, split) == _outcome(GeneralParser(**limits), data, split)


def test_the_compiled_scan_checks_its_arguments() -> None:
    c_scan = resp._compiled_scan
    if c_scan is None:
        pytest.skip("the compiled scan is not built")
    commands: list[list[bytes]] = []
    data = b"*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPI"
    assert c_scan(data, 0, commands, 8, 64, 64) == 14 and commands == [[b"PING"]]
    assert c_scan(data, len(data), commands, 8, 64, 64) == len(data)
    with pytest.raises(TypeError):
        c_scan(bytearray(data), 0, commands, 8, 64, 64)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        c_scan(data, len(data) + 1, commands, 8, 64, 64)
