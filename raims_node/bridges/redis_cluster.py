"""What the Redis transport answers of Redis Cluster: READONLY, READWRITE, ASKING and
CLUSTER <subcommand> get redis-server 7.0.15's error for cluster support disabled, after
its arity checks (each CLUSTER subcommand's own; an unknown one `unknown subcommand`, as
any container). WAIT is the node's engine's (raims_node.kv.server: the daemon gives every
session one, an empty read-only store without a map), which can block a client.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from raims_node.kv.server import CLUSTER_DISABLED, CLUSTER_SUBCOMMANDS


class ClusterClient(Protocol):
    def _write(self, data: bytes) -> bool: ...


def disabled(s: ClusterClient, args: list[bytes]) -> None:
    s._write(b"-%s\r\n" % CLUSTER_DISABLED)


def command_table(make: Callable[..., Any], table: Callable[..., Any]) -> list[Any]:
    """The top-level commands of this module, as redis_session's `_Command`s."""
    return [
        make("readonly", 1, disabled), make("readwrite", 1, disabled), make("asking", 1, disabled),
        make("cluster", -2, None, subcommands=table(
            *(make(f"cluster|{sub.decode()}", arity, disabled) for sub, arity in CLUSTER_SUBCOMMANDS.items()))),
    ]
