"""The uid of each peer on this node (manual, "Console": "lex_a2.3 is the user lex_a2
that has a uid of 3"; "The * is often used for uid 0", this node).

A peer takes the lowest free uid when the node first learns of it and keeps it while it
is live and while it is a zombie (dead, listed by `show peers zombie`), so a label
typed on the console names the same instance until that instance is forgotten. A new
instance of the same user is a new bridge and takes a uid of its own. The node keeps at
most ZOMBIES_KEPT zombies: the oldest is forgotten first, and its uid is free again.
"""

from __future__ import annotations

import heapq

ZOMBIES_KEPT = 1024


class UidTable:
    def __init__(self) -> None:
        self._uid: dict[bytes, int] = {}
        self._free: list[int] = []  # uids released, a heap: the lowest is taken first
        self._next = 1

    def assign(self, bridge: bytes) -> int:
        """The bridge's uid, taken now if it has none."""
        uid = self._uid.get(bridge)
        if uid is None:
            if self._free:
                uid = heapq.heappop(self._free)
            else:
                uid, self._next = self._next, self._next + 1
            self._uid[bridge] = uid
        return uid

    def release(self, bridge: bytes) -> None:
        uid = self._uid.pop(bridge, None)
        if uid is not None:
            heapq.heappush(self._free, uid)

    def get(self, bridge: bytes) -> int | None:
        return self._uid.get(bridge)

    def __len__(self) -> int:
        return len(self._uid)
