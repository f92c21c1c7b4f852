"""The topology service (seed 002, 2.3): inquiries and subscriptions over the node-local
naming table, with timeouts driven by the caller's clock.

- A subscription `{type, lower, upper, timeout}` reports every change of the table that
  overlaps its range as an event: published (0x800), withdrawn (0x1000), and timeout
  (0x2000) once when its timer runs out, after which it is gone. Each event carries the
  overlap of the subscribed and the published range (`found_lower`, `found_upper`) and
  the publication's port and node.
- An inquiry asks whether {type, instance} is published: answered at once when it is,
  at once with a timeout when the timeout is 0, else when it gets published or the timer
  runs out, whichever comes first.
- Timeouts are in milliseconds; FOREVER (0xffffffff) never expires.

Decisions where the draft is vague:
- Events are per publication (one withdrawn event for each publication that goes, as
  Linux TIPC reports ports), which gives the port and node of what changed; a client
  wanting the draft's "no sequence overlapping remains" counts them.
- A new subscription first reports the publications that already overlap its range as
  published events, so that a subscriber never misses what was bound before it asked.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass

from raims_node.names.errors import LimitExceeded
from raims_node.names.table import Publication

PUBLISHED = 0x800
WITHDRAWN = 0x1000
TIMEOUT = 0x2000
FOREVER = 0xFFFFFFFF
EVENT_NAMES = {PUBLISHED: "published", WITHDRAWN: "withdrawn", TIMEOUT: "timeout"}
MAX_SUBSCRIPTIONS = 65536
# one client's share: it cannot take the whole node's and lock every other client out
MAX_CLIENT_SUBSCRIPTIONS = MAX_SUBSCRIPTIONS // 4
MS = 1_000_000


@dataclass(slots=True)
class Subscription:
    """`target` is where events go (the subscriber's inbox inside the network); `owner`
    the client that asked (its subscriptions end when it leaves). An inquiry asks about
    one instance (lower == upper)."""

    sub_id: int
    type: int
    lower: int
    upper: int
    timeout_ms: int
    deadline_ns: int | None
    target: str
    owner: object
    inquiry: bool = False
    events: int = 0


@dataclass(frozen=True, slots=True)
class TopologyEvent:
    event: int
    sub: Subscription
    found_lower: int = 0
    found_upper: int = 0
    port: int = 0
    node: str = ""

    def body(self) -> dict[str, object]:
        """The JSON body a subscriber receives (issue 21's format)."""
        s = self.sub
        out: dict[str, object] = {"event": EVENT_NAMES[self.event], "type": s.type, "lower": s.lower,
                                  "upper": s.upper, "found_lower": self.found_lower,
                                  "found_upper": self.found_upper, "port": self.port, "node": self.node}
        if s.inquiry:
            out["found"] = self.event == PUBLISHED
        return out


def _event(kind: int, sub: Subscription, pub: Publication) -> TopologyEvent:
    sub.events += 1
    return TopologyEvent(kind, sub, max(sub.lower, pub.lower), min(sub.upper, pub.upper), pub.port, pub.user)


class Topology:
    def __init__(self) -> None:
        self._subs: dict[int, Subscription] = {}
        self._by_type: dict[int, dict[int, Subscription]] = {}
        self._per_owner: dict[object, int] = {}
        self._ids = itertools.count(1)
        self.timeouts = 0

    def __len__(self) -> int:
        return len(self._subs)

    def subscribe(self, type_: int, lower: int, upper: int, timeout_ms: int, target: str, owner: object,
                  now_ns: int, existing: Iterable[Publication], inquiry: bool = False,
                  ) -> tuple[Subscription, list[TopologyEvent]]:
        """Register a subscription (or inquiry); `existing` are the publications that
        overlap its range now. Returns it with the events due at once; when those end
        it (an answered inquiry, a zero timeout) it is not kept."""
        if len(self._subs) >= MAX_SUBSCRIPTIONS:
            raise LimitExceeded(f"{len(self._subs)} topology subscriptions, the limit")
        if self._per_owner.get(owner, 0) >= MAX_CLIENT_SUBSCRIPTIONS:
            raise LimitExceeded(f"this client holds {MAX_CLIENT_SUBSCRIPTIONS} topology subscriptions, "
                                "its share of the node's limit")
        deadline = None if timeout_ms == FOREVER else now_ns + timeout_ms * MS
        sub = Subscription(next(self._ids), type_, lower, upper, timeout_ms, deadline, target, owner, inquiry)
        events: list[TopologyEvent] = []
        for pub in existing:
            events.append(_event(PUBLISHED, sub, pub))
            if inquiry:
                return sub, events
        if timeout_ms == 0:
            events.append(TopologyEvent(TIMEOUT, sub))
            self.timeouts += 1
            return sub, events
        self._subs[sub.sub_id] = sub
        self._by_type.setdefault(type_, {})[sub.sub_id] = sub
        self._per_owner[owner] = self._per_owner.get(owner, 0) + 1
        return sub, events

    def _drop(self, sub: Subscription) -> None:
        if self._subs.pop(sub.sub_id, None) is not None:
            left = self._per_owner.get(sub.owner, 0) - 1
            if left > 0:
                self._per_owner[sub.owner] = left
            else:
                self._per_owner.pop(sub.owner, None)
        subs = self._by_type.get(sub.type)
        if subs is not None:
            subs.pop(sub.sub_id, None)
            if not subs:
                del self._by_type[sub.type]

    def changed(self, pub: Publication, published: bool) -> list[TopologyEvent]:
        """Events for a publication that entered (or left) the table."""
        subs = self._by_type.get(pub.type)
        if not subs:
            return []
        events: list[TopologyEvent] = []
        for sub in list(subs.values()):
            if not pub.overlaps(sub.lower, sub.upper):
                continue
            if sub.inquiry:
                if published:
                    events.append(_event(PUBLISHED, sub, pub))
                    self._drop(sub)
                continue
            events.append(_event(PUBLISHED if published else WITHDRAWN, sub, pub))
        return events

    def tick(self, now_ns: int) -> list[TopologyEvent]:
        """Timeout events for what expired by `now_ns` (each then dropped)."""
        events = []
        for sub in [s for s in self._subs.values() if s.deadline_ns is not None and s.deadline_ns <= now_ns]:
            self._drop(sub)
            self.timeouts += 1
            events.append(TopologyEvent(TIMEOUT, sub))
        return events

    def cancel(self, sub_id: int, owner: object | None = None) -> bool:
        sub = self._subs.get(sub_id)
        if sub is None or owner is not None and sub.owner is not owner:
            return False
        self._drop(sub)
        return True

    def cancel_owner(self, owner: object) -> int:
        gone = [s for s in self._subs.values() if s.owner is owner]
        for sub in gone:
            self._drop(sub)
        return len(gone)

    def rows(self) -> list[dict[str, object]]:
        return [{"id": s.sub_id, "kind": "inquiry" if s.inquiry else "subscription", "type": s.type,
                 "lower": s.lower, "upper": s.upper, "timeout_ms": s.timeout_ms, "events": s.events,
                 "target": s.target} for s in self._subs.values()]
