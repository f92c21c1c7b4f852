"""BITFIELD and BITFIELD_RO (Redis 7.0 semantics, errors and replies): signed and unsigned
integers of 1..64 bits (u63 at most) at any bit offset of a string value.

As redis-server, every operation is parsed before any runs (a bad one fails the whole
command and changes nothing); a command with a SET or INCRBY creates or grows the string
to its farthest written bit even when OVERFLOW FAIL then refuses every write, and
notifies `setbit` once when a write was done (none when FAIL refused them all). Decision:
a string created or grown that way is stored as a change (logged, WATCHers touched),
where redis-server neither propagates it nor signals the key, so the map file keeps what
clients read. The string grows to at most strings.MAX_STRING (bitmaps.py's decision);
the operations run on the bytes they reach and a command that writes copies the string
once (as SETBIT).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from raims_node.kv.bitmaps import cword, length_for_write, parse_bit_offset, splice
from raims_node.kv.commands import N_STRING, Engine, KVClient, command, parse_int, syntax_error
from raims_node.kv.errors import CommandError

BAD_TYPE = (b"ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported "
            b"but i64 is.")
WRAP, SAT, FAIL = 0, 1, 2
_OVERFLOW = {b"wrap": WRAP, b"sat": SAT, b"fail": FAIL}
_GET, _SET, _INCRBY = 0, 1, 2
_OPCODES = {b"get": (_GET, 2), b"set": (_SET, 3), b"incrby": (_INCRBY, 3)}


@dataclass(frozen=True, slots=True)
class FieldOp:
    opcode: int
    signed: bool
    bits: int
    offset: int
    value: int
    overflow: int


def parse_type(raw: bytes) -> tuple[bool, int]:
    """(signed, bits) of an `i16` / `u8` type argument."""
    kind = raw[:1]  # redis-server 7.0 takes lower-case i and u only
    # redis-server reads the width with strlen: a NUL ends it
    width = raw[1:].split(b"\0", 1)[0]
    if kind not in (b"i", b"u"):
        raise CommandError(BAD_TYPE)
    bits = parse_int(width, BAD_TYPE)
    if bits < 1 or bits > (64 if kind == b"i" else 63):
        raise CommandError(BAD_TYPE)
    return kind == b"i", bits


def parse_ops(a: list[bytes]) -> list[FieldOp]:
    ops: list[FieldOp] = []
    overflow = WRAP
    j = 2
    while j < len(a):
        word = cword(a[j])
        left = len(a) - j - 1
        if word == b"overflow" and left >= 1:
            ow = _OVERFLOW.get(cword(a[j + 1]))
            if ow is None:
                raise CommandError(b"ERR Invalid OVERFLOW type specified")
            overflow = ow
            j += 2
            continue
        spec = _OPCODES.get(word)
        if spec is None or left < spec[1]:
            raise syntax_error()
        opcode, nargs = spec
        signed, bits = parse_type(a[j + 1])
        offset = parse_bit_offset(a[j + 2], True, bits)
        value = parse_int(a[j + 3]) if opcode != _GET else 0
        ops.append(FieldOp(opcode, signed, bits, offset, value, overflow))
        j += nargs + 1
    return ops


def get_field(buf: bytes | bytearray, offset: int, bits: int, signed: bool) -> int:
    """The integer of `bits` bits at bit `offset` (bits past the end read as 0)."""
    lo, hi = offset >> 3, (offset + bits + 7) >> 3
    chunk = bytes(buf[lo:hi])
    chunk += bytes(hi - lo - len(chunk))
    v = (int.from_bytes(chunk, "big") >> ((hi << 3) - offset - bits)) & ((1 << bits) - 1)
    if signed and v >> (bits - 1):
        v -= 1 << bits
    return v


def set_field(buf: bytearray, offset: int, bits: int, value: int) -> None:
    """Write the low `bits` bits of `value` at bit `offset` (the buffer holds them)."""
    lo, hi = offset >> 3, (offset + bits + 7) >> 3
    shift = (hi << 3) - offset - bits
    mask = ((1 << bits) - 1) << shift
    old = int.from_bytes(buf[lo:hi], "big")
    buf[lo:hi] = ((old & ~mask) | ((value << shift) & mask)).to_bytes(hi - lo, "big")


def overflowed(value: int, bits: int, signed: bool, mode: int) -> tuple[bool, int]:
    """(whether `value` is out of the type's range, the value to store under `mode`)."""
    if signed:
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    else:
        lo, hi = 0, (1 << bits) - 1
    if lo <= value <= hi:
        return False, value
    if mode == SAT:
        return True, hi if value > hi else lo
    wrapped = value & ((1 << bits) - 1)
    if signed and wrapped >> (bits - 1):
        wrapped -= 1 << bits
    return True, wrapped


def run_ops(buf: bytes | bytearray, ops: list[FieldOp]) -> list[int | None]:
    """Apply `ops` to `buf` (a bytearray when any op writes): the replies."""
    out: list[int | None] = []
    for op in ops:
        old = get_field(buf, op.offset, op.bits, op.signed)
        if op.opcode == _GET:
            out.append(old)
            continue
        if op.opcode == _INCRBY:
            over, new = overflowed(old + op.value, op.bits, op.signed, op.overflow)
            reply = new
        else:
            value = op.value if op.signed else op.value & ((1 << 64) - 1)  # a C uint64_t cast
            over, new = overflowed(value, op.bits, op.signed, op.overflow)
            reply = old
        if over and op.overflow == FAIL:
            out.append(None)
            continue
        assert isinstance(buf, bytearray)
        set_field(buf, op.offset, op.bits, new)
        out.append(reply)
    return out


def _bitfield(e: Engine, c: KVClient, a: list[bytes], read_only: bool) -> Any:
    ops = parse_ops(a)
    writes = [op for op in ops if op.opcode != _GET]
    key = a[1]
    old = e.get_string(c.db, key)
    if not writes:
        return run_ops(b"" if old is None else old, ops)
    if read_only:
        raise CommandError(b"ERR BITFIELD_RO only supports the GET subcommand")
    length = length_for_write(old, max(op.offset + op.bits - 1 for op in writes))
    # the ops run on the window of bytes they reach, not on a copy of the whole string
    lo = min(op.offset for op in ops) >> 3
    hi = max(op.offset + op.bits + 7 for op in ops) >> 3
    src = b"" if old is None else old
    window = bytearray(src[lo:hi])
    window.extend(bytes(hi - lo - len(window)))
    out = run_ops(window, [replace(op, offset=op.offset - (lo << 3)) for op in ops])
    wrote = any(r is not None for op, r in zip(ops, out, strict=True) if op.opcode != _GET)
    if wrote or length != len(src) or old is None:
        e.store.put(c.db, key, splice(src, lo, window, length), keep_ttl=True)
    if wrote:
        e.notify(N_STRING, "setbit", c.db, key)
    return out


@command("bitfield", -2, write=True)
def bitfield(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _bitfield(e, c, a, False)


@command("bitfield_ro", -2)
def bitfield_ro(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _bitfield(e, c, a, True)


__all__ = ["BAD_TYPE", "get_field", "overflowed", "parse_type", "run_ops", "set_field"]
