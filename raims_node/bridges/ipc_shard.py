"""An sbus pattern taking shard i of n (`SUB _SHARD/<i>/<n>/<pattern>`, bridges/ipc.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from raims_node.bloom import Shard, subject_hash
from raims_node.bridges import sbus_proto as sp
from raims_node.subject import Pattern, subject_bytes

if TYPE_CHECKING:
    from raims_node.bridges.router_bus import RouterBus


class ShardMatch:
    """An sbus pattern taking shard i of n: a key matches when the pattern does and the
    shard holds the hash of the key's node subject (the bus subject the network hashes,
    so sbus, NATS and Redis shard subscribers split alike; a key that maps to no subject
    is hashed as it is)."""

    __slots__ = ("bus", "pattern", "shard")

    def __init__(self, pattern: Pattern, shard: Shard, bus: RouterBus) -> None:
        self.pattern, self.shard, self.bus = pattern, shard, bus

    def matches(self, text: str) -> bool:
        if not self.pattern.matches(text):
            return False
        subject = sp.subject_of(text.encode("utf-8", "surrogateescape"))
        internal = text if subject is None else self.bus.inside(subject)
        return self.shard.holds(subject_hash(subject_bytes(internal)))
