"""An in-process network of real `Node`s on a virtual clock.

Links are pairs of connections with a latency, an optional loss rate and an up/down
state; a frame sent on one end arrives at the other after the latency unless the link
is down or the frame is dropped (the loss rate, or a test's `drop` hook). Every node's timers run from a periodic tick. The
whole run is deterministic for a given seed: one `random.Random` drives bridge ids,
keys, nonces and loss. With `Jitter`, a second one (so that runs without it keep their
frames) adds a random delay to each frame and now and then stalls a receiving node, as
a busy host does; a link still delivers in the order it was written to, as TCP does.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from raims_node.crypto.credentials import Credentials
from raims_node.linkstate.records import Cost
from raims_node.router.actions import Action, Close, Deliver, DeliverRun, Log, Send
from raims_node.router.node import NS, Node, NodeParams

MS = 1_000_000


@dataclass
class SimLink:
    name: str
    a: str
    b: str
    conn_a: int
    conn_b: int
    latency_ns: int
    loss: float = 0.0
    up: bool = True
    connected: bool = False


@dataclass(frozen=True)
class Jitter:
    """Per frame, up to `delay_ns` more than the link's latency; with `stall_chance`, the
    receiver stalls for up to `stall_ns` (frames to it wait until then)."""

    delay_ns: int = 2 * MS
    stall_ns: int = 20 * MS
    stall_chance: float = 0.002
    seed: int = 0


@dataclass
class SimNode:
    name: str
    node: Node
    delivered: list[Deliver] = field(default_factory=list)
    logs: list[tuple[int, str]] = field(default_factory=list)
    sent_subjects: list[str] = field(default_factory=list)
    alive: bool = True


class SimNetwork:
    def __init__(
        self,
        creds: Callable[[str], Credentials],
        seed: int = 1,
        params: NodeParams | None = None,
        tick_ns: int = 50 * MS,
        start_ns: int = 1_700_000_000 * NS,
        jitter: Jitter | None = None,
    ) -> None:
        self.creds = creds
        self.rng = random.Random(seed)
        self.params = params or NodeParams(heartbeat_ns=1 * NS)
        self.tick_ns = tick_ns
        self.now = start_ns
        self.nodes: dict[str, SimNode] = {}
        self.links: dict[str, SimLink] = {}
        self._conn_owner: dict[int, tuple[str, SimLink]] = {}
        self._next_conn = 1
        self._queue: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = 0
        self._next_tick = start_ns
        self._wake: dict[str, int] = {}  # per node, the time of its scheduled wake (held floods)
        self.frames_sent = 0
        self.frames_dropped = 0
        self.trace: list[tuple[int, str, str, str]] = []  # (time, from, to, subject)
        self.record_trace = False
        # a test's fault hook: drop(from, send) -> True: the frame is lost on its link (as a
        # transport that dropped it would), counted in frames_dropped
        self.drop: Callable[[str, Send], bool] | None = None
        # layers above the router (names/sim.py): other actions (NodeEvent) go to
        # `on_action`, and `tick_hooks` run with every tick
        self.on_action: Callable[[str, Action], None] | None = None
        self.tick_hooks: list[Callable[[int], None]] = []
        self.jitter = jitter
        self._jitter_rng = random.Random(jitter.seed if jitter else 0)
        self._last_arrival: dict[int, int] = {}  # per sending connection (jitter keeps link order)
        self._stalled_until: dict[str, int] = {}

    # ------------------------------------------------------------------ building

    def add_node(self, name: str, start_offset_ns: int = 0) -> Node:
        node = Node(
            self.creds(name), now_ns=self.now + start_offset_ns,
            rng=random.Random(self.rng.getrandbits(64)), params=self.params,
        )
        self.nodes[name] = SimNode(name, node)
        return node

    def add_link(self, name: str, a: str, b: str, cost: Cost = (1000, 1000, 1000, 1000),
                 latency_ns: int = 1 * MS, tport_type: str = "tcp") -> SimLink:
        link = SimLink(name, a, b, self._next_conn, self._next_conn + 1, latency_ns)
        self._next_conn += 2
        self.links[name] = link
        self._conn_owner[link.conn_a] = (a, link)
        self._conn_owner[link.conn_b] = (b, link)
        ta = self._tport(a, name, tport_type, cost)
        tb = self._tport(b, name, tport_type, cost)
        self._connect(link, ta, tb)
        return link

    def _tport(self, node: str, name: str, tport_type: str, cost: Cost) -> int:
        n = self.nodes[node].node
        for t in n.tports:
            if t.name == name:
                return t.tport_id
        return n.add_transport(name, tport_type, cost)

    def _connect(self, link: SimLink, ta: int, tb: int) -> None:
        link.connected = True
        link.up = True
        self._apply(link.a, self.nodes[link.a].node.on_connect(link.conn_a, ta, self.now))
        self._apply(link.b, self.nodes[link.b].node.on_connect(link.conn_b, tb, self.now))

    # ------------------------------------------------------------------ faults

    def set_link(self, name: str, up: bool) -> None:
        """Partition (up=False: frames vanish, heartbeats time out) or heal a link."""
        self.links[name].up = up

    def disconnect(self, name: str) -> None:
        """Close both ends of a link, as a TCP reset would."""
        link = self.links[name]
        if not link.connected:
            return
        link.connected = False
        for who, conn in ((link.a, link.conn_a), (link.b, link.conn_b)):
            if self.nodes[who].alive:
                self._apply(who, self.nodes[who].node.on_disconnect(conn, self.now))

    def reconnect(self, name: str) -> None:
        link = self.links[name]
        na, nb = self.nodes[link.a], self.nodes[link.b]
        if link.connected or not (na.alive and nb.alive):
            return
        ta = next(t.tport_id for t in na.node.tports if t.name == name)
        tb = next(t.tport_id for t in nb.node.tports if t.name == name)
        self._connect(link, ta, tb)

    def kill(self, name: str) -> None:
        """Stop a node dead (kill -9): its links go quiet, peers find out by timeout."""
        self.nodes[name].alive = False
        for link in self.links.values():
            if name in (link.a, link.b):
                link.up = False

    def bye(self, name: str) -> None:
        """Graceful shutdown: _X.BYE on every link, then the links close."""
        sim = self.nodes[name]
        self._apply(name, sim.node.shutdown(self.now))
        self.run_for(10 * MS)
        sim.alive = False
        for link in list(self.links.values()):
            if name in (link.a, link.b):
                self.disconnect(link.name)

    def restart(self, name: str) -> Node:
        """A new incarnation of a killed node (new bridge id and start time)."""
        node = Node(self.creds(name), now_ns=self.now, rng=random.Random(self.rng.getrandbits(64)),
                    params=self.params)
        old = self.nodes[name].node
        sim = SimNode(name, node)
        self.nodes[name] = sim
        for link in self.links.values():
            if name in (link.a, link.b):
                link.connected = False
                other = link.b if link.a == name else link.a
                conn = link.conn_b if link.a == name else link.conn_a
                if self.nodes[other].alive:
                    self._apply(other, self.nodes[other].node.on_disconnect(conn, self.now))
                tcost = next(t for t in old.tports if t.name == link.name)
                node.add_transport(link.name, tcost.type, tcost.cost)
        for link in self.links.values():
            if name in (link.a, link.b):
                self.reconnect(link.name)
        return node

    # ------------------------------------------------------------------ running

    def _schedule(self, at: int, fn: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (at, self._seq, fn))

    def at(self, at_ns: int, fn: Callable[[], None]) -> None:
        """Run `fn` at virtual time `at_ns` (a test's own events: publishes, faults)."""
        self._schedule(at_ns, fn)

    def _apply(self, who: str, actions: list[Action]) -> None:
        sim = self.nodes[who]
        for act in actions:
            if isinstance(act, Send):
                self._send(who, act)
            elif isinstance(act, Deliver):
                sim.delivered.append(act)
            elif isinstance(act, DeliverRun):
                sim.delivered += act.delivers()
            elif isinstance(act, Log):
                sim.logs.append((self.now, act.text))
            elif isinstance(act, Close):
                owner = self._conn_owner.get(act.conn_id)
                if owner is not None:
                    self.disconnect(owner[1].name)
            elif self.on_action is not None:
                self.on_action(who, act)
        self._schedule_wake(who)

    def _schedule_wake(self, who: str) -> None:
        """Wake the node when its held floods are due (router/batch.py), between ticks."""
        sim = self.nodes[who]
        at = sim.node.next_wake_ns()
        if at is None or at >= self._next_tick or self._wake.get(who, at + 1) <= at:
            return
        self._wake[who] = at

        def wake() -> None:
            if self._wake.get(who) == at:
                del self._wake[who]
            if sim.alive and self.nodes.get(who) is sim:
                self._apply(who, sim.node.tick(self.now))

        self._schedule(at, wake)

    def _send(self, who: str, act: Send) -> None:
        owner = self._conn_owner.get(act.conn_id)
        if owner is None:
            return
        _, link = owner
        if not link.connected:
            return
        self.frames_sent += 1
        if self.lost(who, act, link):
            return
        dest, dest_conn = (link.b, link.conn_b) if act.conn_id == link.conn_a else (link.a, link.conn_a)
        data = act.data
        if self.record_trace:
            self.trace.extend((self.now, who, dest, subject) for subject in _subjects(data))

        def arrive() -> None:
            sim = self.nodes[dest]
            if sim.alive and link.connected and link.up:
                self._apply(dest, sim.node.on_frame(dest_conn, data, self.now))

        self._schedule(self.arrival_ns(link, act.conn_id, dest), arrive)

    def lost(self, who: str, act: Send, link: SimLink) -> bool:
        """Whether a frame written now by `who` on `link` is lost (link down, its loss
        rate, the `drop` hook); counted in frames_dropped."""
        if not link.up or (link.loss and self.rng.random() < link.loss) or (
                self.drop is not None and self.drop(who, act)):
            self.frames_dropped += 1
            return True
        return False

    def arrival_ns(self, link: SimLink, conn_id: int, dest: str) -> int:
        """When a frame written now on `conn_id` (an end of `link`) reaches `dest`."""
        jitter = self.jitter
        if jitter is None:
            return self.now + link.latency_ns
        rng = self._jitter_rng
        if rng.random() < jitter.stall_chance:
            stall = self.now + rng.randrange(1, jitter.stall_ns)
            self._stalled_until[dest] = max(self._stalled_until.get(dest, 0), stall)
        at = max(self.now + link.latency_ns + rng.randrange(jitter.delay_ns + 1),
                 self._stalled_until.get(dest, 0), self._last_arrival.get(conn_id, 0))
        self._last_arrival[conn_id] = at
        return at

    def step(self) -> bool:
        """Run the next event or tick; False when nothing is left before the next tick."""
        if self._queue and self._queue[0][0] <= self._next_tick:
            at, _, fn = heapq.heappop(self._queue)
            self.now = max(self.now, at)
            fn()
            return True
        self.now = max(self.now, self._next_tick)
        self._next_tick += self.tick_ns
        for name, sim in self.nodes.items():
            if sim.alive:
                self._apply(name, sim.node.tick(self.now))
        for hook in self.tick_hooks:
            hook(self.now)
        return False

    def run_for(self, duration_ns: int) -> None:
        end = self.now + duration_ns
        while self.now < end:
            if self._queue and self._queue[0][0] <= min(self._next_tick, end) or self._next_tick <= end:
                self.step()
            else:
                self.now = end

    def run_until(self, pred: Callable[[], bool], timeout_ns: int = 60 * NS, max_events: int = 5_000_000) -> int:
        """Run until `pred()` holds; returns the virtual ns it took. Raises on timeout."""
        start = self.now
        events = 0
        checked_at = -1
        while True:
            if self.now != checked_at:  # events at one instant: test once they all ran
                checked_at = self.now
                if pred():
                    return self.now - start
            if self.now - start > timeout_ns or events > max_events:
                raise TimeoutError(f"condition not met after {(self.now - start) / NS:.2f} virtual s")
            self.step()
            events += 1

    # ------------------------------------------------------------------ inspection

    def live(self) -> list[SimNode]:
        return [s for s in self.nodes.values() if s.alive]

    def converged(self) -> bool:
        """Every live node converged, knows every other live node, and agrees on links."""
        live = self.live()
        if not all(s.node.converged and len(s.node.peers) == len(live) - 1 for s in live):
            return False
        bridges = {s.node.bridge for s in live}
        for s in live:
            n = s.node
            if set(n.peers) != bridges - {n.bridge}:
                return False
            if any(p.session_key is None or p.bloom is None for p in n.peers.values()):
                return False
        ref = live[0].node.db
        want = {b: ref.links(b) for b in bridges}
        return all(s.node.db.links(b) == want[b] for s in live for b in bridges)

    def publish(self, name: str, subject: str, payload: bytes) -> None:
        sim = self.nodes[name]
        self._apply(name, sim.node.publish(subject, payload, self.now))

    def publish_run(self, name: str, subject: str, payloads: list[bytes]) -> None:
        """A pipelined run of one subject (a NATS client's PUBs flushed together):
        `Node.publish_run`, batch frames (wire/batch.py)."""
        sim = self.nodes[name]
        self._apply(name, sim.node.publish_run(subject, payloads, self.now))

    def subscribe(self, name: str, subject: str, sid: str | None = None) -> None:
        sim = self.nodes[name]
        self._apply(name, sim.node.subscribe(sim, sid or subject, subject, self.now))

    def psubscribe(self, name: str, pattern: str, syntax: str = "rv", sid: str | None = None) -> None:
        sim = self.nodes[name]
        self._apply(name, sim.node.psubscribe(sim, sid or pattern, pattern, syntax, self.now))

    def interest_known(self, name: str, subject: str, among: Iterable[str] | None = None) -> bool:
        """Every other live node's (or those `among`) replica of `name`'s bloom passes `subject`."""
        b = self.nodes[name].node.bridge
        for s in self.live():
            if s.name == name or among is not None and s.name not in among:
                continue
            peer = s.node.peers.get(b)
            if peer is None or peer.bloom is None or not peer.bloom.matches(subject):  # type: ignore[attr-defined]
                return False
        return True


def _subjects(data: bytes) -> list[str]:
    """The subjects a frame carries: its own, or those of the floods in a `_Z.BAT`
    (router/batch.py), so that a trace shows the manual's messages."""
    from raims_node.router.batch import Z_BAT
    from raims_node.wire import Fid, decode_frame, peek

    subject = peek(data).subject.decode()
    if subject != Z_BAT:
        return [subject]
    return [s for fid, inner in decode_frame(data).fields
            if fid == Fid.DATA and isinstance(inner, bytes) for s in _subjects(inner)]
