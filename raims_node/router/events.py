"""The event recorder behind `show events` (manual, console section "show events").

A ring of the last EVENT_RING_SIZE events, each a small record: time stamp, transport,
user (the peer the event is about), peer (the other party), the event name from the
manual's list, and a data word. Rows are dicts so every renderer shares them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum

EVENT_RING_SIZE = 4096


class Ev(StrEnum):
    STARTUP = "startup"
    ON_CONNECT = "on_connect"
    ON_SHUTDOWN = "on_shutdown"
    ON_TIMEOUT = "on_timeout"
    AUTH_ADD = "auth_add"
    AUTH_REMOVE = "auth_remove"
    SEND_CHALLENGE = "send_challenge"
    RECV_CHALLENGE = "recv_challenge"
    SEND_TRUST = "send_trust"
    RECV_TRUST = "recv_trust"
    ADD_USER_ROUTE = "add_user_route"
    HB_QUEUE = "hb_queue"
    HB_TIMEOUT = "hb_timeout"
    SEND_HELLO = "send_hello"
    RECV_BYE = "recv_bye"
    RECV_ADD_ROUTE = "recv_add_route"
    RECV_PEER_DB = "recv_peer_db"
    SEND_ADD_ROUTE = "send_add_route"
    SEND_PEER_DEL = "send_peer_del"
    SYNC_RESULT = "sync_result"
    SEND_SYNC_REQ = "send_sync_req"
    RECV_SYNC_REQ = "recv_sync_req"
    RECV_SYNC_FAIL = "recv_sync_fail"
    SEND_ADJ_CHANGE = "send_adj_change"
    RECV_ADJ_CHANGE = "recv_adj_change"
    SEND_ADJ_REQ = "send_adj_req"
    RECV_ADJ_REQ = "recv_adj_req"
    SEND_ADJ = "send_adj"
    RECV_ADJ_RESULT = "recv_adj_result"
    RESIZE_BLOOM = "resize_bloom"
    RECV_BLOOM = "recv_bloom"
    CONVERGE = "converge"


@dataclass(frozen=True, slots=True)
class Event:
    stamp_ns: int
    tport: str
    user: str
    peer: str
    event: Ev
    data: str


class EventRecorder:
    """The ring holds plain tuples, made `Event`s when read: a converging network
    records a few events per peer at every node, and are read only by the console."""

    def __init__(self, size: int = EVENT_RING_SIZE) -> None:
        self._ring: deque[tuple[int, str, str, str, Ev, str]] = deque(maxlen=size)
        self.total = 0

    def add(self, now_ns: int, event: Ev, *, tport: str = "", user: str = "", peer: str = "", data: str = "") -> None:
        self._ring.append((now_ns, tport, user, peer, event, data))
        self.total += 1

    def __iter__(self) -> Iterator[Event]:
        return (Event(*t) for t in self._ring)

    def __len__(self) -> int:
        return len(self._ring)

    def names(self) -> list[str]:
        return [t[4].value for t in self._ring]

    def rows(self) -> list[dict[str, object]]:
        return [
            {"stamp": e.stamp_ns, "tport": e.tport, "user": e.user, "peer": e.peer,
             "event": e.event.value, "data": e.data}
            for e in self
        ]
