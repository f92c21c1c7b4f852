"""Flood batching: the `_Z/_S/_P` floods bound for one neighbour, held briefly and sent
together in one `_Z.BAT` frame (issue 24, "convergence that scales").

A network that starts or heals floods a burst of link-state updates (`_Z.ADJ`,
`_Z.ADD`, `_Z.BLM`, ...), and each flood crosses every link; sent one frame per update,
the frames of a convergence grow with the number of nodes times the updates. Here:

- A flood for a connection whose last batch went out at least `HOLD_NS` ago is sent at
  once, alone and unchanged (an isolated update is not delayed and looks as before).
- Floods arriving within `HOLD_NS` of that wait, and leave together when the hold
  ends: one `_Z.BAT` frame signed by this node, whose `data` fields are the original
  frames, each still signed by its origin. So a connection carries at most one batch
  per `HOLD_NS`, however many updates cross it.
- While a flood waits for a neighbour, a copy of it arriving *from* that neighbour
  removes it from the wait: the neighbour already has it (re-flood suppression).
- The receiver handles every inner frame as if it had arrived alone on that link
  (origin MAC, duplicate check by origin and seqno, flooding on), so the link-state
  semantics of the manual are unchanged; only the framing between neighbours differs.
  An inner frame already seen is dropped by its (origin, digest) before any MAC work.

- A link that becomes active gets the floods this node handled since the connection
  opened: they crossed the network while its handshake ran, when no flood could use it,
  and a node whose other links were not up yet would otherwise have been their dead end
  (a lost `_Z.ADJ` leaves every node behind it waiting for a resync). Floods are kept
  only while some connection is not yet authenticated.

- Our own updates are batched the same way at their origin: the first after a quiet
  `OWN_HOLD_NS` leaves at once, unchanged; those that follow within the hold leave
  together in one `_Z.BAT` signed by us that carries a `seqno` of our flood sequence
  (an origin batch). It floods as one update (one duplicate check, one MAC, one copy
  per link), and each receiver applies its inner updates in order, as if each had come
  alone: a node starting up with four links announces them, the peers behind them and
  its filter in one flood instead of nine. A `_Z.BAT` without `seqno` is the
  neighbour's hop batch above; one with it never nests another.

A batch holds at most MAX_BATCH_BYTES (32 KB, some 300 subscription announcements):
a receiver handles a batch's updates in one go, and a batch of 1 MB (a burst of
100,000 subscriptions) held its loop, every client and link of it, 100-200 ms.

A data frame never overtakes a flood held here (`NodeState.floods_first`): before this
node sends or relays one, everything held goes out, so a subscription made before a
publish reaches every node on the publish's path before the publish does (a client that
subscribes, then tells a publisher elsewhere it is ready, or subscribes its reply
subject, then sends a request, gets what follows; nats-server's routes keep that order
too). Holds then last until the next data frame at most.

The driver learns when held floods are due from `Node.next_wake_ns()` and calls
`Node.tick(now)` then (the simulator does; the daemon's 50 ms tick and every received
frame also flush what is due).
"""

from __future__ import annotations

from collections import OrderedDict, deque

MS = 1_000_000
HOLD_NS = 5 * MS  # at most one batch per connection per hold
OWN_HOLD_NS = 10 * MS  # at most one batch of our own updates per hold
MAX_BATCH_BYTES = 32 << 10  # a larger burst goes out in several batches (see below)
SEEN_LIMIT = 65536
RECENT_NS = 1_000 * MS  # floods kept for links that come up (at most RECENT_LIMIT)
RECENT_LIMIT = 4096

Z_BAT = "_Z.BAT"

FloodKey = bytes  # origin bridge + digest of a flood frame


def flood_key(bridge: bytes, digest: bytes) -> FloodKey:
    return bridge + digest


class FloodBatcher:
    """Floods held per connection, and the keys of floods already handled."""

    def __init__(self, hold_ns: int = HOLD_NS, own_hold_ns: int = OWN_HOLD_NS) -> None:
        self.hold_ns = hold_ns
        self.own_hold_ns = own_hold_ns
        self._own: list[bytes] = []
        self._own_due = 0
        self._own_last = -own_hold_ns
        self._held: dict[int, dict[FloodKey, bytes]] = {}
        self._due: dict[int, int] = {}
        self._last: dict[int, int] = {}
        self._seen: OrderedDict[FloodKey, None] = OrderedDict()
        self._recent: deque[tuple[int, FloodKey, bytes]] = deque()
        self.suppressed = 0  # floods a neighbour sent us while we held them for it
        self.batches = 0

    def hold(self, conn_id: int, key: FloodKey, data: bytes, now_ns: int) -> None:
        held = self._held.get(conn_id)
        if held is None:
            held = self._held[conn_id] = {}
            self._due[conn_id] = max(now_ns, self._last.get(conn_id, now_ns - self.hold_ns) + self.hold_ns)
        held[key] = data

    def hold_own(self, data: bytes, now_ns: int) -> None:
        """One of our own updates, signed, for the next origin batch."""
        if not self._own:
            self._own_due = max(now_ns, self._own_last + self.own_hold_ns)
        self._own.append(data)

    @property
    def holding(self) -> bool:
        """Whether any flood waits (ours or one for a neighbour)."""
        return bool(self._own or self._due)

    def own_due(self, now_ns: int, force: bool = False) -> list[bytes]:
        """Our updates whose hold ended (all of them when `force`), oldest first; forgets them."""
        if not self._own or self._own_due > now_ns and not force:
            return []
        out, self._own = self._own, []
        self._own_last = now_ns
        return out

    def has_from(self, conn_id: int, key: FloodKey) -> None:
        """Neighbour `conn_id` sent us this flood: it needs no copy from us."""
        held = self._held.get(conn_id)
        if held is not None and held.pop(key, None) is not None:
            self.suppressed += 1

    def due(self, now_ns: int, force: bool = False) -> list[tuple[int, list[bytes]]]:
        """The held floods whose hold has ended (all when `force`), per connection, oldest
        first; forgets them."""
        out = []
        for conn_id, at in list(self._due.items()):
            if at <= now_ns or force:
                del self._due[conn_id]
                held = self._held.pop(conn_id)
                if held:
                    self._last[conn_id] = now_ns
                    out.append((conn_id, list(held.values())))
        return out

    def next_due_ns(self) -> int | None:
        due = min(self._due.values()) if self._due else None
        if self._own and (due is None or self._own_due < due):
            return self._own_due
        return due

    def drop_conn(self, conn_id: int) -> None:
        self._held.pop(conn_id, None)
        self._due.pop(conn_id, None)
        self._last.pop(conn_id, None)

    def log(self, key: FloodKey, data: bytes, now_ns: int) -> None:
        """A flood handled now (ours or a new one received), for links coming up."""
        recent = self._recent
        recent.append((now_ns, key, data))
        while recent and (len(recent) > RECENT_LIMIT or recent[0][0] < now_ns - RECENT_NS):
            recent.popleft()

    def clear_log(self) -> None:
        self._recent.clear()

    def since(self, t_ns: int) -> list[tuple[FloodKey, bytes]]:
        """The floods handled at or after `t_ns` (kept for RECENT_NS), oldest first."""
        return [(key, data) for at, key, data in self._recent if at >= t_ns]

    def seen(self, key: FloodKey) -> bool:
        return key in self._seen

    def remember(self, key: FloodKey) -> None:
        self._seen[key] = None
        if len(self._seen) > SEEN_LIMIT:
            self._seen.popitem(last=False)


def split_batches(frames: list[bytes], limit: int = MAX_BATCH_BYTES) -> list[list[bytes]]:
    """`frames` in groups of at most `limit` bytes (a frame larger than that alone)."""
    groups: list[list[bytes]] = []
    size = limit
    for f in frames:
        if size + len(f) > limit:
            groups.append([])
            size = 0
        groups[-1].append(f)
        size += len(f)
    return groups
