"""LZF (liblzf 3.6, as redis-server 7.0 builds it: HLOG 16, VERY_FAST), the compression
of RDB strings longer than 20 bytes (rdb.py).

`compress` follows lzf_compress step by step, so its output is redis-server's for the
same input (redis-server leaves its hash table uninitialized: a stale entry could, in
principle, make it find a match this does not; the output is valid either way).
`decompress` is bounded: at most `out_len` bytes, which may be at most MAX_RATIO times
the input (what LZF can encode at best) and at most MAX_OUT.
"""

from __future__ import annotations

MAX_OUT = 512 * 1024 * 1024  # redis-server's proto-max-bulk-len
MAX_RATIO = 88  # a 3-byte back-reference yields at most 264 bytes
_HLOG = 16
_HMASK = (1 << _HLOG) - 1
_MAX_LIT = 1 << 5
_MAX_OFF = 1 << 13
_MAX_REF = (1 << 8) + (1 << 3)


class LZFError(ValueError):
    """Input that is not LZF for the size claimed."""


def compress(data: bytes, out_len: int) -> bytes | None:
    """lzf_compress into at most `out_len` bytes (a little over at the very end, as
    liblzf); None when it does not fit."""
    in_len = len(data)
    if not in_len or not out_len:
        return None
    htab: dict[int, int] = {}
    out = bytearray(b"\x00")  # the first literal run's header
    lit = 0
    ip = 0
    hval = (data[0] << 8 | data[1]) if in_len > 1 else 0
    while ip < in_len - 2:
        hval = (hval << 8 | data[ip + 2]) & 0xFFFFFFFF
        slot = ((hval >> 8) - hval * 5) & _HMASK
        ref = htab.get(slot, -1)
        htab[slot] = ip
        off = ip - ref - 1
        if (ref > 0 and off < _MAX_OFF and data[ref + 2] == data[ip + 2]
                and data[ref] == data[ip] and data[ref + 1] == data[ip + 1]):
            length = 2
            maxlen = min(in_len - ip - length, _MAX_REF)
            op = len(out)
            if op + 4 >= out_len and op - (not lit) + 4 >= out_len:
                return None
            out[op - lit - 1] = lit - 1 & 0xFF  # close the literal run
            if not lit:
                del out[-1]  # an empty run takes no header
            if maxlen > 16:
                for _ in range(16):
                    length += 1
                    if data[ref + length] != data[ip + length]:
                        break
                else:
                    length = _extend(data, ref, ip, length, maxlen)
            else:
                length = _extend(data, ref, ip, length, maxlen)
            length -= 2
            ip += 1
            if length < 7:
                out.append((off >> 8) + (length << 5))
            else:
                out.append((off >> 8) + (7 << 5))
                out.append(length - 7)
            out.append(off & 0xFF)
            lit = 0
            out.append(0)  # start a run
            ip += length + 1
            if ip >= in_len - 2:
                break
            ip -= 2
            hval = data[ip] << 8 | data[ip + 1]
            for _ in range(2):
                hval = (hval << 8 | data[ip + 2]) & 0xFFFFFFFF
                htab[((hval >> 8) - hval * 5) & _HMASK] = ip
                ip += 1
        else:
            if len(out) >= out_len:
                return None
            lit += 1
            out.append(data[ip])
            ip += 1
            if lit == _MAX_LIT:
                out[-lit - 1] = lit - 1
                lit = 0
                out.append(0)
    if len(out) + 3 > out_len:
        return None
    while ip < in_len:
        lit += 1
        out.append(data[ip])
        ip += 1
        if lit == _MAX_LIT:
            out[-lit - 1] = lit - 1
            lit = 0
            out.append(0)
    out[-lit - 1] = lit - 1 & 0xFF
    if not lit:
        del out[-1]
    return bytes(out)


def _extend(data: bytes, ref: int, ip: int, length: int, maxlen: int) -> int:
    """lzf_compress's do { len++; } while (len < maxlen && ref[len] == ip[len])."""
    length += 1
    while length < maxlen and data[ref + length] == data[ip + length]:
        length += 1
    return length


def decompress(data: bytes, out_len: int) -> bytes:
    """liblzf's lzf_decompress; exactly `out_len` bytes or LZFError."""
    if out_len > MAX_RATIO * len(data) + 8 or out_len > MAX_OUT:
        raise LZFError("LZF output too large for its input")
    out = bytearray()
    i, n = 0, len(data)
    while i < n:
        ctrl = data[i]
        i += 1
        if ctrl < 32:  # a literal run of ctrl + 1 bytes
            run = ctrl + 1
            if i + run > n or len(out) + run > out_len:
                raise LZFError("LZF literal past the end")
            out += data[i:i + run]
            i += run
            continue
        length = ctrl >> 5
        if length == 7:
            if i >= n:
                raise LZFError("LZF reference cut short")
            length += data[i]
            i += 1
        if i >= n:
            raise LZFError("LZF reference cut short")
        back = ((ctrl & 0x1F) << 8) + data[i] + 1
        i += 1
        length += 2
        if back > len(out) or len(out) + length > out_len:
            raise LZFError("LZF reference out of range")
        start = len(out) - back
        if back >= length:
            out += out[start:start + length]
        else:  # overlapping: the last `back` bytes repeat
            chunk = bytes(out[start:])
            out += (chunk * (length // back + 1))[:length]
    if len(out) != out_len:
        raise LZFError("LZF output of the wrong size")
    return bytes(out)
