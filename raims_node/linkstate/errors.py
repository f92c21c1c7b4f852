"""Errors raised by the link-state package (records, database, routes, graph text)."""

from raims_node import RaimsError


class LinkStateError(RaimsError):
    """Root of the link-state package's errors."""


class InvalidRecord(LinkStateError):
    """A peer or link record holds a value outside its limits (bridge length, cost, seqno)."""


class UnknownPeer(LinkStateError):
    """A bridge id that the link-state database does not hold."""


class InvalidPath(LinkStateError):
    """A path index outside 0..NUM_PATHS-1."""


class GraphError(LinkStateError):
    """Graph text that cannot be parsed; carries the 1-based line number."""

    def __init__(self, message: str, line: int = 0) -> None:
        self.line = line
        super().__init__(f"line {line}: {message}" if line else message)
