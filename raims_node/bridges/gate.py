"""The flow gate shared by a daemon's bridge connections, and what it and the hub use of
a connection and of its session (glue.py's docstring has the flow-control decisions).

A congested consumer closes the gate: every bridge connection stops being read, so that
local publishers wait instead of burying the consumer. The gate holds for at most
CONGESTION_DEADLINE_S per consumer; after that the consumer no longer holds it until it
drains below its low-water mark. While consumers hold the gate the daemon does not read
its links either (transports/backpressure.py). Members are NATS, Redis and RV
connections (glue.SessionProtocol) and sbus clients (ipc_client.IpcClient).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from raims_node.bridges.errors import BridgeError

CONGESTION_DEADLINE_S = 0.1


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


class FlowGate:
    """The flow state shared by a daemon's bridge connections: the connections with
    output to write, and the gate that holds every connection's reading while a consumer
    is congested."""

    def __init__(self, deadline_s: float = CONGESTION_DEADLINE_S) -> None:
        self.deadline_s = deadline_s
        self.conns: set[GateConn] = set()
        self._holders: dict[GateConn, asyncio.TimerHandle] = {}
        self._expired: set[GateConn] = set()
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
        return bool(self._holders) or self._links_held

    def hold_for_links(self, on: bool) -> None:
        """Hold every connection's reading while links to other nodes are congested (the
        daemon's backpressure; such a link is dropped after tcp_write_timeout)."""
        if on != self._links_held:
            self._links_held = on
            self._apply()

    def congested(self, proto: GateConn, on: bool) -> None:
        if on:
            if proto in self._holders or proto in self._expired:
                return
            loop = asyncio.get_running_loop()
            self._holders[proto] = loop.call_later(self.deadline_s, self._release, proto, True)
            if len(self._holders) == 1:
                self._apply()
                if self.on_consumers is not None:
                    self.on_consumers(True)
        else:
            self._release(proto, False)

    def remove(self, proto: GateConn) -> None:
        self.conns.discard(proto)
        self._release(proto, False)

    def _release(self, proto: GateConn, expired: bool) -> None:
        if expired:
            self._expired.add(proto)
        else:
            self._expired.discard(proto)
        handle = self._holders.pop(proto, None)
        if handle is not None:
            handle.cancel()
            if not self._holders:
                self._apply()
                if self.on_consumers is not None:
                    self.on_consumers(False)

    def _apply(self) -> None:
        for proto in list(self.conns):
            proto.update_reading()
