"""Replication of the naming table between nodes (seed 002, 2.2.10), sans-IO.

Every node numbers its own changes (a per-origin sequence number, starting at 1 with
each incarnation, whose bridge id is new) and floods each change to every node over the
router's `_Z.NAMES` broadcast, which reaches every node of the network whatever the
bloom filters say. A node that learns of another (the router's peer up) asks it, on its
inbox (`_I.<bridge>.names`), for its whole set (a dump: its cluster and zone
publications and its current sequence number), as the draft's "when a node establishes
contact with a new node ... it must immediately send out ... PUBLICATION messages".

Decisions:
- Catch-up is a names-level request to the origin itself on peer up, not a field of the
  router's `sync_rpy`: the name table stays out of the link-state code, and a dump comes
  from the only node sure to be up to date. The request is repeated every `retry_ns`
  until answered, for as long as the origin is up.
- Updates that arrive before the dump, or after a gap in the origin's numbers, are held
  (up to EARLY_LIMIT per origin) and replayed in order once the dump arrives; a gap
  asks for a new dump. An update at or below the known number is a repeat.
- When the router declares a node down (or it says bye), its publications are
  withdrawn at once on every node (the service does it on the peer down event); its
  replication state is forgotten.
- Every `beacon_ns` a node floods its current sequence number (a beacon); a node whose
  table lags behind it asks for a dump. This catches an update lost with nothing after
  it (a link that failed under it while the origin stayed reachable).
- Frames are JSON (compact lists); a frame that does not decode is counted and dropped.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from raims_node.names.errors import BadFrame
from raims_node.names.table import Publication, Scope

EARLY_LIMIT = 256
NS = 1_000_000_000
OP_UPDATE = "u"
OP_REQUEST = "q"
OP_DUMP = "d"
OP_BEACON = "h"


@dataclass(slots=True)
class Flood:
    """Send `data` to every node (`Node.send_names(None, ...)`)."""

    data: bytes


@dataclass(slots=True)
class Unicast:
    """Send `data` to node `dest`'s names inbox."""

    dest: bytes
    data: bytes


Output = Flood | Unicast


@dataclass(slots=True)
class Replace:
    """The whole set of `origin`'s publications is now `pubs` (a dump arrived)."""

    origin: bytes
    pubs: list[Publication]


@dataclass(slots=True)
class Delta:
    origin: bytes
    added: list[Publication]
    removed: list[int]  # keys


Change = Replace | Delta


@dataclass(slots=True)
class _Origin:
    user: str
    known: int | None = None  # the origin's seqno our table reflects; None before a dump
    early: dict[int, tuple[list[Publication], list[int]]] = field(default_factory=dict)
    retry_at_ns: int | None = None  # a dump request outstanding, repeated at this time
    requests: int = 0


def _pub_list(p: Publication) -> list[object]:
    return [p.type, p.lower, p.upper, int(p.scope), p.port, p.key, p.inbox]


def _pub_of(item: object, origin: bytes, user: str) -> Publication:
    if not isinstance(item, list) or len(item) != 7:
        raise BadFrame(f"publication {item!r} is not a 7-item list")
    t, lo, up, scope, port, key, inbox = item
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (t, lo, up, scope, port, key)):
        raise BadFrame(f"publication {item!r} has a non-integer field")
    if not isinstance(inbox, str) or scope not in (1, 2) or not 0 <= lo <= up:
        raise BadFrame(f"publication {item!r} is malformed")
    return Publication(t, lo, up, Scope(scope), origin, port, key, inbox, user)


class Replicator:
    def __init__(self, self_node: bytes, own: Callable[[], list[Publication]], retry_ns: int = NS,
                 beacon_ns: int = 30 * NS) -> None:
        """`own()` returns this node's replicated publications (cluster and zone)."""
        self.self_node = self_node
        self.own = own
        self.retry_ns = retry_ns
        self.beacon_ns = beacon_ns
        self._next_beacon_ns: int | None = None
        self.seq = 0
        self.origins: dict[bytes, _Origin] = {}
        self.bad_frames = 0
        self.dumps_sent = 0
        self.dumps_received = 0
        self.repeats = 0
        self.lagging = 0  # beacons that showed an origin ahead of our table

    # ------------------------------------------------------------------ our changes

    def local_change(self, added: list[Publication], removed: list[Publication]) -> list[Output]:
        """The update to flood for a change of our own replicated publications."""
        added = [p for p in added if p.scope != Scope.NODE]
        removed = [p for p in removed if p.scope != Scope.NODE]
        if not added and not removed:
            return []
        self.seq += 1
        body = {"o": OP_UPDATE, "s": self.seq, "a": [_pub_list(p) for p in added], "r": [p.key for p in removed]}
        return [Flood(_encode(body))]

    # ------------------------------------------------------------------ router events

    def peer_up(self, peer: bytes, user: str, now_ns: int) -> list[Output]:
        origin = self.origins.get(peer)
        if origin is None:
            origin = self.origins[peer] = _Origin(user)
        return self._ask(peer, origin, now_ns)

    def peer_down(self, peer: bytes) -> None:
        self.origins.pop(peer, None)

    def _ask(self, peer: bytes, origin: _Origin, now_ns: int) -> list[Output]:
        origin.retry_at_ns = now_ns + self.retry_ns
        origin.requests += 1
        return [Unicast(peer, _encode({"o": OP_REQUEST}))]

    def frame(self, peer: bytes, user: str, data: bytes, now_ns: int) -> tuple[list[Change], list[Output]]:
        """A names frame from `peer`: the table changes it implies and what to send."""
        try:
            body = json.loads(data)
            if not isinstance(body, dict):
                raise BadFrame("not a JSON object")
            op = body.get("o")
            if op == OP_REQUEST:
                self.dumps_sent += 1
                dump = {"o": OP_DUMP, "s": self.seq, "p": [_pub_list(p) for p in self.own()]}
                return [], [Unicast(peer, _encode(dump))]
            seq = body.get("s")
            if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
                raise BadFrame(f"seqno {seq!r}")
            if op == OP_BEACON:
                return [], self._beacon(peer, user, seq, now_ns)
            if op == OP_DUMP:
                raw = body.get("p")
                if not isinstance(raw, list):
                    raise BadFrame("dump without a publication list")
                return self._dump(peer, user, seq, [_pub_of(i, peer, user) for i in raw], now_ns)
            if op == OP_UPDATE:
                added, removed = body.get("a"), body.get("r")
                if not isinstance(added, list) or not isinstance(removed, list) or not all(
                        isinstance(k, int) for k in removed):
                    raise BadFrame("update without add and remove lists")
                return self._update(peer, user, seq, [_pub_of(i, peer, user) for i in added], removed, now_ns)
            raise BadFrame(f"unknown op {op!r}")
        except (ValueError, RecursionError, BadFrame):
            self.bad_frames += 1
            return [], []

    def _dump(self, peer: bytes, user: str, seq: int, pubs: list[Publication],
              now_ns: int) -> tuple[list[Change], list[Output]]:
        origin = self.origins.get(peer)
        if origin is None:
            origin = self.origins[peer] = _Origin(user)
        self.dumps_received += 1
        if origin.known is not None and seq < origin.known:
            return [], []  # an older answer to a repeated request
        origin.known = seq
        origin.retry_at_ns = None
        changes: list[Change] = [Replace(peer, pubs), *self._replay(peer, origin, now_ns)]
        return changes, self._ask(peer, origin, now_ns) if origin.early else []

    def _update(self, peer: bytes, user: str, seq: int, added: list[Publication], removed: list[int],
                now_ns: int) -> tuple[list[Change], list[Output]]:
        origin = self.origins.get(peer)
        if origin is None:  # no peer up seen (should not happen): treat it as one
            origin = self.origins[peer] = _Origin(user)
        if origin.known is not None and seq <= origin.known:
            self.repeats += 1
            return [], []
        if origin.known is not None and seq == origin.known + 1:
            origin.known = seq
            return [Delta(peer, added, removed), *self._replay(peer, origin, now_ns)], []
        if len(origin.early) < EARLY_LIMIT:
            origin.early[seq] = (added, removed)
        if origin.retry_at_ns is None:
            return [], self._ask(peer, origin, now_ns)
        return [], []

    def _beacon(self, peer: bytes, user: str, seq: int, now_ns: int) -> list[Output]:
        origin = self.origins.get(peer)
        if origin is None:
            origin = self.origins[peer] = _Origin(user)
        if origin.retry_at_ns is None and (origin.known is None or seq > origin.known):
            self.lagging += 1
            return self._ask(peer, origin, now_ns)
        return []

    def _replay(self, peer: bytes, origin: _Origin, now_ns: int) -> list[Change]:
        out: list[Change] = []
        assert origin.known is not None
        for seq in sorted(origin.early):
            if seq <= origin.known:
                del origin.early[seq]
            elif seq == origin.known + 1:
                added, removed = origin.early.pop(seq)
                out.append(Delta(peer, added, removed))
                origin.known = seq
            else:
                break
        return out

    def tick(self, now_ns: int) -> list[Output]:
        out: list[Output] = []
        if self._next_beacon_ns is None:
            self._next_beacon_ns = now_ns + self.beacon_ns
        elif now_ns >= self._next_beacon_ns and self.seq:
            self._next_beacon_ns = now_ns + self.beacon_ns
            out.append(Flood(_encode({"o": OP_BEACON, "s": self.seq})))
        for peer, origin in self.origins.items():
            if origin.retry_at_ns is not None and origin.retry_at_ns <= now_ns:
                out += self._ask(peer, origin, now_ns)
        return out

    def rows(self) -> list[dict[str, object]]:
        return [{"node": o.user, "seqno": o.known, "held": len(o.early), "requests": o.requests,
                 "waiting": o.retry_at_ns is not None} for o in self.origins.values()]


def _encode(body: dict[str, object]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()
