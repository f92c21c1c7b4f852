"""A node's state: the last message id received from each origin node 1..255 (seed 1.5).

The state is what a client sends a server when it connects, what a numbered message file's
header records (the log's state when the file started) and what a state-only log holds.
It is also the whole of the exactly-once rule (seed 1.7): a message is delivered iff its
id is above the state of its origin; delivering it raises the state to that id. Messages of
one origin travel every path in id order (each server sends its log in order, starting
from what the client's state lacks), so a duplicate arriving over a redundant path is
always at or below the state and is dropped, and nothing ever arrives past a hole unless
the server's log itself lacks the messages (pruned): that is accepted and counted as a
gap, so that a late joiner is not stuck forever.

Encoding (inside header and footer records, little-endian): u16 count, then count
(u8 origin, u64 id) pairs in origin order, zero entries omitted.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping
from enum import IntEnum
from typing import Final

from raims_node.msglog.errors import BadArgument, MsgLogError

MAX_ORIGIN: Final = 255
_COUNT = struct.Struct("<H")
_PAIR = struct.Struct("<BQ")


class Verdict(IntEnum):
    DELIVER = 0  # id == state + 1
    DUPLICATE = 1  # id <= state: already delivered over another path
    GAP = 2  # id > state + 1: delivered, but messages before it were never available


class State:
    """Last id per origin; ids start at 1, 0 means nothing received from that origin."""

    __slots__ = ("ids",)

    def __init__(self, ids: Mapping[int, int] | None = None) -> None:
        self.ids = [0] * (MAX_ORIGIN + 1)
        for origin, mid in (ids or {}).items():
            check_origin(origin)
            if mid < 0:
                raise BadArgument(f"message id {mid} of origin {origin} is negative")
            self.ids[origin] = mid

    def __getitem__(self, origin: int) -> int:
        return self.ids[origin]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, State) and self.ids == other.ids

    def __repr__(self) -> str:
        return f"State({self.as_dict()})"

    def copy(self) -> State:
        s = State()
        s.ids = list(self.ids)
        return s

    def items(self) -> Iterator[tuple[int, int]]:
        return ((o, m) for o, m in enumerate(self.ids) if m)

    def as_dict(self) -> dict[int, int]:
        return dict(self.items())

    def total(self) -> int:
        return sum(self.ids)

    def offer(self, origin: int, mid: int) -> Verdict:
        """The exactly-once rule: DUPLICATE leaves the state alone, otherwise it advances."""
        last = self.ids[origin]
        if mid <= last:
            return Verdict.DUPLICATE
        self.ids[origin] = mid
        return Verdict.DELIVER if mid == last + 1 else Verdict.GAP

    def covers(self, other: State) -> bool:
        """Whether every origin's id here is at least `other`'s."""
        return all(a >= b for a, b in zip(self.ids, other.ids, strict=True))

    def merge(self, other: State) -> None:
        self.ids = [max(a, b) for a, b in zip(self.ids, other.ids, strict=True)]

    def encode(self) -> bytes:
        pairs = list(self.items())
        return _COUNT.pack(len(pairs)) + b"".join(_PAIR.pack(o, m) for o, m in pairs)

    @classmethod
    def decode(cls, data: bytes | memoryview, offset: int = 0) -> tuple[State, int]:
        """The state encoded at `offset` and the offset after it."""
        try:
            (n,) = _COUNT.unpack_from(data, offset)
            offset += _COUNT.size
            s = cls()
            for _ in range(n):
                origin, mid = _PAIR.unpack_from(data, offset)
                offset += _PAIR.size
                s.ids[origin] = mid
        except struct.error as exc:
            raise MsgLogError(f"truncated state encoding: {exc}") from None
        return s, offset

    def to_json(self) -> dict[str, int]:
        return {str(o): m for o, m in self.items()}

    @classmethod
    def from_json(cls, raw: object) -> State:
        if not isinstance(raw, dict):
            raise BadArgument(f"a state is an object of origin: id, not {type(raw).__name__}")
        try:
            return cls({int(k): int(v) for k, v in raw.items()})
        except (TypeError, ValueError):
            raise BadArgument(f"bad state {raw!r}") from None


def check_origin(origin: int) -> int:
    if not 1 <= origin <= MAX_ORIGIN:
        raise BadArgument(f"origin node number {origin} is not in 1..{MAX_ORIGIN}")
    return origin
