"""Splitting a byte stream (a TCP link) into frames.

`FrameReader.feed(bytes) -> frames` keeps partial frames across reads. A stream
that stops looking like frames (bad version bit, impossible size, wrong bridge
descriptor where one must be) raises StreamDesync: there is no way to find the next
frame boundary, so the link must be closed. Frames larger than `max_frame` raise
FrameTooLarge as soon as their header is read. The error carries in `.frames` the
complete frames that preceded the bad bytes in the same call, and every later call
raises again.
"""

from __future__ import annotations

from raims_node.wire.errors import FrameTooLarge, StreamDesync, WireError
from raims_node.wire.frame import BRIDGE_DESC, HEADER_SIZE, frame_length

MAX_FRAME = 64 * 1024 * 1024


class FrameReader:
    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        self.max_frame = max_frame
        self._buf = bytearray()
        self._error: WireError | None = None
        self.consumed = 0  # stream offset of _buf[0], for error messages

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        if self._error is not None:
            raise StreamDesync(f"stream already failed: {self._error}")
        buf = self._buf
        buf += data
        frames: list[bytes] = []
        off = 0
        n = len(buf)
        try:
            while n - off >= HEADER_SIZE:
                try:
                    total = frame_length(bytes(buf[off : off + HEADER_SIZE]))
                except WireError as exc:
                    raise StreamDesync(f"not a frame header: {exc}", self.consumed + off) from None
                if total > self.max_frame:
                    raise FrameTooLarge(f"frame of {total} bytes exceeds max {self.max_frame}", self.consumed + off)
                if n - off >= HEADER_SIZE + 2 and ((buf[off + 8] << 8) | buf[off + 9]) != BRIDGE_DESC:
                    raise StreamDesync("frame does not start with the bridge field", self.consumed + off + 8)
                if n - off < total:
                    break
                frames.append(bytes(buf[off : off + total]))
                off += total
        except WireError as exc:
            self._error = exc
            exc.frames = frames
            raise
        finally:
            if off:
                del buf[:off]
                self.consumed += off
        return frames
