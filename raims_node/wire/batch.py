"""A batch frame: a run of messages of one subject from one publisher in one frame.

Decision (issue 24, "a cheap hop"; the manual frames one message per frame): a node
whose bridge client pipelines many publishes to one subject (a NATS `PUB` run, no reply,
no headers) sends them as one multicast frame, so the run costs one frame build, one
MAC, one header peek, one forwarding lookup and one link write per hop instead of one
per message. The frame is an ordinary multicast frame of that subject whose fields are

    seqno   u64   the first message's sequence number (message i has seqno + i)
    stamp   u64   only when the first message starts the stream (as a single message)
    start   u64   only a young stream's start stamp told again after a route change
                  (raims fid 26, as a single message carries it: router/stream_start.py)
    batch   long opaque (raims fid 87): n records of  u32 length | payload bytes

Routers forward it as received (the bytes are never re-encoded); only a node that
delivers it splits it. The sequence window advances by n: a batch that repeats part of
what was delivered delivers only its new tail, a gap before its first seqno is loss as
for a single message. Single messages and every other frame are unchanged, so a run of
one is a normal frame and the golden simulation's frames do not move. A node of an
earlier version would deliver a batch frame as one empty message: batches assume a
network of nodes of this version (the mixed-version case is not handled).

A frame holds at most BATCH_BYTES of records (a larger run becomes several frames), so
flow control and latency keep the granularity of a few link writes.

A receiving node keeps a run of equal-size payloads (a stream) inside the frame as a
PackedRun: the payloads become objects only when a consumer asks for them, and a bridge
that puts fixed bytes around every message (NATS: the `MSG` line and CRLF) renders the
whole run with `PackedRun.framed`, column copies in numpy, no object per message.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import TYPE_CHECKING

from raims_node.wire.errors import BadField
from raims_node.wire.fields import Fid, FieldType, descriptor

BATCH_BYTES = 16 * 1024  # records per frame, at most (a single larger payload goes alone)
BATCH_DESC = descriptor(FieldType.LONG_OPAQUE, Fid.BATCH)
_SEQNO_DESC = descriptor(FieldType.U64, Fid.SEQNO)
_STAMP_DESC = descriptor(FieldType.U64, Fid.STAMP)
_START_DESC = descriptor(FieldType.U64, Fid.START)
_HQ = struct.Struct(">HQ")
_HI = struct.Struct(">HI")
_H = struct.Struct(">H")
_I = struct.Struct(">I")
_pack_hq = _HQ.pack
_pack_hi = _HI.pack
_pack_i = _I.pack
_unpack_h = _H.unpack_from
_unpack_i = _I.unpack_from
_unpack_q = struct.Struct(">Q").unpack_from
FRAMED_MIN = 16  # records from which PackedRun.framed copies columns (numpy's fixed cost)

if TYPE_CHECKING:
    from types import ModuleType


class PackedRun:
    """`count` payloads of `size` bytes each, the first at `off` in `data`, one every
    `stride` bytes (the records of a batch frame: a 4-byte length prefix apart; a NATS
    client's pipelined `PUB` run: a control line and CRLF apart): the payloads
    without an object each until asked for (module docstring)."""

    __slots__ = ("data", "off", "count", "size", "stride")

    def __init__(self, data: bytes, off: int, count: int, size: int, stride: int) -> None:
        self.data = data
        self.off = off
        self.count = count
        self.size = size
        self.stride = stride

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.payloads())

    def __repr__(self) -> str:
        return f"PackedRun({self.count} x {self.size} B)"

    def payloads(self) -> list[bytes]:
        data, size, off = self.data, self.size, self.off
        return [data[i:i + size] for i in range(off, off + self.count * self.stride, self.stride)]

    def part(self, start: int, stop: int) -> PackedRun:
        """Payloads start..stop-1 of the run."""
        stop = min(stop, self.count)
        return PackedRun(self.data, self.off + start * self.stride, max(0, stop - start), self.size, self.stride)

    def tail(self, skip: int) -> PackedRun:
        """The run without its first `skip` payloads."""
        return self.part(skip, self.count)

    def framed(self, head: bytes, end: bytes) -> bytes:
        """`head + payload + end` for every payload, joined: one copy per column of the
        output instead of three objects per message."""
        k, size = self.count, self.size
        if k < FRAMED_MIN:
            return head + (end + head).join(self.payloads()) + end
        np = _numpy()
        h, stride = len(head), self.stride
        src = np.frombuffer(self.data, np.uint8, (k - 1) * stride + size, self.off)
        cols = np.lib.stride_tricks.as_strided(src, (k, size), (stride, 1))
        out = np.empty((k, h + size + len(end)), np.uint8)
        out[:, :h] = np.frombuffer(head, np.uint8)
        out[:, h:h + size] = cols
        out[:, h + size:] = np.frombuffer(end, np.uint8)
        return out.tobytes()


_np_module: ModuleType | None = None


def _numpy() -> ModuleType:
    """numpy, imported on the first framed run (the wire package's other users, such as
    the sbus client library, do not load it)."""
    global _np_module
    if _np_module is None:
        import numpy
        _np_module = numpy
    return _np_module


Run = list[bytes] | PackedRun  # a batch's payloads, as decode_batch_run gives them


def skip_run(run: Run, skip: int) -> Run:
    """`run` without its first `skip` payloads."""
    if not skip:
        return run
    return run.tail(skip) if isinstance(run, PackedRun) else run[skip:]


def split_runs(payloads: Run) -> list[Run]:
    """`payloads` cut into runs of at most BATCH_BYTES of records each (in order)."""
    if isinstance(payloads, PackedRun):
        per = max(1, BATCH_BYTES // (payloads.size + 4))
        return [payloads.part(i, i + per) for i in range(0, payloads.count, per)]
    if len(set(map(len, payloads))) == 1:  # one size (a stream): cut by count
        per = max(1, BATCH_BYTES // (len(payloads[0]) + 4))
        return [payloads[i:i + per] for i in range(0, len(payloads), per)] if len(payloads) > per else [payloads]
    runs: list[Run] = []
    start = size = 0
    for i, p in enumerate(payloads):
        n = len(p) + 4
        if size + n > BATCH_BYTES and i > start:
            runs.append(payloads[start:i])
            start, size = i, 0
        size += n
    runs.append(payloads[start:])
    return runs


def encode_batch_fields(seqno: int, stamp: int, payloads: Run, start: int = 0) -> bytearray:
    """The fields of a batch frame (module docstring); seqno, stamp and start are 64-bit."""
    out = bytearray(_pack_hq(_SEQNO_DESC, seqno))
    if stamp:
        out += _pack_hq(_STAMP_DESC, stamp)
    if start:
        out += _pack_hq(_START_DESC, start)
    if isinstance(payloads, PackedRun):  # the records framed in one pass
        size = payloads.count * (payloads.size + 4)
        out += _pack_hi(BATCH_DESC, size)
        out += payloads.framed(_pack_i(payloads.size), b"")
        if size & 1:
            out.append(0)
        return out
    size = 4 * len(payloads) + sum(map(len, payloads))
    out += _pack_hi(BATCH_DESC, size)
    if len(set(map(len, payloads))) == 1:  # one size (a stream): the records joined in one call
        prefix = _pack_i(len(payloads[0]))
        out += prefix
        out += prefix.join(payloads)
    else:
        for p in payloads:
            out += _pack_i(len(p))
            out += p
    if size & 1:
        out.append(0)
    return out


def _same_prefixes(data: bytes, pos: int, stop: int, rec: int, k: int) -> bool:
    """Whether the k records of rec bytes from pos all carry the first one's length
    prefix: four strided slices, one per prefix byte."""
    for j in range(4):
        col = data[pos + j:stop:rec]
        if col.count(data[pos + j]) != k:
            return False
    return True


def decode_batch(buf: bytes | bytearray | memoryview, off: int, end: int) -> tuple[int, int, list[bytes]] | None:
    """(first seqno, stamp, payloads) when buf[off:end] holds batch fields, else None
    (a single message: the caller decodes it as usual). Raises BadField on a batch
    whose records overrun it."""
    got = decode_batch_run(buf, off, end)
    if got is None:
        return None
    seqno, stamp, run, _ = got
    return seqno, stamp, run.payloads() if isinstance(run, PackedRun) else run


def decode_batch_run(buf: bytes | bytearray | memoryview, off: int, end: int) -> tuple[int, int, Run, int] | None:
    """decode_batch, with a run of equal-size payloads left packed (a PackedRun), and
    the stream's start the frame tells (0: none): (first seqno, stamp, run, start)."""
    if end - off < 16 or _unpack_h(buf, off)[0] != _SEQNO_DESC:
        return None
    pos = off + 10
    stamp = start = 0
    if _unpack_h(buf, pos)[0] != BATCH_DESC:  # a stamp or a start first (the usual frame has neither)
        if _unpack_h(buf, pos)[0] == _STAMP_DESC:
            if end - pos < 16:
                return None
            stamp = _unpack_q(buf, pos + 2)[0]
            pos += 10
        if _unpack_h(buf, pos)[0] == _START_DESC:
            if end - pos < 16:
                return None
            start = _unpack_q(buf, pos + 2)[0]
            pos += 10
        if _unpack_h(buf, pos)[0] != BATCH_DESC:
            return None
    size = _unpack_i(buf, pos + 2)[0]
    pos += 6
    stop = pos + size
    if stop + (size & 1) != end:
        raise BadField(f"batch of {size} bytes does not end the frame")
    seqno = _unpack_q(buf, off + 2)[0]
    data = buf if type(buf) is bytes else bytes(buf)
    if stop - pos >= 4:
        first = _unpack_i(data, pos)[0]
        rec = first + 4
        k = size // rec
        if k > 1 and k * rec == size and _same_prefixes(data, pos, stop, rec, k):
            return seqno, stamp, PackedRun(data, pos + 4, k, first, rec), start
    payloads: list[bytes] = []
    append = payloads.append
    while pos < stop:
        if pos + 4 > stop:
            raise BadField("batch record header overruns the batch")
        n = _unpack_i(data, pos)[0]
        pos += 4
        if pos + n > stop:
            raise BadField(f"batch record of {n} bytes overruns the batch")
        append(data[pos:pos + n])
        pos += n
    if not payloads:
        raise BadField("empty batch")
    return seqno, stamp, payloads, start
