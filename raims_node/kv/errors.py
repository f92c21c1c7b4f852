"""Errors of the key-value map."""

from __future__ import annotations


class KVError(Exception):
    """Root of the key-value map's errors."""


class MapFileError(KVError):
    """A map file that cannot be opened, read or written (names the path and the cause)."""


class CommandError(KVError):
    """A command refused with a Redis error reply; `text` starts with the code."""

    def __init__(self, text: bytes) -> None:
        super().__init__(text.decode("utf-8", "replace"))
        self.text = text


WRONGTYPE = b"WRONGTYPE Operation against a key holding the wrong kind of value"
NOT_INTEGER = b"ERR value is not an integer or out of range"
NOT_FLOAT = b"ERR value is not a valid float"
SYNTAX = b"ERR syntax error"
NO_MAP = (b"ERR no key-value map is configured, data writes are refused (start ms_server with "
          b"-m PATH or set the map_file parameter; ms_kv init PATH creates a map)")
OOM = b"OOM command not allowed when used memory > 'maxmemory'."
