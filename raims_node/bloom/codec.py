"""A filter's bytes for the link-state database, `_Z.BLM` and `adj_rpy` (and back).

Manual "Networking": the LSDB record of a peer carries its bloom filter, which "generally
uses about 2 bytes per subscription". The bytes hold the filter's geometry, its counts and
the multiset of set bit positions, Elias-Fano coded: with n positions in [0, M) and
L = floor(log2(M / n)) low bits, the low L bits of each position are packed (n * L bits)
and the high parts are a unary bit vector of n + ((M - 1) >> L) + 1 bits (bit
high_i + i set). That costs L + 2 to L + 3 bits a position whatever M is, so a large, sparse
single-hash filter travels in about 2 bytes a subscription (see `filter.py`).

Layout (integers little endian; varint = unsigned LEB128):

    u8  FORMAT_VERSION (1)
    u8  size_shift          size_bits = 1 << size_shift, 0..32
    u8  num_hashes          1..MAX_NUM_HASHES
    u32 seed
    varint subject_count, varint pattern_count
    varint key_count, then per key length in use (ascending):
        u8 key_len (0..63 prefix, 64 full subject), varint plain, varint detail
    Elias-Fano positions: n = num_hashes * sum(plain); low part ceil(n * L / 8) bytes,
        then high part ceil((n + ((M - 1) >> L) + 1) / 8) bytes (bits MSB first)
    varint detail_count, then per detail record (ascending by key, then detail):
        u8 key_len, u32 key_hash, varint min_len, u8 suffix_len,
        [u32 suffix_hash if suffix_len], varint shard_count (0: none),
        [varint shard_index if shard_count], varint refcount

Decoding checks every count and bound and is canonical: `encode(decode(b)) == b`.
`FilterImage.probe_hashes` is the vectorized membership test the Spark audit uses.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, NamedTuple

from raims_node.bloom.entry import FULL, Detail
from raims_node.bloom.errors import BloomDecodeError, BloomError, InvalidGeometry
from raims_node.bloom.hashing import MAX_HASHED_LEN
from raims_node.bloom.positions import MAX_NUM_HASHES, MAX_SIZE_SHIFT, bit_positions
from raims_node.bloom.shard import Shard

if TYPE_CHECKING:  # numpy is imported by the functions that use it (ms_server's start, issue 23)
    import numpy as np
    import numpy.typing as npt

FORMAT_VERSION: Final = 1
MAX_VARINT_BYTES: Final = 10
_U32: Final = struct.Struct("<I")


class DetailRecord(NamedTuple):
    key_len: int
    key_hash: int
    detail: Detail
    refcount: int

    def sort_key(self) -> tuple[int, ...]:
        return (self.key_len, self.key_hash, *self.detail.sort_key())


@dataclass(frozen=True, slots=True, eq=False)
class FilterImage:
    """Everything a filter's bytes hold; `positions` is the sorted multiset of set bits."""

    size_bits: int
    seed: int
    num_hashes: int
    subject_count: int
    pattern_count: int
    key_counts: tuple[tuple[int, int, int], ...]  # (key_len, plain, detail), ascending
    positions: npt.NDArray[np.uint64]
    details: tuple[DetailRecord, ...]

    def probe_hashes(self, hashes: npt.NDArray[np.uint32]) -> npt.NDArray[np.bool_]:
        """For each hash, whether all its bit positions are set (the plain-entry test)."""
        import numpy as np

        wanted = bit_positions(self.size_bits, self.seed, self.num_hashes, hashes)
        return np.asarray(np.isin(wanted, self.positions).all(axis=1), dtype=np.bool_)


def _low_bits(size_bits: int, n: int) -> int:
    ratio = size_bits // n
    return ratio.bit_length() - 1 if ratio else 0


def _high_bits(size_bits: int, n: int, low: int) -> int:
    return n + ((size_bits - 1) >> low) + 1


def _varint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _encode_positions(values: npt.NDArray[np.uint64], size_bits: int) -> bytes:
    n = len(values)
    if n == 0:
        return b""
    import numpy as np

    low = _low_bits(size_bits, n)
    high = np.zeros(_high_bits(size_bits, n, low), dtype=np.uint8)
    high[(values >> np.uint64(low)) + np.arange(n, dtype=np.uint64)] = 1
    low_part = b""
    if low:
        shifts = np.arange(low - 1, -1, -1, dtype=np.uint64)
        bits = ((values[:, None] >> shifts[None, :]) & np.uint64(1)).astype(np.uint8)
        low_part = np.packbits(bits.ravel()).tobytes()
    return low_part + np.packbits(high).tobytes()


def encode_image(image: FilterImage) -> bytes:
    shift = image.size_bits.bit_length() - 1
    if image.size_bits != 1 << shift or shift > MAX_SIZE_SHIFT:
        raise InvalidGeometry(f"size of {image.size_bits} bits is not a power of two <= 2**32")
    out = bytearray((FORMAT_VERSION, shift, image.num_hashes))
    out += _U32.pack(image.seed)
    _varint(out, image.subject_count)
    _varint(out, image.pattern_count)
    _varint(out, len(image.key_counts))
    for key_len, plain, detail in image.key_counts:
        out.append(key_len)
        _varint(out, plain)
        _varint(out, detail)
    out += _encode_positions(image.positions, image.size_bits)
    _varint(out, len(image.details))
    for rec in image.details:
        d = rec.detail
        out.append(rec.key_len)
        out += _U32.pack(rec.key_hash)
        _varint(out, d.min_len)
        out.append(d.suffix_len)
        if d.suffix_len:
            out += _U32.pack(d.suffix_hash)
        _varint(out, 0 if d.shard is None else d.shard.count)
        if d.shard is not None:
            _varint(out, d.shard.index)
        _varint(out, rec.refcount)
    return bytes(out)


class _Reader:
    __slots__ = ("data", "offset")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.offset = 0

    def fail(self, what: str) -> BloomDecodeError:
        return BloomDecodeError(f"{what} at offset {self.offset} of {len(self.data)} bytes")

    def take(self, n: int, field: str) -> bytes:
        if n > len(self.data) - self.offset:
            raise self.fail(f"{field}: needs {n} bytes, {len(self.data) - self.offset} left")
        chunk = self.data[self.offset : self.offset + n]
        self.offset += n
        return chunk

    def u8(self, field: str) -> int:
        return self.take(1, field)[0]

    def u32(self, field: str) -> int:
        value: int = _U32.unpack(self.take(4, field))[0]
        return value

    def varint(self, field: str) -> int:
        value = 0
        for i in range(MAX_VARINT_BYTES):
            byte = self.u8(field)
            value |= (byte & 0x7F) << (7 * i)
            if not byte & 0x80:
                if byte == 0 and i:
                    raise self.fail(f"{field}: varint has a redundant trailing zero byte")
                return value
        raise self.fail(f"{field}: varint longer than {MAX_VARINT_BYTES} bytes")


def _decode_positions(r: _Reader, n: int, size_bits: int) -> npt.NDArray[np.uint64]:
    import numpy as np

    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    low = _low_bits(size_bits, n)
    high_nbits = _high_bits(size_bits, n, low)
    # take() checks the lengths against the input before numpy allocates anything.
    low_raw = r.take((n * low + 7) // 8, "position low bits")
    high_raw = r.take((high_nbits + 7) // 8, "position high bits")
    ones = np.flatnonzero(np.unpackbits(np.frombuffer(high_raw, dtype=np.uint8)))
    if len(ones) != n or ones[-1] >= high_nbits:
        raise r.fail(f"position high bits: {len(ones)} set bits for {n} positions")
    values = ones.astype(np.uint64)
    values -= np.arange(n, dtype=np.uint64)
    values <<= np.uint64(low)
    if low:
        bits = np.unpackbits(np.frombuffer(low_raw, dtype=np.uint8))
        if bits[n * low :].any():
            raise r.fail("position low bits: padding bits are set")
        shifts = np.arange(low - 1, -1, -1, dtype=np.uint64)
        values |= (bits[: n * low].reshape(n, low).astype(np.uint64) << shifts).sum(axis=1)
    if values[-1] >= size_bits or bool(np.any(values[1:] < values[:-1])):
        raise r.fail(f"positions: not sorted below the size of {size_bits} bits")
    return values


def _decode_detail(r: _Reader) -> DetailRecord:
    key_len = r.u8("detail key length")
    if key_len > FULL:
        raise r.fail(f"detail key length {key_len} is above {FULL}")
    key_hash = r.u32("detail key hash")
    min_len = r.varint("detail min length")
    suffix_len = r.u8("detail suffix length")
    if suffix_len > MAX_HASHED_LEN:
        raise r.fail(f"detail suffix length {suffix_len} is above {MAX_HASHED_LEN}")
    suffix_hash = r.u32("detail suffix hash") if suffix_len else 0
    shard_count = r.varint("detail shard count")
    shard = None
    if shard_count:
        index = r.varint("detail shard index")
        try:
            shard = Shard(index, shard_count)
        except BloomError as exc:
            raise r.fail(f"detail shard: {exc}") from exc
    count = r.varint("detail refcount")
    if count == 0:
        raise r.fail("detail refcount is zero")
    return DetailRecord(key_len, key_hash, Detail(min_len, suffix_len, suffix_hash, shard), count)


def decode_image(data: bytes) -> FilterImage:
    r = _Reader(bytes(data))
    version = r.u8("version")
    if version != FORMAT_VERSION:
        raise r.fail(f"format version {version} is not {FORMAT_VERSION}")
    shift = r.u8("size shift")
    if shift > MAX_SIZE_SHIFT:
        raise r.fail(f"size shift {shift} is above {MAX_SIZE_SHIFT}")
    num_hashes = r.u8("hash count")
    if not 1 <= num_hashes <= MAX_NUM_HASHES:
        raise r.fail(f"hash count {num_hashes} is outside 1..{MAX_NUM_HASHES}")
    seed = r.u32("seed")
    subject_count = r.varint("subject count")
    pattern_count = r.varint("pattern count")
    key_counts: list[tuple[int, int, int]] = []
    for _ in range(r.varint("key count")):
        key_len = r.u8("key length")
        if key_len > FULL or (key_counts and key_len <= key_counts[-1][0]):
            raise r.fail(f"key length {key_len} is above {FULL} or out of order")
        plain, detail = r.varint("plain count"), r.varint("detail count")
        if plain + detail == 0:
            raise r.fail(f"key length {key_len} is listed with no entries")
        key_counts.append((key_len, plain, detail))
    if sum(p + d for _, p, d in key_counts) != subject_count + pattern_count:
        raise r.fail(f"key counts do not add up to {subject_count} + {pattern_count} entries")
    full_plain = sum(p for k, p, _ in key_counts if k == FULL)
    if subject_count > full_plain:
        raise r.fail(f"{subject_count} subjects but {full_plain} full-subject entries")
    n_positions = num_hashes * sum(p for _, p, _ in key_counts)
    positions = _decode_positions(r, n_positions, 1 << shift)
    details = [_decode_detail(r) for _ in range(r.varint("detail record count"))]
    if any(a.sort_key() >= b.sort_key() for a, b in zip(details, details[1:], strict=False)):
        raise r.fail("detail records are not in ascending order")
    want = {k: d for k, _, d in key_counts if d}
    have: dict[int, int] = {}
    for rec in details:
        have[rec.key_len] = have.get(rec.key_len, 0) + rec.refcount
    if have != want:
        raise r.fail(f"detail records count {have}, key counts say {want}")
    if r.offset != len(r.data):
        raise r.fail(f"{len(r.data) - r.offset} trailing bytes")
    return FilterImage(
        1 << shift,
        seed,
        num_hashes,
        subject_count,
        pattern_count,
        tuple(key_counts),
        positions,
        tuple(details),
    )
