"""Client-protocol bridges: NATS and Redis pub/sub servers into the Rai MS network.

Sans-IO layer (issue 8): parsers and encoders (`nats_proto`, `resp`), one session state
machine per connection (`nats_session`, `redis_session`) with its outbound buffer and
flow control (`flow`), and the `Bus` contract the node implements (`bus`).

On the running daemon: `router_bus` (the Bus of one service namespace on the node),
`glue` (the asyncio Protocol per connection, listeners, backpressure between
connections), `nats` and `redis` (the two transports), `hub` (a daemon's bridges: buses
by service, client ids). The glue only feeds `data_received` and writes
`pending_output()`.

The names below are loaded on first use (PEP 562): a node imports the bridge modules of
the transports it runs (registry.py), so that `ms_server` with no Redis transport does
not load the Redis side and the key-value engine before it listens (bench/startup_bench.py).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from raims_node.bridges.bus import SHARD_PREFIX, Bus, ClientHandle, shard_subject
    from raims_node.bridges.errors import (
        AuthorizationViolation,
        BadLimits,
        BridgeError,
        ProtocolViolation,
        SlowConsumer,
        StaleConnection,
    )
    from raims_node.bridges.flow import FlowLimits, SessionOutput
    from raims_node.bridges.nats_proto import NatsParser, NatsProtocolError
    from raims_node.bridges.nats_session import NatsConfig, NatsSession
    from raims_node.bridges.redis_config import RedisConfig
    from raims_node.bridges.redis_session import RedisSession
    from raims_node.bridges.resp import RespParser, RespProtocolError

_HOMES = {
    "bus": ("SHARD_PREFIX", "Bus", "ClientHandle", "shard_subject"),
    "errors": ("AuthorizationViolation", "BadLimits", "BridgeError", "ProtocolViolation", "SlowConsumer",
               "StaleConnection"),
    "flow": ("FlowLimits", "SessionOutput"),
    "nats_proto": ("NatsParser", "NatsProtocolError"),
    "nats_session": ("NatsConfig", "NatsSession"),
    "redis_config": ("RedisConfig",),
    "redis_session": ("RedisSession",),
    "resp": ("RespParser", "RespProtocolError"),
}
_HOME = {name: module for module, names in _HOMES.items() for name in names}

__all__ = [
    "SHARD_PREFIX", "AuthorizationViolation", "BadLimits", "BridgeError", "Bus", "ClientHandle",
    "FlowLimits", "NatsConfig", "NatsParser", "NatsProtocolError", "NatsSession",
    "ProtocolViolation", "RedisConfig", "RedisSession", "RespParser", "RespProtocolError",
    "SessionOutput", "SlowConsumer", "StaleConnection", "shard_subject",
]


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
