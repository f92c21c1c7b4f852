"""Errors of the client-protocol bridges (NATS, Redis).

A client that breaks its protocol is answered with the protocol's own error and the
connection is closed: every such error carries in `reply` the exact bytes to send
before closing, so that a session can answer without knowing which parser failed.
Parsers raise these from `feed()` with the events decoded before the bad bytes in
`events`; those are still executed, in order, as the real servers do.
"""

from __future__ import annotations

from raims_node import RaimsError


class BridgeError(RaimsError):
    """Root of every error raised by raims_node.bridges."""


class ProtocolViolation(BridgeError):
    """The client sent bytes its protocol does not allow; the connection must close."""

    def __init__(self, message: str, reply: bytes) -> None:
        super().__init__(message)
        self.reply = reply


class AuthorizationViolation(BridgeError):
    """The client did not authenticate as the transport requires."""


class SlowConsumer(BridgeError):
    """The client does not read its output fast enough; the connection is dropped."""

    def __init__(self, pending: int, limit: int) -> None:
        super().__init__(f"outbound buffer of {pending} bytes exceeds the hard limit {limit}")
        self.pending = pending
        self.limit = limit


class StaleConnection(BridgeError):
    """The client stopped answering the server's PINGs."""


class HandshakeTimeout(BridgeError):
    """The client did not complete its protocol's handshake within the transport's
    deadline (glue.py: an RV client's version, info and `I` messages)."""


class BadLimits(BridgeError):
    """Flow-control limits that cannot work (low > high > hard, or negative)."""
