"""Splitting a byte stream (a TCP link) into frames.

`FrameReader.feed(bytes) -> frames` keeps partial frames across reads. A stream
that stops looking like frames (bad version bit, impossible size, wrong bridge
descriptor where one must be) raises StreamDesync: there is no way to find the next
frame boundary, so the link must be closed. Frames larger than `max_frame` raise
FrameTooLarge as soon as their header is read. The error carries in `.frames` the
complete frames that preceded the bad bytes in the same call, and every later call
raises again.

Linear in the bytes read: a partial frame's length is remembered, and reads that do
not complete it are only appended (one copy of a large frame, when it is whole).
"""

from __future__ import annotations

import struct

from raims_node.wire.errors import FrameTooLarge, StreamDesync, WireError
from raims_node.wire.frame import (
    BRIDGE_DESC,
    HEADER_SIZE,
    MAX_SIZE_24,
    MIN_BODY,
    VERSION,
    frame_length,
)

MAX_FRAME = 64 * 1024 * 1024
_HEAD = struct.Struct(">IIH")  # size word, hash, bridge descriptor
_HEAD_SIZE = _HEAD.size
_unpack_head = _HEAD.unpack_from


class FrameReader:
    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        self.max_frame = max_frame
        self._buf = bytearray()
        self._error: WireError | None = None
        self._need = 0  # bytes _buf must hold before a parse can progress
        self.consumed = 0  # stream offset of _buf[0], for error messages

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        if self._error is not None:
            raise StreamDesync(f"stream already failed: {self._error}")
        if self._buf:
            self._buf += data
            if len(self._buf) < self._need:  # a large frame still arriving
                return []
            buf = bytes(self._buf)
        else:
            buf = data if type(data) is bytes else bytes(data)  # slices of bytes are bytes: one copy
        frames: list[bytes] = []
        self._need = 0
        append = frames.append
        unpack = _unpack_head
        max_frame = self.max_frame
        off = 0
        n = len(buf)
        try:
            while n - off >= HEADER_SIZE:
                total = 0
                if n - off >= _HEAD_SIZE:  # the usual frame, checked in one unpack
                    word, _, bdesc = unpack(buf, off)
                    size = word & MAX_SIZE_24
                    if (word >> 31 == VERSION and size >= MIN_BODY and bdesc == BRIDGE_DESC
                            and HEADER_SIZE + size <= max_frame):
                        total = HEADER_SIZE + size
                if not total:
                    total = self._check(buf, off, n)  # any other kind, or raise
                if n - off < total:
                    self._need = total
                    break
                append(buf[off : off + total])
                off += total
        except WireError as exc:
            self._error = exc
            exc.frames = frames
            raise
        finally:
            self._buf = bytearray(buf[off:]) if off < n else bytearray()
            self.consumed += off
        return frames

    def _check(self, buf: bytes, off: int, n: int) -> int:
        """The length of the frame at `off` that is not the usual kind (extended size,
        or its bridge descriptor not read yet); raise on one that cannot be a frame or
        is too large."""
        try:
            total = frame_length(buf[off : off + HEADER_SIZE])
        except WireError as exc:
            raise StreamDesync(f"not a frame header: {exc}", self.consumed + off) from None
        if total > self.max_frame:
            raise FrameTooLarge(f"frame of {total} bytes exceeds max {self.max_frame}", self.consumed + off)
        if n - off >= HEADER_SIZE + 2 and ((buf[off + 8] << 8) | buf[off + 9]) != BRIDGE_DESC:
            raise StreamDesync("frame does not start with the bridge field", self.consumed + off + 8)
        return total
