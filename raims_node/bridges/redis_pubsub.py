"""PUBLISH (with raims' reply subject), SPUBLISH and PUBSUB CHANNELS | NUMSUB | NUMPAT |
SHARDCHANNELS | SHARDNUMSUB, for redis_session.py (moved out of it to keep it small); replies
as redis-server 7.0.15's.
"""

from __future__ import annotations

from typing import Protocol

from raims_node.bridges.bus import Bus, ClientHandle, shard_subject
from raims_node.bridges.resp import encode_array_header, encode_bulk, encode_bulks, encode_int


class Limits(Protocol):
    @property
    def max_payload(self) -> int: ...


class PubSession(ClientHandle, Protocol):
    """What these commands use of a Redis session."""

    bus: Bus
    msgs_in: int
    oversized: int

    @property
    def config(self) -> Limits: ...

    def _arity_error(self, fullname: str) -> None: ...

    def _write(self, data: bytes) -> bool: ...

    def _error(self, message: str | bytes, code: str = "ERR") -> None: ...


def text(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


def oversized(s: PubSession, message: bytes) -> bool:
    """A PUBLISH message over max_payload (only a map's larger bulks let one through):
    refused with an error, counted."""
    if len(message) <= s.config.max_payload:
        return False
    s.oversized += 1
    s._error(b"message of %d bytes exceeds max_payload %d" % (len(message), s.config.max_payload))
    return True


def publish_with_reply(s: PubSession, args: list[bytes]) -> None:
    """PUBLISH channel message [reply]: raims' optional third argument is the message's
    reply subject (`_ACK.<inbox>` / `_TRACE.<inbox>` ask for acks or a trace, acks.py)."""
    if len(args) > 4:
        s._arity_error("publish")
    elif not oversized(s, args[2]):
        s.msgs_in += 1
        reply = text(args[3]) if len(args) == 4 else None
        s._write(encode_int(s.bus.publish(s, text(args[1]), reply, None, args[2])))


def spublish(s: PubSession, args: list[bytes]) -> None:
    if not oversized(s, args[2]):
        s.msgs_in += 1
        s._write(encode_int(s.bus.publish(s, shard_subject(text(args[1])), None, None, args[2])))


def pubsub_channels(s: PubSession, args: list[bytes], shard: bool = False) -> None:
    if len(args) > 3:
        s._error(b"unknown subcommand or wrong number of arguments for '%s'. Try PUBSUB HELP." % args[1][:128])
        return
    names = s.bus.channels(text(args[2]) if len(args) == 3 else None, shard)
    s._write(encode_bulks(n.encode("utf-8", "surrogateescape") for n in names))


def pubsub_numsub(s: PubSession, args: list[bytes], shard: bool = False) -> None:
    counts = s.bus.numsub([text(a) for a in args[2:]], shard)
    s._write(encode_array_header(2 * len(counts)) + b"".join(
        encode_bulk(a) + encode_int(c) for a, c in zip(args[2:], counts, strict=True)))


def pubsub_numpat(s: PubSession, args: list[bytes]) -> None:
    s._write(encode_int(s.bus.numpat()))


def pubsub_shardchannels(s: PubSession, args: list[bytes]) -> None:
    pubsub_channels(s, args, shard=True)


def pubsub_shardnumsub(s: PubSession, args: list[bytes]) -> None:
    pubsub_numsub(s, args, shard=True)
