"""Records of a message log file, pure encode/decode (seed 004 section 1.1).

Every record, header and footer included, is a 28-byte record header and a data part:

    offset size field
    0      4    crc      CRC-32 of everything after it: bytes 4..27 and the data
    4      1    kind     b'H' file header, b'M' message, b'F' footer
    5      1    origin   node number of the message's origin (header/footer: the log's)
    6      2    flags    0 (reserved)
    8      4    length   bytes of data that follow the record header
    12     8    id       message id (header/footer: the file number)
    20     8    time     nanoseconds since the epoch (message: when it originated;
                         header: when the file started; footer: when it was closed)

(The CRC comes first so that it covers one contiguous run: one crc32 call per record.)

All integers little-endian. A header's data is MAGIC, a version byte, the log's node
number, its kind (content or state) and a pad byte, then the log's state when the file
started (`State.encode`). A footer's data is the state when the file was closed. Message
data is the application's bytes, text or binary, at most MAX_DATA.

The same bytes travel on server/client connections, so a server can send a run of its
file unchanged and the client checks every record's checksum before logging it.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from enum import IntEnum
from typing import Final, NamedTuple

from raims_node.msglog.errors import MsgLogError
from raims_node.msglog.state import State

HEAD: Final = struct.Struct("<IBBHIQq")
HEAD_SIZE: Final = HEAD.size  # 28
MAGIC: Final = b"NBMSGLOG"
VERSION: Final = 1
_FILE_HEAD: Final = struct.Struct("<8sBBBB")
MAX_DATA: Final = 16 * 1024 * 1024  # one message's data; larger is a format error


class Kind(IntEnum):
    HEADER = ord("H")
    MESSAGE = ord("M")
    FOOTER = ord("F")


class LogKind(IntEnum):
    CONTENT = 1
    STATE = 2


_KINDS: Final = frozenset(int(k) for k in Kind)


class Record(NamedTuple):
    kind: int
    origin: int
    mid: int
    time_ns: int
    data: bytes


@dataclass(frozen=True, slots=True)
class FileHeader:
    node_number: int
    log_kind: LogKind
    file_no: int
    time_ns: int
    state: State


def encode(kind: int, origin: int, mid: int, time_ns: int, data: bytes) -> bytes:
    if len(data) > MAX_DATA:
        raise MsgLogError(f"message of {len(data)} bytes exceeds max {MAX_DATA}")
    head = HEAD.pack(0, kind, origin, 0, len(data), mid, time_ns)[4:]
    crc = zlib.crc32(data, zlib.crc32(head))
    return crc.to_bytes(4, "little") + head + data


def encode_message(origin: int, mid: int, time_ns: int, data: bytes) -> bytes:
    return encode(Kind.MESSAGE, origin, mid, time_ns, data)


def encode_header(h: FileHeader) -> bytes:
    data = _FILE_HEAD.pack(MAGIC, VERSION, h.node_number, int(h.log_kind), 0) + h.state.encode()
    return encode(Kind.HEADER, h.node_number, h.file_no, h.time_ns, data)


def encode_footer(node_number: int, file_no: int, time_ns: int, state: State) -> bytes:
    return encode(Kind.FOOTER, node_number, file_no, time_ns, state.encode())


def decode_header(rec: Record, where: str) -> FileHeader:
    if rec.kind != Kind.HEADER:
        raise MsgLogError(f"{where}: first record is not a file header")
    try:
        magic, version, number, log_kind, _ = _FILE_HEAD.unpack_from(rec.data, 0)
    except struct.error:
        raise MsgLogError(f"{where}: file header too short") from None
    if magic != MAGIC or version != VERSION:
        raise MsgLogError(f"{where}: not a message log file (magic {magic!r}, version {version})")
    state, _ = State.decode(rec.data, _FILE_HEAD.size)
    return FileHeader(number, LogKind(log_kind), rec.mid, rec.time_ns, state)


class Bad(NamedTuple):
    """Where scanning stopped on a record that is not whole or not valid."""

    offset: int
    why: str
    extent: int  # where the bad record claims to end (>= offset + HEAD_SIZE)


class Head(NamedTuple):
    """A whole, valid record's header fields and where its data ends."""

    offset: int
    kind: int
    origin: int
    mid: int
    time_ns: int
    stop: int


def scan_heads(
    buf: bytes | memoryview, offset: int = 0, verify: bool = True
) -> Iterator[Head | Bad]:
    """The header of each whole record from `offset` (data not copied); a final `Bad` when
    the bytes end inside a record or a record is invalid (nothing when they end cleanly)."""
    view = memoryview(buf)
    end = len(view)
    unpack = HEAD.unpack_from
    crc32 = zlib.crc32
    while offset < end:
        if end - offset < HEAD_SIZE:
            yield Bad(offset, "short record header", offset + HEAD_SIZE)
            return
        crc, kind, origin, _flags, length, mid, time_ns = unpack(view, offset)
        stop = offset + HEAD_SIZE + length
        if kind not in _KINDS or length > MAX_DATA:
            yield Bad(offset, f"bad record kind {kind} or length {length}", stop)
            return
        if stop > end:
            yield Bad(offset, f"record of {length} bytes cut short", stop)
            return
        if verify and crc32(view[offset + 4 : stop]) != crc:
            yield Bad(offset, "checksum mismatch", stop)
            return
        yield Head(offset, kind, origin, mid, time_ns, stop)
        offset = stop


def valid_record_after(buf: bytes, start: int, window: int = 1 << 20) -> bool:
    """Whether a whole record with a good checksum starts within `window` bytes after
    `start` (a damaged record is followed by good ones; a torn write's tail is not)."""
    view = memoryview(buf)
    end = len(view)
    kinds = bytes(sorted(_KINDS))
    for p in range(start + 1, min(end - HEAD_SIZE, start + window) + 1):
        if view[p + 4] not in kinds:
            continue
        crc, kind, _origin, _flags, length, _mid, _time = HEAD.unpack_from(view, p)
        stop = p + HEAD_SIZE + length
        if length <= MAX_DATA and stop <= end and zlib.crc32(view[p + 4 : stop]) == crc:
            return True
    return False


def scan(
    buf: bytes | memoryview, offset: int = 0, verify: bool = True
) -> Iterator[tuple[int, Record] | Bad]:
    """(offset, record) for each whole record from `offset`, then `Bad` as `scan_heads`."""
    view = memoryview(buf)
    for h in scan_heads(view, offset, verify):
        if isinstance(h, Bad):
            yield h
            return
        data = bytes(view[h.offset + HEAD_SIZE : h.stop])
        yield h.offset, Record(h.kind, h.origin, h.mid, h.time_ns, data)
