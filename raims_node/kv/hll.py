"""HyperLogLog commands (Redis 7.0): PFADD, PFCOUNT, PFMERGE on strings in Redis's own
HLL format, so a value moves between redis-server and the map with GET and SET.

The format (facts of redis-server's hyperloglog.c): a 16-byte header, "HYLL", the
encoding byte (0 dense, 1 sparse), three unused bytes and the cached cardinality as 8
little-endian bytes whose top bit set means "stale"; then 16384 registers of 6 bits,
either packed LSB first (dense, 12288 bytes) or as sparse opcodes (ZERO 00xxxxxx: 1..64
zero registers; XZERO 01xxxxxx yyyyyyyy: 1..16384; VAL 1vvvvvxx: 1..4 registers of value
1..32). An element's register and value come from MurmurHash64A (seed 0xadc83b19): the
low 14 bits pick the register, the rank of the first set bit of the rest is the value.
PFCOUNT is Ertl's improved estimator (redis-server 5 and later).

The sparse form is kept as redis-server changes it, opcode by opcode (a register split
out of a run, equal neighbours merged within five opcodes of the change), and turned
dense when a value passes 32 or the string would pass SPARSE_MAX_BYTES (redis-server's
`hll-sparse-max-bytes` default, 3000), so GET returns the bytes redis-server holds for
the same commands.

Decisions: PFCOUNT of one key stores the cardinality in the value's header as
redis-server does (WATCH sees it) and logs itself to the map when it did, so a restart
keeps those bytes. PFDEBUG and PFSELFTEST are not provided. A sparse opcode that would
read past the value's end is taken as corrupted, and so is a sparse body longer than
SPARSE_MAX_BODY (more opcodes than registers): PFADD refuses it whole where redis-server
may change its first registers, and a large SETRANGE'd string costs no opcode list.
OBJECT ENCODING answers `raw` for any value that is a HLL by its header (kv/objects.py),
as redis-server does for the HLLs its PF commands wrote (a short one SET by a client is
`embstr` there until a PF command changes it).
"""

from __future__ import annotations

import math
import re
import struct
from bisect import bisect_right
from itertools import accumulate
from operator import itemgetter
from typing import Any

import numpy as np

from raims_node.kv.commands import N_STRING, Engine, KVClient, command
from raims_node.kv.errors import WRONGTYPE, CommandError
from raims_node.kv.reply import OK

P = 14
REGISTERS = 1 << P
Q = 64 - P
HDR = 16
DENSE, SPARSE = 0, 1
DENSE_SIZE = HDR + REGISTERS * 6 // 8
SPARSE_MAX_BYTES = 3000
SPARSE_MAX_BODY = 2 * REGISTERS  # every opcode covers a register at least: longer is corrupted
VAL_MAX_VALUE, VAL_MAX_LEN, ZERO_MAX_LEN, XZERO_MAX_LEN = 32, 4, 64, 16384
ALPHA_INF = 0.721347520444481703680  # 0.5 / ln(2)
SEED = 0xADC83B19
_M = 0xC6A4A7935BD1E995
_MASK = (1 << 64) - 1

NOT_HLL = b"WRONGTYPE Key is not a valid HyperLogLog string value."
CORRUPTED = b"INVALIDOBJ Corrupted HLL object detected"

ZERO, XZERO, VAL = 0, 1, 2
Op = tuple[int, int, int]  # (kind, value, run length)


def murmur64a(data: bytes, seed: int = SEED) -> int:
    """MurmurHash64A as redis-server computes it (little-endian 8-byte blocks)."""
    n = len(data)
    h = (seed ^ (n * _M)) & _MASK
    blocks = n >> 3
    if blocks:
        for k in struct.unpack_from(f"<{blocks}Q", data):
            k = (k * _M) & _MASK
            k ^= k >> 47
            h ^= (k * _M) & _MASK
            h = (h * _M) & _MASK
    if n & 7:
        h ^= int.from_bytes(data[blocks << 3:], "little")
        h = (h * _M) & _MASK
    h ^= h >> 47
    h = (h * _M) & _MASK
    return h ^ (h >> 47)


def pat_len(element: bytes) -> tuple[int, int]:
    """(register, value) of an element: the rank of the first 1 after the index bits."""
    h = murmur64a(element)
    rest = (h >> P) | (1 << Q)
    return h & (REGISTERS - 1), (rest & -rest).bit_length()


# ------------------------------------------------------------------ encodings

def unpack_dense(body: bytes) -> bytearray:
    raw = np.frombuffer(body, dtype=np.uint8, count=REGISTERS * 6 // 8).reshape(-1, 3).astype(np.uint32)
    v = raw[:, 0] | (raw[:, 1] << 8) | (raw[:, 2] << 16)
    regs = np.stack([v & 63, (v >> 6) & 63, (v >> 12) & 63, (v >> 18) & 63], axis=1)
    return bytearray(regs.astype(np.uint8).tobytes())


def pack_dense(regs: bytearray) -> bytes:
    r = np.frombuffer(bytes(regs), dtype=np.uint8).reshape(-1, 4).astype(np.uint32)
    v = r[:, 0] | (r[:, 1] << 6) | (r[:, 2] << 12) | (r[:, 3] << 18)
    return np.stack([v & 255, (v >> 8) & 255, v >> 16], axis=1).astype(np.uint8).tobytes()


def _op_bytes(op: Op) -> bytes:
    kind, val, run = op
    if kind == VAL:
        return bytes((0x80 | ((val - 1) << 2) | (run - 1),))
    if kind == XZERO:
        return bytes((0x40 | ((run - 1) >> 8), (run - 1) & 0xFF))
    return bytes((run - 1,))


_ALL_OPS = ([(VAL, v, r) for v in range(1, VAL_MAX_VALUE + 1) for r in range(1, VAL_MAX_LEN + 1)]
            + [(ZERO, 0, r) for r in range(1, ZERO_MAX_LEN + 1)]
            + [(XZERO, 0, r) for r in range(1, XZERO_MAX_LEN + 1)])
_OP_BYTES: dict[Op, bytes] = {op: _op_bytes(op) for op in _ALL_OPS}
_OPS: dict[bytes, Op] = {b: op for op, b in _OP_BYTES.items()}
_TOKEN = re.compile(rb"[\x40-\x7f][\x00-\xff]|[\x00-\xff]")
_run = itemgetter(2)


def decode_sparse(body: bytes) -> list[Op] | None:
    """The opcodes of a sparse body; None when the last XZERO is cut short."""
    try:
        return [_OPS[t] for t in _TOKEN.findall(body)]
    except KeyError:
        return None


def encode_sparse(ops: list[Op]) -> bytes:
    return b"".join(map(_OP_BYTES.__getitem__, ops))


def _zero_op(run: int) -> Op:
    return (XZERO, 0, run) if run > ZERO_MAX_LEN else (ZERO, 0, run)


class Corrupted(Exception):
    """The value is a HLL by its header but its registers do not add up."""


class HLL:
    """One value being read or changed by a command: its header and either the sparse
    opcodes (with their byte count) or the dense registers, one byte each."""

    __slots__ = ("head", "ops", "size", "regs", "shadow")

    def __init__(self, value: bytes) -> None:
        self.head = bytearray(value[:HDR])
        self.ops: list[Op] = []
        self.size = len(value)
        self.regs: bytearray | None = None
        self.shadow: bytearray | None = None  # the sparse registers, to skip no-op sets
        if value[4] == DENSE:
            self.regs = unpack_dense(value[HDR:])
        else:
            if len(value) - HDR > SPARSE_MAX_BODY:
                raise Corrupted
            ops = decode_sparse(value[HDR:])
            if ops is None:
                raise Corrupted
            self.ops = ops

    @classmethod
    def empty(cls) -> HLL:
        return cls(b"HYLL\x01" + bytes(11) + _OP_BYTES[(XZERO, 0, XZERO_MAX_LEN)])

    def value(self) -> bytes:
        body = pack_dense(self.regs) if self.regs is not None else encode_sparse(self.ops)
        return bytes(self.head) + body

    def invalidate(self) -> None:
        self.head[15] |= 0x80

    def cached(self) -> int | None:
        if self.head[15] & 0x80:
            return None
        return int.from_bytes(self.head[8:16], "little")

    def set_cached(self, card: int) -> None:
        self.head[8:16] = card.to_bytes(8, "little")

    # ------------------------------------------------------------ changes

    def set(self, index: int, count: int) -> int:
        """Raise register `index` to `count`: 1 when it changed, 0 when not (Corrupted
        when a sparse value does not cover the register or cannot turn dense)."""
        regs = self.regs
        if regs is not None:
            if regs[index] < count:
                regs[index] = count
                return 1
            return 0
        if count > VAL_MAX_VALUE:
            return self._promote(index, count)
        shadow = self.shadow
        if shadow is None:
            shadow = self.shadow = self._registers()
        if shadow[index] >= count:
            return 0
        ops = self.ops
        ends = list(accumulate(map(_run, ops)))
        i = bisect_right(ends, index)
        if i >= len(ops):
            raise Corrupted
        kind, val, run = ops[i]
        first = ends[i] - run
        if kind == VAL and val >= count:
            return 0
        if run == 1 and kind != XZERO:
            ops[i] = (VAL, count, 1)
        else:
            last = first + run - 1
            seq: list[Op] = []
            if kind == VAL:
                if index != first:
                    seq.append((VAL, val, index - first))
                seq.append((VAL, count, 1))
                if index != last:
                    seq.append((VAL, val, last - index))
            else:
                if index != first:
                    seq.append(_zero_op(index - first))
                seq.append((VAL, count, 1))
                if index != last:
                    seq.append(_zero_op(last - index))
            delta = sum(2 if op[0] == XZERO else 1 for op in seq) - (2 if kind == XZERO else 1)
            if delta > 0 and self.size + delta > SPARSE_MAX_BYTES:
                return self._promote(index, count)
            ops[i:i + 1] = seq
            self.size += delta
        shadow[index] = count
        self._merge_from(i - 1 if i > 0 else 0)
        self.invalidate()
        return 1

    def _registers(self) -> bytearray:
        """The sparse registers, one byte each (cut or padded to REGISTERS)."""
        regs = bytearray(expand(self.ops)[:REGISTERS])
        return regs + bytes(REGISTERS - len(regs))

    def _merge_from(self, p: int) -> None:
        """Merge equal neighbouring VAL opcodes, looking at five opcodes from `p`."""
        ops = self.ops
        for _ in range(5):
            if p >= len(ops):
                return
            kind, val, run = ops[p]
            if kind == VAL and p + 1 < len(ops):
                k2, v2, r2 = ops[p + 1]
                if k2 == VAL and v2 == val and run + r2 <= VAL_MAX_LEN:
                    ops[p:p + 2] = [(VAL, val, run + r2)]
                    self.size -= 1
                    continue
            p += 1

    def to_dense(self) -> None:
        if self.regs is not None:
            return
        regs = bytearray(REGISTERS)
        idx = 0
        for kind, val, run in self.ops:
            if kind == VAL:
                if idx + run > REGISTERS:
                    raise Corrupted
                regs[idx:idx + run] = bytes((val,)) * run
            idx += run
        if idx != REGISTERS:
            raise Corrupted
        self.regs = regs
        self.ops = []
        self.head[4] = DENSE
        self.size = DENSE_SIZE

    def _promote(self, index: int, count: int) -> int:
        self.to_dense()
        assert self.regs is not None
        self.regs[index] = max(self.regs[index], count)
        return 1

    # ------------------------------------------------------------ reading

    def histogram(self) -> list[int]:
        """Registers per value (0..63); Corrupted when a sparse value does not cover
        exactly REGISTERS registers."""
        if self.regs is not None:
            return register_histogram(self.regs)
        regs = expand(self.ops)
        if len(regs) != REGISTERS:
            raise Corrupted
        return register_histogram(regs)

    def merge_into(self, top: bytearray) -> None:
        """top[i] = max(top[i], register i); Corrupted as `histogram`."""
        regs = self.regs if self.regs is not None else expand(self.ops)
        if len(regs) != REGISTERS:
            raise Corrupted
        m = np.maximum(np.frombuffer(top, dtype=np.uint8), np.frombuffer(regs, dtype=np.uint8))
        top[:] = m.tobytes()


def expand(ops: list[Op]) -> bytes:
    """The registers the opcodes stand for, one byte each, as many as they cover."""
    if not ops:
        return b""
    arr = np.array(ops, dtype=np.int64)
    return np.repeat(arr[:, 1], arr[:, 2]).astype(np.uint8).tobytes()


def register_histogram(regs: bytes | bytearray) -> list[int]:
    counts = np.bincount(np.frombuffer(regs, dtype=np.uint8), minlength=64)
    return [int(x) for x in counts[:64]]


def _sigma(x: float) -> float:
    if x == 1.0:
        return math.inf
    y = 1.0
    z = x
    while True:
        x *= x
        z_prev = z
        z += x * y
        y += y
        if z_prev == z:
            return z


def _tau(x: float) -> float:
    if x == 0.0 or x == 1.0:
        return 0.0
    y = 1.0
    z = 1 - x
    while True:
        x = math.sqrt(x)
        z_prev = z
        y *= 0.5
        z -= math.pow(1 - x, 2) * y
        if z_prev == z:
            return z / 3


def estimate(hist: list[int]) -> int:
    """Ertl's estimator over the register histogram, as redis-server's hllCount (values
    above Q + 1 are left out, as there)."""
    m = float(REGISTERS)
    z = m * _tau((m - hist[Q + 1]) / m)
    for j in range(Q, 0, -1):
        z += hist[j]
        z *= 0.5
    z += m * _sigma(hist[0] / m)
    e = ALPHA_INF * m * m / z
    f = math.floor(e)
    return int(f) + (1 if e - f >= 0.5 else 0)


# ------------------------------------------------------------------ the commands

def is_hll(value: bytes) -> bool:
    """redis-server's isHLLObjectOrReply checks past the type."""
    return (len(value) >= HDR and value[:4] == b"HYLL" and value[4] <= SPARSE
            and (value[4] != DENSE or len(value) == DENSE_SIZE))


def _load(e: Engine, c: KVClient, key: bytes) -> HLL | None:
    v = e.store.lookup(c.db, key)
    if v is None:
        return None
    if type(v) is not bytes:
        raise CommandError(WRONGTYPE)
    if not is_hll(v):
        raise CommandError(NOT_HLL)
    try:
        return HLL(v)
    except Corrupted:
        raise CommandError(CORRUPTED) from None


@command("pfadd", -2, write=True)
def pfadd(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    key = a[1]
    h = _load(e, c, key)
    created = h is None
    if h is None:
        h = HLL.empty()
    updated = 1 if created else 0
    error = False
    for el in a[2:]:
        try:
            updated += h.set(*pat_len(el))
        except Corrupted:
            error = True
            break
    if updated:
        h.invalidate()
        e.store.put(c.db, key, h.value(), keep_ttl=True)
        if not error:
            e.notify(N_STRING, "pfadd", c.db, key)
    if error:
        raise CommandError(CORRUPTED)
    return 1 if updated else 0


@command("pfcount", -2)
def pfcount(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    if len(a) > 2:
        top = bytearray(REGISTERS)
        for key in a[1:]:
            h = _load(e, c, key)
            if h is None:
                continue
            try:
                h.merge_into(top)
            except Corrupted:
                raise CommandError(CORRUPTED) from None
        return estimate(register_histogram(top))
    key = a[1]
    h = _load(e, c, key)
    if h is None:
        return 0
    card = h.cached()
    if card is not None:
        return card
    try:
        card = estimate(h.histogram())
    except Corrupted:
        raise CommandError(CORRUPTED) from None
    h.set_cached(card)
    e.store.put(c.db, key, h.value(), keep_ttl=True)
    if e.log is not None and not e.loading:  # a read that rewrites the cached count
        e.log(c.db, [[b"PFCOUNT", key]])
    return card


@command("pfmerge", -2, write=True)
def pfmerge(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    top = bytearray(REGISTERS)
    use_dense = False
    for key in a[1:]:
        h = _load(e, c, key)
        if h is None:
            continue
        use_dense = use_dense or h.regs is not None
        try:
            h.merge_into(top)
        except Corrupted:
            raise CommandError(CORRUPTED) from None
    dest = a[1]
    d = _load(e, c, dest)
    created = d is None
    if d is None:
        d = HLL.empty()
    try:
        if use_dense:
            d.to_dense()
        for j, v in enumerate(top):
            if v:
                d.set(j, v)
    except Corrupted:
        raise CommandError(CORRUPTED) from None
    d.invalidate()
    e.store.put(c.db, dest, d.value(), keep_ttl=not created)
    e.notify(N_STRING, "pfadd", c.db, dest)
    return OK
