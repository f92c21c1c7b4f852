"""The flow gate shared by a daemon's bridge connections, and what it and the hub use of
a connection and of its session (glue.py's docstring has the flow-control decisions).

Producer stalls (as nats-server 2.9.10's `stalledWait`): while a bridge consumer's output
is over its high-water mark, a local client whose input delivers into it is *stalled*:
its reading stops until the consumer drains to its low-water mark, or the stall's
deadline passes (`stall_duration`: 0.1 s at the high-water mark, growing with the
consumer's backlog to 1 s at its hard limit, nats-server's stallClientMin/MaxDuration).
After a deadline the consumer takes STALL_GRANT more (256 KiB) before its producers
stall again: nats-server lets one message through per stall, raims a grant in bytes,
because a read's slice can shrink to 256 bytes (a slice delivering to many consumers)
and one slice per stall would hold a producer for good. A consumer that never reads
thus reaches the node's output budget (16 MiB) in 5-10 s and is cut, about when
nats-server's write_deadline (10 s) cuts one. Only the producers feeding a congested
consumer wait; the node's other clients run on.

Links: a frame from another node carries many producers and cannot be stalled per
producer (nats-server does not stall routes either). A consumer that becomes congested
holds the daemon's links (not its clients) for at most CONGESTION_DEADLINE_S
(transports/backpressure.py), once until it drains (issue 24: a batch-fed stream can
outrun a subscriber not scheduled for a moment; the hold travels back hop by hop to the
publisher); past that, link deliveries go on and the node's output budget or the
consumer's limit cuts it, as before. The hold starts when the glue's flush sees the
consumer congested, after the deliveries of the read: started at the delivery itself,
inside the link's frame loop, the 200-subscriber test behind a link
(test_flow_control.py) buried its healthy subscriber (16 MiB, cut) where the flush-time
hold kept it whole.

A blocked sbus receiver (ipc_client.IpcClient) still closes the whole gate: every bridge
connection stops being read, for at most CONGESTION_DEADLINE_S per receiver, the links
too. While links to other nodes are congested every connection waits as well
(`hold_for_links`). Members are NATS, Redis and RV connections (glue.SessionProtocol)
and sbus clients.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from raims_node.bridges.errors import BridgeError

CONGESTION_DEADLINE_S = 0.1
STALL_MIN_S = 0.1  # nats-server's stallClientMinDuration ...
STALL_MAX_S = 1.0  # ... and stallClientMaxDuration
STALL_GRANT = 256 * 1024  # what a consumer may take after a stall's deadline before the next stall


def stall_duration(buffered: int, high_water: int, hard_limit: int) -> float:
    """How long a producer waits for a consumer holding `buffered` bytes: nats-server's
    stallDuration (min at half of max_pending, +min per tenth above it, max at the
    limit), over raims's range from the high-water mark to the hard limit."""
    if buffered >= hard_limit:
        return STALL_MAX_S
    span = max(hard_limit - high_water, 1)
    steps = max(buffered - high_water, 0) * 10 // span
    return min(STALL_MIN_S * (1 + steps), STALL_MAX_S)


class BridgeSession(Protocol):
    """What the glue uses of NatsSession and RedisSession."""

    client_id: int
    msgs_in: int
    msgs_out: int
    bytes_out: int

    @property
    def buffered(self) -> int: ...

    @property
    def input_buffered(self) -> int: ...

    @property
    def paused(self) -> bool: ...

    @property
    def closing(self) -> bool: ...

    @property
    def close_error(self) -> BridgeError | None: ...

    def data_received(self, data: bytes) -> None: ...

    def pending_output(self, max_bytes: int | None = None) -> bytes: ...

    def connection_lost(self) -> None: ...


class GateConn(Protocol):
    """What the FlowGate and the hub use of a client connection: a NATS, Redis or RV one
    (SessionProtocol) or an sbus one (ipc_client.IpcClient, whose `session` is None: its
    outbox keeps its own limits, so the hub's budget and soft-limit checks pass it by)."""

    session: BridgeSession | None

    @property
    def buffered(self) -> int: ...

    def update_reading(self) -> None: ...

    def flush(self) -> None: ...


class _Holds:
    """Connections that hold something (every client's reading, or the links'), each for
    at most a deadline: one whose deadline passed holds no more until it is released.
    `changed` is called when the first holder comes and when the last one goes."""

    def __init__(self, changed: Callable[[], None]) -> None:
        self._changed = changed
        self.active: dict[GateConn, asyncio.TimerHandle] = {}
        self._expired: set[GateConn] = set()

    def hold(self, proto: GateConn, deadline_s: float) -> None:
        if proto in self.active or proto in self._expired:
            return
        self.active[proto] = asyncio.get_running_loop().call_later(deadline_s, self.release, proto, True)
        if len(self.active) == 1:
            self._changed()

    def release(self, proto: GateConn, expired: bool = False) -> None:
        if expired:
            self._expired.add(proto)
        else:
            self._expired.discard(proto)
        handle = self.active.pop(proto, None)
        if handle is not None:
            handle.cancel()
            if not self.active:
                self._changed()


class FlowGate:
    """The flow state shared by a daemon's bridge connections: the connections with
    output to write, the producers stalled by the consumers they feed, and the gate that
    holds every connection's reading while an sbus receiver is blocked."""

    def __init__(self, deadline_s: float = CONGESTION_DEADLINE_S) -> None:
        self.deadline_s = deadline_s
        self.conns: set[GateConn] = set()
        self._holders = _Holds(self._holders_changed)  # sbus receivers: every client waits
        self._link_holders = _Holds(self._consumers_changed)  # consumers fed by links: the links wait
        # the client whose input is being carried out (the glue sets it while it feeds one)
        self.producer: GateConn | None = None
        self._stalls: dict[GateConn, tuple[set[GateConn], asyncio.TimerHandle]] = {}  # producer -> (consumers, deadline)
        self._grants: dict[GateConn, int] = {}  # consumer -> the backlog at which its next stall comes
        self.stalls = 0  # producer stalls begun ...
        self.stall_timeouts = 0  # ... and ended by their deadline
        self._dirty: list[GateConn] = []
        self._flush_scheduled = False
        self._links_held = False  # a link to another node is above its write high-water mark
        # told when consumers start / stop holding the gate (the daemon then holds its
        # links' reading too, for as long: transports/backpressure.py)
        self.on_consumers: Callable[[bool], None] | None = None

    def wake(self, proto: GateConn) -> None:
        """`proto` has output: flush it at the end of the current input, or soon."""
        self._dirty.append(proto)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def defer(self) -> None:
        """The caller flushes (`flush`) in this pass what the next deliveries wake: no
        turn of the loop is scheduled for them (the lone-frame path, transports/lone.py)."""
        self._flush_scheduled = True

    def flush(self) -> None:
        self._flush_scheduled = False
        while self._dirty:
            dirty, self._dirty = self._dirty, []
            for proto in dirty:
                proto.flush()

    @property
    def closed(self) -> bool:
        return bool(self._holders.active) or self._links_held

    # ------------------------------------------------------------ producer stalls

    def stalled(self, proto: GateConn) -> bool:
        """`proto` is a producer waiting for a consumer it fed to drain."""
        return proto in self._stalls

    def fed(self, consumer: GateConn, stall_s: float) -> None:
        """A delivery was queued for `consumer` while its output is over its high-water
        mark: stall the producer carried out now for up to `stall_s` (none: a link's
        frame or a timer's output, module docstring)."""
        producer = self.producer
        if producer is None or producer is consumer:  # its own answers: its reading is paused already
            return
        grant = self._grants.get(consumer)
        if grant is not None and consumer.buffered < grant:
            return
        stall = self._stalls.get(producer)
        if stall is None:
            handle = asyncio.get_running_loop().call_later(stall_s, self._stall_due, producer)
            self._stalls[producer] = ({consumer}, handle)
            self.stalls += 1
            producer.update_reading()
        else:
            stall[0].add(consumer)

    def drained(self, consumer: GateConn) -> None:
        """`consumer` is back at its low-water mark (or closing): the producers waiting
        only for it run again, and it no longer holds the links."""
        self._grants.pop(consumer, None)
        self._link_holders.release(consumer)
        for producer, (consumers, _) in list(self._stalls.items()):  # (few: the producers stalled now)
            if consumer in consumers:
                consumers.discard(consumer)
                if not consumers:
                    self._unstall(producer)

    def _stall_due(self, producer: GateConn) -> None:
        self.stall_timeouts += 1
        stall = self._stalls.get(producer)
        if stall is not None:
            for consumer in stall[0]:
                self._grants[consumer] = consumer.buffered + STALL_GRANT
        self._unstall(producer)

    def _unstall(self, producer: GateConn) -> None:
        stall = self._stalls.pop(producer, None)
        if stall is None:
            return
        stall[1].cancel()
        producer.update_reading()

    def hold_links(self, consumer: GateConn) -> None:
        """`consumer` became congested: the links wait, once until it drains, at most the deadline."""
        self._link_holders.hold(consumer, self.deadline_s)

    def _consumers_changed(self) -> None:
        if self.on_consumers is not None:
            self.on_consumers(bool(self._holders.active) or bool(self._link_holders.active))

    def _holders_changed(self) -> None:
        self._apply()
        self._consumers_changed()

    # ------------------------------------------------------------ the whole gate (sbus receivers)

    def hold_for_links(self, on: bool) -> None:
        """Hold every connection's reading while links to other nodes are congested (the
        daemon's backpressure; such a link is dropped after tcp_write_timeout)."""
        if on != self._links_held:
            self._links_held = on
            self._apply()

    def congested(self, proto: GateConn, on: bool) -> None:
        if on:
            self._holders.hold(proto, self.deadline_s)
        else:
            self._holders.release(proto)

    def remove(self, proto: GateConn) -> None:
        self.conns.discard(proto)
        self._holders.release(proto)
        self.drained(proto)
        self._unstall(proto)
        if self.producer is proto:
            self.producer = None

    def _apply(self) -> None:
        for proto in list(self.conns):
            proto.update_reading()
