"""The rvmsg codec (raims_node/bridges/rv_codec.py): bytes checked against the layout
the reference daemon writes, round trips, and garbage giving only RvCodecError."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raims_node.bridges.rv_codec import (
    MAGIC,
    T_INT,
    T_OPAQUE,
    T_RVMSG,
    T_STRING,
    T_SUBJECT,
    RvCodecError,
    RvFrameReader,
    Writer,
    decode,
    decode_subject,
    encode_subject,
    info_kind,
    info_rec,
    is_rvmsg,
)
from tests.integration import rv_client


def test_subject_layout() -> None:
    assert encode_subject("A.BC") == b"\x02\x03A\x00\x04BC\x00"
    assert decode_subject(b"\x02\x03A\x00\x04BC\x00") == "A.BC"
    for bad in ("", "a..b", ".a", "a.", "x" * 254):
        with pytest.raises(RvCodecError):
            encode_subject(bad)
    for raw in (b"", b"\x00", b"\x02\x03A\x00", b"\x01\x05A\x00", b"\x01\x03A\x00x", b"\x01\x02\x00"):
        with pytest.raises(RvCodecError):
            decode_subject(raw)


def test_message_layout_as_the_reference_writes_it() -> None:
    msg = Writer().subject("sub", "A.B").string("mtype", "D").finish()
    body = b"\x04sub\x00\x02\x79\x00\x09\x02\x03A\x00\x03B\x00" + b"\x06mtype\x00\x08\x02D\x00"
    assert msg == struct.pack(">II", 8 + len(body), MAGIC) + body
    m = decode(msg)
    assert [(f.name, f.type) for f in m.fields] == [("sub", T_SUBJECT), ("mtype", T_STRING)]
    assert m.text("sub") == "A.B" and m.text("mtype") == "D"


def test_sizes_nested_and_integers() -> None:
    big, huge = b"x" * 200, b"y" * 40000
    inner = Writer().int32("n", -5).uint32("u", 7).finish()
    msg = Writer().opaque("a", big).opaque("b", huge).message("m", inner).finish()
    m = decode(msg)
    assert m.get("a").data == big and m.get("b").data == huge  # type: ignore[union-attr]
    assert b"\x02a\x00\x07\x79" + (202).to_bytes(2, "big") in msg
    assert b"\x02b\x00\x07\x7a" + (40004).to_bytes(4, "big") in msg
    nested = m.get("m")
    assert nested is not None and nested.type == T_RVMSG and nested.data == inner
    assert nested.message().to_dict() == {"n": -5, "u": 7}
    assert is_rvmsg(inner) and not is_rvmsg(b"x" * 8)


def test_records() -> None:
    rec = info_rec(2)
    assert len(rec) == 64 and info_kind(rec) == 2
    assert rec[:28] == bytes.fromhex("00000002 00000002 00000000 00000001 00000000 04000000 04000000")


def test_the_test_clients_encoding_agrees() -> None:
    """The test client (an independent encoder) and the codec read each other."""
    theirs = rv_client.encode({"sub": ("subject", "X.Y.Z"), "mtype": "L", "n": 3, "o": b"\x00\x01",
                               "data": {"k": "v"}})
    m = decode(theirs)
    assert m.text("sub") == "X.Y.Z" and m.get("n").integer() == 3  # type: ignore[union-attr]
    assert m.get("o").type == T_OPAQUE and m.get("data").message().text("k") == "v"  # type: ignore[union-attr]
    ours = Writer().subject("sub", "X.Y").string("mtype", "D").int32("n", 9).message(
        "data", Writer().string("k", "v").finish()).finish()
    assert rv_client.decode(ours) == {"sub": "X.Y", "mtype": "D", "n": 9, "data": {"k": "v"}}


def test_frame_reader_splits_and_rejects() -> None:
    one = Writer().string("mtype", "D").finish()
    r = RvFrameReader(1024)
    r.push(one + one[:5])
    assert r.frames() == [one] and r.buffered == 5
    r.push(one[5:])
    assert r.frames() == [one]
    r.push(b"\x00\x00\x00\x10\x00\x00\x00\x00")
    with pytest.raises(RvCodecError):
        r.frames()
    r2 = RvFrameReader(64)
    r2.push(struct.pack(">II", 1000, MAGIC))
    with pytest.raises(RvCodecError):
        r2.frames()


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.text(min_size=1, max_size=20).filter(lambda s: "\x00" not in s),
                          st.one_of(st.binary(max_size=300), st.integers(-2**31, 2**31 - 1),
                                    st.text(max_size=50).filter(lambda s: "\x00" not in s))), max_size=8))
def test_round_trip(fields: list[tuple[str, object]]) -> None:
    w = Writer()
    for name, value in fields:
        if isinstance(value, bytes):
            w.opaque(name, value)
        elif isinstance(value, int):
            w.int32(name, value)
        else:
            w.string(name, str(value))
    m = decode(w.finish())
    assert [f.name for f in m.fields] == [n for n, _ in fields]
    for f, (_, value) in zip(m.fields, fields, strict=True):
        if f.type == T_INT:
            assert f.integer() == value
        elif f.type == T_STRING:
            assert f.text() == value
        else:
            assert f.data == value


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_garbage_only_typed_errors(data: bytes) -> None:
    framed = struct.pack(">II", len(data) + 8, MAGIC) + data
    try:
        m = decode(framed)
        m.to_dict()
    except RvCodecError:
        pass
