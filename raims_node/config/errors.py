"""Errors raised by the configuration package.

Every error that comes from a configuration source names the file, the line (when
known) and the field, so that an operator can go straight to the bad value:
`config/tport_x.yaml:3: port: 'abc' is not a number`.
"""

from __future__ import annotations

from raims_node import RaimsError


class ConfigError(RaimsError):
    """A configuration source is unreadable, malformed or holds an invalid value."""

    def __init__(self, message: str, source: str = "", line: int = 0, field: str = "") -> None:
        self.source = source
        self.line = line
        self.field = field
        self.reason = message
        where = source
        if source and line:
            where = f"{source}:{line}"
        parts = [p for p in (where, field) if p]
        super().__init__(": ".join([*parts, message]))


class KeyConfigError(ConfigError):
    """Keys cannot be read or do not verify (missing .pass/.salt, bad signature, ...)."""
