"""The sbus protocol, sans-IO (seed 001 "Protocol", "Secret messages", "Flood control").

One packet is one message (SOCK_SEQPACKET); four grammars, checked to the letter:

    SUB     ^SUB \\([^\\x00]*\\)\\(\\x00.*\\)\\?$          pattern, the rest ignored
    UNSUB   ^UNSUB \\([^\\x00]*\\)\\(\\x00.*\\)\\?$        pattern, the rest ignored
    MSG     ^MSG \\([^\\x00]*\\)\\x00\\(.*\\)$             routing key, payload
    CMSG    ^CMSG \\([^\\x00]*\\)\\(\\x00\\(.*\\)\\)$       key, payload (the \\x00 may be
                                                omitted by a client: payload None)

`parse(packet)` returns one event or raises `SbusProtocolError`; `encode_msg` /
`encode_cmsg` build the server's packets. A MSG is forwarded as the very packet the
publisher sent (seed: "send a copy of packet").

Secret keys (`!/cred/GID/UID/PID/rest`): `cred_pattern` fills a subscription's empty
fields with the client's credentials and refuses other credentials, '*' and truncated
keys; `key_creds` reads the fields of a published key. The server compares the fields as
numbers ("0100" is 100).

Mapping into the Rai MS network (decisions). A routing key `a/b/c` is the bus subject
`a.b.c` (then `<service>.a.b.c` inside the node), so NATS and Redis clients of the same
service see sbus traffic and the reverse. The map is one-to-one on the keys it covers:
`subject_of` refuses a key that is empty, contains '.', has an empty segment
(`a//b`, `/a`, `a/`) or a segment that is exactly '!' (the reserved token, so every
`!/cred/` key); `key_of` refuses the reverse cases (a subject with '/', an empty token
or a '!' token). Refused keys travel between the clients of one sbus only: secret keys
never leave their host, and no NATS or Redis client can forge one.

A pattern is bridged by `network_sub`: the empty pattern is RV `>`; otherwise each
segment maps to its literal token, or to RV `*` when it holds '*' (sbus `ab*` is a
partial segment RV cannot say, `*` covers it) or is exactly '>' (a literal '>' that RV
would read as a wildcard); a trailing '/' adds `>`. The result covers every mappable key
the pattern matches and maybe more, so the server filters each delivery with the sbus
pattern itself. A pattern that can only match unmappable keys (one holding '.', an empty
or '!' segment) has no network subscription.

Flood control: `Outbox` is one client's queue of packets the socket would not take, with
the seed's modes (module `Outbox` docstring).
"""

from __future__ import annotations

import heapq
import re
from collections import deque
from dataclasses import dataclass
from typing import Final, Literal, NamedTuple

from raims_node.bridges.errors import BridgeError

VERB_SUB: Final = b"SUB "
VERB_UNSUB: Final = b"UNSUB "
VERB_MSG: Final = b"MSG "
VERB_CMSG: Final = b"CMSG "
NUL: Final = b"\x00"

CRED_PREFIX: Final = b"!/cred/"
WHOAMI: Final = b"!/cred/whoami"
# ids are 32-bit: at most 10 digits (a longer field is malformed, never a huge int())
_CRED_RX: Final = re.compile(rb"!/cred/([0-9]{0,10})/([0-9]{0,10})/([0-9]{0,10})/(.*)", re.DOTALL)


class SbusProtocolError(BridgeError):
    """A packet that matches none of the four grammars."""


@dataclass(frozen=True, slots=True)
class Sub:
    pattern: bytes


@dataclass(frozen=True, slots=True)
class Unsub:
    pattern: bytes


@dataclass(frozen=True, slots=True)
class Msg:
    key: bytes
    payload: bytes


@dataclass(frozen=True, slots=True)
class Cmsg:
    key: bytes
    payload: bytes | None  # None: the client omitted the \x00


Event = Sub | Unsub | Msg | Cmsg


def _head(packet: bytes, skip: int) -> bytes:
    """The text after the verb up to the first NUL (or the end)."""
    nul = packet.find(NUL, skip)
    return packet[skip:] if nul < 0 else packet[skip:nul]


def parse(packet: bytes) -> Event:
    """The event of one packet; SbusProtocolError when no grammar matches."""
    if packet.startswith(VERB_MSG):
        nul = packet.find(NUL, 4)
        if nul < 0:
            raise SbusProtocolError("MSG packet without the NUL that ends its routing key")
        return Msg(packet[4:nul], packet[nul + 1:])
    if packet.startswith(VERB_SUB):
        return Sub(_head(packet, 4))
    if packet.startswith(VERB_UNSUB):
        return Unsub(_head(packet, 6))
    if packet.startswith(VERB_CMSG):
        nul = packet.find(NUL, 5)
        if nul < 0:
            return Cmsg(packet[5:], None)
        return Cmsg(packet[5:nul], packet[nul + 1:])
    raise SbusProtocolError(f"packet {packet[:16]!r} is not SUB, UNSUB, MSG or CMSG")


def encode_msg(key: bytes, payload: bytes) -> bytes:
    return b"".join((VERB_MSG, key, NUL, payload))


def encode_cmsg(key: bytes, payload: bytes = b"") -> bytes:
    return b"".join((VERB_CMSG, key, NUL, payload))


def encode_sub(pattern: bytes) -> bytes:
    return VERB_SUB + pattern


def encode_unsub(pattern: bytes) -> bytes:
    return VERB_UNSUB + pattern


# ---------------------------------------------------------------- credentials


class Creds(NamedTuple):
    """A client's credentials, in the order of the seed's keys."""

    gid: int
    uid: int
    pid: int

    def key(self) -> bytes:
        """The `!/cred/whoami` answer."""
        return b"!/cred/%d/%d/%d" % (self.gid, self.uid, self.pid)


class CredRefused(BridgeError):
    """A `!/cred/` subscription the client's credentials do not allow."""


def cred_pattern(pattern: bytes, creds: Creds) -> bytes:
    """`pattern` (starting with `!/cred/`) with its empty fields filled from `creds`;
    CredRefused for other credentials, '*' in a field or a truncated key."""
    m = _CRED_RX.fullmatch(pattern)
    if m is None:
        raise CredRefused(f"{pattern[:64]!r} is not !/cred/GID/UID/PID/... with numeric or empty fields")
    fields = []
    for text, own in zip(m.groups()[:3], creds, strict=True):
        if text and int(text) != own:
            raise CredRefused(f"{pattern[:64]!r} names credentials other than the client's {creds.key()!r}")
        fields.append(b"%d" % own)
    return b"!/cred/" + b"/".join(fields) + b"/" + m.group(4)


def is_cred_key(key: bytes) -> bool:
    """`key` has the form of a secret key (fields numeric or empty)."""
    return _CRED_RX.fullmatch(key) is not None


def key_creds(key: bytes) -> Creds | None:
    """The credentials a published `!/cred/` key is for; None when malformed or a field
    is empty (such a key reaches nobody)."""
    m = _CRED_RX.fullmatch(key)
    if m is None or not all(m.groups()[:3]):
        return None
    return Creds(int(m.group(1)), int(m.group(2)), int(m.group(3)))


# ---------------------------------------------------------------- keys <-> bus subjects

_CODEC: Final = "utf-8"
_ERRORS: Final = "surrogateescape"


def subject_of(key: bytes) -> str | None:
    """The bus subject of routing key `key`; None when it stays on the sbus."""
    if not key or b"." in key:
        return None
    for seg in key.split(b"/"):
        if not seg or seg == b"!":
            return None
    return key.replace(b"/", b".").decode(_CODEC, _ERRORS)


def key_of(subject: str) -> bytes | None:
    """The routing key of bus subject `subject`; None when sbus clients cannot see it."""
    if not subject or "/" in subject:
        return None
    for tok in subject.split("."):
        if not tok or tok == "!":
            return None
    return subject.replace(".", "/").encode(_CODEC, _ERRORS)


class NetSub(NamedTuple):
    """A bus subscription: a literal subject, or an RV pattern when `wild`."""

    text: str
    wild: bool


def network_sub(pattern: bytes) -> NetSub | None:
    """The bus subscription covering the mappable keys `pattern` matches (module
    docstring); None when it can match none."""
    if not pattern:
        return NetSub(">", True)
    if b"." in pattern:
        return None
    trailing = pattern.endswith(b"/")
    body = pattern[:-1] if trailing else pattern
    tokens: list[bytes] = []
    wild = trailing
    for seg in body.split(b"/"):
        if not seg or seg == b"!":
            return None
        if b"*" in seg or seg == b">":
            tokens.append(b"*")
            wild = True
        else:
            tokens.append(seg)
    if trailing:
        tokens.append(b">")
    return NetSub(b".".join(tokens).decode(_CODEC, _ERRORS), wild)


# ---------------------------------------------------------------- raims conventions

SHARD_HEAD: Final = b"_SHARD/"
_SHARD_RX: Final = re.compile(rb"_SHARD/(\d{1,5})/(\d{1,5})/", re.DOTALL)


def shard_split(pattern: bytes) -> tuple[int, int, bytes] | None:
    """(i, n, rest) of a shardcast pattern `_SHARD/<i>/<n>/<rest>`; None for any other
    pattern (the shard's range is the caller's to check)."""
    if not pattern.startswith(SHARD_HEAD):
        return None
    m = _SHARD_RX.match(pattern)
    if m is None:
        return None
    return int(m.group(1)), int(m.group(2)), pattern[m.end():]


def ack_request(payload: bytes | None) -> tuple[bytes, bytes, bytes] | None:
    """(inbox key, routing key, message) of a `CMSG raims/ack` or `raims/trace` payload
    `INBOX\x00KEY\x00MESSAGE`; None when it has not that form."""
    parts = (payload or b"").split(NUL, 2)
    if len(parts) != 3 or not parts[0] or not parts[1]:
        return None
    return parts[0], parts[1], parts[2]


# ---------------------------------------------------------------- flood control

Soft = Literal["queue", "discard", "block", "error"]
Hard = Literal["discard", "block", "error"]
Order = Literal["queue", "stack", "random"]
Verdict = Literal["queued", "discarded", "error"]

FLOOD_KEYS: Final[dict[bytes, tuple[str, str]]] = {
    b"blocking/soft/queue": ("soft", "queue"),
    b"blocking/soft/discard": ("soft", "discard"),
    b"blocking/soft/block": ("soft", "block"),
    b"blocking/soft/error": ("soft", "error"),
    b"blocking/hard/discard": ("hard", "discard"),
    b"blocking/hard/block": ("hard", "block"),
    b"blocking/hard/error": ("hard", "error"),
    b"order/queue": ("order", "queue"),
    b"order/stack": ("order", "stack"),
    b"order/random": ("order", "random"),
}

DEFAULT_MAX_BYTES: Final = 8 * 1024 * 1024
DEFAULT_MAX_PACKETS: Final = 10_000
BLOCK_CAP_BYTES: Final = 64 * 1024 * 1024  # hard/block: past this the client is cut (flow.HARD_LIMIT)


class Outbox:
    """The packets of one client that its socket would not take without blocking.

    The server sends a packet straight to the socket when the outbox is empty; it
    `offer`s it here when the socket refuses it (EAGAIN) or the outbox already holds
    packets (so that order holds). Modes, most recent control message wins (decisions
    where the seed leaves room):

    - soft (a packet cannot be sent now): `queue` (default) keeps it; `discard` drops
      it; `block` keeps it and `holding` turns True while anything is queued (the
      server stops reading its publishers); `error` closes the client as misbehaving.
    - hard (the queue is over `max_bytes` or `max_packets`, default 8 MiB / 10,000):
      `discard` drops new packets; `error` closes the client; `block` (default) keeps
      queueing with `holding` True. Publishers that cannot be held (links to other
      nodes, which are never paused; local ones once the daemon's congestion deadline
      passed) still queue, up to `block_cap` bytes (default 64 MiB, the NATS bridge's
      hard limit): past it the client is closed as a slow consumer, so memory stays
      bounded. (Cutting at the packet limit instead would lose a stream that crosses
      the network whenever its reader lags by a few thousand messages.)
    - order of what is queued: `queue` oldest first (default); `stack` newest first;
      `random` "frees memory as fast as possible": the largest packet first (ties
      oldest first).
    """

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES, max_packets: int = DEFAULT_MAX_PACKETS,
                 block_cap: int = BLOCK_CAP_BYTES) -> None:
        self.max_bytes = max_bytes
        self.block_cap = max(block_cap, max_bytes)
        self.max_packets = max_packets
        self.soft: Soft = "queue"
        self.hard: Hard = "block"
        self.order: Order = "queue"
        self.bytes = 0
        self.discarded = 0
        self._fifo: deque[bytes] = deque()  # queue and stack orders
        self._heap: list[tuple[int, int, bytes]] = []  # random order: (-size, seq, packet)
        self._seq = 0
        self._answers: deque[bytes] = deque()
        self._answered = False  # pop returned an answer
        self._batch_answers = 0  # answers among the last pop_batch (its tail)

    def __len__(self) -> int:
        return len(self._fifo) + len(self._heap) + len(self._answers)

    @property
    def packets(self) -> int:
        """Queued data packets (the server's answers not counted)."""
        return len(self._fifo) + len(self._heap)

    def control(self, key: bytes) -> bool:
        """Apply a flood-control CMSG key; False when `key` is not one."""
        mode = FLOOD_KEYS.get(key)
        if mode is None:
            return False
        what, value = mode
        if what == "order" and value != self.order:
            self._reorder(value)  # type: ignore[arg-type]
        setattr(self, what, value)
        return True

    @property
    def holding(self) -> bool:
        """The server should hold its publishers (block modes)."""
        if not self.packets:
            return False
        return self.soft == "block" or (self.hard == "block" and self._over(0))

    def _over(self, extra: int) -> bool:
        n = self.packets + (1 if extra else 0)
        return self.bytes + extra > self.max_bytes or n > self.max_packets

    def offer(self, packet: bytes) -> Verdict:
        """A packet the socket cannot take now."""
        soft = self.soft
        if soft == "discard":
            self.discarded += 1
            return "discarded"
        if soft == "error":
            return "error"
        size = len(packet)
        if self._over(size):
            hard = self.hard
            if hard == "discard":
                self.discarded += 1
                return "discarded"
            if hard == "error" or self.bytes + size > self.block_cap:
                return "error"
        self._push(packet)
        return "queued"

    def offer_all(self, packets: list[bytes]) -> Verdict:
        """`offer` each of `packets` in order; "error" as soon as one is refused so
        (the rest are not offered), else "queued" when any was kept."""
        verdict: Verdict = "discarded"
        for packet in packets:
            v = self.offer(packet)
            if v == "error":
                return v
            if v == "queued":
                verdict = v
        return verdict

    def force(self, packet: bytes) -> None:
        """Queue one of the server's answers to the client's own control messages
        (ping, whoami): whatever the modes, it is kept, and sent once the packets
        queued before it are (in any order), so that a ping answered means they were."""
        self._answers.append(packet)

    def _push(self, packet: bytes) -> None:
        self.bytes += len(packet)
        if self.order == "random":
            self._seq += 1
            heapq.heappush(self._heap, (-len(packet), self._seq, packet))
        else:
            self._fifo.append(packet)

    def pop(self) -> bytes | None:
        """The next packet to send in the current order; None when empty."""
        self._answered = False
        if self._heap:
            packet = heapq.heappop(self._heap)[2]
        elif self._fifo:
            packet = self._fifo.pop() if self.order == "stack" else self._fifo.popleft()
        elif self._answers:
            self._answered = True
            return self._answers.popleft()
        else:
            return None
        self.bytes -= len(packet)
        return packet

    def pop_batch(self, k: int) -> list[bytes]:
        """Up to `k` packets, as `pop` would return them one by one; what the socket does
        not take goes back with `unpop_batch`."""
        fifo = self._fifo
        if not self._heap and self.order == "queue" and len(fifo) >= k:  # the usual case, at once
            out = [fifo.popleft() for _ in range(k)]
            self.bytes -= sum(map(len, out))
            self._batch_answers = 0
            return out
        out = []
        answers = 0
        while len(out) < k:
            packet = self.pop()
            if packet is None:
                break
            answers += self._answered
            out.append(packet)
        self._batch_answers = answers
        return out

    def unpop_batch(self, rest: list[bytes]) -> None:
        """Put back the tail `rest` of the last `pop_batch` (in its order)."""
        answers = min(self._batch_answers, len(rest))
        cut = len(rest) - answers
        for packet in reversed(rest[cut:]):
            self._answers.appendleft(packet)
        self._answered = False
        for packet in reversed(rest[:cut]):
            self.unpop(packet)

    def unpop(self, packet: bytes) -> None:
        """Put back the packet `pop` returned (the socket refused it)."""
        if self._answered:
            self._answers.appendleft(packet)
            return
        self.bytes += len(packet)
        if self.order == "random":
            self._seq += 1
            heapq.heappush(self._heap, (-len(packet), -self._seq, packet))
        elif self.order == "stack":
            self._fifo.append(packet)
        else:
            self._fifo.appendleft(packet)

    def _reorder(self, order: Order) -> None:
        """Move the queued packets into the structure of `order`, oldest first."""
        if order == "random":
            items = list(self._fifo)
            self._fifo.clear()
            for packet in items:
                self._seq += 1
                heapq.heappush(self._heap, (-len(packet), self._seq, packet))
        elif self._heap:
            items = [p for _, _, p in sorted(self._heap, key=lambda e: abs(e[1]))]
            self._heap.clear()
            self._fifo.extend(items)
