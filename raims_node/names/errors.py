"""Errors of the service name table (raims_node.names)."""

from __future__ import annotations

from raims_node import RaimsError


class NamesError(RaimsError):
    """Root of every error raised by raims_node.names."""


class BadRequest(NamesError):
    """A `_NAMES.*` request whose body or subject does not say what it must."""


class PartialOverlap(NamesError):
    """A bind whose sequence partially overlaps one of the same type in scope (draft 2.2.5:
    sequences of one type are identical or disjoint)."""


class LimitExceeded(NamesError):
    """Too many publications or subscriptions (the numbers are in the message)."""


class BadFrame(NamesError):
    """A replication frame from another node that cannot be decoded."""
