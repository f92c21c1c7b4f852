"""One node's name service, sans-IO: the `_NAMES.*` requests of its clients, the naming
table, the topology service and the table's replication (seed 002, 2.2 and 2.3; issue 21).

Inputs: `request(owner, prefix, verb, reply, headers, payload, now_ns)` for a message a
local client published to `_NAMES.<verb>`; `client_gone(owner)`; `node_event(...)` for
the router's peer up / peer down / names frames; `tick(now_ns)`. Outputs: `Publish`
(a message to a subject inside the network: a reply, a topology event, a message for a
port), and replication's `Flood` / `Unicast` frames.

Requests (JSON bodies; `prefix` is the client's namespace, e.g. `_nats.`, added to the
subjects a client names so that the answers reach it through the network):
- `BIND` `{"type","lower","upper","scope","inbox"}` (or `"instance"` for lower = upper)
  -> `{"port","key","node"}`. The port is the inbox: binds with one inbox share a port.
- `UNBIND` `{"port"}` withdraws the port's publications (only the one sequence when
  `type`/`lower`/`upper` are given) -> `{"withdrawn": n}`. As in TIPC a binding belongs
  to the client that made it: only that client withdraws it (another client naming its
  port gets `{"error"}`; ports are small numbers, easy to guess); the operator's console,
  which binds as no client, may withdraw any.
- `LOOKUP` `{"type","instance","domain"}` -> `{"port","node","lower","upper"}` or
  `{"error"}`; `domain` as table.py describes (default the nearest).
- `INQUIRE` `{"type","instance","timeout_ms"}` -> `{"found": true, ...}` once
  published, `{"found": false, "event": "timeout"}` when the timer ran out.
- `SUBSCRIBE` `{"type","lower","upper","timeout_ms","inbox"}` -> `{"sub": id}`, then
  events on `inbox`; `UNSUBSCRIBE` `{"sub"}`.
- `TO.<type>.<instance>`: the message goes to the port a lookup (nearest) chooses;
  `MCAST.<type>.<lower>.<upper>`: once to every port bound to an overlapping sequence.
  Both keep the sender's reply subject; with none matching, a sender that gave a reply
  subject gets `{"error"}`.
A request's answer goes to its reply subject, or to `"reply"` in the body (a Redis
client's PUBLISH has no reply subject). Errors are answered as `{"error": text}` and
counted; they never change the table.

Limits: the node's own names (MAX_LOCAL_PUBLICATIONS) and topology subscriptions
(topology.MAX_SUBSCRIPTIONS), as TIPC's per-node ones; one client holds at most a
quarter of either, so a client binding or subscribing without end does not lock the
node's other clients out.

Name type 0 is the node's availability (2.3.4): every node publishes
`{0, addr, addr}` in zone scope, `addr` being the first 4 bytes of its bridge id as an
integer, so a subscription to type 0 sees nodes come and go; clients cannot bind type 0.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable
from dataclasses import dataclass

from raims_node.names.errors import BadRequest, LimitExceeded, NamesError
from raims_node.names.replication import Change, Delta, Flood, Replace, Replicator, Unicast
from raims_node.names.table import (
    MAX_INSTANCE,
    NEAREST,
    Domain,
    NameTable,
    Publication,
    Scope,
    check_instance,
    check_range,
)
from raims_node.names.topology import FOREVER, Topology, TopologyEvent

NS = 1_000_000_000
NODE_TYPE = 0
PREFIX = "_NAMES."
MAX_BODY = 64 * 1024
# this node's own publications (one dump frame carries them all: a few MB at most) and
# the length of a port's inbox subject
MAX_LOCAL_PUBLICATIONS = 10_000
MAX_CLIENT_PUBLICATIONS = MAX_LOCAL_PUBLICATIONS // 4  # one client's share: others can still bind
MAX_INBOX_LEN = 256


@dataclass(slots=True)
class Publish:
    """Publish `payload` on `subject`, a subject inside the network."""

    subject: str
    payload: bytes
    reply: str | None = None
    headers: bytes | None = None


Out = Publish | Flood | Unicast


def node_address(bridge: bytes) -> int:
    """A node's 32-bit address for name type 0 (first 4 bytes of its bridge id)."""
    return int.from_bytes(bridge[:4], "big")


def _int(body: dict[str, object], name: str, default: int | None = None) -> int:
    value = body.get(name, default)
    if value is None:
        raise BadRequest(f"{name} is missing")
    return check_instance(name, value)


class NameService:
    def __init__(self, node: bytes, user: str, now_ns: int, retry_ns: int = NS, beacon_ns: int = 30 * NS) -> None:
        self.node = node
        self.user = user
        self.table = NameTable(node)
        self.topology = Topology()
        self.repl = Replicator(node, self._own, retry_ns, beacon_ns)
        self.peers: dict[bytes, str] = {}
        self._keys = itertools.count(1)
        self._ports: dict[str, int] = {}  # inbox -> port
        self._owner_of: dict[int, object] = {}  # key -> owner
        self._by_owner: dict[object, set[int]] = {}
        self._local: set[int] = set()  # keys of this node's bound names (type 0 aside)
        self.requests = 0
        self.errors = 0
        self.sent = 0
        self.unmatched = 0
        self.dropped = 0
        addr = node_address(node)
        self._add_own(Publication(NODE_TYPE, addr, addr, Scope.ZONE, node, 0, next(self._keys), "", user), None)

    # ------------------------------------------------------------------ own publications

    def _own(self) -> list[Publication]:
        return [p for p in self.table.of_node(self.node) if p.scope != Scope.NODE]

    def _add_own(self, pub: Publication, owner: object | None) -> list[Out]:
        self.table.add(pub)
        if pub.type != NODE_TYPE:
            self._local.add(pub.key)
        if owner is not None:
            self._owner_of[pub.key] = owner
            self._by_owner.setdefault(owner, set()).add(pub.key)
        out: list[Out] = self._events(self.topology.changed(pub, True))
        return out + self.repl.local_change([pub], [])

    def _withdraw_own(self, keys: Iterable[int]) -> list[Out]:
        gone: list[Publication] = []
        out: list[Out] = []
        for key in keys:
            pub = self.table.remove(self.node, key)
            self._local.discard(key)
            owner = self._owner_of.pop(key, None)
            if owner is not None:
                owned = self._by_owner.get(owner)
                if owned is not None:
                    owned.discard(key)
                    if not owned:
                        del self._by_owner[owner]
            if pub is not None:
                gone.append(pub)
                out += self._events(self.topology.changed(pub, False))
        return out + self.repl.local_change([], gone)

    # ------------------------------------------------------------------ client requests

    def request(self, owner: object, prefix: str, verb: str, reply: str | None, headers: bytes | None,
                payload: bytes, now_ns: int) -> list[Out]:
        """A message a local client published to `_NAMES.<verb>` (module docstring)."""
        self.requests += 1
        answer_to = prefix + reply if reply else None
        try:
            if verb.startswith(("TO.", "MCAST.")):
                return self._send(verb, answer_to, reply, headers, payload)
            if len(payload) > MAX_BODY:
                raise BadRequest(f"body of {len(payload)} bytes exceeds {MAX_BODY}")
            try:
                body = json.loads(payload or b"{}")
            except (ValueError, RecursionError):  # RecursionError: nested too deep
                raise BadRequest("body is not JSON") from None
            if not isinstance(body, dict):
                raise BadRequest("body is not a JSON object")
            alt = body.get("reply")
            if answer_to is None and isinstance(alt, str) and alt:
                answer_to = prefix + alt
            handler = _VERBS.get(verb)
            if handler is None:
                raise BadRequest(f"unknown request _NAMES.{verb}")
            return handler(self, owner, prefix, body, answer_to, now_ns)
        except NamesError as exc:
            self.errors += 1
            return self._answer(answer_to, {"error": str(exc)})

    @staticmethod
    def _answer(to: str | None, body: dict[str, object]) -> list[Out]:
        if to is None:
            return []
        return [Publish(to, json.dumps(body, separators=(",", ":")).encode())]

    def _range(self, body: dict[str, object]) -> tuple[int, int]:
        if "instance" in body and "lower" not in body:
            inst = _int(body, "instance")
            return inst, inst
        return check_range(body.get("lower"), body.get("upper", body.get("lower")))

    def _inbox(self, prefix: str, body: dict[str, object]) -> str:
        inbox = body.get("inbox")
        # a literal subject a client can listen to: no wildcard, no empty segment, nothing
        # a client protocol cannot carry (space, control characters)
        if not isinstance(inbox, str) or not inbox or any(c in inbox for c in "*>") or \
                not inbox.isprintable() or " " in inbox or "" in inbox.split("."):
            raise BadRequest(f"inbox {inbox!r} is not a subject")
        if len(inbox) > MAX_INBOX_LEN:
            raise BadRequest(f"inbox of {len(inbox)} characters exceeds {MAX_INBOX_LEN}")
        return prefix + inbox

    def _bind(self, owner: object, prefix: str, body: dict[str, object], answer_to: str | None,
              now_ns: int) -> list[Out]:
        type_ = _int(body, "type")
        if type_ == NODE_TYPE:
            raise BadRequest("name type 0 is the nodes' own (node availability)")
        lower, upper = self._range(body)
        scope = Scope.parse(body.get("scope"))
        inbox = self._inbox(prefix, body)
        self.table.check_bind(type_, lower, upper)
        port = self._ports.get(inbox)
        if port is None:
            port = self._ports[inbox] = len(self._ports) + 1
        same = next((p for p in self.table.overlapping(type_, lower, upper)
                     if p.node == self.node and p.port == port and (p.lower, p.upper) == (lower, upper)), None)
        if same is not None and same.scope == scope:  # bound already: a repeated request changes nothing
            return self._answer(answer_to, {"port": port, "key": same.key, "node": self.user})
        # bound with another scope: the name moves to the scope asked for (withdrawn, published again)
        out = self._withdraw_own([same.key]) if same is not None else []
        if len(self._local) >= MAX_LOCAL_PUBLICATIONS:
            raise LimitExceeded(f"this node holds {len(self._local)} bound names, the limit")
        if owner is not None and len(self._by_owner.get(owner, ())) >= MAX_CLIENT_PUBLICATIONS:
            raise LimitExceeded(f"this client holds {MAX_CLIENT_PUBLICATIONS} bound names, "
                                "its share of the node's limit")
        pub = Publication(type_, lower, upper, scope, self.node, port, next(self._keys), inbox, self.user)
        return out + self._answer(answer_to, {"port": port, "key": pub.key, "node": self.user}) + \
            self._add_own(pub, owner)

    def _unbind(self, owner: object, prefix: str, body: dict[str, object], answer_to: str | None,
                now_ns: int) -> list[Out]:
        port = body.get("port")
        if not isinstance(port, int) or isinstance(port, bool):
            raise BadRequest(f"port {port!r} is not an integer")
        pubs = [p for p in self.table.of_node(self.node) if p.port == port and p.type != NODE_TYPE]
        if "type" in body:
            type_ = _int(body, "type")
            lower, upper = self._range(body)
            pubs = [p for p in pubs if (p.type, p.lower, p.upper) == (type_, lower, upper)]
        if owner is not None:
            mine = [p for p in pubs if self._owner_of.get(p.key) is owner]
            if pubs and not mine:
                raise BadRequest(f"port {port}'s names were bound by another client")
            pubs = mine
        out = self._withdraw_own([p.key for p in pubs])
        return self._answer(answer_to, {"withdrawn": len(pubs)}) + out

    def domain(self, value: object) -> Domain:
        if value is None or value in ("", "0", 0, NEAREST):
            return Domain("nearest")
        if value in ("node", "cluster", "zone"):
            return Domain(str(value))
        if isinstance(value, str):
            if value == self.user:
                return Domain("node", self.node)
            for bridge, user in self.peers.items():
                if user == value:
                    return Domain("node", bridge)
            raise BadRequest(f"domain {value!r} is no node, nor node, cluster, zone or {NEAREST}")
        raise BadRequest(f"domain {value!r} is not a string")

    def lookup(self, type_: int, instance: int, domain: Domain) -> Publication | None:
        return self.table.lookup(type_, instance, domain)

    def _lookup(self, owner: object, prefix: str, body: dict[str, object], answer_to: str | None,
                now_ns: int) -> list[Out]:
        type_, instance = _int(body, "type"), _int(body, "instance")
        pub = self.table.lookup(type_, instance, self.domain(body.get("domain")))
        if pub is None:
            return self._answer(answer_to, {"error": f"no publication of {{{type_}, {instance}}} in the domain"})
        return self._answer(answer_to, {"port": pub.port, "node": pub.user, "lower": pub.lower, "upper": pub.upper})

    def _timeout(self, body: dict[str, object]) -> int:
        value = body.get("timeout_ms", FOREVER)
        return check_instance("timeout_ms", value)

    def _inquire(self, owner: object, prefix: str, body: dict[str, object], answer_to: str | None,
                 now_ns: int) -> list[Out]:
        type_, instance = _int(body, "type"), _int(body, "instance")
        if answer_to is None:
            raise BadRequest("an inquiry needs a reply subject")
        existing = self.table.overlapping(type_, instance, instance)
        _, events = self.topology.subscribe(type_, instance, instance, self._timeout(body), answer_to, owner,
                                            now_ns, existing, inquiry=True)
        return self._events(events)

    def _subscribe(self, owner: object, prefix: str, body: dict[str, object], answer_to: str | None,
                   now_ns: int) -> list[Out]:
        type_ = _int(body, "type")
        lower, upper = self._range(body) if "lower" in body or "instance" in body else (0, MAX_INSTANCE)
        target = self._inbox(prefix, body)
        existing = self.table.overlapping(type_, lower, upper)
        sub, events = self.topology.subscribe(type_, lower, upper, self._timeout(body), target, owner, now_ns,
                                              existing)
        return self._answer(answer_to, {"sub": sub.sub_id}) + self._events(events)

    def _unsubscribe(self, owner: object, prefix: str, body: dict[str, object], answer_to: str | None,
                     now_ns: int) -> list[Out]:
        sub_id = body.get("sub")
        if not isinstance(sub_id, int) or isinstance(sub_id, bool):
            raise BadRequest(f"sub {sub_id!r} is not an integer")
        return self._answer(answer_to, {"cancelled": self.topology.cancel(sub_id, owner)})  # its own only

    def _send(self, verb: str, answer_to: str | None, reply: str | None, headers: bytes | None,
              payload: bytes) -> list[Out]:
        kind, _, rest = verb.partition(".")
        parts = rest.split(".")
        try:
            nums = [int(p) for p in parts]
        except ValueError:
            raise BadRequest(f"_NAMES.{verb}: type and instances must be integers") from None
        if kind == "TO" and len(nums) == 2:
            pub = self.table.lookup(check_instance("type", nums[0]), check_instance("instance", nums[1]),
                                    Domain("nearest"))
            targets = [pub] if pub is not None else []
        elif kind == "MCAST" and len(nums) == 3:
            lower, upper = check_range(nums[1], nums[2])
            targets = self.table.ports(check_instance("type", nums[0]), lower, upper)
        else:
            raise BadRequest(f"_NAMES.{verb}: use _NAMES.TO.<type>.<instance> or _NAMES.MCAST.<type>.<lower>.<upper>")
        # the reply subject travels as the sender wrote it (the bus's rule for replies)
        out: list[Out] = [Publish(p.inbox, payload, reply, headers) for p in targets if p.inbox]
        self.sent += len(out)
        if not out:
            self.unmatched += 1
            return self._answer(answer_to, {"error": f"no port bound to _NAMES.{verb}"})
        return out

    # ------------------------------------------------------------------ clients and timers

    def client_gone(self, owner: object) -> list[Out]:
        """The client's connection closed: its names are withdrawn, its subscriptions end."""
        self.topology.cancel_owner(owner)
        keys = self._by_owner.get(owner)
        return self._withdraw_own(list(keys)) if keys else []

    def tick(self, now_ns: int) -> list[Out]:
        return self._events(self.topology.tick(now_ns)) + list(self.repl.tick(now_ns))

    def _events(self, events: list[TopologyEvent]) -> list[Out]:
        return [Publish(e.sub.target, json.dumps(e.body(), separators=(",", ":")).encode()) for e in events]

    # ------------------------------------------------------------------ the router's events

    def node_event(self, kind: str, peer: bytes, user: str, data: bytes, now_ns: int) -> list[Out]:
        if kind == "peer_up":
            self.peers[peer] = user
            return list(self.repl.peer_up(peer, user, now_ns))
        if kind == "peer_down":
            self.peers.pop(peer, None)
            self.repl.peer_down(peer)
            out: list[Out] = []
            for pub in self.table.remove_node(peer):
                out += self._events(self.topology.changed(pub, False))
            return out
        if kind == "names":
            if peer not in self.peers:
                self.peers[peer] = user
            changes, sends = self.repl.frame(peer, user, data, now_ns)
            out = []
            for change in changes:
                out += self._apply(change)
            return out + list(sends)
        return []

    def _add_remote(self, pub: Publication) -> bool:
        try:
            return self.table.add(pub)
        except LimitExceeded:  # a full table drops what does not fit, counted
            self.dropped += 1
            return False

    def _apply(self, change: Change) -> list[Out]:
        events: list[TopologyEvent] = []
        if isinstance(change, Replace):
            held = {p.key: p for p in self.table.of_node(change.origin)}
            new = {p.key: p for p in change.pubs}
            for key, pub in held.items():
                if new.get(key) != pub:
                    self.table.remove(pub.node, key)
                    events += self.topology.changed(pub, False)
            for key, pub in new.items():
                if held.get(key) != pub and self._add_remote(pub):
                    events += self.topology.changed(pub, True)
        elif isinstance(change, Delta):
            for key in change.removed:
                gone = self.table.remove(change.origin, key)
                if gone is not None:
                    events += self.topology.changed(gone, False)
            for pub in change.added:
                if self._add_remote(pub):
                    events += self.topology.changed(pub, True)
        return self._events(events)

    # ------------------------------------------------------------------ show

    def name_rows(self) -> list[dict[str, object]]:
        return self.table.rows()

    def topology_rows(self) -> list[dict[str, object]]:
        return self.topology.rows()


_VERBS = {
    "BIND": NameService._bind,
    "UNBIND": NameService._unbind,
    "LOOKUP": NameService._lookup,
    "INQUIRE": NameService._inquire,
    "SUBSCRIBE": NameService._subscribe,
    "UNSUBSCRIBE": NameService._unsubscribe,
}
