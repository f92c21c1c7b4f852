"""Wire codec: field round trips, the manual's dumps, framing, fuzzing."""

from __future__ import annotations

import base64
import random
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raims_node.wire import (
    DIGEST_OFFSET,
    FID_TYPES,
    BadField,
    BadHeader,
    Fid,
    FieldType,
    FrameReader,
    FrameTooLarge,
    MsgType,
    StreamDesync,
    Truncated,
    WireError,
    decode_fields,
    decode_frame,
    decode_message_fields,
    decode_typed_fields,
    dump_id,
    encode_fields,
    encode_frame,
    encode_message_fields,
    frame_with_body,
    message_of,
    path_opt,
    peek,
    peeked_message,
    subject_hash,
)
from raims_node.wire.frame import MAX_SIZE_24

FIXTURES = Path(__file__).parent.parent / "fixtures"
BRIDGE = bytes(range(16))


# ---------------------------------------------------------------- field values

def _value_for(ftype: FieldType) -> st.SearchStrategy[object]:
    if ftype == FieldType.BOOL:
        return st.booleans()
    if ftype in (FieldType.U16, FieldType.U32, FieldType.U64):
        return st.integers(0, (1 << (8 << (ftype - 1))) - 1)
    if ftype <= FieldType.OPAQUE64:
        n = 1 << ftype
        return st.binary(min_size=n, max_size=n)
    if ftype == FieldType.STRING:
        return st.text(min_size=1, max_size=40)
    return st.binary(max_size=64)


def _field() -> st.SearchStrategy[tuple[int, object]]:
    return st.sampled_from(sorted(FID_TYPES)).flatmap(
        lambda fid: st.tuples(st.just(fid), st.sampled_from(FID_TYPES[fid]).flatmap(_value_for))
    )


def _fits(fid: int, value: object) -> bool:
    types = FID_TYPES[fid]
    if isinstance(value, int) and not isinstance(value, bool) and types[0] in (
        FieldType.U16, FieldType.U32, FieldType.U64
    ):
        return value < (1 << (8 << (types[-1] - 1)))
    return True


_messages = st.recursive(
    st.lists(_field(), max_size=8),
    lambda inner: st.lists(
        st.one_of(_field(), st.tuples(st.sampled_from([Fid.ADJACENCY, Fid.BLOOM, Fid.PEER_DB]), inner)),
        max_size=6,
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(_messages)
def test_fields_round_trip(fields: list[tuple[int, object]]) -> None:
    fields = [(f, v) for f, v in fields if _fits(f, v)]
    raw = encode_fields(fields)
    assert len(raw) % 2 == 0
    assert decode_fields(raw) == fields


@settings(max_examples=200, deadline=None)
@given(_messages, st.text(min_size=1, max_size=80), st.integers(0, 3), st.integers(0, 0x1F))
def test_frame_round_trip(fields: list[tuple[int, object]], subject: str, mtype: int, opt: int) -> None:
    fields = [(f, v) for f, v in fields if _fits(f, v)]
    raw = encode_frame(mtype, subject, BRIDGE, fields, opt)
    frame = decode_frame(raw)
    assert (frame.msg_type, frame.opt, frame.subject, frame.bridge) == (mtype, opt, subject, BRIDGE)
    assert frame.digest == bytes(16)
    assert frame.fields == fields
    assert frame.subject_hash == subject_hash(subject.encode())
    head = peek(raw + b"trailing")  # the fast path reads one frame out of a longer buffer
    assert head == (mtype, opt, frame.subject_hash, BRIDGE, bytes(16), subject.encode(), len(raw))


@given(seqno=st.integers(0, 2**64 - 1), stamp=st.integers(0, 2**64 - 1),
       reply=st.one_of(st.none(), st.text(max_size=20)), headers=st.one_of(st.none(), st.binary(max_size=20)),
       payload=st.binary(max_size=300), subject=st.text(min_size=1, max_size=30),
       start=st.one_of(st.just(0), st.integers(0, 2**64 - 1)))
@settings(max_examples=200)
def test_publish_encoder_gives_the_generic_encoders_bytes(seqno: int, stamp: int, reply: str | None,
                                                          headers: bytes | None, payload: bytes, subject: str,
                                                          start: int) -> None:
    fields: list[tuple[int, object]] = [(Fid.SEQNO, seqno)]
    if stamp:
        fields.append((Fid.STAMP, stamp))
    if start:  # a young stream's start, told again after a route change (router/stream_start.py)
        fields.append((Fid.START, start))
    if reply:
        fields.append((Fid.REPLY, reply))
    if headers:
        fields.append((Fid.HEADERS, headers))
    fields.append((Fid.DATA, payload))
    body = encode_message_fields(seqno, stamp, reply, headers, payload, start)
    assert body == encode_fields(fields)
    sub = subject.encode("utf-8", "surrogateescape")
    frame = frame_with_body(MsgType.MCAST, sub, BRIDGE, body, path_opt(2), subject_hash(sub))
    assert frame == encode_frame(MsgType.MCAST, subject, BRIDGE, fields, path_opt(2))
    message = peeked_message(bytes(frame), peek(frame))
    assert message == message_of(decode_frame(frame).fields)
    assert message == (seqno, stamp, reply or None, headers or None, payload, start)


def test_integer_width_is_the_smallest_that_fits() -> None:
    for value, ftype in [(0, FieldType.U16), (65535, FieldType.U16), (65536, FieldType.U32),
                         (1 << 32, FieldType.U64)]:
        (field,) = decode_typed_fields(encode_fields([(Fid.SEQNO, value)]))
        assert field.ftype == ftype and field.value == value
    with pytest.raises(BadField, match="does not fit"):
        encode_fields([(Fid.INTERVAL, 1 << 32)])  # interval allows u16/u32 only
    with pytest.raises(BadField, match="negative"):
        encode_fields([(Fid.SEQNO, -1)])


def test_encoder_rejects_wrong_values() -> None:
    with pytest.raises(BadField, match="expected 16 bytes"):
        encode_fields([(Fid.CNONCE, b"short")])
    with pytest.raises(BadField, match="not in the field table"):
        encode_fields([(250, 1)])
    with pytest.raises(BadField, match="expected a string"):
        encode_fields([(Fid.USER, 5)])


def test_null_string() -> None:
    raw = encode_fields([(Fid.EXPIRES, None)])
    assert raw == bytes([0x47, Fid.EXPIRES, 0, 0])
    assert decode_fields(raw) == [(Fid.EXPIRES, None)]


def test_descriptor_bits_match_the_manual_diagrams() -> None:
    # manual: bridge is "1 1 x x 0 1 0 0 | fid 3", sub is "0 1 x x 0 1 1 1 | fid 0",
    # seqno "1 1 x x 0 0 1 0 | fid 17" (a 4-byte value there), data "0 1 x x 1 0 0 0 | fid 1"
    frame = encode_frame(MsgType.MCAST, "CABA", BRIDGE, [(Fid.SEQNO, 1 << 20), (Fid.DATA, b"x")])
    assert frame[8:10] == bytes([0b11000100, 3])
    assert frame[44:48] == bytes([0b01000111, 0, 0, 4])
    assert frame[52:54] == bytes([0b11000010, 17])
    assert frame[58:60] == bytes([0b01001000, 1])
    # header word: version 1, type 0, opt 0, size excludes the first 8 bytes
    assert frame[0] == 0x80 and int.from_bytes(frame[1:4]) == len(frame) - 8


# ---------------------------------------------------------------- the manual's dumps

_DUMP_LINE = re.compile(r"^\s+(\w+?)_(\w+) \[(\d+)\]\s*: (.*)$")


def _manual_messages() -> list[tuple[str, list[tuple[int, int, object]]]]:
    blocks: list[tuple[str, list[tuple[int, int, object]]]] = []
    for line in (FIXTURES / "manual_dumps.txt").read_text().splitlines():
        if line.startswith("=="):
            blocks.append((line[3:], []))
            continue
        m = _DUMP_LINE.match(line)
        if not m:
            continue
        _name, _size, num, text = m.groups()
        ident = int(num)
        ftype = ident >> 8
        value: object
        if text == "null":
            value = None
        elif text.startswith('"'):
            value = text.strip('"')
        elif ftype in (FieldType.U16, FieldType.U32, FieldType.U64):
            value = int(text)
        else:
            value = base64.b64decode(text + "=" * (-len(text) % 4))
        blocks[-1][1].append((ident, ident & 0xFF, value))
    return blocks


def test_manual_dumps_reencode_with_the_same_ids_and_types() -> None:
    blocks = _manual_messages()
    assert [len(fields) for _, fields in blocks] == [20, 22, 22, 5]
    for title, dump in blocks:
        header = {fid: value for _, fid, value in dump[:3]}
        assert [fid for _, fid, _ in dump[:3]] == [Fid.BRIDGE, Fid.DIGEST, Fid.SUB], title
        body = [(fid, value) for _, fid, value in dump[3:]]
        raw = encode_frame(MsgType.INBOX, str(header[Fid.SUB]), bytes(header[Fid.BRIDGE]), body)  # type: ignore[arg-type]
        raw[DIGEST_OFFSET : DIGEST_OFFSET + 16] = header[Fid.DIGEST]  # type: ignore[index]
        frame = decode_frame(raw)
        assert frame.digest == header[Fid.DIGEST] and frame.subject == header[Fid.SUB]
        body_start = 48 + len(frame.subject.encode()) + (len(frame.subject.encode()) & 1)
        typed = decode_typed_fields(raw, body_start)
        assert [(dump_id(f.ftype, f.fid), f.value) for f in typed] == [
            (ident, value) for ident, _, value in dump[3:]
        ], title


# ---------------------------------------------------------------- errors and fuzzing

def _typical() -> bytearray:
    return encode_frame(
        MsgType.MCAST, "RSF.EQUITY.IBM.N.LEVEL1.QUOTES.0123456789", BRIDGE,
        [(Fid.SEQNO, 12345), (Fid.STAMP, 1663967313973571299), (Fid.DATA, bytes(100))],
    )


def test_decode_errors_say_what_and_where() -> None:
    raw = _typical()
    with pytest.raises(Truncated, match="shorter than"):
        decode_frame(raw[:20])
    with pytest.raises(Truncated, match="frame size says"):
        decode_frame(raw[:-2])
    bad = bytearray(raw)
    bad[0] &= 0x7F
    with pytest.raises(BadHeader, match="version"):
        decode_frame(bad)
    bad = bytearray(raw)
    bad[8] = 0x41
    with pytest.raises(BadHeader, match="bridge descriptor") as info:
        decode_frame(bad)
    assert info.value.offset == 8 and "at offset 8" in str(info.value)
    bad = bytearray(raw)
    bad[-106] = 0x4F  # DATA descriptor -> type 15
    with pytest.raises(BadField, match="unknown field type 15"):
        decode_frame(bad)


def test_huge_declared_length_does_not_allocate() -> None:
    raw = encode_frame(MsgType.MCAST, "a", BRIDGE, [(Fid.DATA, b"xy")])
    raw[-6:-2] = (0xFFFFFFF0).to_bytes(4, "big")
    with pytest.raises(Truncated, match="long opaque of 4294967280 bytes"):
        decode_frame(raw)


def test_extended_size_frame() -> None:
    payload = bytes(MAX_SIZE_24)
    raw = encode_frame(MsgType.MCAST, "big.subject", BRIDGE, [(Fid.DATA, payload)])
    assert raw[1:4] == b"\0\0\0" and int.from_bytes(raw[4:8]) == len(raw) - 8
    frame = decode_frame(raw)
    assert frame.subject_hash == subject_hash(b"big.subject")
    assert peek(raw).subject_hash == frame.subject_hash and peek(raw).frame_len == len(raw)
    assert len(frame.get(Fid.DATA)) == MAX_SIZE_24  # type: ignore[arg-type]


def test_fuzz_random_and_mutated_frames_raise_only_wire_errors() -> None:
    rng = random.Random(20261121)
    seeds = [
        _typical(),
        encode_frame(MsgType.RTR_ALERT, "_Z.ADJ", BRIDGE,
                     [(Fid.ADJACENCY, [(Fid.TPORT, "link_ab"), (Fid.COST, 100), (Fid.LINK_ADD, True)]),
                      (Fid.USER, "ruby"), (Fid.EXPIRES, None)]),
    ]
    decoded = failed = 0
    for i in range(200_000):
        kind = i % 4
        if kind == 0:
            buf = bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 80)))
        else:
            buf = bytearray(seeds[i & 1])
            for _ in range(rng.randrange(1, 4)):
                op = rng.randrange(3)
                if op == 0:
                    buf[rng.randrange(len(buf))] = rng.getrandbits(8)
                elif op == 1:
                    del buf[rng.randrange(len(buf)) :]
                else:
                    buf[rng.randrange(len(buf)) : 0] = bytes([rng.getrandbits(8)])
                if not buf:
                    break
        try:
            decode_frame(buf)
            peek(buf)
            decoded += 1
        except WireError:
            failed += 1
    assert decoded + failed == 200_000
    assert decoded > 1000 and failed > 100_000  # both paths exercised


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes(buf: bytes) -> None:
    for fn in (decode_frame, peek, decode_fields, lambda b: decode_message_fields(b, 0, len(b))):
        try:
            fn(buf)
        except WireError:
            pass


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=60), st.integers(0, 59), st.integers(0, 255))
def test_mutated_message_fields_raise_only_wire_errors(tail: bytes, at: int, value: int) -> None:
    body = bytearray(encode_message_fields(2**62 + 7, 2**61, None, None, tail))
    body[at % len(body)] = value
    try:
        decode_message_fields(bytes(body), 0, len(body))
    except WireError:
        pass


# ---------------------------------------------------------------- stream framing

def test_reader_reassembles_frames_split_anywhere() -> None:
    frames = [bytes(_typical()), bytes(encode_frame(MsgType.HEARTBEAT, "_X.HB", BRIDGE, [(Fid.SEQNO, 1)]))]
    stream = b"".join(frames * 3)
    rng = random.Random(7)
    for _ in range(50):
        reader = FrameReader()
        got: list[bytes] = []
        pos = 0
        while pos < len(stream):
            step = rng.randrange(1, 90)
            got += reader.feed(stream[pos : pos + step])
            pos += step
        assert got == frames * 3 and reader.buffered == 0


def test_reader_reports_desync_and_keeps_earlier_frames() -> None:
    good = bytes(_typical())
    reader = FrameReader()
    with pytest.raises(StreamDesync, match="not a frame header") as info:
        reader.feed(good + b"GET / HTTP/1.1\r\n\r\n")
    assert info.value.frames == [good]
    with pytest.raises(StreamDesync, match="already failed"):
        reader.feed(good)
    reader = FrameReader()
    bad = bytearray(good)
    bad[8] = 0
    with pytest.raises(StreamDesync, match="bridge field"):
        reader.feed(bad[:12])


def test_reader_limits_frame_size() -> None:
    reader = FrameReader(max_frame=1000)
    big = encode_frame(MsgType.MCAST, "x", BRIDGE, [(Fid.DATA, bytes(2000))])
    with pytest.raises(FrameTooLarge, match="exceeds max 1000"):
        reader.feed(big[:8])


def test_path_option_bits() -> None:
    for p in range(4):
        frame = decode_frame(encode_frame(MsgType.MCAST, "a.b", BRIDGE, [], path_opt(p) | 1))
        assert frame.path == p and frame.opt & 1


def test_the_frame_reader_is_linear_in_a_large_frame() -> None:
    """A 32 MiB frame arriving in 4 KiB reads (8192 feeds) is copied once when whole: a
    reader that copied its buffer on every feed would move ~128 GB and never finish."""
    import time

    big = bytes(encode_frame(MsgType.MCAST, "big", bytes(16), [(Fid.DATA, bytes(32 * 1024 * 1024))]))
    small = bytes(encode_frame(MsgType.MCAST, "s", bytes(16), [(Fid.DATA, b"x")]))
    stream = small + big + small
    reader = FrameReader()
    got: list[bytes] = []
    t0 = time.process_time()  # CPU time: a loaded machine does not fail it
    for off in range(0, len(stream), 4096):
        got += reader.feed(stream[off:off + 4096])
    assert time.process_time() - t0 < 5
    assert got == [small, big, small] and reader.buffered == 0
