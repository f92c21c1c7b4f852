"""The contract between the client-protocol sessions and the node (issue 8).

A `Bus` is one service namespace ("Services and Networks": a NATS and a Redis transport
with the same `service` share one bus, so messages published by either reach both).
The sessions are sans-IO and call the bus synchronously; the router implements it.

Rules both sides rely on (decisions where the manual is silent):

- Subjects are the client's own: the bus adds the service prefix (`_nats.`, `_redis.`)
  when it maps them into the Rai MS network, and strips it on delivery. Redis channels
  are binary; sessions decode every subject as UTF-8 with `surrogateescape`, so any byte
  string survives the round trip and UTF-8 subjects are the same `str` in both protocols.
- `subscribe` is a literal subject, matched exactly even if it holds `*` or `>`;
  `psubscribe` is a pattern with its syntax ("Subjects": RV/NATS `*` and trailing `>`,
  or Redis glob). A NATS SUB with wildcard tokens is a `psubscribe(..., "rv")`; NATS
  queue groups may be given to both (a queue group member receives a share of the
  messages: each message goes to one member of each group among all nodes).
- `sid` is the client's name for a subscription, unique per client; the bus hands it
  back in `deliver` so the session knows which subscription matched.
- `deliver` may run re-entrantly inside `publish` (local subscribers, including the
  publisher itself), and may itself call `unsubscribe` (NATS auto-unsubscribe after N
  messages) or `drop_client` (a slow consumer cut off): the bus must iterate over a
  snapshot of its matches.
- `publish(client, ...)` names the publisher (None for the node itself). When
  `client.echo` is False the bus never delivers that message back to `client` (NATS
  CONNECT `echo: false`). The result is the number of receivers reached: local
  deliveries plus the remote subscriptions known from the network (Redis PUBLISH).
- `has_interest(subject, no_echo)` is True when a subscription or pattern anywhere in the
  network matches, other than those of `no_echo` (NATS no-responders: a client with
  `echo: false` does not answer its own requests).
- Redis sharded pub/sub (SSUBSCRIBE/SPUBLISH) is a separate channel space: sessions
  subscribe and publish shard channels as `shard_subject(channel)`, which patterns
  never match (as in Redis); `channels` and `numsub` take and return plain channel
  names and `shard` selects the space.
- `channels(pattern)` lists literal subscriptions (not patterns) matching the Redis glob
  `pattern` (all when None); `numsub` counts the literal subscribers of each channel;
  `numpat` counts distinct patterns. All three are network-wide.
- `drop_client` removes every subscription of a client (connection closed).
- Loss (issue 8 point 5): when the router sees a sequence gap on a subscription, NATS
  and Redis clients receive nothing extra; the router's counters record it.

Two additions to the contract as first drafted for issue 8: `ClientHandle.echo`, and the
optional `queue` of `psubscribe` (NATS allows queue groups on wildcard subjects). The
shard prefix is a plain subject prefix: a NATS client subscribing to `_SHARD.x` does see
`SPUBLISH x`, which is harmless and keeps the bus free of a third subscription kind.
"""

from __future__ import annotations

from typing import Literal, Protocol

from raims_node.wire.batch import Run

SHARD_PREFIX = "_SHARD."

PatternSyntax = Literal["rv", "glob"]


def shard_subject(channel: str) -> str:
    """The bus subject of a Redis shard channel."""
    return SHARD_PREFIX + channel


class ClientHandle(Protocol):
    """A session, as the bus sees it."""

    client_id: int
    echo: bool

    def deliver(self, sid: str, subject: str, reply: str | None,
                headers: bytes | None, payload: bytes) -> None: ...

    def deliver_run(self, sid: str, subject: str, payloads: list[bytes]) -> None: ...


class Bus(Protocol):
    """One per bridge transport service namespace."""

    def subscribe(self, client: ClientHandle, sid: str, subject: str,
                  queue: str | None = None) -> str | None:
        """None, or why the subscription is refused (nothing recorded for `sid`)."""

    def psubscribe(self, client: ClientHandle, sid: str, pattern: str,
                   syntax: PatternSyntax, queue: str | None = None) -> str | None:
        """As `subscribe`, for a pattern of `syntax`."""

    def unsubscribe(self, client: ClientHandle, sid: str) -> None: ...

    def unsubscribe_all(self, client: ClientHandle) -> None:
        """Every subscription of `client` (Redis RESET, UNSUBSCRIBE of all): at once,
        their withdrawals a slice per loop turn as for a closing client."""

    def drop_client(self, client: ClientHandle) -> None: ...

    def publish(self, client: ClientHandle | None, subject: str, reply: str | None,
                headers: bytes | None, payload: bytes) -> int: ...

    def publish_run(self, client: ClientHandle, subject: str, payloads: Run) -> int:
        """`publish` of each payload in order, without reply or headers (a client's
        pipelined run on one subject, routed once); the receivers reached, summed."""

    def has_interest(self, subject: str, no_echo: ClientHandle | None = None) -> bool: ...

    def channels(self, pattern: str | None, shard: bool = False) -> list[str]: ...

    def numsub(self, channels: list[str], shard: bool = False) -> list[int]: ...

    def numpat(self) -> int: ...
