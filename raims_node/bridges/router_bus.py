"""The `Bus` of one service namespace on a running daemon (issue 8, bus.py's contract).

Manual "Services and Networks": the NATS and Redis transports with the same `service`
share one namespace, so they share one `RouterBus`. "Subjects", "NATS subject rules",
"Redis subject rules", "The _INBOX subject", "Notification of message loss".

Mapping into the Rai MS network (decisions):

- A client subject `s` is `f"{service}.{s}"` inside the node (`_nats.s`, `_redis.s` by
  default); patterns likewise, with their syntax. The prefix is stripped on delivery.
  Reply subjects travel as the client wrote them: a reply is only ever published to in
  the same namespace, where the bus adds the prefix again.
- Redis shard channels (`shard_subject(c)` = `_SHARD.c`) map to `_SHARD.{service}.c`,
  outside the `{service}.` space, so that no pattern of the namespace (glob `*`, NATS
  `>`) can match them, as the contract requires, and PUBSUB CHANNELS / SHARDCHANNELS
  list disjoint sets.
- The node's statistics subjects (`_N.`, nstats.py) are the network's, not a
  namespace's: a client subject or pattern starting `_N.` maps to itself, so that a
  NATS, Redis or sbus client of any service can subscribe to `_N.>`.
- Shardcast for clients (manual "Anycast and Shardcast"): a wildcard subscription whose
  queue group is `_SHARD.<i>.<n>` (1 <= i <= n) takes shard i of n of the pattern's
  subjects instead of joining a queue group (NATS `SUB foo.> _SHARD.1.4 sid`); the other
  shards are left to other subscribers. Protocols without a queue argument put the
  shard in front of the pattern: a pattern `_SHARD.<i>.<n>.<rest>` is the pattern
  `<rest>` taking shard i of n (Redis `PSUBSCRIBE _SHARD.1.4.foo.*`; any syntax; the
  client's deliveries still name the pattern as it was given). sbus clients write
  `SUB _SHARD/<i>/<n>/<pattern>` (bridges/ipc.py). A bad shard is refused as a bad
  pattern.
- `ack` / `trace` for clients: a reply subject `_ACK.<inbox>` or `_TRACE.<inbox>`
  (bridges/acks.py): NATS `PUB s _ACK.<inbox> n`, Redis `PUBLISH s m _ACK.<inbox>` (a
  third argument, raims' extension, is the reply subject), sbus `CMSG raims/ack` /
  `raims/trace` (bridges/ipc.py).
- The service name must be a plain dotted name (no wildcard or glob characters): it is
  pasted in front of patterns of both syntaxes, where such characters would change
  their meaning.
- Echo: a publisher whose `echo` is False is named as the node's `no_echo` owner.
- `_INBOX.` replies route like any subject: the bloom filters carry the message only
  toward the nodes whose requester subscribed to it, which is the point-to-point path
  when there is one requester (the envelope optimisation is not done).
- Queue groups are the node's (one member among all nodes, marker subjects `_QUEUE.*`,
  which the bus never lists).
- `publish` returns the local deliveries plus the number of remote nodes whose bloom
  filter matches the subject (each such node counts once, whatever its number of
  subscribers: the filters carry no counts). `numsub` likewise counts each remote node
  holding the channel in its replicated subject list as one subscriber; `numpat` counts
  the distinct patterns of the namespace in the network, of both syntaxes.
- `has_interest` (NATS no-responders) is True when a local subscription matches or a
  remote node's filter does; a bloom false positive makes a request time out instead
  of failing fast, never the reverse.
- Subjects are bytes on the wire (str with surrogateescape), so binary channels cross
  nodes. Subjects that the network cannot carry (longer than a frame's subject) are
  refused: `subscribe` / `psubscribe` return why (the session tells its client: Redis
  `-ERR`, NATS `-ERR 'Invalid Subject'`) and such a publish reaches nobody (count 0);
  both are counted in `refused`. A pattern raims cannot compile (see
  raims_node.subject.glob) is likewise refused with the reason, counted in
  `bad_patterns`.
- Local fast path: when no remote node's filter matches, a publish is delivered to the
  local subscriptions directly, without building, signing and decoding a frame (a
  multicast to no one); the node's `published` / `delivered` counters are kept. Queue
  groups then have only local members and are served round robin. Remote interest is
  cached per subject until the link-state database changes version, which the node
  bumps whenever a peer's filter or subject list changes (`put_peer` with its new
  sub seqno) and whenever a peer comes or goes.
- `_NAMES.*` (issue 21) goes to the node's name service (names/glue.py), not into the
  network; a closing client's names are withdrawn.
- Loss (issue 8 point 5): a delivery that reports a sequence gap gives NATS and Redis
  clients nothing extra; the node's loss counters (`show loss`) record it. A client
  with a `data_loss(sid, subject, lost, payload)` method (RV, issue 25) is told before the
  delivery.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from raims_node.bloom import BloomFilter, SubjectHashes
from raims_node.bloom.shard import InvalidShard, Shard
from raims_node.bridges.acks import ack_request
from raims_node.bridges.bus import SHARD_PREFIX, ClientHandle, PatternSyntax
from raims_node.bridges.errors import BridgeError
from raims_node.bridges.host import NodeHost
from raims_node.router.actions import Deliver, DeliverRun
from raims_node.subject import MAX_SUBJECT_LEN, SubjectError, compile_pattern
from raims_node.turns import Turns
from raims_node.wire.batch import PackedRun, Run

NAMES_PREFIX = "_NAMES."  # requests to the node's name service, never routed
# Room left in a frame's subject for the `_S.JOIN.` / `_P.PSUB.` / `_QUEUE.q.sub.` wrappers.
SUBJECT_HEADROOM = 32
ROUTE_CACHE_LIMIT = 65536
_FORBIDDEN_IN_SERVICE = frozenset("*>?[]\\ \t\r\n")


STATS_PREFIX = "_N."  # the node statistics subjects, shared by every namespace
_SHARD_QUEUE = re.compile(r"_SHARD\.(\d{1,5})\.(\d{1,5})")  # a queue group asking for shard i of n
_SHARD_HEAD = re.compile(r"_SHARD\.(\d{1,5})\.(\d{1,5})\.(?=.)")  # a pattern taking shard i of n

class InvalidService(BridgeError):
    """A service name that cannot prefix subjects and patterns."""


def check_service(service: str) -> None:
    bad = sorted(set(service) & _FORBIDDEN_IN_SERVICE)
    if not service or bad or any(not t for t in service.split(".")):
        raise InvalidService(f"service {service!r} must be a dotted name without {bad or 'empty tokens'}")


class _Owner:
    """What the node sees as the owner of one client's subscriptions."""

    __slots__ = ("bus", "client")

    def __init__(self, bus: RouterBus, client: ClientHandle) -> None:
        self.bus = bus
        self.client = client

    def on_deliver(self, d: Deliver) -> None:
        if d.loss:  # a client that reports loss (RV's DATALOSS advisory) is told first
            report = getattr(self.client, "data_loss", None)
            if report is not None:
                report(d.sid, self.bus.outside(d.subject), d.loss, d.payload)
        self.client.deliver(d.sid, self.bus.outside(d.subject), d.reply, d.headers, d.payload)

    def on_deliver_run(self, d: DeliverRun) -> None:
        run = d.payloads
        if isinstance(run, PackedRun):  # still inside the frame: a client that can, takes it whole
            packed = getattr(self.client, "deliver_packed", None)
            if packed is not None:
                packed(d.sid, self.bus.outside(d.subject), run)
                return
            run = run.payloads()
        self.client.deliver_run(d.sid, self.bus.outside(d.subject), run)


class RouterBus:
    """One service namespace of a daemon's node, as the client sessions see it."""

    def __init__(self, host: NodeHost, service: str) -> None:
        check_service(service)
        self.host = host
        self.node = host.node
        self.service = service
        self.prefix = service + "."
        self._plen = len(self.prefix)
        self._shard_head = SHARD_PREFIX + self.prefix
        self._owners: dict[ClientHandle, _Owner] = {}
        self._routes: dict[str, tuple[str, int]] = {}
        self._routes_version = -1
        self._host_lone: Callable[[str, bytes, object | None], int] | None = getattr(host, "publish_lone", None)
        self._carried: str | None = None  # the last node subject publish_lone found carriable
        self._queue_turn: Turns[str] = Turns()  # groups come and go (turns.py)
        self.refused = 0
        self.bad_patterns = 0

    # ------------------------------------------------------------ names

    def inside(self, subject: str) -> str:
        """The node's subject for a client subject of this namespace."""
        if subject.startswith(SHARD_PREFIX):
            return self._shard_head + subject[len(SHARD_PREFIX):]
        if subject.startswith(STATS_PREFIX):
            return subject
        return self.prefix + subject

    def outside(self, internal: str) -> str:
        """The client subject of a node subject of this namespace (inverse of `inside`)."""
        if internal.startswith(self._shard_head):
            return SHARD_PREFIX + internal[len(self._shard_head):]
        if internal.startswith(STATS_PREFIX):
            return internal
        return internal[self._plen:]

    def _carriable(self, internal: str, extra: int = 0) -> bool:
        """Whether the wire can carry `internal` (UTF-8, within a frame's subject)."""
        return self._too_long(internal, extra) is None

    def _too_long(self, internal: str, extra: int = 0) -> str | None:
        """Why the wire cannot carry `internal` (counted in `refused`), or None."""
        size = len(internal) if internal.isascii() else len(internal.encode("utf-8", "surrogateescape"))
        if size + extra + SUBJECT_HEADROOM > MAX_SUBJECT_LEN:
            self.refused += 1
            return (f"subject too long: {size + extra} bytes with the service prefix, the network carries "
                    f"at most {MAX_SUBJECT_LEN - SUBJECT_HEADROOM}")
        return None

    # ------------------------------------------------------------ subscriptions

    def _owner(self, client: ClientHandle) -> _Owner:
        owner = self._owners.get(client)
        if owner is None:
            owner = self._owners[client] = _Owner(self, client)
        return owner

    def subscribe(self, client: ClientHandle, sid: str, subject: str,
                  queue: str | None = None) -> str | None:
        internal = self.inside(subject)
        refused = self._too_long(internal, len(queue) if queue else 0)
        if refused is None:
            self.host.subscribe(self._owner(client), sid, internal, queue)
        return refused

    def psubscribe(self, client: ClientHandle, sid: str, pattern: str,
                   syntax: PatternSyntax, queue: str | None = None) -> str | None:
        if queue is None and pattern.startswith(SHARD_PREFIX) and (m := _SHARD_HEAD.match(pattern)):
            queue, pattern = f"_SHARD.{m.group(1)}.{m.group(2)}", pattern[m.end():]  # Redis PSUBSCRIBE
        internal = pattern if pattern.startswith(STATS_PREFIX) else self.prefix + pattern
        refused = self._too_long(internal, len(queue) if queue else 0)
        if refused is not None:
            return refused
        shard = None
        if queue is not None and (m := _SHARD_QUEUE.fullmatch(queue)):
            try:
                shard, queue = Shard(int(m.group(1)), int(m.group(2))), None
            except InvalidShard as exc:
                self.bad_patterns += 1
                return str(exc)
        try:
            self.host.psubscribe(self._owner(client), sid, internal, syntax, queue, shard)
        except SubjectError as exc:  # the node checks the pattern before changing anything
            self.bad_patterns += 1
            return str(exc)
        return None

    def unsubscribe(self, client: ClientHandle, sid: str) -> None:
        owner = self._owners.get(client)
        if owner is not None:
            self.host.unsubscribe(owner, sid)

    def unsubscribe_all(self, client: ClientHandle) -> None:
        owner = self._owners.get(client)
        if owner is not None:  # (the owner stays: the client may subscribe again)
            self.host.drop_owner(owner)

    def drop_client(self, client: ClientHandle) -> None:
        owner = self._owners.pop(client, None)
        if owner is not None:
            self.host.drop_owner(owner)
        self.host.naming.client_gone(client)  # its service names are withdrawn

    # ------------------------------------------------------------ publish

    def publish(self, client: ClientHandle | None, subject: str, reply: str | None,
                headers: bytes | None, payload: bytes) -> int:
        return self._publish(client, subject, reply, headers, (payload,))

    def publish_run(self, client: ClientHandle, subject: str, payloads: Run) -> int:
        return self._publish(client, subject, None, None, payloads)

    def publish_lone(self, client: ClientHandle, subject: str, payload: bytes) -> int:
        """`publish` of one message a client sent alone (no reply or headers): to other
        nodes, its frame is written on the links in this pass (transports/lone.py)
        instead of on the loop's next turn."""
        lone = self._host_lone
        if lone is not None and not subject.startswith(NAMES_PREFIX):
            internal, remote = self._route(subject)
            if remote:
                if internal is not self._carried:
                    if not self._carriable(internal):
                        return 0
                    self._carried = internal  # (the routes keep the same str)
                no_echo = self._owners.get(client) if not client.echo else None
                return lone(internal, payload, no_echo) + remote
        return self._publish(client, subject, None, None, (payload,))

    def _publish(self, client: ClientHandle | None, subject: str, reply: str | None,
                 headers: bytes | None, payloads: Sequence[bytes] | PackedRun) -> int:
        """Publish each payload in order; the receivers reached, summed."""
        if subject.startswith(NAMES_PREFIX):  # the node's name service (names/glue.py)
            names = self.host.naming
            return sum(names.request(client, self.prefix, subject, reply, headers, p) for p in payloads)
        internal, remote = self._route(subject)
        no_echo = self._owners.get(client) if client is not None and not client.echo else None
        asked = ack_request(reply)
        if asked is not None:  # bridges/acks.py: answers come back on the inbox
            kind, inbox = asked
            return sum(self.host.publish_acked(internal, p, headers, no_echo, kind, self.inside(inbox)) + remote
                       for p in payloads)
        if remote:
            if not self._carriable(internal) or (reply is not None and not self._carriable(reply)):
                return 0
            if reply is None and headers is None and len(payloads) > 1:  # a pipelined run: batch frames
                run = payloads if isinstance(payloads, PackedRun) else list(payloads)
                return self.host.publish_run(internal, run, no_echo) + remote * len(payloads)
            publish = self.host.publish
            return sum(publish(internal, payload, reply, headers, no_echo) + remote for payload in payloads)
        # the local fast path: a multicast to no remote node, without a frame
        node = self.node
        match = node.subs.match
        if len(payloads) > 1:
            subs = match(internal)
            if all(sub.owner is no_echo for sub in subs):  # no one but the publisher (an sbus run)
                node.counters.published += len(payloads)
                return 0
            if len(subs) == 1 and subs[0].queue is None and subs[0].owner is not no_echo:
                owner = subs[0].owner  # one subscriber (the usual stream): the run written at once
                if type(owner) is _Owner and owner.bus is self:
                    node.counters.published += len(payloads)
                    node.counters.delivered += len(payloads)
                    packed = getattr(owner.client, "deliver_packed", None) if isinstance(payloads, PackedRun) else None
                    if packed is not None:  # a NATS run still in its read buffer: framed at once
                        packed(subs[0].sid, subject, payloads)
                    else:
                        owner.client.deliver_run(subs[0].sid, subject, list(payloads))
                    return len(payloads)
        n = 0
        for payload in payloads:
            node.counters.published += 1
            groups: dict[str, list[tuple[object, str]]] | None = None
            for sub in node.subs.match(internal):  # again: a delivery may unsubscribe or drop one
                owner = sub.owner
                if owner is no_echo:
                    continue
                if sub.queue is not None:
                    if groups is None:
                        groups = {}
                    groups.setdefault(sub.queue_marker or "", []).append((owner, sub.sid))
                    continue
                n += 1
                if type(owner) is _Owner and owner.bus is self:
                    owner.client.deliver(sub.sid, subject, reply, headers, payload)
                else:
                    self._hand(owner, sub.sid, internal, reply, headers, payload)
            if groups is not None:
                for marker, members in groups.items():
                    owner, sid = members[self._queue_turn.next(marker) % len(members)]
                    n += 1
                    if type(owner) is _Owner and owner.bus is self:
                        owner.client.deliver(sid, subject, reply, headers, payload)
                    else:
                        self._hand(owner, sid, internal, reply, headers, payload)
        node.counters.delivered += n
        return n

    def _hand(self, owner: object, sid: str, internal: str, reply: str | None,
              headers: bytes | None, payload: bytes) -> None:
        """A delivery to an owner outside this namespace (console, web, a nested service)."""
        handler = getattr(owner, "on_deliver", None)
        if handler is not None:
            handler(Deliver(owner, sid, internal, reply, payload, self.node.bridge, 0, headers))

    def _route(self, subject: str) -> tuple[str, int]:
        """(node subject, remote nodes whose bloom filter matches it), cached per client
        subject until the link-state database changes version."""
        version = self.node.db.version
        routes = self._routes
        if version != self._routes_version or len(routes) >= ROUTE_CACHE_LIMIT:
            routes.clear()
            self._routes_version = version
        route = routes.get(subject)
        if route is None:
            internal = self.inside(subject)
            route = routes[subject] = (internal, self._remote_nodes(internal))
        return route

    def _remote_nodes(self, internal: str) -> int:
        peers = self.node.peers
        if not peers:
            return 0
        hashes = SubjectHashes(internal)
        return sum(1 for peer in peers.values()
                   if isinstance(peer.bloom, BloomFilter) and peer.bloom.might_match(hashes))

    def has_interest(self, subject: str, no_echo: ClientHandle | None = None) -> bool:
        if subject.startswith(NAMES_PREFIX):
            return True
        internal, remote = self._route(subject)
        if remote > 0:
            return True
        local = self.node.subs.match(internal)
        if no_echo is None or not local:
            return bool(local)
        owner = self._owners.get(no_echo)
        return any(sub.owner is not owner for sub in local)

    # ------------------------------------------------------------ introspection (Redis PUBSUB)

    def _literals(self, shard: bool) -> tuple[str, list[tuple[str, int]]]:
        """The head of the space and (internal subject, holders) network-wide."""
        head = self._shard_head if shard else self.prefix
        node = self.node
        out = [(s, node.subs.count(s)) for s in node.subs.subjects() if s.startswith(head)]
        for peer in node.peers.values():
            out += [(s, 1) for s in peer.subjects if s.startswith(head)]
        return head, out

    def channels(self, pattern: str | None, shard: bool = False) -> list[str]:
        head, literals = self._literals(shard)
        names = {s[len(head):] for s, _ in literals}
        if pattern is not None:
            try:
                compiled = compile_pattern(pattern, "glob")
            except SubjectError:
                return []
            names = {n for n in names if compiled.matches(n)}
        return sorted(names)

    def numsub(self, channels: list[str], shard: bool = False) -> list[int]:
        head, literals = self._literals(shard)
        counts: dict[str, int] = {}
        for s, k in literals:
            counts[s] = counts.get(s, 0) + k
        return [counts.get(head + c, 0) for c in channels]

    def numpat(self) -> int:
        node = self.node
        found = {p for p in node.subs.patterns() if p[1].startswith(self.prefix)}
        for peer in node.peers.values():
            found.update(p for p in peer.patterns if p[1].startswith(self.prefix))
        return len(found)
