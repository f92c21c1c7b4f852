"""redis-server 7.0's serialization format, the parts DUMP and RESTORE use (rdb_values.py
puts values together from them): the payload's footer (RDB version, CRC64), lengths,
strings (plain, integer-encoded, LZF-compressed), doubles, and the compact blobs values
travel in (listpack, ziplist, intset, zipmap).

Everything here is pure and bounded: a reader never allocates more than the payload
holds, except LZF strings: each at most 88 times its compressed size (lzf.py), all of a
payload's together at most 512 MiB;
whatever does not parse raises BadPayload, which RESTORE answers as "ERR Bad data
format". Strings are written as redis-server writes them (integer-encoded, or
LZF-compressed when longer than 20 bytes and that saves at least 4 bytes), except that
compression is bounded per string and per payload (StringWriter: LZF in Python would
hold the node's loop for long; redis-server reads plain strings the same).
"""

from __future__ import annotations

import re
import struct
import sys

from raims_node.kv import lzf

RDB_VERSION = 10  # redis-server 7.0's
COMPRESS_MAX = 16 * 1024  # longer strings are written uncompressed
COMPRESS_BUDGET = 64 * 1024  # string bytes compression is tried on per payload

# value types (rdb.h)
T_STRING, T_LIST, T_SET, T_ZSET, T_HASH, T_ZSET_2 = 0, 1, 2, 3, 4, 5
T_HASH_ZIPMAP, T_LIST_ZIPLIST, T_SET_INTSET, T_ZSET_ZIPLIST, T_HASH_ZIPLIST = 9, 10, 11, 12, 13
T_LIST_QUICKLIST, T_STREAM_LISTPACKS, T_HASH_LISTPACK, T_ZSET_LISTPACK = 14, 15, 16, 17
T_LIST_QUICKLIST_2, T_STREAM_LISTPACKS_2 = 18, 19

_ENC_INT8, _ENC_INT16, _ENC_INT32, _ENC_LZF = 0, 1, 2, 3
_LEN32, _LEN64 = 0x80, 0x81


class BadPayload(ValueError):
    """A payload that is not a value in redis-server 7.0's format."""


# ------------------------------------------------------------------ CRC64 (Jones, reflected)

def _crc_tables() -> list[list[int]]:
    """The byte table of the reflected polynomial and seven more for 8 bytes a step."""
    poly = 0x95AC9329AC4BC9B5  # 0xad93d23594c935a9 reflected
    base = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        base.append(c)
    tables = [base]
    for _ in range(7):
        prev = tables[-1]
        tables.append([(prev[i] >> 8) ^ base[prev[i] & 0xFF] for i in range(256)])
    return tables


_T0, _T1, _T2, _T3, _T4, _T5, _T6, _T7 = _crc_tables()


def crc64(data: bytes, crc: int = 0) -> int:
    """redis-server's crc64.c: CRC-64/Jones, reflected, initial value 0, no final xor
    (slicing by 8 on little-endian machines: about 6 MB/s in CPython)."""
    n8 = len(data) & ~7 if sys.byteorder == "little" else 0
    if n8:
        t0, t1, t2, t3, t4, t5, t6, t7 = _T0, _T1, _T2, _T3, _T4, _T5, _T6, _T7
        for word in memoryview(data)[:n8].cast("Q"):
            crc ^= word
            crc = (t7[crc & 0xFF] ^ t6[(crc >> 8) & 0xFF] ^ t5[(crc >> 16) & 0xFF] ^ t4[(crc >> 24) & 0xFF]
                   ^ t3[(crc >> 32) & 0xFF] ^ t2[(crc >> 40) & 0xFF] ^ t1[(crc >> 48) & 0xFF] ^ t0[crc >> 56])
    table = _T0
    for b in data[n8:]:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc


def frame(body: bytes) -> bytes:
    """A DUMP payload: the value, the RDB version and the CRC64 of both, little-endian."""
    data = body + struct.pack("<H", RDB_VERSION)
    return data + struct.pack("<Q", crc64(data))


def verify(payload: bytes) -> bool:
    """Whether a payload's version and checksum hold (redis-server's verifyDumpPayload).
    The value is then read from the whole payload, footer included, as redis-server
    reads it: a value cut short may end in the footer's bytes."""
    if len(payload) < 10:
        return False
    version = payload[-10] | payload[-9] << 8
    return version <= RDB_VERSION and struct.unpack("<Q", payload[-8:])[0] == crc64(payload[:-8])


# ------------------------------------------------------------------ reading

class Reader:
    """The RDB items of one payload, read from the front."""

    __slots__ = ("buf", "pos", "inflated")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0
        self.inflated = 0  # bytes of LZF output so far: at most lzf.MAX_OUT per payload

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise BadPayload("payload cut short")
        out = self.buf[self.pos:end]
        self.pos = end
        return out

    def byte(self) -> int:
        if self.pos >= len(self.buf):
            raise BadPayload("payload cut short")
        b = self.buf[self.pos]
        self.pos += 1
        return b

    def _len(self) -> tuple[int, bool]:
        b = self.byte()
        kind = b >> 6
        if kind == 0:
            return b & 0x3F, False
        if kind == 1:
            return (b & 0x3F) << 8 | self.byte(), False
        if kind == 3:
            return b & 0x3F, True
        if b == _LEN32:
            return int(struct.unpack(">I", self.take(4))[0]), False
        if b == _LEN64:
            return int(struct.unpack(">Q", self.take(8))[0]), False
        raise BadPayload(f"unknown length encoding {b}")

    def length(self) -> int:
        n, encoded = self._len()
        if encoded:
            raise BadPayload("an encoded string where a length belongs")
        return n

    def string(self) -> bytes:
        n, encoded = self._len()
        if not encoded:
            return self.take(n)
        if n == _ENC_INT8:
            return b"%d" % struct.unpack("<b", self.take(1))[0]
        if n == _ENC_INT16:
            return b"%d" % struct.unpack("<h", self.take(2))[0]
        if n == _ENC_INT32:
            return b"%d" % struct.unpack("<i", self.take(4))[0]
        if n == _ENC_LZF:
            clen = self.length()
            out_len = self.length()
            self.inflated += out_len
            if self.inflated > lzf.MAX_OUT:
                raise BadPayload("LZF strings of more than 512 MiB in one payload")
            try:
                return lzf.decompress(self.take(clen), out_len)
            except lzf.LZFError as exc:
                raise BadPayload(str(exc)) from None
        raise BadPayload(f"unknown string encoding {n}")

    def binary_double(self) -> float:
        v: float = struct.unpack("<d", self.take(8))[0]
        if v != v:
            raise BadPayload("NaN score")
        return v

    def string_double(self) -> float:
        """The old ZSET type's score: a length byte (253 NaN, 254 inf, 255 -inf) and text."""
        n = self.byte()
        if n == 255:
            return float("-inf")
        if n == 254:
            return float("inf")
        if n == 253:
            raise BadPayload("NaN score")
        return text_double(self.take(n))

    def millis(self) -> int:
        v: int = struct.unpack("<q", self.take(8))[0]
        return v


_C_DOUBLE = re.compile(rb"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity)", re.I)


def text_double(raw: bytes) -> float:
    """A score written as text (strtod's decimal forms); NaN and anything else refused."""
    if _C_DOUBLE.fullmatch(raw) is None:
        raise BadPayload("bad score")
    return float(raw)


def to_bytes(el: bytes | int) -> bytes:
    return el if isinstance(el, bytes) else b"%d" % el


def to_int(el: bytes | int) -> int:
    """An element that must be an integer (as listpack's lpGetInteger reads it)."""
    if type(el) is int:
        return el
    assert isinstance(el, bytes)
    if re.fullmatch(rb"0|-?[1-9][0-9]{0,18}", el) is None or not -(1 << 63) <= int(el) < 1 << 63:
        raise BadPayload("not an integer")
    return int(el)


# ------------------------------------------------------------------ compact blobs

def _lp_backlen(n: int) -> bytes:
    """listpack.c's lpEncodeBacklen, in the order it is stored."""
    parts = [n & 127]
    n >>= 7
    while n:
        parts.append(n & 127)
        n >>= 7
    return bytes([parts[-1]] + [p | 128 for p in reversed(parts[:-1])])


_INT_FORMS = {0xF1: ("<h", 2), 0xF2: (None, 3), 0xF3: ("<i", 4), 0xF4: ("<q", 8)}


def parse_listpack(blob: bytes) -> list[bytes | int]:
    """The elements of a listpack (listpack.c), integers as int."""
    total = len(blob)
    if total < 7 or struct.unpack("<I", blob[:4])[0] != total or blob[-1] != 0xFF:
        raise BadPayload("bad listpack header")
    count = blob[4] | blob[5] << 8
    out: list[bytes | int] = []
    pos, end = 6, total - 1
    while pos < end:
        b = blob[pos]
        el: bytes | int
        if b < 0x80:
            el, size = b, 1
        elif b < 0xC0:
            size = 1 + (b & 0x3F)
            el = blob[pos + 1:pos + size]
        elif b < 0xE0:
            if pos + 2 > end:
                raise BadPayload("listpack entry past the end")
            v = (b & 0x1F) << 8 | blob[pos + 1]
            el, size = (v - 8192 if v >= 4096 else v), 2
        elif b < 0xF0:
            if pos + 2 > end:
                raise BadPayload("listpack entry past the end")
            size = 2 + ((b & 0x0F) << 8 | blob[pos + 1])
            el = blob[pos + 2:pos + size]
        elif b == 0xF0:
            if pos + 5 > end:
                raise BadPayload("listpack entry past the end")
            size = 5 + struct.unpack("<I", blob[pos + 1:pos + 5])[0]
            el = blob[pos + 5:pos + size]
        elif b in _INT_FORMS:
            fmt, width = _INT_FORMS[b]
            size = 1 + width
            if pos + size > end:
                raise BadPayload("listpack entry past the end")
            raw = blob[pos + 1:pos + size]
            el = int.from_bytes(raw, "little", signed=True) if fmt is None else struct.unpack(fmt, raw)[0]
        else:
            raise BadPayload(f"bad listpack encoding {b}")
        back = _lp_backlen(size)
        nxt = pos + size + len(back)
        if nxt > end or blob[pos + size:nxt] != back:
            raise BadPayload("bad listpack entry")
        out.append(el)
        pos = nxt
    if count != 65535 and count != len(out):
        raise BadPayload("listpack count mismatch")
    return out


def parse_ziplist(blob: bytes) -> list[bytes | int]:
    """The elements of a ziplist (ziplist.c, RDB before 7.0), integers as int."""
    total = len(blob)
    if total < 11 or struct.unpack("<I", blob[:4])[0] != total or blob[-1] != 0xFF:
        raise BadPayload("bad ziplist header")
    tail = struct.unpack("<I", blob[4:8])[0]
    count = blob[8] | blob[9] << 8
    out: list[bytes | int] = []
    pos, end, prev, last = 10, total - 1, 0, 10
    while pos < end:
        last = pos
        if blob[pos] < 254:
            prevlen, pos = blob[pos], pos + 1
        elif blob[pos] == 254 and pos + 5 <= end:
            prevlen, pos = struct.unpack("<I", blob[pos + 1:pos + 5])[0], pos + 5
        else:
            raise BadPayload("bad ziplist prevlen")
        if prevlen != prev or pos >= end:
            raise BadPayload("bad ziplist prevlen")
        b = blob[pos]
        el: bytes | int
        if b < 0x40:
            head, n = 1, b & 0x3F
        elif b < 0x80:
            head, n = 2, ((b & 0x3F) << 8 | blob[pos + 1]) if pos + 1 < end else -1
        elif b < 0xC0:
            head, n = 5, struct.unpack(">I", blob[pos + 1:pos + 5])[0] if pos + 5 <= end else -1
        else:
            head, n = 1, -2
        if n == -1:
            raise BadPayload("ziplist entry past the end")
        if n >= 0:
            el, stop = blob[pos + head:pos + head + n], pos + head + n
        else:
            width = {0xC0: 2, 0xD0: 4, 0xE0: 8, 0xF0: 3, 0xFE: 1}.get(b)
            if width is not None:
                el = int.from_bytes(blob[pos + 1:pos + 1 + width], "little", signed=True)
                stop = pos + 1 + width
            elif 0xF1 <= b <= 0xFD:
                el, stop = (b & 0x0F) - 1, pos + 1
            else:
                raise BadPayload(f"bad ziplist encoding {b}")
        if stop > end:
            raise BadPayload("ziplist entry past the end")
        prev = stop - last
        out.append(el)
        pos = stop
    if tail != last or (count != 65535 and count != len(out)):
        raise BadPayload("ziplist tail or count mismatch")
    return out


def parse_intset(blob: bytes) -> list[int]:
    """The members of an intset (intset.c), ascending."""
    if len(blob) < 8:
        raise BadPayload("bad intset header")
    width, n = struct.unpack("<II", blob[:8])
    fmt = {2: "h", 4: "i", 8: "q"}.get(width)
    if fmt is None or len(blob) != 8 + width * n:
        raise BadPayload("bad intset size")
    values = list(struct.unpack(f"<{n}{fmt}", blob[8:]))
    if any(a >= b for a, b in zip(values, values[1:], strict=False)):
        raise BadPayload("intset out of order")
    return values


def parse_zipmap(blob: bytes) -> list[tuple[bytes, bytes]]:
    """The pairs of a zipmap (zipmap.c, the oldest hash form)."""
    pairs: list[tuple[bytes, bytes]] = []
    pos = 1

    def length() -> int:
        nonlocal pos
        if pos >= len(blob):
            raise BadPayload("zipmap cut short")
        b = blob[pos]
        if b < 254:
            pos += 1
            return b
        if b == 254 and pos + 5 <= len(blob):
            pos += 5
            return int(struct.unpack("<I", blob[pos - 4:pos])[0])
        raise BadPayload("bad zipmap length")

    while True:
        if pos >= len(blob):
            raise BadPayload("zipmap cut short")
        if blob[pos] == 255:
            break
        klen = length()
        key = blob[pos:pos + klen]
        pos += klen
        vlen = length()
        if pos >= len(blob):
            raise BadPayload("zipmap cut short")
        free = blob[pos]
        pos += 1
        value = blob[pos:pos + vlen]
        pos += vlen + free
        if len(key) != klen or len(value) != vlen:
            raise BadPayload("zipmap entry past the end")
        pairs.append((key, value))
    if pos != len(blob) - 1 or (blob[:1] and blob[0] < 254 and blob[0] != len(pairs)):
        raise BadPayload("zipmap size mismatch")
    return pairs


# ------------------------------------------------------------------ writing

def enc_len(n: int) -> bytes:
    if n < 64:
        return bytes([n])
    if n < 16384:
        return bytes([0x40 | n >> 8, n & 0xFF])
    if n < 1 << 32:
        return bytes([_LEN32]) + struct.pack(">I", n)
    return bytes([_LEN64]) + struct.pack(">Q", n)


def canonical_int(b: bytes) -> int | None:
    """`b` as redis-server's string2ll reads it back identically, else None."""
    if not b or len(b) > 20 or re.fullmatch(rb"0|-?[1-9][0-9]*", b) is None:
        return None
    v = int(b)
    return v if -(1 << 63) <= v < 1 << 63 else None


class StringWriter:
    """RDB strings of one payload, as redis-server's rdbSaveRawString writes them:
    integer-encoded when a canonical 32-bit integer, LZF-compressed when longer than 20
    bytes and that saves 4 bytes, else plain. Compression is tried for strings of at
    most COMPRESS_MAX bytes and COMPRESS_BUDGET bytes per payload in all (Python's LZF
    takes up to 2 microseconds a byte; the rest is written plain, which reads the same)."""

    __slots__ = ("budget",)

    def __init__(self, budget: int = COMPRESS_BUDGET) -> None:
        self.budget = budget

    def __call__(self, b: bytes) -> bytes:
        n = len(b)
        if n <= 11:
            v = canonical_int(b)
            if v is not None:
                if -128 <= v <= 127:
                    return bytes([0xC0 | _ENC_INT8]) + struct.pack("<b", v)
                if -32768 <= v <= 32767:
                    return bytes([0xC0 | _ENC_INT16]) + struct.pack("<h", v)
                if -(1 << 31) <= v < 1 << 31:
                    return bytes([0xC0 | _ENC_INT32]) + struct.pack("<i", v)
        if 20 < n <= COMPRESS_MAX and n <= self.budget:
            self.budget -= n
            packed = lzf.compress(b, n - 4)
            if packed is not None:
                return bytes([0xC0 | _ENC_LZF]) + enc_len(len(packed)) + enc_len(n) + packed
        return enc_len(n) + b


def _lp_entry(el: bytes) -> bytes:
    v = canonical_int(el)
    if v is not None:
        if 0 <= v <= 127:
            enc = bytes([v])
        elif -4096 <= v <= 4095:
            u = v & 0x1FFF
            enc = bytes([0xC0 | u >> 8, u & 0xFF])
        elif -32768 <= v <= 32767:
            enc = b"\xf1" + struct.pack("<h", v)
        elif -(1 << 23) <= v < 1 << 23:
            enc = b"\xf2" + (v & 0xFFFFFF).to_bytes(3, "little")
        elif -(1 << 31) <= v < 1 << 31:
            enc = b"\xf3" + struct.pack("<i", v)
        else:
            enc = b"\xf4" + struct.pack("<q", v)
    else:
        n = len(el)
        if n < 64:
            enc = bytes([0x80 | n]) + el
        elif n < 4096:
            enc = bytes([0xE0 | n >> 8, n & 0xFF]) + el
        else:
            enc = b"\xf0" + struct.pack("<I", n) + el
    return enc + _lp_backlen(len(enc))


def listpack(items: list[bytes | int]) -> bytes:
    """A listpack of `items` (canonical integers in integer encodings, as lpAppend)."""
    body = b"".join(_lp_entry(to_bytes(x)) for x in items)
    return struct.pack("<IH", 7 + len(body), min(len(items), 65535)) + body + b"\xff"
