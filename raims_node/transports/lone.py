"""The daemon's side of the lone-frame path (issue 24, latency).

A link read that is exactly one multicast data frame (transports/tcp.py) is handed to
`LoneFrames.received`: the node's `LonePath` (router/lone.py) checks and routes it,
the frame is written at once on every link it goes on to (`LinkProtocol.send_now`:
behind whatever waits on that link, else in this pass), and local deliveries are
carried out and written to their clients now (`FlowGate.flush`) instead of on the
loop's next turn. A frame the lone path does not take goes to `Node.on_frames` as if
read with others.

`publish` is the same for a message a client sent alone (RouterBus.publish_lone): the
node's frames are written on their links in this pass.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from raims_node import RaimsError
from raims_node.router.actions import Action, Send
from raims_node.router.node import Node
from raims_node.transports.idle_busy import IdleBusy
from raims_node.transports.poll_stats import SAMPLE, PollStats

if TYPE_CHECKING:
    from raims_node.bridges.gate import FlowGate
    from raims_node.transports.link import RouterLink


log = logging.getLogger("raims.router")


class LoneFrames:
    def __init__(self, node: Node, links: dict[int, RouterLink], apply: Callable[[list[Action]], None],
                 gate: FlowGate, idle: IdleBusy | None = None, poll: PollStats | None = None) -> None:
        self.node = node
        self.poll = poll or PollStats()
        self.links = links  # the daemon's, by conn id
        self.apply = apply
        self.gate = gate
        self.idle = idle or IdleBusy(0)

    def received(self, conn_id: int, frame: bytes) -> None:
        poll = self.poll
        poll.route_cnt += 1
        if poll.route_cnt % SAMPLE:
            self._route(conn_id, frame)
            return
        start = time.perf_counter_ns()
        self._route(conn_id, frame)
        poll.route_ns += time.perf_counter_ns() - start
        poll.route_timed += 1

    def _route(self, conn_id: int, frame: bytes) -> None:
        self.idle.activity()
        lone = self.node.lone
        now_ns = time.time_ns()
        try:
            sends = lone.forward_lone(conn_id, frame, now_ns)
        except RaimsError as exc:  # a malformed field after a good MAC: as Node.on_frames
            self.node.counters.bad_frames += 1
            log.debug("bad frame from conn %d: %s", conn_id, exc)
            sends = ()
        except Exception:  # a bug must cost this frame only, never the link
            self.node.counters.internal_errors += 1
            log.exception("error handling a frame from conn %d", conn_id)
            sends = ()
        if sends is None:
            self.apply(self.node.on_frames(conn_id, [frame], now_ns))
            return
        links = self.links
        for cid in sends:
            link = links.get(cid)
            if link is not None:
                link.send_now(frame)
        if lone.has_actions:  # local deliveries: written to their clients now
            gate = self.gate
            gate.defer()
            try:
                self.apply(lone.take_actions())
            finally:
                gate.flush()
        elif self.node.forward.reorder.held:  # it waits for a gap (router/reorder.py): arm the wake
            self.apply([])

    def publish(self, subject: str, payload: bytes, no_echo: object | None) -> int:
        """Daemon.publish of one message read alone, its frames written now; the local
        deliveries made."""
        node = self.node
        before = node.counters.delivered
        links = self.links
        lone = node.lone
        now_ns = time.time_ns()
        made = lone.publish(subject, payload, now_ns, no_echo)
        if made is not None:
            frame, sends = made
            for cid in sends:
                link = links.get(cid)
                if link is not None:
                    link.send_now(frame)
            if lone.has_actions:  # local deliveries (the glue writes them after the read)
                self.apply(lone.take_actions())
            return node.counters.delivered - before
        for act in node.publish(subject, payload, now_ns, no_echo=no_echo):
            if type(act) is Send:
                link = links.get(act.conn_id)
                if link is not None:
                    link.send_now(act.data)
            else:
                self.apply([act])
        return node.counters.delivered - before
