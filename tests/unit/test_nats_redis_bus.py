"""An in-memory single-node Bus, and the tests that need both protocols on one bus.

`MemoryBus` is a real delivery table (literal subjects, NATS `*`/`>` patterns, Redis
globs via fnmatch, queue groups served round robin, echo suppression, shard channels),
written independently of raims_node.bridges so that it can catch the sessions' bugs.
The NATS and Redis session tests import it from here.
"""

from __future__ import annotations

import fnmatch
import random
from collections import defaultdict
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from raims_node.bridges import SHARD_PREFIX, ClientHandle, NatsConfig, NatsSession, RedisSession


@dataclass
class Entry:
    client: ClientHandle
    sid: str
    subject: str
    syntax: str | None  # None: literal subject
    queue: str | None

    def matches(self, subject: str) -> bool:
        if self.syntax is None:
            return subject == self.subject
        if subject.startswith(SHARD_PREFIX):
            return False  # shard channels are never matched by patterns
        if self.syntax == "glob":
            return fnmatch.fnmatchcase(subject, self.subject)
        want, got = self.subject.split("."), subject.split(".")
        if want[-1] == ">":
            return len(got) >= len(want) and all(w in ("*", g) for w, g in zip(want[:-1], got, strict=False))
        return len(want) == len(got) and all(w in ("*", g) for w, g in zip(want, got, strict=True))


class MemoryBus:
    def __init__(self) -> None:
        self.entries: dict[tuple[int, str], Entry] = {}
        self.published: list[tuple[str, str | None, bytes | None, bytes]] = []
        self._turn: defaultdict[str, int] = defaultdict(int)

    def subscribe(self, client: ClientHandle, sid: str, subject: str, queue: str | None = None) -> None:
        key = (client.client_id, sid)
        assert key not in self.entries, f"sid {sid!r} subscribed twice"
        self.entries[key] = Entry(client, sid, subject, None, queue)

    def psubscribe(self, client: ClientHandle, sid: str, pattern: str, syntax: str,
                   queue: str | None = None) -> None:
        key = (client.client_id, sid)
        assert key not in self.entries, f"sid {sid!r} subscribed twice"
        assert syntax in ("rv", "glob")
        self.entries[key] = Entry(client, sid, pattern, syntax, queue)

    def unsubscribe(self, client: ClientHandle, sid: str) -> None:
        del self.entries[(client.client_id, sid)]

    def unsubscribe_all(self, client: ClientHandle) -> None:
        for key in [k for k in self.entries if k[0] == client.client_id]:
            del self.entries[key]

    def drop_client(self, client: ClientHandle) -> None:
        self.unsubscribe_all(client)

    def publish(self, client: ClientHandle | None, subject: str, reply: str | None,
                headers: bytes | None, payload: bytes) -> int:
        self.published.append((subject, reply, headers, payload))
        matched = [e for e in list(self.entries.values()) if e.matches(subject)
                   and not (client is not None and e.client is client and not client.echo)]
        groups: defaultdict[str, list[Entry]] = defaultdict(list)
        receivers = [e for e in matched if e.queue is None]
        for e in matched:
            if e.queue is not None:
                groups[e.queue].append(e)
        for queue, members in groups.items():
            turn = self._turn[queue]
            self._turn[queue] += 1
            receivers.append(members[turn % len(members)])
        for e in receivers:
            e.client.deliver(e.sid, subject, reply, headers, payload)
        return len(receivers)

    def publish_run(self, client: ClientHandle, subject: str, payloads: list[bytes]) -> int:
        return sum(self.publish(client, subject, None, None, payload) for payload in payloads)

    def has_interest(self, subject: str, no_echo: ClientHandle | None = None) -> bool:
        return any(e.matches(subject) and e.client is not no_echo for e in self.entries.values())

    def _literal(self, shard: bool) -> list[str]:
        names = [e.subject for e in self.entries.values() if e.syntax is None]
        if shard:
            return [n[len(SHARD_PREFIX):] for n in names if n.startswith(SHARD_PREFIX)]
        return [n for n in names if not n.startswith(SHARD_PREFIX)]

    def channels(self, pattern: str | None, shard: bool = False) -> list[str]:
        return sorted({n for n in self._literal(shard) if pattern is None or fnmatch.fnmatchcase(n, pattern)})

    def numsub(self, channels: list[str], shard: bool = False) -> list[int]:
        names = self._literal(shard)
        return [names.count(c) for c in channels]

    def numpat(self) -> int:
        return len({e.subject for e in self.entries.values() if e.syntax is not None})


def nats(bus: MemoryBus, client_id: int, **config: object) -> NatsSession:
    """A NATS session past its handshake (CONNECT verbose false, headers on)."""
    s = NatsSession(bus, client_id, NatsConfig(server_id="TEST", **config))  # type: ignore[arg-type]
    s.data_received(b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true}\r\n')
    s.pending_output()
    return s


def redis(bus: MemoryBus, client_id: int, resp: int = 2) -> RedisSession:
    s = RedisSession(bus, client_id)
    if resp == 3:
        s.data_received(b"HELLO 3\r\n")
        s.pending_output()
    return s


# ---------------------------------------------------------------- cross protocol

def test_nats_and_redis_share_the_namespace() -> None:
    bus = MemoryBus()
    n = nats(bus, 1)
    r = redis(bus, 2)
    n.data_received(b"SUB orders.* 7\r\n")
    r.data_received(b"*2\r\n$9\r\nSUBSCRIBE\r\n$8\r\norders.1\r\n")
    assert r.pending_output() == b"*3\r\n$9\r\nsubscribe\r\n$8\r\norders.1\r\n:1\r\n"
    n.data_received(b"PUB orders.1 2\r\nhi\r\n")
    assert n.pending_output() == b"MSG orders.1 7 2\r\nhi\r\n"
    assert r.pending_output() == b"*3\r\n$7\r\nmessage\r\n$8\r\norders.1\r\n$2\r\nhi\r\n"
    publisher = redis(bus, 3)
    publisher.data_received(b"*3\r\n$7\r\nPUBLISH\r\n$8\r\norders.2\r\n$3\r\nyou\r\n")
    assert publisher.pending_output() == b":1\r\n"
    assert n.pending_output() == b"MSG orders.2 7 3\r\nyou\r\n"


def test_headers_are_dropped_for_redis_and_kept_for_nats() -> None:
    bus = MemoryBus()
    a, b = nats(bus, 1), nats(bus, 2)
    r = redis(bus, 3, resp=3)
    b.data_received(b"SUB h 1\r\n")
    r.data_received(b"SUBSCRIBE h\r\n")
    r.pending_output()
    hdr = b"NATS/1.0\r\nk: v\r\n\r\n"
    a.data_received(b"HPUB h %d %d\r\n%sxy\r\n" % (len(hdr), len(hdr) + 2, hdr))
    assert b.pending_output() == b"HMSG h 1 %d %d\r\n%sxy\r\n" % (len(hdr), len(hdr) + 2, hdr)
    assert r.pending_output() == b">3\r\n$7\r\nmessage\r\n$1\r\nh\r\n$2\r\nxy\r\n"


# ---------------------------------------------------------------- fuzz: isolation

NATS_FIXTURES = [
    b'CONNECT {"verbose":true,"headers":true}\r\n', b"PING\r\n", b"PONG\r\n",
    b"SUB a.b 1\r\n", b"SUB a.* q 2\r\n", b"SUB > 3\r\n", b"UNSUB 1 2\r\n", b"UNSUB 2\r\n",
    b"PUB a.b 5\r\nhello\r\n", b"PUB a.b r.1 0\r\n\r\n",
    b"HPUB a.c 12 14\r\nNATS/1.0\r\n\r\nhi\r\n",
]
REDIS_FIXTURES = [
    b"*2\r\n$9\r\nSUBSCRIBE\r\n$1\r\na\r\n", b"*2\r\n$10\r\nPSUBSCRIBE\r\n$2\r\na*\r\n",
    b"*3\r\n$7\r\nPUBLISH\r\n$1\r\na\r\n$2\r\nhi\r\n", b"PING\r\n", b"HELLO 3\r\n",
    b"*1\r\n$11\r\nUNSUBSCRIBE\r\n", b"SSUBSCRIBE s\r\n", b"PUBSUB NUMSUB a b\r\n",
    b"CLIENT SETNAME x\r\n", b"GET k\r\n", b"RESET\r\n", b'ECHO "a\\x41"\r\n',
]


def _mutate(rnd: random.Random, chunks: list[bytes]) -> bytes:
    data = bytearray(b"".join(chunks))
    for _ in range(rnd.randint(0, 6)):
        op = rnd.randrange(4)
        i = rnd.randrange(len(data) + 1)
        if op == 0 and data:
            del data[min(i, len(data) - 1)]
        elif op == 1:
            data[i:i] = bytes([rnd.randrange(256)])
        elif op == 2 and data:
            data[min(i, len(data) - 1)] = rnd.choice(b"\r\n *$0123456789-:\"'\\")
        else:
            data[i:i] = rnd.choice(chunks)
    return bytes(data)


def _observer_still_served(bus: MemoryBus, subject: str) -> None:
    """A NATS and a Redis client on the bus, untouched by the fuzzed one, still work."""
    watcher = nats(bus, 100)
    rwatcher = redis(bus, 101)
    watcher.data_received(b"SUB %s 9\r\n" % subject.encode())
    rwatcher.data_received(b"SUBSCRIBE %s\r\n" % subject.encode())
    rwatcher.pending_output()
    publisher = nats(bus, 102)
    publisher.data_received(b"PUB %s 2\r\nok\r\n" % subject.encode())
    assert watcher.pending_output() == b"MSG %s 9 2\r\nok\r\n" % subject.encode()
    assert rwatcher.pending_output().endswith(b"$2\r\nok\r\n")
    assert not watcher.closing and not rwatcher.closing


@settings(max_examples=400, deadline=None)
@given(seed=st.integers(0, 2**32), split=st.integers(1, 64), redis_side=st.booleans())
def test_mutated_input_never_escapes_nor_disturbs_others(seed: int, split: int, redis_side: bool) -> None:
    rnd = random.Random(seed)
    bus = MemoryBus()
    fixtures = REDIS_FIXTURES if redis_side else NATS_FIXTURES
    data = _mutate(rnd, [rnd.choice(fixtures) for _ in range(rnd.randint(1, 8))])
    victim: NatsSession | RedisSession = redis(bus, 1) if redis_side else NatsSession(
        bus, 1, NatsConfig(server_id="TEST"))
    for i in range(0, len(data), split):
        victim.data_received(data[i:i + split])
        victim.pending_output()
    if victim.closing:
        victim.connection_lost()
        assert not any(k[0] == 1 for k in bus.entries)  # a closed session leaves nothing behind
    _observer_still_served(bus, "private.watch")
