"""A small Python client of a host's raims node, over its sbus bus (bridges/ipc.py):
`connect()` (blocking, client/sync.py) and `aconnect()` (asyncio, client/aio.py); the
node is found through the endpoints file each daemon writes (client/endpoints.py)."""

from raims_node.client.aio import AsyncClient, AsyncSubscription, aconnect
from raims_node.client.endpoints import Endpoints, NoNode, find, nodes
from raims_node.client.sync import (
    Client,
    ClientError,
    ConnectionLost,
    MaxPayload,
    Message,
    SlowConsumer,
    SlowConsumerCut,
    Subscription,
    connect,
)

__all__ = ["AsyncClient", "AsyncSubscription", "Client", "ClientError", "ConnectionLost", "Endpoints", "MaxPayload",
           "Message", "NoNode", "SlowConsumer", "SlowConsumerCut", "Subscription", "aconnect", "connect", "find",
           "nodes"]
