"""Round-robin turns per key, bounded: queue groups (router/queue_choice.py, the bus's
local path in bridges/router_bus.py) and service names (names/table.py) come and go, a
key per job, so every turn is forgotten at TURNS_LIMIT keys (each starts again at its
first member) rather than growing for good."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

TURNS_LIMIT = 4096  # keys whose turn is kept

K = TypeVar("K", bound=Hashable)


class Turns(Generic[K]):
    def __init__(self) -> None:
        self._turn: dict[K, int] = {}

    def next(self, key: K) -> int:
        """This key's turn (0, 1, 2, ...; take it modulo the members)."""
        turns = self._turn
        turn = turns.get(key, 0)
        if not turn and len(turns) >= TURNS_LIMIT:
            turns.clear()
        turns[key] = turn + 1
        return turn

    def __len__(self) -> int:
        return len(self._turn)
