"""The daemon's flow control between its links and its bridge clients (issue 17; the
decisions are in docs/DESIGN-NOTES.md, "daemon and transports").

Two levels, driven by the links' own queues (transports/tcp.py):
- congested (a link's output above `tcp_write_highwater`): the bridge clients, the
  sources of new traffic, are not read until every link drains;
- full (a link's queue above QUEUE_FACTOR x the mark): the other links are not read
  either, so the nodes feeding this one see their own links congest, hop by hop back to
  the publisher. A link paused here is not timed out for silence (its bytes wait
  unread); full links themselves are still read, so two nodes full toward each other
  do not stop reading each other;
- consumers (issue 24): while congested bridge clients hold the FlowGate (each for at
  most its deadline, 0.1 s), no link is read either, so a stream arriving from other
  nodes waits in the links (and backs up to the publisher) instead of burying a
  subscriber that was not scheduled for a moment; one that stays slow is still cut.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Protocol

from raims_node.bridges.gate import FlowGate
from raims_node.router.node import Node


class HeldLink(Protocol):
    """What backpressure needs of a link: its queued bytes and a switch for reading."""

    @property
    def buffered(self) -> int: ...

    @property
    def write_drops(self) -> int: ...

    def hold_reading(self, held: bool) -> None: ...


class ServerCounts(Protocol):
    slow_consumers: int
    error_closes: int


class Backpressure:
    def __init__(self, links: Mapping[int, HeldLink], gate: FlowGate, node: Node) -> None:
        self.links = links
        self.gate = gate
        self.node = node
        self.congested: set[int] = set()  # links above their write high-water mark
        self.congestion_events = 0
        self.full: set[int] = set()  # links whose queue is above QUEUE_FACTOR x the mark
        self.full_events = 0
        self.read_paused: set[int] = set()  # links not read while another link is full
        self.dropped_links = 0
        self.consumers_held = False  # congested bridge clients hold the gate
        gate.on_consumers = self.set_consumers_held

    def set_congested(self, conn_id: int, congested: bool) -> None:
        was = bool(self.congested)
        if congested:
            self.congested.add(conn_id)
            self.congestion_events += 1
        else:
            self.congested.discard(conn_id)
        if bool(self.congested) != was:
            self.gate.hold_for_links(bool(self.congested))

    def set_full(self, conn_id: int, full: bool) -> None:
        if full:
            self.full.add(conn_id)
            self.full_events += 1
        else:
            self.full.discard(conn_id)
        self._update_reading()

    def set_consumers_held(self, held: bool) -> None:
        self.consumers_held = held
        self._update_reading()

    def _update_reading(self) -> None:
        now = time.time_ns()
        for cid, link in self.links.items():
            want = self.consumers_held or (bool(self.full) and cid not in self.full)
            if want != (cid in self.read_paused):
                if want:
                    self.read_paused.add(cid)
                else:
                    self.read_paused.discard(cid)
                link.hold_reading(want)
                self.node.hold_liveness(cid, want, now)

    def lost(self, conn_id: int, link: HeldLink | None) -> None:
        """Link `conn_id` is gone (already out of `links`)."""
        if conn_id in self.congested:
            self.set_congested(conn_id, False)
        self.read_paused.discard(conn_id)
        if conn_id in self.full:
            self.set_full(conn_id, False)
        if link is not None and link.write_drops:
            self.dropped_links += 1

    def counters(self, client_buffered: int, servers: Iterable[ServerCounts]) -> dict[str, int]:
        """Flow control state and counters (`show counters`, web JSON, /metrics): bytes
        held for links and clients, links dropped for not draining, congestion episodes,
        clients cut as slow consumers or closed for another error (oversize payload,
        protocol, limits)."""
        links = sum(link.buffered for link in self.links.values())
        servers = list(servers)
        return {
            "buffered": links + client_buffered, "link_buffered": links, "client_buffered": client_buffered,
            "congested": len(self.congested), "full": len(self.full),
            "congestion_events": self.congestion_events, "full_events": self.full_events,
            "dropped_links": self.dropped_links,
            "slow_consumers": sum(b.slow_consumers for b in servers),
            "client_errors": sum(b.error_closes for b in servers),
        }
