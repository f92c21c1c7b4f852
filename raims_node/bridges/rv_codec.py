"""The bytes of the TIBCO Rendezvous daemon-client protocol, sans-IO (issue 25 point 1).

The manual ("Tib RV") names the protocol but not its bytes; these are the facts of the
open-source daemon of the same authors (raitechnology/sassrv, ev_rv.cpp, and the rvmsg
codec of raitechnology/raimd), written here from scratch:

- Session start: the daemon sends a 12-byte version record (three big-endian u32: 0,
  4, 0) and the client answers with the same; the daemon then sends a 64-byte info
  record (sixteen big-endian u32: kind, 2, 0, 1, 0, 4<<24, 4<<24, then zeros) of kind
  2 (request), the client answers kind 3 (response) and the daemon closes with kind 1
  (agreement). After that every message is an rvmsg.
- An rvmsg is `u32 size` (big-endian, counting itself), `u32 magic 0x9955eeaa`, then
  fields. A message of size 8 (no fields) is a keep-alive.
- A field is `u8 name length` (counting a trailing NUL), the name and its NUL, `u8
  type`, a size, the data. Sizes of the variable types: one byte below 120, else 121
  and a u16 of size + 2, or 122 and a u32 of size + 4. The fixed types (int, uint,
  real, boolean, ipdata, datetime) have a one-byte size. A nested message (type 1) is
  122 followed by the whole nested rvmsg, its own u32 size first.
- A subject (type 2) is `u8 segment count`, then per segment `u8 (length + 2)`, the
  characters and a NUL: `A.B` is `02 03 'A' 00 03 'B' 00`.
- Integers and ipdata are big-endian; strings carry their NUL in the size.

Decode errors are `RvCodecError` (a BridgeError): a client sending one is closed.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from raims_node.bridges.errors import BridgeError

MAGIC = 0x9955EEAA
HEADER = struct.Struct(">II")
HEADER_LEN = 8
VERSION_REC = struct.pack(">III", 0, 4, 0)
VERSION_REC_LEN = 12
INFO_REC_LEN = 64
INFO_REQUEST, INFO_RESPONSE, INFO_AGREE = 2, 3, 1

T_RVMSG, T_SUBJECT, T_DATETIME, T_OPAQUE, T_STRING = 1, 2, 3, 7, 8
T_BOOLEAN, T_IPDATA, T_INT, T_UINT, T_REAL = 9, 10, 11, 12, 13
T_ENCRYPTED, T_XML = 32, 47
ARRAY_TYPES = frozenset((34, 35, 36, 37, 38, 39, 40, 41, 44, 45, 48, 49))
VARIABLE_TYPES = frozenset((T_SUBJECT, T_OPAQUE, T_STRING, T_ENCRYPTED, T_XML)) | ARRAY_TYPES
FIXED_TYPES = frozenset((T_DATETIME, T_BOOLEAN, T_IPDATA, T_INT, T_UINT, T_REAL))
SIZE_SHORT, SIZE_LONG = 121, 122
TINY_LIMIT = 120
SHORT_LIMIT = 30000  # below this the u16 form (the reference's choice)
MAX_SEGMENT = 253
MAX_SEGMENTS = 255
MAX_DEPTH = 8  # nested messages decoded at most this deep


class RvCodecError(BridgeError):
    """Bytes that are not an rvmsg (or a subject that cannot be one)."""


def info_rec(kind: int) -> bytes:
    """The 64-byte info record of `kind` (INFO_REQUEST, INFO_RESPONSE, INFO_AGREE)."""
    return struct.pack(">7I", kind, 2, 0, 1, 0, 4 << 24, 4 << 24) + bytes(INFO_REC_LEN - 28)


def info_kind(rec: bytes) -> int:
    return int.from_bytes(rec[:4], "big")


# ------------------------------------------------------------------ subjects


def encode_subject(subject: str) -> bytes:
    """The subject field's data; RvCodecError for empty segments or past the limits."""
    segs = subject.encode("utf-8", "surrogateescape").split(b".")
    if len(segs) > MAX_SEGMENTS:
        raise RvCodecError(f"subject {subject!r}: more than {MAX_SEGMENTS} segments")
    out = bytearray((len(segs),))
    for seg in segs:
        if not seg or len(seg) > MAX_SEGMENT or 0 in seg:
            raise RvCodecError(f"subject {subject!r}: a segment is empty, too long or holds a NUL")
        out.append(len(seg) + 2)
        out += seg
        out.append(0)
    return bytes(out)


def decode_subject(data: bytes) -> str:
    if not data or data[0] == 0:
        raise RvCodecError("subject without segments")
    count, i, n = data[0], 1, len(data)
    segs: list[bytes] = []
    for _ in range(count):
        if i >= n or data[i] < 2 or i + data[i] > n:
            raise RvCodecError("subject segment out of bounds")
        end = i + data[i]
        seg = data[i + 1:end - 1]
        if not seg or data[end - 1] != 0:
            raise RvCodecError("subject segment empty or not terminated")
        segs.append(seg)
        i = end
    if i != n:
        raise RvCodecError("bytes after the subject's last segment")
    return b".".join(segs).decode("utf-8", "surrogateescape")


# ------------------------------------------------------------------ fields


@dataclass(frozen=True, slots=True)
class Field:
    """One decoded field: its name, type and data (no size prefix; a nested message
    keeps its own header)."""

    name: str
    type: int
    data: bytes

    def text(self) -> str:
        """A string (NUL dropped) or subject field as text."""
        if self.type == T_SUBJECT:
            return decode_subject(self.data)
        if self.type not in (T_STRING, T_OPAQUE):
            raise RvCodecError(f"field {self.name!r} of type {self.type} is not text")
        data = self.data[:-1] if self.data.endswith(b"\x00") else self.data
        return data.decode("utf-8", "surrogateescape")

    def integer(self) -> int:
        if self.type not in (T_INT, T_UINT, T_IPDATA) or len(self.data) not in (1, 2, 4, 8):
            raise RvCodecError(f"field {self.name!r} is not an integer")
        return int.from_bytes(self.data, "big", signed=self.type == T_INT)

    def message(self) -> RvMsg:
        if self.type != T_RVMSG:
            raise RvCodecError(f"field {self.name!r} is not a message")
        return decode(self.data)


class RvMsg:
    """A decoded rvmsg: its fields in order, looked up by name (the first of a name)."""

    __slots__ = ("_depth", "fields")

    def __init__(self, fields: list[Field], depth: int = 0) -> None:
        self.fields = fields
        self._depth = depth

    def get(self, name: str) -> Field | None:
        for f in self.fields:
            if f.name == name:
                return f
        return None

    def text(self, name: str, default: str = "") -> str:
        f = self.get(name)
        return default if f is None else f.text()

    def to_dict(self) -> dict[str, object]:
        """Field values as Python values (tests and logs): text, int, bytes or dicts."""
        out: dict[str, object] = {}
        for f in self.fields:
            value: object
            if f.type in (T_STRING, T_SUBJECT):
                value = f.text()
            elif f.type in (T_INT, T_UINT) and len(f.data) in (1, 2, 4, 8):
                value = f.integer()
            elif f.type == T_RVMSG and self._depth < MAX_DEPTH:
                value = decode(f.data, self._depth + 1).to_dict()
            else:
                value = f.data
            out[f.name] = value
        return out


def _size(data: bytes, i: int, end: int) -> tuple[int, int]:
    """(data size, offset of the data) of a variable-size field whose size starts at i."""
    if i >= end:
        raise RvCodecError("field size out of bounds")
    b = data[i]
    if b == SIZE_SHORT:
        if i + 3 > end:
            raise RvCodecError("field size out of bounds")
        size = int.from_bytes(data[i + 1:i + 3], "big") - 2
        i += 3
    elif b == SIZE_LONG:
        if i + 5 > end:
            raise RvCodecError("field size out of bounds")
        size = int.from_bytes(data[i + 1:i + 5], "big") - 4
        i += 5
    else:
        size, i = b, i + 1
    if size < 0 or i + size > end:
        raise RvCodecError("field data out of bounds")
    return size, i


def spans(data: bytes, start: int, end: int) -> Iterator[tuple[bytes, int, int, int]]:
    """(raw name with its NUL, type, data start, data end) of each field in data[start:end]."""
    i = start
    while i < end:
        name_len = data[i]
        i += 1
        if i + name_len >= end:
            raise RvCodecError("field name out of bounds")
        raw = data[i:i + name_len]
        i += name_len
        ftype = data[i]
        i += 1
        if ftype == T_RVMSG:
            if i >= end or data[i] != SIZE_LONG or i + 1 + HEADER_LEN > end:
                raise RvCodecError(f"field {raw!r}: a nested message without its size")
            i += 1
            size = int.from_bytes(data[i:i + 4], "big")
            if size < HEADER_LEN or i + size > end:
                raise RvCodecError(f"field {raw!r}: nested message out of bounds")
        elif ftype in VARIABLE_TYPES:
            size, i = _size(data, i, end)
        elif ftype in FIXED_TYPES:
            if i >= end:
                raise RvCodecError("field size out of bounds")
            size = data[i]
            i += 1
            if i + size > end:
                raise RvCodecError(f"field {raw!r}: data out of bounds")
        else:
            raise RvCodecError(f"field {raw!r}: unknown type {ftype}")
        yield raw, ftype, i, i + size
        i += size


def iter_fields(data: bytes, start: int, end: int) -> Iterator[Field]:
    for raw, ftype, a, b in spans(data, start, end):
        name = (raw[:-1] if raw.endswith(b"\x00") else raw).decode("utf-8", "surrogateescape")
        yield Field(name, ftype, bytes(data[a:b]))


@dataclass(slots=True)
class Envelope:
    """The fields the daemon routes by, read without decoding the rest: `mtype`, the
    raw `sub` data, `return` as text, and the `data` field's type and bytes."""

    mtype: bytes = b""
    sub: bytes | None = None
    reply: str | None = None
    dtype: int = 0
    data: bytes = b""
    data_start: int = 0  # where `data`'s bytes start in the frame, 0 without a data field
    data_last: bool = False  # the data field ends the frame


_N_MTYPE, _N_SUB, _N_RETURN, _N_DATA = b"mtype\x00", b"sub\x00", b"return\x00", b"data\x00"


def envelope(frame: bytes) -> Envelope:
    """A whole rvmsg's routing fields (its header already checked by the reader)."""
    env = Envelope()
    for raw, ftype, a, b in spans(frame, HEADER_LEN, len(frame)):
        if raw == _N_MTYPE:
            if ftype == T_STRING:
                env.mtype = frame[a:b].rstrip(b"\x00")
        elif raw == _N_SUB:
            if ftype == T_SUBJECT:
                env.sub = frame[a:b]
        elif raw == _N_RETURN:
            if ftype == T_STRING and b > a:
                env.reply = frame[a:b].rstrip(b"\x00").decode("utf-8", "surrogateescape") or None
        elif raw == _N_DATA:
            env.dtype, env.data, env.data_start = ftype, frame[a:b], a
            env.data_last = b == len(frame)
        else:
            env.data_last = False
    return env


def decode(data: bytes, depth: int = 0) -> RvMsg:
    """One whole rvmsg (its header's size must be its length)."""
    if depth > MAX_DEPTH:
        raise RvCodecError("messages nested too deep")
    if len(data) < HEADER_LEN:
        raise RvCodecError("rvmsg shorter than its header")
    size, magic = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise RvCodecError(f"bad rvmsg magic {magic:#x}")
    if size != len(data):
        raise RvCodecError(f"rvmsg size {size} is not its length {len(data)}")
    return RvMsg(list(iter_fields(data, HEADER_LEN, size)), depth)


def is_rvmsg(data: bytes) -> bool:
    """Whether a payload is one whole rvmsg by its header (then delivered as a message)."""
    return len(data) >= HEADER_LEN and HEADER.unpack_from(data) == (len(data), MAGIC)


# ------------------------------------------------------------------ encoding


def _name(name: str) -> bytes:
    raw = name.encode("utf-8", "surrogateescape")
    if len(raw) + 1 > 255:
        raise RvCodecError(f"field name {name!r} too long")
    return bytes((len(raw) + 1,)) + raw + b"\x00"


def _var_size(n: int) -> bytes:
    if n < TINY_LIMIT:
        return bytes((n,))
    if n < SHORT_LIMIT:
        return bytes((SIZE_SHORT,)) + (n + 2).to_bytes(2, "big")
    return bytes((SIZE_LONG,)) + (n + 4).to_bytes(4, "big")


class Writer:
    """Builds one rvmsg: append fields, then `finish()`."""

    __slots__ = ("_body",)

    def __init__(self) -> None:
        self._body = bytearray()

    def raw(self, name: str, ftype: int, data: bytes) -> Writer:
        body = self._body
        body += _name(name)
        body.append(ftype)
        if ftype == T_RVMSG:
            body.append(SIZE_LONG)
        elif ftype in FIXED_TYPES:
            body.append(len(data))
        elif ftype == T_SUBJECT:  # subjects always in the u16 form, as the reference writes them
            body.append(SIZE_SHORT)
            body += (len(data) + 2).to_bytes(2, "big")
        else:
            body += _var_size(len(data))
        body += data
        return self

    def string(self, name: str, value: str) -> Writer:
        return self.raw(name, T_STRING, value.encode("utf-8", "surrogateescape") + b"\x00")

    def opaque(self, name: str, value: bytes) -> Writer:
        return self.raw(name, T_OPAQUE, value)

    def subject(self, name: str, value: str) -> Writer:
        return self.raw(name, T_SUBJECT, encode_subject(value))

    def int32(self, name: str, value: int) -> Writer:
        return self.raw(name, T_INT, value.to_bytes(4, "big", signed=True))

    def uint32(self, name: str, value: int) -> Writer:
        return self.raw(name, T_UINT, min(value, 0xFFFFFFFF).to_bytes(4, "big"))

    def ipdata(self, name: str, value: bytes) -> Writer:
        return self.raw(name, T_IPDATA, value)

    def message(self, name: str, value: bytes) -> Writer:
        """A nested message: `value` is a whole rvmsg (a `finish()`ed Writer)."""
        return self.raw(name, T_RVMSG, value)

    def finish(self) -> bytes:
        return HEADER.pack(HEADER_LEN + len(self._body), MAGIC) + self._body

    def fields(self) -> bytes:
        """The encoded fields without the header (a prefix to reuse with `join`)."""
        return bytes(self._body)


def join(*parts: bytes) -> bytes:
    """One rvmsg of encoded fields (`Writer.fields()` pieces)."""
    body = b"".join(parts)
    return HEADER.pack(HEADER_LEN + len(body), MAGIC) + body


_DATA_OPAQUE = _name("data") + bytes((T_OPAQUE,))
_DATA_MSG = _name("data") + bytes((T_RVMSG, SIZE_LONG))
_RETURN = _name("return") + bytes((T_STRING,))


def data_field(payload: bytes) -> bytes:
    """The `data` field of a delivery: a whole rvmsg nested, any other bytes opaque."""
    if is_rvmsg(payload):
        return _DATA_MSG + payload
    return _DATA_OPAQUE + _var_size(len(payload)) + payload


def return_field(reply: str) -> bytes:
    raw = reply.encode("utf-8", "surrogateescape") + b"\x00"
    return _RETURN + _var_size(len(raw)) + raw


# ------------------------------------------------------------------ the stream


class RvFrameReader:
    """Splits the client's byte stream into rvmsgs (whole, header included)."""

    def __init__(self, max_size: int) -> None:
        self.max_size = max_size
        self._buf = bytearray()

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def take(self, n: int) -> bytes | None:
        """The next `n` raw bytes (the session records), or None until they arrived."""
        if len(self._buf) < n:
            return None
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out

    def push(self, data: bytes) -> None:
        self._buf += data

    def frames(self) -> list[bytes]:
        """The whole messages buffered; RvCodecError for a bad header (the stream is
        lost) once the messages before it have been returned."""
        buf, off, n = self._buf, 0, len(self._buf)
        out: list[bytes] = []
        while n - off >= HEADER_LEN:
            size, magic = HEADER.unpack_from(buf, off)
            if magic != MAGIC or size < HEADER_LEN or size > self.max_size:
                del buf[:off]
                if out:  # the good messages first; the next call raises
                    return out
                if size > self.max_size and magic == MAGIC:
                    raise RvCodecError(f"rvmsg of {size} bytes is over the limit of {self.max_size}")
                raise RvCodecError(f"bad rvmsg header (size {size}, magic {magic:#x})")
            if n - off < size:
                break
            out.append(bytes(buf[off:off + size]))
            off += size
        del buf[:off]
        return out
