"""The errors of the sbus client (client/sync.py, client/aio.py): raised by calls, or
given to the client's `error_cb` (else logged as warnings on `raims.client`).

A lost connection is never silent (decision, as the NATS clients' error and disconnect
callbacks): the node cuts a client whose queued deliveries pass its limits (bridges/
ipc_client.py: flood modes `blocking/soft/error`, `blocking/hard/error`, or
`blocking/hard/block` past its block cap), drops what it had queued and says so first,
`CMSG raims/error\\0Slow Consumer\\0N` (nats-server's words, N the messages it dropped),
behind what the client's socket already holds, if the socket takes it within 1 s. The
client reconnects and restores its subscriptions, then reports once per lost
connection: `SlowConsumerCut` when the node said so, or when the node that closed the
connection is the one it reconnected to (same process: only a cut closes a live
client; `dropped` is None then, the notice having found no room), else
`ConnectionLost` (the node went away: a restart, or it said `Server Shutdown`, its
bus stopped from the console and started again). Messages published meanwhile, and
those dropped, are lost: the network keeps nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from raims_node.subject import subject_text

if TYPE_CHECKING:
    from raims_node.client.pending import Pending

SLOW_CONSUMER = b"Slow Consumer"
SERVER_SHUTDOWN = b"Server Shutdown"  # the node stopped its bus (console `shutdown T`, exit): not a cut


class ClientError(RuntimeError):
    """A call that could not be done (closed client, timeout)."""


class MaxPayload(ClientError):
    """A packet over the node's ipc `max_packet` (nats-py's MaxPayloadError): raised by
    `publish` before sending; given to `error_cb` when the node reports one it dropped."""


class MessageTooLarge(ClientError):
    """The node dropped a message for this client larger than its socket takes, and
    said so in its place (bridges/ipc.py): given to `error_cb`, never raised."""

    def __init__(self, subject: str, size: int) -> None:
        self.subject, self.size = subject, size
        super().__init__(f"the node dropped a message on {subject!r} of {size} bytes: "
                         "larger than this client's socket takes")


class SlowConsumer(ClientError):
    """A subscription's queue is full and new messages for it are dropped (module
    docstring of client/sync.py): given to the client's `error_cb` once per episode, never raised."""

    def __init__(self, subscription: object, pattern: bytes, subject: str, pending: Pending) -> None:
        self.subscription = subscription
        self.pattern = subject_text(pattern)
        self.subject = subject  # of the first message dropped
        self.msgs, self.bytes, self.dropped = pending.msgs, pending.bytes, pending.dropped
        self.msgs_limit, self.bytes_limit = pending.msgs_limit, pending.bytes_limit
        super().__init__(f"slow consumer on {self.pattern!r}: {self.msgs} messages, {self.bytes} bytes pending "
                         f"(limits {self.msgs_limit}, {self.bytes_limit}); dropping new messages "
                         f"({self.dropped} dropped so far)")


class ConnectionLost(ClientError):
    """The connection to the node was lost (module docstring); `reconnected` says
    whether the client is back, subscriptions restored. Given to `error_cb`, never raised."""

    def __init__(self, reason: str, reconnected: bool, dropped: int | None = None) -> None:
        self.reason, self.reconnected, self.dropped = reason, reconnected, dropped
        after = ("reconnected, subscriptions restored" if reconnected
                 else "not reconnected within reconnect_s")
        super().__init__(f"{reason}; {after}; messages published meanwhile were lost")


class SlowConsumerCut(ConnectionLost):
    """The node cut this client as a slow consumer: its deliveries queued on the node
    passed the ipc transport's limits; `dropped` the messages the node dropped with the
    cut (None: the node's notice did not reach the client)."""

    def __init__(self, reconnected: bool, dropped: int | None) -> None:
        n = "an unknown number of" if dropped is None else str(dropped)
        super().__init__(f"Slow Consumer: the node cut this client (its queued deliveries past the node's "
                         f"limits) and dropped {n} messages", reconnected, dropped)


def node_error(payload: bytes) -> ClientError:
    """The node's `CMSG raims/error` payload as the error to report."""
    what, _, rest = payload.partition(b"\x00")
    if what == b"Maximum Payload Violation":
        return MaxPayload(f"Maximum Payload Violation: the node dropped a packet over its "
                          f"max_packet ({rest.decode(errors='replace')} bytes)")
    if what == b"Message Too Large":
        key, _, size = rest.rpartition(b"\x00")
        try:
            return MessageTooLarge(subject_text(key), int(size))
        except ValueError:
            pass
    return ClientError("node error: " + payload.replace(b"\x00", b" ").decode(errors="replace"))
