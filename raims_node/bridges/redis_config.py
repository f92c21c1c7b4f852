"""One `type: redis` transport's settings, shared by its connections (redis_session.py):
the version it claims, its databases, the RESP limits and the output limits."""

from __future__ import annotations

from dataclasses import dataclass, field

from raims_node.bridges.flow import FlowLimits
from raims_node.bridges.resp import MAX_ARGS, MAX_BULK, MAX_QUERY
from raims_node.kv.server import REDIS_VERSION as _VERSION

REDIS_VERSION = _VERSION.decode()
DATABASES = 16
REDIS_LIMITS = FlowLimits(hard_limit=32 * 1024 * 1024, soft_limit=8 * 1024 * 1024, soft_seconds=60.0)


@dataclass(frozen=True, slots=True)
class RedisConfig:
    """One `type: redis` transport, shared by its connections."""

    version: str = REDIS_VERSION
    databases: int = DATABASES
    max_bulk: int = MAX_BULK
    max_args: int = MAX_ARGS
    max_query: int = MAX_QUERY
    limits: FlowLimits = field(default_factory=FlowLimits)
    max_payload: int = MAX_BULK  # the largest PUBLISH message


def redis_limits(max_payload: int, data: bool = False) -> RedisConfig:
    """A transport's config for the node's `max_payload` (decisions): a PUBLISH message
    is at most one payload; a bulk may hold one payload (redis-server's
    proto-max-bulk-len) or, with a key-value map (`data`), a value as large as the map
    takes (MAX_BULK, 64 MiB: a 5 MB SET is ordinary for a Redis client); a request four
    bulks (a PUBLISH is one payload and its channel; SUBSCRIBE with many channels stays
    well within); output limits as redis-server's `client-output-buffer-limit pubsub
    32mb 8mb 60`. A PUBLISH over max_payload that a map's larger bulk let through gets
    `-ERR message of N bytes exceeds max_payload M` and the connection stays usable."""
    bulk = max(max_payload, MAX_BULK) if data else max_payload
    return RedisConfig(max_bulk=bulk, max_query=4 * bulk, limits=REDIS_LIMITS, max_payload=max_payload)
