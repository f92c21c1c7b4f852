"""Errors of the message logs (seed 004, NodeBrain Message module).

One root, `MsgLogError`; every error carries a readable message naming the file, the
offset or the argument at fault, because the `ms_msglog` command prints `str(exc)` as
its one error line.
"""

from __future__ import annotations

from raims_node import RaimsError


class MsgLogError(RaimsError):
    """Root of every error raised by raims_node.msglog."""


class BadArgument(MsgLogError):
    """A command or API argument is out of range or malformed (node number, retention...)."""


class LogNotFound(MsgLogError):
    """The message log directory or one of its files does not exist."""


class LogExists(MsgLogError):
    """`create` was asked for a log that already exists."""


class CorruptLog(MsgLogError):
    """A record fails its checksum or framing where it cannot be a torn last write."""

    def __init__(self, path: str, offset: int, why: str) -> None:
        super().__init__(f"{path}: corrupt record at offset {offset}: {why}")
        self.path = path
        self.offset = offset


class LogLocked(MsgLogError):
    """Another producer holds the log (one producer per log, seed 1.1)."""


class ConfigError(MsgLogError):
    """The cabal configuration is malformed or inconsistent."""


class ProtocolError(MsgLogError):
    """A peer broke the server/client protocol; the connection is closed."""


class OutOfOrder(MsgLogError):
    """An origin's message id does not follow its state (an originating producer bug)."""
