"""The client protocols a node serves, by transport `type`: one line per bridge.

A new client protocol is one module with a `BridgeServer` subclass plus its line here;
the daemon starts any transport whose type is listed as a bridge (a listener with no
cost, manual "NATS", "Redis"). A protocol's module is imported when a transport of its
type starts (`server_class`), so a node loads only the bridges it runs (the Redis side
and its key-value engine are the largest: bench/startup_bench.py).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from raims_node.bridges.glue import BridgeServer

# type -> (module, class)
CLIENT_PROTOCOLS: dict[str, tuple[str, str]] = {
    "nats": ("raims_node.bridges.nats", "NatsServer"),
    "redis": ("raims_node.bridges.redis", "RedisServer"),
    "ipc": ("raims_node.bridges.ipc", "IpcServer"),
    "rv": ("raims_node.bridges.rv", "RvServer"),
}


def server_class(kind: str) -> type[BridgeServer]:
    """The BridgeServer of transport type `kind` (one of CLIENT_PROTOCOLS)."""
    module, name = CLIENT_PROTOCOLS[kind]
    cls: type[BridgeServer] = getattr(importlib.import_module(module), name)
    return cls
