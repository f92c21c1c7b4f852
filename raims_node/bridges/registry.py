"""The client protocols a node serves, by transport `type`: one line per bridge.

A new client protocol is one module with a `BridgeServer` subclass plus its line here;
the daemon starts any transport whose type is listed as a bridge (a listener with no
cost, manual "NATS", "Redis").
"""

from __future__ import annotations

from raims_node.bridges.glue import BridgeServer
from raims_node.bridges.ipc import IpcServer
from raims_node.bridges.nats import NatsServer
from raims_node.bridges.redis import RedisServer
from raims_node.bridges.rv import RvServer

CLIENT_PROTOCOLS: dict[str, type[BridgeServer]] = {
    "nats": NatsServer,
    "redis": RedisServer,
    "ipc": IpcServer,
    "rv": RvServer,
}
