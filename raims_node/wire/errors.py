"""Errors raised by the wire codec.

Every malformed byte string given to a decoder raises a subclass of `WireError`
carrying the offset where decoding stopped, never any other exception.
"""

from raims_node import RaimsError


class WireError(RaimsError):
    """A frame or field could not be encoded or decoded."""

    def __init__(self, message: str, offset: int | None = None) -> None:
        self.offset = offset
        # complete frames a stream reader parsed before the error, so none is lost
        self.frames: list[bytes] = []
        super().__init__(message if offset is None else f"{message} (at offset {offset})")


class Truncated(WireError):
    """The buffer ends before the length a header or field announces."""


class BadHeader(WireError):
    """The 8-byte frame header or one of the three fixed header fields is invalid."""


class BadField(WireError):
    """A field descriptor or value is invalid."""


class FrameTooLarge(WireError):
    """A frame exceeds the configured maximum size."""


class StreamDesync(WireError):
    """A byte stream no longer starts with a frame header; the stream must be closed."""
