"""What the sans-IO node asks its driver (a daemon, or the simulator) to do.

The node never touches a socket or a clock: every input carries `now_ns`, and every
output is one of these small records, returned in order. They are not frozen: a frozen
dataclass's __init__ costs several times more, and a Send and a Deliver are made per
message.
"""

from __future__ import annotations

from dataclasses import dataclass

from raims_node.wire.batch import Run


@dataclass(slots=True)
class Send:
    """Write `data` (one or more whole frames) on connection `conn_id`."""

    conn_id: int
    data: bytes


@dataclass(slots=True)
class Deliver:
    """A message for a local subscription `sid` of `owner`.

    `loss` > 0 tells the subscriber that many messages on this subject were lost
    before this one (the manual's "Notification of message loss").
    """

    owner: object
    sid: str
    subject: str
    reply: str | None
    payload: bytes
    source: bytes
    loss: int = 0
    headers: bytes | None = None


@dataclass(slots=True)
class DeliverRun:
    """Consecutive messages of one subject, without reply or headers, for subscription
    `sid` of `owner` (a batch frame, wire/batch.py). A driver hands it to the owner's
    `on_deliver_run` when it has one, else as one `Deliver` per payload (`delivers`).
    `payloads` is a list, or a PackedRun (wire/batch.py) still inside the received
    frame: iterate it, or ask it for `payloads()`."""

    owner: object
    sid: str
    subject: str
    payloads: Run
    source: bytes

    def delivers(self) -> list[Deliver]:
        return [Deliver(self.owner, self.sid, self.subject, None, p, self.source) for p in self.payloads]


@dataclass(slots=True)
class Close:
    """Drop connection `conn_id` (bad stream, rejected peer, BYE sent)."""

    conn_id: int
    reason: str


@dataclass(slots=True)
class Connect:
    """Open a link on transport `tport_id` to `url` (a mesh member learned of)."""

    tport_id: int
    url: str


@dataclass(slots=True)
class Log:
    """A line for the operator's log (the manual's messages, e.g. convergence). Lines
    with a `key` may repeat in floods (a rejected handshake): the driver rate-limits
    them per key."""

    text: str
    key: str | None = None


@dataclass(slots=True)
class NodeEvent:
    """What a layer above the router follows (issue 21, the name table): `kind` is
    "peer_up" (a peer became known, its session key held), "peer_down" (it was
    declared down or left) or "names" (a names frame from `peer` arrived, flooded or
    to this node's inbox); `data` is the frame's payload."""

    kind: str
    peer: bytes
    user: str
    data: bytes = b""


Action = Send | Deliver | DeliverRun | Close | Connect | Log | NodeEvent
