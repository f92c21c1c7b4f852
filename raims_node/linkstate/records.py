"""Peer and link records of the link-state database (manual: "Networking" intro, "Cost").

The manual's LSDB holds one record per peer, `{bridge id, session key, peer name, sub
seqno, link seqno, bloom}`, and for each peer the links it has to directly attached
peers, `{bridge id, tport name, peer name, tport id, cost}`. These are the plain,
immutable values the router replicates; the session key stays with the router's auth
state and is not part of the routing records.

Decisions where the manual is vague:
- A link is identified by `(bridge, tport_id, peer_bridge)`: the manual names the
  `(bridge id, tport id)` pair, and one multicast transport (pgm) reaches several peers
  under one tport id.
- A link carries its transport type (`tcp`, `mesh`, `pgm`) because `show adjacency`
  and `show graph` print it and the manual says the peer sends it with the link.
- Costs are four positive 32-bit integers, one per path; `expand_cost` fills a shorter
  list cyclically (`[a, b]` -> `(a, b, a, b)`), so one value applies to every path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from raims_node.linkstate.errors import InvalidRecord

NUM_PATHS = 4
BRIDGE_LEN = 16
DEFAULT_COST = 1000
MIN_COST = 1
MAX_COST = 0xFFFF_FFFF
MAX_TPORT_ID = 0xFFFF_FFFF
MAX_SEQNO = 0xFFFF_FFFF_FFFF_FFFF

Cost = tuple[int, int, int, int]


def expand_cost(values: Sequence[int]) -> Cost:
    """Four per-path costs from 1..4 values, repeated cyclically."""
    if not 1 <= len(values) <= NUM_PATHS:
        raise InvalidRecord(f"{len(values)} cost values given, expected 1 to {NUM_PATHS}")
    n = len(values)
    return check_cost((values[0], values[1 % n], values[2 % n], values[3 % n]))


def check_cost(cost: Cost) -> Cost:
    if len(cost) != NUM_PATHS:
        raise InvalidRecord(f"cost {cost!r} must have {NUM_PATHS} values")
    for c in cost:
        if type(c) is not int and not isinstance(c, int) or not MIN_COST <= c <= MAX_COST:
            raise InvalidRecord(f"cost {c!r} outside {MIN_COST}..{MAX_COST}")
    return cost


def _check_bridge(bridge: bytes, what: str) -> None:
    if not isinstance(bridge, bytes) or len(bridge) != BRIDGE_LEN:
        raise InvalidRecord(f"{what} must be {BRIDGE_LEN} bytes, got {bridge!r}")


def _check_seqno(value: int, what: str) -> None:
    if not 0 <= value <= MAX_SEQNO:
        raise InvalidRecord(f"{what} {value} outside 0..{MAX_SEQNO}")


@dataclass(frozen=True, slots=True)
class PeerRecord:
    """One peer of the network; `start_ns` (its start time) orders peers by age."""

    bridge: bytes
    name: str
    start_ns: int
    sub_seqno: int = 0
    link_seqno: int = 0
    bloom: bytes | None = None

    def __post_init__(self) -> None:
        _check_bridge(self.bridge, "bridge")
        _check_seqno(self.start_ns, "start_ns")
        _check_seqno(self.sub_seqno, "sub_seqno")
        _check_seqno(self.link_seqno, "link_seqno")

    @property
    def age_key(self) -> tuple[int, bytes]:
        """Sort key putting older peers first; the bridge breaks equal start times."""
        return (self.start_ns, self.bridge)


@dataclass(frozen=True, slots=True)
class LinkRecord:
    """A link of peer `bridge` on its transport `tport_id` to the attached `peer_bridge`."""

    bridge: bytes
    tport_name: str
    tport_id: int
    peer_bridge: bytes
    cost: Cost = (DEFAULT_COST, DEFAULT_COST, DEFAULT_COST, DEFAULT_COST)
    tport_type: str = "tcp"

    def __post_init__(self) -> None:
        _check_bridge(self.bridge, "bridge")
        _check_bridge(self.peer_bridge, "peer_bridge")
        if self.bridge == self.peer_bridge:
            raise InvalidRecord(f"link of {self.bridge.hex()} to itself")
        if not 0 <= self.tport_id <= MAX_TPORT_ID:
            raise InvalidRecord(f"tport_id {self.tport_id} outside 0..{MAX_TPORT_ID}")
        check_cost(self.cost)

    @property
    def key(self) -> tuple[bytes, int, bytes]:
        return (self.bridge, self.tport_id, self.peer_bridge)
