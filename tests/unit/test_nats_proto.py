"""NATS client protocol: parser fixtures, limits, split invariance, encoders, fuzzing."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raims_node.bridges.nats_proto import (
    ClientError,
    Connect,
    ControlLineTooLong,
    NatsParser,
    NatsProtocolError,
    PayloadTooLarge,
    Ping,
    Pong,
    Pub,
    Sub,
    UnknownOperation,
    Unsub,
    encode_err,
    encode_hmsg,
    encode_hpub,
    encode_info,
    encode_msg,
    encode_pub,
    encode_sub,
    encode_unsub,
    has_wildcard,
    is_literal_subject,
    is_valid_subject,
    no_responders_headers,
)


def parse(data: bytes, **kw: int) -> list[object]:
    return list(NatsParser(**kw).feed(data))


# ---------------------------------------------------------------- fixtures

@pytest.mark.parametrize(("data", "events"), [
    (b"PUB foo 5\r\nhello\r\n", [Pub("foo", None, None, b"hello")]),
    (b"PUB foo _INBOX.x.1 0\r\n\r\n", [Pub("foo", "_INBOX.x.1", None, b"")]),
    (b"PUB bin 4\r\n\r\n\r\n\r\n", [Pub("bin", None, None, b"\r\n\r\n")]),
    (b"HPUB h 12 14\r\nNATS/1.0\r\n\r\nhi\r\n", [Pub("h", None, b"NATS/1.0\r\n\r\n", b"hi")]),
    (b"HPUB h r 12 12\r\nNATS/1.0\r\n\r\n\r\n", [Pub("h", "r", b"NATS/1.0\r\n\r\n", b"")]),
    (b"HPUB h 0 2\r\nhi\r\n", [Pub("h", None, b"", b"hi")]),  # an HPUB still: headers b""
    (b"SUB a.* 1\r\nSUB a.> workers 22\r\n", [Sub("a.*", None, "1"), Sub("a.>", "workers", "22")]),
    (b"UNSUB 1\r\nUNSUB 2 10\r\nUNSUB 3 x\r\n", [Unsub("1", 0), Unsub("2", 10), Unsub("3", 0)]),
    (b"PING\r\nPONG\r\nPINGX\r\nping\n", [Ping(), Pong(), Ping(), Ping()]),
    (b'CONNECT {"verbose":false,"name":"n"}\r\n', [Connect({"verbose": False, "name": "n"})]),
    (b'connect{"echo":false}\r\n', [Connect({"echo": False})]),
    (b"pub\tfoo \t 2\nhi\r\nsUb  x\t9\n", [Pub("foo", None, None, b"hi"), Sub("x", None, "9")]),
    (b'INFO {"server_id":"x"}\r\n+OK\r\nPING\r\n', [Ping()]),
    ("PUB caf\u00e9 1\r\nx\r\n".encode(), [Pub("caf\u00e9", None, None, b"x")]),
    (b"PUB \xff\xfe 1\r\nx\r\n", [Pub("\udcff\udcfe", None, None, b"x")]),
])
def test_parses_client_operations(data: bytes, events: list[object]) -> None:
    assert parse(data) == events


@pytest.mark.parametrize("data", [
    b"\r\n", b"FOO\r\n", b"MSG a 1 2\r\nhi\r\n", b"PUB a\r\n", b"PUB a b c d\r\n", b"PUB a -1\r\n",
    b"PUB a 1x\r\n", b"PUB a 1\r\nxx\r\n", b"HPUB a 5 2\r\n", b"HPUB a 2\r\n", b"SUB a\r\n",
    b"SUB a b c d\r\n", b"UNSUB\r\n", b"UNSUB a b c\r\n", b"CONNECT\r\n", b"CONNECT {bad\r\n",
    b"CONNECT []\r\n", b"INFO nope\r\n", b"PUBX a 1\r\n", b"CONNECT " + b"[" * 2000 + b"\r\n",
])
def test_malformed_lines_are_unknown_operations(data: bytes) -> None:
    with pytest.raises(UnknownOperation) as err:
        parse(data)
    assert err.value.reply == b"-ERR 'Unknown Protocol Operation'\r\n"


def test_client_err_closes_without_reply() -> None:
    with pytest.raises(ClientError) as err:
        parse(b"PING\r\n-ERR 'oops'\r\n")
    assert err.value.reply == b""
    assert err.value.events == [Ping()]


def test_error_carries_earlier_events_and_poisons_the_parser() -> None:
    p = NatsParser()
    with pytest.raises(UnknownOperation) as err:
        p.feed(b"PUB a 1\r\nx\r\nSUB b 1\r\nBOGUS\r\nPING\r\n")
    assert err.value.events == [Pub("a", None, None, b"x"), Sub("b", None, "1")]
    with pytest.raises(UnknownOperation):
        p.feed(b"PING\r\n")


# ---------------------------------------------------------------- limits

def test_payload_limit_is_enforced_on_the_control_line() -> None:
    p = NatsParser(max_payload=10)
    assert p.feed(b"PUB a 10\r\n0123456789\r\n") == [Pub("a", None, None, b"0123456789")]
    with pytest.raises(PayloadTooLarge) as err:
        p.feed(b"PUB a 11\r\n")  # raised before any payload byte arrives
    assert err.value.reply == b"-ERR 'Maximum Payload Violation'\r\n"
    assert "11 bytes exceeds max_payload 10" in str(err.value)


def test_hpub_limit_counts_headers_and_payload() -> None:
    with pytest.raises(PayloadTooLarge):
        NatsParser(max_payload=12).feed(b"HPUB a 12 13\r\n")


@pytest.mark.parametrize("complete", [True, False])
def test_control_line_limit(complete: bool) -> None:
    p = NatsParser(max_control_line=64)
    assert p.feed(b"SUB " + b"a" * 56 + b" 1\r\n")  # exactly 61 bytes: fine
    line = b"SUB " + b"a" * 70 + (b" 1\r\n" if complete else b"")
    with pytest.raises(ControlLineTooLong) as err:
        p.feed(line)
    assert err.value.reply == b"-ERR 'maximum control line exceeded'\r\n"


@pytest.mark.parametrize("op", [b"PUB", b"SUB", b"HPUB"])
def test_the_limit_counts_the_arguments_only_as_nats_server_does(op: bytes) -> None:
    """nats-server 2.9.10 accepts a PUB or SUB line of 4,100 bytes (4,096 of arguments)."""
    tail = {b"PUB": b" 1", b"SUB": b" 1", b"HPUB": b" 0 1"}[op]
    fits = op + b" " + b"a" * (64 - len(tail)) + tail
    assert NatsParser(max_control_line=64).feed(fits + b"\r\n" + (b"x\r\n" if op != b"SUB" else b""))
    with pytest.raises(ControlLineTooLong):
        NatsParser(max_control_line=64).feed(op + b" " + b"a" * (65 - len(tail)) + tail + b"\r\n")


def test_partial_line_at_the_limit_waits_for_its_newline() -> None:
    p = NatsParser(max_control_line=10)
    assert p.feed(b"SUB abc 12\r") == []
    assert p.feed(b"\n") == [Sub("abc", None, "12")]


def test_large_payload_arriving_in_small_reads() -> None:
    payload = bytes(range(256)) * 400
    data = encode_pub(b"big", b"r", payload)
    p = NatsParser()
    events: list[object] = []
    for i in range(0, len(data), 1000):
        events += p.feed(data[i:i + 1000])
    assert events == [Pub("big", "r", None, payload)]


# ---------------------------------------------------------------- split invariance, round trips

TOKEN = st.text("abcXYZ019_-", min_size=1, max_size=6)
SUBJECT = st.lists(TOKEN, min_size=1, max_size=4).map(".".join)


@st.composite
def operations(draw: st.DrawFn) -> tuple[bytes, list[object]]:
    chunks: list[bytes] = []
    events: list[object] = []
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["pub", "hpub", "sub", "unsub", "ping", "connect"]))
        subject = draw(SUBJECT)
        reply = draw(st.none() | SUBJECT)
        payload = draw(st.binary(max_size=40))
        if kind == "pub":
            chunks.append(encode_pub(subject.encode(), reply and reply.encode(), payload))
            events.append(Pub(subject, reply, None, payload))
        elif kind == "hpub":
            hdr = b"NATS/1.0\r\nk: %s\r\n\r\n" % draw(TOKEN).encode()
            chunks.append(encode_hpub(subject.encode(), reply and reply.encode(), hdr, payload))
            events.append(Pub(subject, reply, hdr, payload))
        elif kind == "sub":
            sid = str(draw(st.integers(1, 999)))
            chunks.append(encode_sub(subject.encode(), reply and reply.encode(), sid.encode()))
            events.append(Sub(subject, reply, sid))
        elif kind == "unsub":
            n = draw(st.integers(0, 5))
            chunks.append(encode_unsub(b"7", n))
            events.append(Unsub("7", n))
        elif kind == "ping":
            chunks.append(b"PING\r\n")
            events.append(Ping())
        else:
            opts = {"verbose": draw(st.booleans()), "name": subject}
            chunks.append(b"CONNECT %s\r\n" % json.dumps(opts).encode())
            events.append(Connect(opts))
    return b"".join(chunks), events


@settings(max_examples=200, deadline=None)
@given(ops=operations(), cuts=st.lists(st.integers(0, 2000), max_size=12))
def test_any_split_gives_the_same_events(ops: tuple[bytes, list[object]], cuts: list[int]) -> None:
    data, expected = ops
    p = NatsParser()
    got: list[object] = []
    bounds = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    for a, b in zip(bounds, bounds[1:], strict=False):
        got += p.feed(data[a:b])
    assert got == expected


# ---------------------------------------------------------------- encoders

def test_encoders_match_nats_server_bytes() -> None:
    assert encode_msg(b"foo", b"1", None, b"hi") == b"MSG foo 1 2\r\nhi\r\n"
    assert encode_msg(b"foo", b"1", b"r", b"") == b"MSG foo 1 r 0\r\n\r\n"
    hdr = b"NATS/1.0\r\nk: v\r\n\r\n"
    assert encode_hmsg(b"s", b"2", b"r", hdr, b"xy") == b"HMSG s 2 r 18 20\r\n" + hdr + b"xy\r\n"
    assert encode_err("Slow Consumer") == b"-ERR 'Slow Consumer'\r\n"
    assert encode_info({"a": 1, "b": True}) == b'INFO {"a":1,"b":true} \r\n'
    nr = no_responders_headers(b"svc.x")
    assert nr == b"NATS/1.0 503\r\nNats-Subject: svc.x\r\n\r\n" and len(nr) == 32 + len(b"svc.x")


# ---------------------------------------------------------------- subject rules

@pytest.mark.parametrize(("subject", "valid", "literal", "wild"), [
    ("a.b", True, True, False), ("a.*", True, False, True), ("a.>", True, False, True),
    (">", True, False, True), ("*", True, False, True), ("a*.b>", True, True, False),
    ("a..b", False, False, False), (".a", False, False, False), ("a.", False, False, False),
    ("a.>.b", False, False, True), ("", False, False, False),
])
def test_subject_rules(subject: str, valid: bool, literal: bool, wild: bool) -> None:
    assert is_valid_subject(subject) is valid
    assert is_literal_subject(subject) is literal
    assert has_wildcard(subject) is wild


# ---------------------------------------------------------------- fuzz

SEEDS = [b"PUB a 5\r\nhello\r\n", b"HPUB a 12 14\r\nNATS/1.0\r\n\r\nhi\r\n", b"SUB a.* q 1\r\n",
         b"UNSUB 1 5\r\n", b'CONNECT {"verbose":false}\r\n', b"PING\r\n", b"PONG\r\n"]


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=300) | st.lists(st.sampled_from(SEEDS), max_size=6).map(b"".join),
       seed=st.integers(0, 2**32), split=st.integers(1, 50))
def test_fuzzed_input_yields_events_or_protocol_errors(data: bytes, seed: int, split: int) -> None:
    rnd = random.Random(seed)
    buf = bytearray(data)
    for _ in range(rnd.randint(0, 4)):
        if buf:
            buf[rnd.randrange(len(buf))] = rnd.randrange(256)
    p = NatsParser(max_payload=64, max_control_line=128)
    try:
        for i in range(0, len(buf), split):
            for ev in p.feed(bytes(buf[i:i + split])):
                assert isinstance(ev, Connect | Pub | Sub | Unsub | Ping | Pong)
    except NatsProtocolError as exc:
        assert exc.reply == b"" or exc.reply.startswith(b"-ERR '")
