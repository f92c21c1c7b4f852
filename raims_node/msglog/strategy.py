"""Connection strategy of a cabal node, sans-IO (seed 004 section 1.6).

A link carries messages one way, from a server to a client. From a node's side it is
`FEED` (this node serves, the peer is a client) or `PULL` (this node is the client).
Either end may request it (seed: "the client and server are peers"); `mine` says this
node did. What each type wants, as the seed's table gives it:

    hub     FEED to the first reachable hub ahead in the circular ring list and
            PULL from the first reachable hub behind; accepts hub and spoke clients
    spoke   PULL from the first reachable hub behind
    sink    PULL from every source (each source is a want of its own)
    source  nothing: it only accepts sink clients

The adaptive ring, per want (an ordered list of candidates, the preferred first):
- Candidates are tried in order, one attempt at a time; a failed one is skipped at once
  and left alone for `retry` seconds, so the node "continues through the list until a
  connection is made" and, without its preferred link, "periodically attempts" it again.
- A want is served by any up link in its direction to one of its candidates, requested
  by either end. Once a better one is up, the alternates this node requested are dropped
  ("the node that requests a connection is responsible for deciding when it is no longer
  needed"); links peers requested are kept until the peers drop them.
- Two links between the same pair in the same direction (both ends requested at once):
  the end with the higher (number, name) drops its own, so exactly one stays.
- Blocked peers (unreachable by configuration: a partition filter) are no candidates, and
  links to them are dropped.
Delivery over redundant links stays exactly-once by the state rule (`state.State.offer`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from raims_node.msglog.config import Cabal, NodeConf, NodeType

DEFAULT_RETRY: Final = 1.0  # seconds before a failed candidate is tried again


class Direction(StrEnum):
    FEED = "feed"  # this node is the server of the link
    PULL = "pull"  # this node is the client


@dataclass(frozen=True, slots=True)
class Link:
    id: int
    peer: str
    direction: Direction
    mine: bool


@dataclass(frozen=True, slots=True)
class Connect:
    peer: str
    direction: Direction


@dataclass(frozen=True, slots=True)
class Drop:
    link: int
    why: str


Action = Connect | Drop


@dataclass(slots=True)
class Want:
    direction: Direction
    candidates: list[str]
    attempting: str | None = None
    next_try: dict[str, float] = field(default_factory=dict)


def wants_of(cabal: Cabal, me: str) -> list[Want]:
    node = cabal.node(me)
    hubs_ahead = [n.name for n in cabal.ahead(me) if n.type is NodeType.HUB]
    hubs_behind = [n.name for n in cabal.behind(me) if n.type is NodeType.HUB]
    if node.type is NodeType.HUB:
        return [Want(Direction.FEED, hubs_ahead), Want(Direction.PULL, hubs_behind)]
    if node.type is NodeType.SPOKE:
        return [Want(Direction.PULL, hubs_behind)]
    if node.type is NodeType.SINK:
        return [
            Want(Direction.PULL, [n.name]) for n in cabal.ahead(me) if n.type is NodeType.SOURCE
        ]
    return []


def accepts(me: NodeConf, peer: NodeConf, direction: Direction) -> bool:
    """Whether `me` takes a link in `direction` (its view) requested by `peer` (seed table)."""
    if direction is Direction.FEED:  # peer is a client of mine
        if me.type is NodeType.HUB:
            return peer.type in (NodeType.HUB, NodeType.SPOKE)
        return me.type is NodeType.SOURCE and peer.type is NodeType.SINK
    return me.type is NodeType.HUB and peer.type is NodeType.HUB  # a hub server feeds me


class Strategy:
    def __init__(self, cabal: Cabal, me: str, retry: float = DEFAULT_RETRY) -> None:
        self.cabal = cabal
        self.me = cabal.node(me)
        self.retry = retry
        self.wants = wants_of(cabal, me)
        self.links: dict[int, Link] = {}
        self.blocked: frozenset[str] = frozenset()
        self._dropping: set[int] = set()

    # -- events --------------------------------------------------------------------

    def link_up(self, link: Link) -> None:
        self.links[link.id] = link
        for w in self.wants:
            if link.mine and w.direction is link.direction and w.attempting == link.peer:
                w.attempting = None

    def link_down(self, link_id: int, now: float) -> None:
        link = self.links.pop(link_id, None)
        self._dropping.discard(link_id)
        if link is None:
            return
        for w in self.wants:  # a lost link's peer is tried again only after `retry`
            if w.direction is link.direction and link.peer in w.candidates:
                w.next_try[link.peer] = now + self.retry

    def connect_failed(self, peer: str, direction: Direction, now: float) -> None:
        for w in self.wants:
            if w.direction is direction and w.attempting == peer:
                w.attempting = None
                w.next_try[peer] = now + self.retry

    def set_blocked(self, names: Iterable[str]) -> None:
        self.blocked = frozenset(names)

    # -- decisions -----------------------------------------------------------------

    def _rank(self, link: Link) -> tuple[int, str]:
        return (self.cabal.node(link.peer).number, link.peer)

    def poll(self, now: float) -> list[Action]:
        out: list[Action] = []
        for link in self.links.values():
            if link.peer in self.blocked:
                self._drop(link, "peer unreachable (blocked)", out)
        for link in self.links.values():
            if not link.mine:
                continue
            twin = any(
                o.id != link.id
                and o.peer == link.peer
                and o.direction is link.direction
                and not o.mine
                and o.id not in self._dropping
                for o in self.links.values()
            )
            if twin and (self.me.number, self.me.name) > self._rank(link):
                self._drop(link, "peer requested the same link", out)
        for w in self.wants:
            self._serve(w, now, out)
        return out

    def _drop(self, link: Link, why: str, out: list[Action]) -> None:
        if link.id not in self._dropping:
            self._dropping.add(link.id)
            out.append(Drop(link.id, why))

    def _serve(self, w: Want, now: float, out: list[Action]) -> None:
        cands = [c for c in w.candidates if c not in self.blocked]
        live = [
            link
            for link in self.links.values()
            if link.direction is w.direction
            and link.peer in cands
            and link.id not in self._dropping
        ]
        best = min((cands.index(link.peer) for link in live), default=len(cands))
        for link in live:
            if link.mine and cands.index(link.peer) > best:
                self._drop(link, f"preferred {cands[best]} is up", out)
        if w.attempting is not None or best == 0:
            return
        for peer in cands[:best]:
            if w.next_try.get(peer, 0.0) <= now:
                w.attempting = peer
                out.append(Connect(peer, w.direction))
                return

    def preferred(self) -> dict[Direction, str | None]:
        """The best candidate each direction is linked to now (status and tests)."""
        out: dict[Direction, str | None] = {}
        for w in self.wants:
            cands = [c for c in w.candidates if c not in self.blocked]
            ups = [
                cands.index(link.peer)
                for link in self.links.values()
                if link.direction is w.direction and link.peer in cands
            ]
            out[w.direction] = cands[min(ups)] if ups else None
        return out
