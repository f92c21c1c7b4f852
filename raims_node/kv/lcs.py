"""LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN] (Redis 7.0 semantics, errors
and replies, RESP2 and RESP3): the longest common subsequence of two string values.

The answer is redis-server's: its dynamic-programming table walked back from the end,
taking the diagonal on equal bytes, else the direction with the larger length (ties go
to the second string), so the LCS string and the IDX ranges are the same ones.

Decisions:
- The work is bounded as redis-server 7.0.15 bounds it: a table of (len1+1)*(len2+1)
  4-byte cells larger than proto-max-bulk-len (512 MiB, MAX_TABLE_BYTES: about 134
  million cells) is refused with its error "Insufficient memory, transient memory for
  LCS exceeds proto-max-bulk-len", whichever of LEN / IDX is asked; below that the node
  answers as redis-server does.
- The table is never held: rows are computed in numpy (a row is a running maximum),
  keeping two bits per cell (the steps of the table along each string, 1/16 of
  redis-server's memory: at most 32 MiB) from which the walk back is derived; runs of
  the walk along the longer string are found by vector scans. At the limit (two strings
  of 11584 bytes) LCS takes about a second, as redis-server's own table does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from raims_node.kv.bitmaps import cword
from raims_node.kv.commands import Engine, KVClient, command, parse_int, syntax_error
from raims_node.kv.errors import CommandError
from raims_node.kv.reply import Map

MAX_TABLE_BYTES = 512 * 1024 * 1024
TOO_BIG = b"ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len"
NOT_STRINGS = b"ERR The specified keys must contain string values"
_BLOCK = 1 << 16  # columns per numpy row slice (a multiple of 8: packed bits stay byte-aligned)


def table_too_big(alen: int, blen: int) -> bool:
    return (alen + 1) * (blen + 1) * 4 > MAX_TABLE_BYTES


class Table:
    """The LCS table of `rows` x `cols` (the shorter string along the rows), kept as two
    bit planes: up[r, c] = L(r,c) - L(r-1,c) and left[r, c] = L(r,c) - L(r,c-1)."""

    def __init__(self, rows: bytes, cols: bytes, planes: bool) -> None:
        self.rows, self.cols = rows, cols
        self.t = np.frombuffer(cols, np.uint8)
        nr, nc = len(rows), len(cols)
        width = (nc + 7) >> 3
        self.up = np.zeros((nr, width), np.uint8) if planes else None
        self.left = np.zeros((nr, width), np.uint8) if planes else None
        dtype = np.uint16 if min(nr, nc) < 65535 else np.uint32
        edge = np.zeros(nr + 1, dtype)  # L(r, c0-1) for the block starting at column c0
        for c0 in range(1, nc + 1, _BLOCK):
            c1 = min(c0 + _BLOCK, nc + 1)
            t = self.t[c0 - 1:c1 - 1]
            prev = np.zeros(c1 - c0 + 1, dtype)
            prev[0] = edge[0]
            for r in range(1, nr + 1):
                cand = np.where(t == rows[r - 1], prev[:-1] + 1, prev[1:])
                cand[0] = max(cand[0], edge[r])
                row = np.empty_like(prev)
                row[0] = edge[r]
                np.maximum.accumulate(cand, out=row[1:])
                if self.up is not None and self.left is not None:
                    b0 = (c0 - 1) >> 3
                    packed_up = np.packbits(row[1:] != prev[1:])
                    packed_left = np.packbits(row[1:] != row[:-1])
                    self.up[r - 1, b0:b0 + len(packed_up)] = packed_up
                    self.left[r - 1, b0:b0 + len(packed_left)] = packed_left
                edge[r] = row[-1]
                prev = row
        self.length = int(edge[nr])

    def bits(self, plane: np.ndarray, r: int, lo: int, hi: int) -> np.ndarray:
        """Plane bits of row r, columns lo..hi (1-based, inclusive), as booleans."""
        b0, b1 = (lo - 1) >> 3, ((hi - 1) >> 3) + 1
        unpacked = np.unpackbits(plane[r - 1, b0:b1])
        start = (lo - 1) - (b0 << 3)
        return unpacked[start:start + hi - lo + 1].astype(bool)

    def bit(self, plane: np.ndarray, r: int, c: int) -> int:
        return (int(plane[r - 1, (c - 1) >> 3]) >> (7 - ((c - 1) & 7))) & 1

    def run_end(self, r: int, c: int, along_stops_on_up: bool) -> int:
        """The largest column c' < c of row r where the walk back stops running along the
        columns (equal bytes, or the direction changes); 0 if none."""
        assert self.up is not None and self.left is not None
        hi, span = c - 1, 64
        target = self.rows[r - 1]
        while hi >= 1:
            lo = max(1, hi - span + 1)
            up, left = self.bits(self.up, r, lo, hi), self.bits(self.left, r, lo, hi)
            if along_stops_on_up:  # columns are the second string: leave when up=0, left=1
                turn = ~up & left
            else:  # columns are the first string: stay while left=0, up=1
                turn = left | ~up
            stop = np.flatnonzero((self.t[lo - 1:hi] == target) | turn)
            if stop.size:
                return lo + int(stop[-1])
            hi, span = lo - 1, span * 2
        return 0


def walk(a: bytes, b: bytes, want_ranges: bool, min_len: int, with_len: bool) -> tuple[bytes, list[Any], int]:
    """The LCS of `a` and `b`, its IDX ranges (longest last match first) and its length."""
    swap = len(a) > len(b)  # rows are the shorter string
    tab = Table(b, a, True) if swap else Table(a, b, True)
    up, left = tab.up, tab.left
    assert up is not None and left is not None
    out = bytearray()
    ranges: list[Any] = []
    i, j = len(a), len(b)
    open_ = False
    as_ = ae = bs = be = 0

    def emit() -> None:
        n = ae - as_ + 1
        if want_ranges and (min_len == 0 or n >= min_len):
            ranges.append([[as_, ae], [bs, be], n] if with_len else [[as_, ae], [bs, be]])

    while i > 0 and j > 0:
        if a[i - 1] == b[j - 1]:
            out.append(a[i - 1])
            if not open_:
                open_, as_, ae, bs, be = True, i - 1, i - 1, j - 1, j - 1
            else:
                as_, bs = as_ - 1, bs - 1
            if as_ == 0 or bs == 0:
                emit()
                open_ = False
            i, j = i - 1, j - 1
            continue
        if open_:
            emit()
            open_ = False
        if swap:  # rows follow b (j), columns a (i); up is along b, left along a
            go_i = not tab.bit(left, j, i) and tab.bit(up, j, i) == 1
            if go_i:
                i = tab.run_end(j, i, False)
            else:
                j -= 1
        else:
            go_i = not tab.bit(up, i, j) and tab.bit(left, i, j) == 1
            if go_i:
                i -= 1
            else:
                j = tab.run_end(i, j, True)
    out.reverse()
    return bytes(out), ranges, tab.length


@command("lcs", -3)
def lcs(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    va, vb = e.store.lookup(c.db, a[1]), e.store.lookup(c.db, a[2])
    if (va is not None and type(va) is not bytes) or (vb is not None and type(vb) is not bytes):
        raise CommandError(NOT_STRINGS)
    va, vb = va or b"", vb or b""
    get_idx = get_len = with_len = False
    min_len = 0
    j = 3
    while j < len(a):
        opt = cword(a[j])
        if opt == b"idx":
            get_idx = True
        elif opt == b"len":
            get_len = True
        elif opt == b"withmatchlen":
            with_len = True
        elif opt == b"minmatchlen" and j + 1 < len(a):
            min_len = max(parse_int(a[j + 1]), 0)
            j += 1
        else:
            raise syntax_error()
        j += 1
    if get_idx and get_len:
        raise CommandError(b"ERR If you want both the length and indexes, please just use IDX.")
    if table_too_big(len(va), len(vb)):
        raise CommandError(TOO_BIG)
    if get_len:
        short, long_ = (va, vb) if len(va) <= len(vb) else (vb, va)
        return Table(short, long_, False).length
    text, ranges, length = walk(va, vb, get_idx, min_len, with_len)
    if get_idx:
        return Map([(b"matches", ranges), (b"len", length)])
    return text


__all__ = ["MAX_TABLE_BYTES", "TOO_BIG", "Table", "table_too_big", "walk"]
