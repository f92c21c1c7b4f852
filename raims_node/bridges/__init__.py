"""Client-protocol bridges: NATS and Redis pub/sub servers into the Rai MS network.

Sans-IO layer (issue 8): parsers and encoders (`nats_proto`, `resp`), one session state
machine per connection (`nats_session`, `redis_session`) with its outbound buffer and
flow control (`flow`), and the `Bus` contract the node implements (`bus`).

On the running daemon: `router_bus` (the Bus of one service namespace on the node),
`glue` (the asyncio Protocol per connection, listeners, backpressure between
connections), `nats` and `redis` (the two transports), `hub` (a daemon's bridges: buses
by service, client ids). The glue only feeds `data_received` and writes
`pending_output()`.
"""

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

__all__ = [
    "SHARD_PREFIX", "AuthorizationViolation", "BadLimits", "BridgeError", "Bus", "ClientHandle",
    "FlowLimits", "NatsConfig", "NatsParser", "NatsProtocolError", "NatsSession",
    "ProtocolViolation", "RedisConfig", "RedisSession", "RespParser", "RespProtocolError",
    "SessionOutput", "SlowConsumer", "StaleConnection", "shard_subject",
]
