"""Typed message fields: the 16-bit descriptor, the value encodings and the fid table.

Implements the manual's "Field Values" section (seed 000). A field is a 16-bit
big-endian descriptor followed by its value:

    bit 15     fixed      (1 for the fixed-size types 0..6)
    bit 14     primitive  (0 only for a nested message, which is a long opaque)
    bits 13-12 unused     (written as 0, ignored when read)
    bits 11-8  type       (FieldType)
    bits 7-0   fid        (Fid)

The manual's dumps print `name_size [N]` where N is `type << 8 | fid`; the fids below
are those numbers. Fids 0..68 and 70, 71, 74, 77 are the reference implementation's;
the ones marked "raims" fill the unused range for what this implementation adds.

Decisions where the manual is silent:
- An integer fid may be sent as u16, u32 or u64 (the dumps show `seqno_2` and `time_8`);
  the encoder picks the smallest width the fid allows that holds the value, the decoder
  accepts any integer width for any fid.
- Values are padded to 2-byte alignment: a bool takes 2 bytes, an odd-length string or
  opaque one more. Strings carry no terminating NUL.
- A null string (the dumps' `expires_s2 : null`) is a zero-length string and decodes as
  None; encoding "" produces the same bytes.
- Nested messages nest at most MAX_NESTING levels deep.
- Strings are UTF-8 with `surrogateescape`: any bytes round-trip (binary Redis channels).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from enum import IntEnum
from typing import NamedTuple

from raims_node.wire.errors import BadField, Truncated

MAX_NESTING = 8
MAX_STRING = 0xFFFF
MAX_LONG_OPAQUE = 0xFFFFFFFF

FIXED_BIT = 0x8000
PRIMITIVE_BIT = 0x4000


class FieldType(IntEnum):
    BOOL = 0
    U16 = 1
    U32 = 2
    U64 = 3
    OPAQUE16 = 4
    OPAQUE32 = 5
    OPAQUE64 = 6
    STRING = 7
    LONG_OPAQUE = 8


FIXED_SIZE = {t: 1 << t for t in range(7)}
INT_TYPES = (FieldType.U16, FieldType.U32, FieldType.U64)
_INT_LIMIT = {FieldType.U16: 1 << 16, FieldType.U32: 1 << 32, FieldType.U64: 1 << 64}


class Fid(IntEnum):
    SUB = 0
    DATA = 1
    SESSION = 2
    BRIDGE = 3
    USER_HMAC = 4
    DIGEST = 5
    AUTH_KEY = 6
    SESS_KEY = 7
    PEER_DB = 8
    MESH_DB = 9
    CNONCE = 10
    SYNC_BRIDGE = 11
    UID_CSUM = 12
    MESH_CSUM = 13
    MESH_FILTER = 14
    ADJACENCY = 15
    BLOOM = 16
    SEQNO = 17
    SUB_SEQNO = 18
    TIME = 19
    UPTIME = 20
    INTERVAL = 21
    REF_CNT = 22
    TOKEN = 23
    RET = 24
    LINK_STATE = 25
    START = 26
    END = 27
    ADJ_INFO = 28
    AUTH_SEQNO = 29
    AUTH_TIME = 30
    FMT = 31
    HOPS = 32
    REF_SEQNO = 33
    TPORTID = 34
    UID = 35
    UID_CNT = 36
    SUBJ_HASH = 37
    SUBJECT = 38
    PATTERN = 39
    REPLY = 40
    UCAST_URL = 41
    MESH_URL = 42
    TPORT = 43
    USER = 44
    SERVICE = 45
    CREATE = 46
    EXPIRES = 47
    VERSION = 48
    AUTH_STAGE = 49
    LINK_ADD = 50
    FD_CNT = 51
    MS_TOT = 52
    MR_TOT = 53
    BS_TOT = 54
    BR_TOT = 55
    MS = 56
    MR = 57
    BS = 58
    BR = 59
    SUB_CNT = 60
    COST = 61
    COST2 = 62
    COST3 = 63
    COST4 = 64
    PEER = 65
    LATENCY = 66
    PK_DIGEST = 67
    TPORT_TYPE = 68
    REASON = 69  # raims: why (event, convergence, rejection)
    STAMP = 70
    CONVERGE = 71
    SHARD_ID = 72  # raims: shardcast, this subscription's shard index
    SHARD_CNT = 73  # raims: shardcast, number of shards
    PK_SIG = 74
    QUEUE = 75  # raims: queue group name (anycast to one member)
    LOSS = 76  # raims: messages lost, in a loss notification
    PUBKEY = 77
    HEADERS = 78  # raims: client message headers (NATS HPUB)
    NAME_TYPE = 79  # raims: TIPC-style service name type
    NAME_LOWER = 80  # raims: name sequence lower bound
    NAME_UPPER = 81  # raims: name sequence upper bound
    LOG_ID = 82  # raims: durable message log id
    LINK_SUM = 83  # raims: sum of every peer's link seqno (heartbeat)
    SUB_SUM = 84  # raims: sum of every peer's subscription seqno (heartbeat)
    SUB_LIST = 85  # raims: a peer's subjects and patterns (sync_rpy, adj_rpy)
    TPORT_ROLE = 86  # raims: an _X.NAME advertisement's role (listen, connect, mesh, any)
    BATCH = 87  # raims: a run of payloads of one subject in one frame (wire/batch.py)


_U = (FieldType.U16, FieldType.U32, FieldType.U64)
_U16_32 = (FieldType.U16, FieldType.U32)
_S = (FieldType.STRING,)
_O16 = (FieldType.OPAQUE16,)
_LO = (FieldType.LONG_OPAQUE,)

# fid -> the types it may be encoded with (first is used unless it is an integer fid).
FID_TYPES: dict[int, tuple[FieldType, ...]] = {
    Fid.SUB: _S, Fid.DATA: _LO, Fid.SESSION: (FieldType.OPAQUE32,), Fid.BRIDGE: _O16,
    Fid.USER_HMAC: _O16, Fid.DIGEST: _O16, Fid.AUTH_KEY: (FieldType.OPAQUE64,),
    Fid.SESS_KEY: (FieldType.OPAQUE64,), Fid.PEER_DB: _LO, Fid.MESH_DB: _LO, Fid.CNONCE: _O16,
    Fid.SYNC_BRIDGE: _O16, Fid.UID_CSUM: _O16, Fid.MESH_CSUM: _O16, Fid.MESH_FILTER: _LO,
    Fid.ADJACENCY: _LO, Fid.BLOOM: _LO,
    Fid.SEQNO: _U, Fid.SUB_SEQNO: _U, Fid.TIME: _U, Fid.UPTIME: _U, Fid.INTERVAL: _U16_32,
    Fid.REF_CNT: _U16_32, Fid.TOKEN: _U, Fid.RET: _U16_32, Fid.LINK_STATE: _U, Fid.START: _U,
    Fid.END: _U, Fid.ADJ_INFO: _U16_32, Fid.AUTH_SEQNO: _U, Fid.AUTH_TIME: _U, Fid.FMT: _U,
    Fid.HOPS: _U16_32, Fid.REF_SEQNO: _U, Fid.TPORTID: _U16_32, Fid.UID: _U16_32,
    Fid.UID_CNT: _U16_32, Fid.SUBJ_HASH: (FieldType.U32,),
    Fid.SUBJECT: _S, Fid.PATTERN: _S, Fid.REPLY: _S, Fid.UCAST_URL: _S, Fid.MESH_URL: _S,
    Fid.TPORT: _S, Fid.USER: _S, Fid.SERVICE: _S, Fid.CREATE: _S, Fid.EXPIRES: _S,
    Fid.VERSION: _S, Fid.AUTH_STAGE: (FieldType.U16,), Fid.LINK_ADD: (FieldType.BOOL,),
    Fid.FD_CNT: _U16_32, Fid.MS_TOT: _U, Fid.MR_TOT: _U, Fid.BS_TOT: _U, Fid.BR_TOT: _U,
    Fid.MS: _U, Fid.MR: _U, Fid.BS: _U, Fid.BR: _U, Fid.SUB_CNT: _U,
    Fid.COST: _U16_32, Fid.COST2: _U16_32, Fid.COST3: _U16_32, Fid.COST4: _U16_32,
    Fid.PEER: _S, Fid.LATENCY: _S, Fid.PK_DIGEST: _O16, Fid.TPORT_TYPE: _S,
    Fid.REASON: _S, Fid.STAMP: _U, Fid.CONVERGE: _U, Fid.SHARD_ID: _U16_32,
    Fid.SHARD_CNT: _U16_32, Fid.PK_SIG: (FieldType.OPAQUE64,), Fid.QUEUE: _S, Fid.LOSS: _U,
    Fid.PUBKEY: (FieldType.OPAQUE32,), Fid.HEADERS: _LO, Fid.NAME_TYPE: _U,
    Fid.NAME_LOWER: _U, Fid.NAME_UPPER: _U, Fid.LOG_ID: _U, Fid.LINK_SUM: _U, Fid.SUB_SUM: _U,
    Fid.SUB_LIST: _LO, Fid.TPORT_ROLE: _S, Fid.BATCH: _LO,
}


def fid_name(fid: int) -> str:
    """The manual's name of a fid ("seqno"), or "fid_N" for one this table lacks."""
    try:
        return Fid(fid).name.lower()
    except ValueError:
        return f"fid_{fid}"


def descriptor(ftype: int, fid: int, primitive: bool = True) -> int:
    """The 16-bit descriptor of a field."""
    fixed = FIXED_BIT if ftype < FieldType.STRING else 0
    return fixed | (PRIMITIVE_BIT if primitive else 0) | (ftype << 8) | fid


def dump_id(ftype: int, fid: int) -> int:
    """The bracketed number the manual prints beside a field: `type << 8 | fid`."""
    return (ftype << 8) | fid


FieldValue = bool | int | bytes | str | None | list[tuple[int, object]]  # or a Nested (lazy decode)
Fields = list[tuple[int, object]]


class Message(NamedTuple):
    """The fields of a published message (`encode_message_fields`)."""

    seqno: int
    stamp: int  # 0: none (the stream goes on)
    reply: str | None
    headers: bytes | None
    payload: bytes
    start: int = 0  # the stream's start stamp, on a frame re-stamped after a route change (router/stream_start.py)


class Nested:
    """A nested message left encoded by `decode_fields(..., lazy=True)`: `raw` holds its
    fields, decoded by `fields()` when wanted. A router reads many system messages only
    to find them stale, and the same record (a link, a peer summary) recurs in many of
    them; the raw bytes are what identical records share."""

    __slots__ = ("depth", "raw")

    def __init__(self, raw: bytes, depth: int) -> None:
        self.raw = raw
        self.depth = depth  # the nesting depth of its fields

    def fields(self, lazy: bool = False) -> Fields:
        return decode_fields(self.raw, 0, len(self.raw), self.depth, lazy)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Nested) and other.raw == self.raw

    def __hash__(self) -> int:
        return hash(self.raw)

    def __repr__(self) -> str:
        return f"Nested({self.raw!r})"


class DecodedField(NamedTuple):
    fid: int
    ftype: FieldType
    value: object


_PACK_U16 = struct.Struct(">H").pack
_PACK_U32 = struct.Struct(">I").pack
_PACK_U64 = struct.Struct(">Q").pack
_PACK_DESC_U16 = struct.Struct(">HH").pack
_PACK_DESC_U32 = struct.Struct(">HI").pack
_PACK_DESC_U64 = struct.Struct(">HQ").pack
_UNPACK_H = struct.Struct(">H").unpack_from
_UNPACK_I = struct.Struct(">I").unpack_from
_UNPACK_Q = struct.Struct(">Q").unpack_from

_DATA_DESC = descriptor(FieldType.LONG_OPAQUE, Fid.DATA)
_new = tuple.__new__  # a NamedTuple without its generated __new__, a third of the cost
_SEQNO_DESC = descriptor(FieldType.U64, Fid.SEQNO)  # the widths a publisher's seqno and stamp have
_STAMP_DESC = descriptor(FieldType.U64, Fid.STAMP)
_WIDE, _TOO_WIDE = 1 << 32, 1 << 64  # the integers written as U64


# per fid, what the encoder needs: (kind, descriptor) where the kind is the first type
# of the fid (an int type picks its width per value, from _INT_ENC)
_E_INT, _E_BOOL, _E_FIXED, _E_STRING, _E_LONG = range(5)


def _enc_spec(ftype: FieldType, fid: int) -> tuple[int, int]:
    if ftype in INT_TYPES:
        return _E_INT, 0
    if ftype is FieldType.BOOL:
        return _E_BOOL, descriptor(ftype, fid)
    if ftype <= FieldType.OPAQUE64:
        return _E_FIXED, descriptor(ftype, fid)
    if ftype is FieldType.STRING:
        return _E_STRING, descriptor(ftype, fid)
    return _E_LONG, descriptor(ftype, fid)


_ENC = {fid: _enc_spec(types[0], fid) for fid, types in FID_TYPES.items()}
_PACKERS = {FieldType.U16: _PACK_DESC_U16, FieldType.U32: _PACK_DESC_U32, FieldType.U64: _PACK_DESC_U64}
_INT_ENC = {
    fid: tuple((_INT_LIMIT[t], _PACKERS[t], descriptor(t, fid)) for t in types)
    for fid, types in FID_TYPES.items()
    if types[0] in INT_TYPES
}
_LONG_NESTED_DESC = {fid: descriptor(FieldType.LONG_OPAQUE, fid, False) for fid in _ENC}


def _int_field(out: bytearray, fid: int, value: int) -> None:
    if value < 0:
        raise BadField(f"{fid_name(fid)}: negative integer {value}")
    for limit, pack, desc in _INT_ENC[fid]:
        if value < limit:
            out += pack(desc, value)
            return
    raise BadField(f"{fid_name(fid)}: integer {value} does not fit {FID_TYPES[fid][-1].name}")


def _long_field(out: bytearray, fid: int, desc: int, raw: bytes | bytearray | memoryview) -> None:
    """Append a long opaque field: descriptor, 32-bit size, the bytes, padded to even."""
    size = len(raw)
    if size > MAX_LONG_OPAQUE:
        raise BadField(f"{fid_name(fid)}: {size} bytes exceed {MAX_LONG_OPAQUE}")
    out += _PACK_DESC_U32(desc, size)
    out += raw
    if size & 1:
        out.append(0)


def encode_field(out: bytearray, fid: int, value: object, depth: int = 0) -> None:
    """Append one field to `out`; raises BadField when fid and value do not fit."""
    spec = _ENC.get(fid)
    if spec is None:
        raise BadField(f"fid {fid} is not in the field table")
    kind, desc = spec
    if kind == _E_INT:
        if type(value) is not int and (not isinstance(value, int) or isinstance(value, bool)):
            raise BadField(f"{fid_name(fid)}: expected an integer, got {type(value).__name__}")
        _int_field(out, fid, value)
        return
    if kind == _E_LONG:  # bytes, or a nested message given as a list of (fid, value)
        if isinstance(value, list):
            if depth >= MAX_NESTING:
                raise BadField(f"{fid_name(fid)}: messages nested deeper than {MAX_NESTING}")
            raw: bytes | bytearray | memoryview = encode_fields(value, depth + 1)
            desc = _LONG_NESTED_DESC[fid]
        elif isinstance(value, bytes | bytearray):
            raw = value
        elif isinstance(value, memoryview):
            raw = value.tobytes()
        elif isinstance(value, Nested):  # a nested message as it was received
            raw = value.raw
            desc = _LONG_NESTED_DESC[fid]
        else:
            raise BadField(f"{fid_name(fid)}: expected bytes or a message, got {type(value).__name__}")
        _long_field(out, fid, desc, raw)
        return
    if kind == _E_STRING:
        if value is None:
            sraw = b""
        elif isinstance(value, str):
            sraw = value.encode("utf-8", "surrogateescape")
        else:
            raise BadField(f"{fid_name(fid)}: expected a string, got {type(value).__name__}")
        if len(sraw) > MAX_STRING:
            raise BadField(f"{fid_name(fid)}: string of {len(sraw)} bytes exceeds {MAX_STRING}")
        out += _PACK_DESC_U16(desc, len(sraw))
        out += sraw
        if len(sraw) & 1:
            out.append(0)
        return
    if kind == _E_FIXED:
        size = FIXED_SIZE[FID_TYPES[fid][0]]
        if not isinstance(value, bytes | bytearray | memoryview) or len(value) != size:
            raise BadField(f"{fid_name(fid)}: expected {size} bytes, got {_describe(value)}")
        out += _PACK_U16(desc)
        out += value
        return
    if not isinstance(value, bool):
        raise BadField(f"{fid_name(fid)}: expected a bool, got {type(value).__name__}")
    out += _PACK_U16(desc)
    out += b"\x01\x00" if value else b"\x00\x00"


def _describe(value: object) -> str:
    if isinstance(value, bytes | bytearray | memoryview):
        return f"{len(value)} bytes"
    return type(value).__name__


def encode_message_fields(seqno: int, stamp: int, reply: str | None, headers: bytes | None,
                          payload: bytes, start: int = 0) -> bytearray:
    """The fields of a published message, seqno, stamp, start, reply, headers and data, the
    zero stamp and start and empty reply and headers left out: the bytes `encode_fields`
    gives for them, built without its per-field dispatch (the publish hot path)."""
    if _WIDE <= seqno < _TOO_WIDE:  # a stream's seqno carries its time frame: 64 bits
        out = bytearray(_PACK_DESC_U64(_SEQNO_DESC, seqno))
    else:
        out = bytearray()
        _int_field(out, Fid.SEQNO, seqno)
    if _WIDE <= stamp < _TOO_WIDE:
        out += _PACK_DESC_U64(_STAMP_DESC, stamp)
    elif stamp:
        _int_field(out, Fid.STAMP, stamp)
    if start:
        _int_field(out, Fid.START, start)
    if reply:
        encode_field(out, Fid.REPLY, reply)
    if headers:
        encode_field(out, Fid.HEADERS, headers)
    _long_field(out, Fid.DATA, _DATA_DESC, payload)
    return out


def decode_message_fields(buf: bytes | bytearray | memoryview, off: int, end: int) -> Message:
    """The fields of a published message in buf[off:end]: the usual layout (seqno, an
    optional stamp, data) read directly, any other through `decode_fields`. Raises only
    WireError subclasses (BadField when a field has the wrong type)."""
    pos = off
    if end - pos >= 10 and _UNPACK_H(buf, pos)[0] == _SEQNO_DESC:
        seqno = _UNPACK_Q(buf, pos + 2)[0]
        pos += 10
        stamp = 0
        if end - pos >= 10 and _UNPACK_H(buf, pos)[0] == _STAMP_DESC:
            stamp = _UNPACK_Q(buf, pos + 2)[0]
            pos += 10
        if end - pos >= 6 and _UNPACK_H(buf, pos)[0] == _DATA_DESC:
            size = _UNPACK_I(buf, pos + 2)[0]
            if pos + 6 + size + (size & 1) == end:
                return _new(Message, (seqno, stamp, None, None, bytes(buf[pos + 6 : pos + 6 + size]), 0))
    return message_of(decode_fields(buf, off, end))


def message_of(fields: Fields) -> Message:
    """The published message in decoded fields (the last of a repeated field wins)."""
    d = dict(fields)
    seqno, stamp, start = d.get(Fid.SEQNO, 0), d.get(Fid.STAMP, 0), d.get(Fid.START, 0)
    reply, headers, payload = d.get(Fid.REPLY), d.get(Fid.HEADERS), d.get(Fid.DATA, b"")
    if type(seqno) is not int or type(stamp) is not int or type(start) is not int:
        raise BadField("message seqno, stamp or start is not an integer")
    if not isinstance(reply, str | None) or not isinstance(headers, bytes | None) or not isinstance(payload, bytes):
        raise BadField("message reply, headers or data has the wrong type")
    return Message(seqno, stamp, reply, headers, payload, start)


def encode_fields(fields: Iterable[tuple[int, object]], depth: int = 0) -> bytearray:
    """Encode (fid, value) pairs in order."""
    out = bytearray()
    for fid, value in fields:
        encode_field(out, fid, value, depth)
    return out


# the decoder's dispatch: the kind of field a descriptor's high byte announces (flag bits
# and type together), one list index instead of the bit tests per field
_K_U16, _K_U32, _K_U64, _K_LONG, _K_NESTED, _K_STRING, _K_OPAQUE, _K_BOOL, _K_BAD = range(9)


def _kind(high: int) -> int:
    ftype, fixed, primitive = high & 0xF, high & 0x80, high & 0x40
    if ftype <= FieldType.OPAQUE64:
        if not fixed or not primitive:
            return _K_BAD
        return {0: _K_BOOL, 1: _K_U16, 2: _K_U32, 3: _K_U64}.get(ftype, _K_OPAQUE)
    if ftype == FieldType.STRING:
        return _K_BAD if fixed or not primitive else _K_STRING
    if ftype == FieldType.LONG_OPAQUE:
        return _K_BAD if fixed else (_K_LONG if primitive else _K_NESTED)
    return _K_BAD


_KINDS = [_kind(h) for h in range(256)]
_INT_UNPACKERS = (_UNPACK_H, _UNPACK_I, _UNPACK_Q)  # by kind


def decode_fields(
    buf: bytes | bytearray | memoryview, off: int = 0, end: int | None = None, depth: int = 0, lazy: bool = False
) -> Fields:
    """Decode the fields in buf[off:end] into (fid, value) pairs, in order; with `lazy`
    a nested message stays encoded, a `Nested` (its depth checked when decoded).

    Raises only WireError subclasses; every length is checked against `end` first.
    """
    if end is None:
        end = len(buf)
    out: Fields = []
    append = out.append
    kinds = _KINDS
    unpack_h, unpack_i, unpackers = _UNPACK_H, _UNPACK_I, _INT_UNPACKERS
    while off < end:
        if end - off < 2:
            raise Truncated("field descriptor cut short", off)
        high = buf[off]
        fid = buf[off + 1]
        kind = kinds[high]
        start = off
        off += 2
        left = end - off
        if kind <= _K_U64:  # 0..2: u16, u32, u64
            size = 2 << kind
            if left < size:
                raise Truncated(f"{fid_name(fid)}: needs {size} bytes, {left} left", off)
            value: object = unpackers[kind](buf, off)[0]
            off += size
        elif kind <= _K_NESTED:  # long opaque: bytes or a nested message
            if left < 4:
                raise Truncated(f"{fid_name(fid)}: long opaque length cut short", off)
            n = unpack_i(buf, off)[0]
            off += 4
            if left - 4 < n + (n & 1):
                raise Truncated(f"{fid_name(fid)}: long opaque of {n} bytes, {left - 4} left", off)
            if kind == _K_LONG:
                value = bytes(buf[off : off + n])
            else:
                if depth >= MAX_NESTING:
                    raise BadField(f"{fid_name(fid)}: messages nested deeper than {MAX_NESTING}", start)
                value = Nested(bytes(buf[off : off + n]), depth + 1) if lazy else decode_fields(
                    buf, off, off + n, depth + 1)
            off += n + (n & 1)
        elif kind == _K_STRING:
            if left < 2:
                raise Truncated(f"{fid_name(fid)}: string length cut short", off)
            n = unpack_h(buf, off)[0]
            off += 2
            if left - 2 < n + (n & 1):
                raise Truncated(f"{fid_name(fid)}: string of {n} bytes, {left - 2} left", off)
            value = bytes(buf[off : off + n]).decode("utf-8", "surrogateescape") if n else None
            off += n + (n & 1)
        elif kind == _K_OPAQUE:
            size = 1 << (high & 0xF)
            if left < size:
                raise Truncated(f"{fid_name(fid)}: needs {size} bytes, {left} left", off)
            value = bytes(buf[off : off + size])
            off += size
        elif kind == _K_BOOL:
            if left < 2:
                raise Truncated(f"{fid_name(fid)}: bool padding cut short", off)
            value = buf[off] != 0
            off += 2
        else:
            raise BadField(_bad_descriptor(high, fid), start)
        append((fid, value))
    return out


def _bad_descriptor(high: int, fid: int) -> str:
    ftype = high & 0xF
    if ftype <= FieldType.OPAQUE64:
        return f"{fid_name(fid)}: fixed type {ftype} without fixed/primitive bits"
    if ftype == FieldType.STRING:
        return f"{fid_name(fid)}: string with fixed bit or without primitive bit"
    if ftype == FieldType.LONG_OPAQUE:
        return f"{fid_name(fid)}: long opaque with the fixed bit"
    return f"fid {fid}: unknown field type {ftype}"


def decode_typed_fields(buf: bytes | bytearray | memoryview, off: int = 0, end: int | None = None) -> list[DecodedField]:
    """Like decode_fields, with each field's wire type (for dumps: `seqno_2 [273]`)."""
    if end is None:
        end = len(buf)
    out: list[DecodedField] = []
    for fid, value in decode_fields(buf, off, end):
        # re-read the descriptor to report the type actually used on the wire
        desc = (buf[off] << 8) | buf[off + 1]
        ftype = FieldType((desc >> 8) & 0xF)
        out.append(DecodedField(fid, ftype, value))
        off = _skip_field(buf, off)
    return out


def _skip_field(buf: bytes | bytearray | memoryview, off: int) -> int:
    desc = (buf[off] << 8) | buf[off + 1]
    ftype = (desc >> 8) & 0xF
    off += 2
    if ftype == FieldType.BOOL:
        return off + 2
    if ftype <= FieldType.OPAQUE64:
        return off + (1 << ftype)
    if ftype == FieldType.STRING:
        n = _UNPACK_H(buf, off)[0]
        return off + 2 + n + (n & 1)
    n = _UNPACK_I(buf, off)[0]
    return off + 4 + n + (n & 1)
