"""Batch frames (wire/batch.py): codec, splitting, and the sequence window's runs."""

from __future__ import annotations

import pytest

from raims_node.router.seqwin import PubWindow, SubWindow, Verdict, new_stream_seqno
from raims_node.wire import (
    BadField,
    MsgType,
    decode_message_fields,
    encode_message_fields,
    frame_with_body,
    peek,
)
from raims_node.wire.batch import (
    BATCH_BYTES,
    FRAMED_MIN,
    PackedRun,
    decode_batch,
    decode_batch_run,
    encode_batch_fields,
    skip_run,
    split_runs,
)
from raims_node.wire.frame import SUBJECT_OFFSET

NS = 1_000_000_000
T0 = 1659131646 * NS
SRC = b"s" * 16
SEQ = new_stream_seqno(T0)


def _body(buf: bytes) -> tuple[int, int]:
    head = peek(buf)
    slen = len(head.subject)
    return SUBJECT_OFFSET + slen + (slen & 1), head.frame_len


@pytest.mark.parametrize("stamp", [0, T0])
def test_a_batch_frame_round_trips_its_payloads_in_order(stamp: int) -> None:
    payloads = [b"", b"a", b"bc", bytes(range(256)) * 3, b"odd"]
    frame = bytes(frame_with_body(MsgType.MCAST, b"x.y", bytes(16), encode_batch_fields(SEQ, stamp, payloads)))
    assert decode_batch(frame, *_body(frame)) == (SEQ, stamp, payloads)


@pytest.mark.parametrize(("stamp", "start"), [(0, T0), (T0, 0), (T0, T0 - NS)])
@pytest.mark.parametrize("payloads", [[b"a", b"bc", b"def"], [b"%04d" % i for i in range(40)]])
def test_a_batch_frame_tells_a_young_streams_start(stamp: int, start: int, payloads: list[bytes]) -> None:
    """The start (raims fid 26, router/stream_start.py) between the stamp and the records;
    a batch without it decodes start 0 (the other tests), a truncated one is no batch."""
    body = encode_batch_fields(SEQ + 5, stamp, payloads, start)
    frame = bytes(frame_with_body(MsgType.MCAST, b"x.y", bytes(16), body))
    got = decode_batch_run(frame, *_body(frame))
    assert got is not None and (got[0], got[1], list(got[2]), got[3]) == (SEQ + 5, stamp, payloads, start)
    assert decode_batch(frame, *_body(frame)) == (SEQ + 5, stamp, payloads)
    assert len(body) == len(encode_batch_fields(SEQ + 5, stamp, payloads)) + 10 * bool(start)  # one u64, per frame
    cut = bytes(frame_with_body(MsgType.MCAST, b"x.y", bytes(16), body[:10 + 10 * bool(stamp) + 10 * bool(start)]))
    assert decode_batch_run(cut, *_body(cut)) is None


def test_a_single_message_is_not_a_batch() -> None:
    for stamp, start in ((0, 0), (T0, 0), (0, T0)):
        frame = bytes(frame_with_body(MsgType.MCAST, b"x", bytes(16),
                                      encode_message_fields(SEQ, stamp, None, None, b"payload", start)))
        assert decode_batch(frame, *_body(frame)) is None
        msg = decode_message_fields(frame, *_body(frame))
        assert (msg.payload, msg.start) == (b"payload", start)


def test_a_record_overrunning_the_batch_is_a_bad_field() -> None:
    frame = bytearray(frame_with_body(MsgType.MCAST, b"x", bytes(16), encode_batch_fields(SEQ, 0, [b"abcd", b"ef"])))
    off, end = _body(bytes(frame))
    frame[off + 16 + 3] = 200  # the first record's length (after seqno and batch descriptors)
    with pytest.raises(BadField):
        decode_batch(bytes(frame), off, end)


def test_runs_are_cut_at_the_batch_size_and_keep_order() -> None:
    payloads = [bytes([i % 256]) * 1000 for i in range(100)]
    runs = split_runs(payloads)
    assert [p for r in runs for p in r] == payloads
    assert all(sum(len(p) + 4 for p in r) <= BATCH_BYTES for r in runs) and len(runs) == 7
    big = [bytes(BATCH_BYTES * 2), b"x"]
    assert split_runs(big) == [[big[0]], [b"x"]]


def test_publisher_reserves_a_run_of_seqnos() -> None:
    w = PubWindow(4 << 20, 10 * NS, T0)
    first = w.next_seqnos("a", 10, T0)
    assert first is not None and first[1]
    nxt, start = w.next_seqno("a", T0)
    assert nxt == first[0] + 10 and not start
    w._w.put("a", 1, (nxt | ((1 << 35) - 1)) - 3)  # three left before the counter wraps
    assert w.next_seqnos("a", 10, T0) is None  # the caller publishes one by one
    assert w.next_seqnos("a", 3, T0) is not None


def test_subscriber_window_advances_by_a_run_and_keeps_repeats_and_loss() -> None:
    w = SubWindow(8 << 20, 10 * NS, T0)
    assert w.check_run(SRC, "a", SEQ, 5, T0, T0) == (Verdict.FIRST, 0, 0)
    assert w.check(SRC, "a", SEQ + 5, 0, T0) == (Verdict.OK, 0)  # a single after the run
    assert w.check_run(SRC, "a", SEQ + 6, 4, 0, T0) == (Verdict.OK, 0, 0)  # up to SEQ + 9
    assert w.check_run(SRC, "a", SEQ + 6, 4, 0, T0) == (Verdict.REPEAT, 0, 4)  # replayed whole
    assert w.check_run(SRC, "a", SEQ + 8, 4, 0, T0) == (Verdict.OK, 0, 2)  # overlaps: 2 new
    assert w.check_run(SRC, "a", SEQ + 20, 3, 0, T0) == (Verdict.LOSS, 8, 0)  # SEQ+12..19 lost
    assert w.check(SRC, "a", SEQ + 23, 0, T0) == (Verdict.OK, 0)


def test_a_batch_of_one_size_round_trips() -> None:
    payloads = [bytes([i]) * 16 for i in range(200)] + [b"\x00\x00\x00\x10" * 4]
    frame = bytes(frame_with_body(MsgType.MCAST, b"s", bytes(16), encode_batch_fields(SEQ, 0, payloads)))
    assert decode_batch(frame, *_body(frame)) == (SEQ, 0, payloads)
    mixed = [*payloads[:50], b"short", *payloads[50:]]
    frame = bytes(frame_with_body(MsgType.MCAST, b"s", bytes(16), encode_batch_fields(SEQ, 0, mixed)))
    assert decode_batch(frame, *_body(frame)) == (SEQ, 0, mixed)


@pytest.mark.parametrize("count", [2, FRAMED_MIN - 1, FRAMED_MIN, 700])
@pytest.mark.parametrize("size", [0, 1, 16, 1000])
def test_a_stream_stays_packed_and_frames_as_the_payloads_would(count: int, size: int) -> None:
    payloads = [(i.to_bytes(4, "big") * (size // 4 + 1))[:size] for i in range(count)]
    frame = bytes(frame_with_body(MsgType.MCAST, b"s", bytes(16), encode_batch_fields(SEQ, 0, payloads)))
    got = decode_batch_run(frame, *_body(frame))
    assert got is not None
    run = got[2]
    assert isinstance(run, PackedRun) and len(run) == count and run.size == size
    assert run.payloads() == list(run) == payloads
    head, end = b"MSG s 1 %d\r\n" % size, b"\r\n"
    assert run.framed(head, end) == b"".join(head + p + end for p in payloads)
    assert run.framed(b"", b"") == b"".join(payloads)
    tail = skip_run(run, 1)
    assert isinstance(tail, PackedRun) and tail.payloads() == payloads[1:]
    assert tail.framed(head, end) == b"".join(head + p + end for p in payloads[1:])


def test_mixed_sizes_come_back_as_a_list() -> None:
    payloads = [b"a", b"bc", b"a"]
    frame = bytes(frame_with_body(MsgType.MCAST, b"s", bytes(16), encode_batch_fields(SEQ, 0, payloads)))
    got = decode_batch_run(frame, *_body(frame))
    assert got == (SEQ, 0, payloads, 0)
    assert skip_run(payloads, 2) == [b"a"] and skip_run(payloads, 0) is payloads


def test_a_packed_pub_run_encodes_as_its_payloads_would() -> None:
    """A NATS client's pipelined PUBs, kept in the read buffer (stride: line + CRLF),
    make the same batch frames as the list of their payloads."""
    payloads = [b"%016d" % i for i in range(3000)]
    line = b"PUB s 16\r\n"
    data = b"".join(line + p + b"\r\n" for p in payloads)
    run = PackedRun(data, len(line), len(payloads), 16, len(line) + 18)
    assert run.payloads() == payloads
    packed, plain = split_runs(run), split_runs(payloads)
    assert [len(r) for r in packed] == [len(r) for r in plain] and len(plain) > 1
    for a, b in zip(packed, plain, strict=True):
        assert encode_batch_fields(SEQ, T0, a) == encode_batch_fields(SEQ, T0, b)
