"""Shardcast, ack and trace for Redis and sbus clients (issue 28), on the manual's A-D
graph as processes, with redis-py, raw sbus sockets and raw NATS sockets.

Conventions under test (bridges/router_bus.py, bridges/ipc.py): Redis `PSUBSCRIBE
_SHARD.<i>.<n>.<glob>` and sbus `SUB _SHARD/<i>/<n>/<pattern>` take shard i of n, as NATS
`SUB <pattern> _SHARD.<i>.<n>` does, and the three split one service's subjects alike;
Redis `PUBLISH channel message _ACK.<inbox>` (or `_TRACE.`) and sbus `CMSG raims/ack`
(or `raims/trace`) with payload `INBOX\\0KEY\\0MESSAGE` bring the network's answers back
on the inbox.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable

import pytest
import redis

from tests.integration.test_ipc_bus import TIMEOUT, Raw
from tests.integration.test_ipc_bus import graph as graph  # noqa: PLC0414 (the module's fixture, shared)

COUNT = 300
Graph = dict[str, dict[str, object]]


class Receiver:
    """A subscriber that can be polled without blocking for the subjects it received."""

    def poll(self) -> list[str]:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class SbusReceiver(Receiver):
    def __init__(self, g: Graph, node: str, pattern: bytes) -> None:
        self.c = Raw(str(g[node]["path"]))
        self.c.sub(pattern)
        self.c.sync()
        self.c.s.setblocking(False)

    def poll(self) -> list[str]:
        out = []
        while True:
            try:
                packet = self.c.s.recv(1 << 16)
            except BlockingIOError:
                return out
            assert packet.startswith(b"MSG "), packet
            out.append(packet[4:packet.index(b"\x00")].decode().replace("/", "."))

    def close(self) -> None:
        self.c.close()


class RedisReceiver(Receiver):
    def __init__(self, g: Graph, node: str, pattern: str) -> None:
        self.r = redis.Redis(port=int(str(g[node]["redis"])), socket_timeout=TIMEOUT)
        self.p = self.r.pubsub(ignore_subscribe_messages=True)
        self.p.psubscribe(pattern)
        self.pattern = pattern

    def poll(self) -> list[str]:
        out = []
        while (m := self.p.get_message(timeout=0.0)) is not None:
            assert m["type"] == "pmessage" and m["pattern"] == self.pattern.encode(), m
            out.append(m["channel"].decode())
        return out

    def close(self) -> None:
        self.p.close()
        self.r.close()


class NatsReceiver(Receiver):
    def __init__(self, g: Graph, node: str, subject: str, queue: str) -> None:
        self.s = socket.create_connection(("127.0.0.1", int(str(g[node]["nats"]))), timeout=TIMEOUT)
        self.s.recv(4096)
        self.s.sendall(f"CONNECT {{\"verbose\":false}}\r\nSUB {subject} {queue} 1\r\nPING\r\n".encode())
        buf = b""
        while not buf.endswith(b"PONG\r\n"):
            buf += self.s.recv(4096)
        self.s.setblocking(False)
        self.buf = b""

    def poll(self) -> list[str]:
        while True:
            try:
                chunk = self.s.recv(1 << 16)
            except BlockingIOError:
                break
            assert chunk
            self.buf += chunk
        out = []
        while (end := self.buf.find(b"\r\n")) >= 0:
            line = self.buf[:end].split()
            if line[0] == b"MSG":
                size = int(line[-1])
                if len(self.buf) < end + 2 + size + 2:
                    break
                out.append(line[1].decode())
                self.buf = self.buf[end + 2 + size + 2:]
            else:
                if line[0] == b"PING":
                    self.s.sendall(b"PONG\r\n")
                self.buf = self.buf[end + 2:]
        return out

    def close(self) -> None:
        self.s.close()


def _publisher(g: Graph, node: str, kind: str) -> tuple[Callable[[str], None], Callable[[], None]]:
    """(publish(subject), close) for an sbus or Redis publisher on `node`."""
    if kind == "sbus":
        c = Raw(str(g[node]["path"]))
        return (lambda subject: c.pub(subject.replace(".", "/").encode(), b"x")), c.close
    r = redis.Redis(port=int(str(g[node]["redis"])), socket_timeout=TIMEOUT)
    return (lambda subject: r.publish(subject, b"x") and None), r.close


def _until(check: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


def _split(receivers: list[Receiver], publish: Callable[[str], None], head: str) -> list[set[str]]:
    """Probe until every shard holder got one message (its filter reached the
    publisher's node), then publish COUNT subjects; what each received."""
    got: list[set[str]] = [set() for _ in receivers]

    def collect() -> None:
        for into, rcv in zip(got, receivers, strict=True):
            into.update(rcv.poll())

    probes = iter(range(10_000))

    def probed() -> bool:
        publish(f"{head}.p{next(probes)}")
        collect()
        return all(any(s.startswith(f"{head}.p") for s in into) for into in got)

    assert _until(probed, 20), [sorted(x)[:3] for x in got]
    time.sleep(0.3)  # the probes in flight land before the count starts
    collect()
    for into in got:
        into.clear()
    for i in range(COUNT):
        publish(f"{head}.{i}")
    _until(lambda: (collect(), sum(map(len, got)) >= COUNT)[1], 10)
    time.sleep(0.3)  # a subject delivered twice would show by now
    collect()
    return got


@pytest.mark.parametrize(("holders", "publisher"), [
    ([("A", "redis"), ("D", "redis")], ("B", "redis")),
    ([("A", "sbus"), ("D", "sbus")], ("B", "sbus")),
    ([("A", "sbus"), ("D", "redis"), ("C", "nats")], ("A", "sbus")),
], ids=["redis", "sbus", "sbus+redis+nats"])
def test_shards_split_the_subjects(graph: Graph, holders: list[tuple[str, str]],
                                   publisher: tuple[str, str]) -> None:
    head = "sh" + "".join(k[0] for _, k in holders)
    n = len(holders)
    receivers: list[Receiver] = []
    for i, (node, kind) in enumerate(holders, 1):
        if kind == "sbus":
            receivers.append(SbusReceiver(graph, node, f"_SHARD/{i}/{n}/{head}/*".encode()))
        elif kind == "redis":
            receivers.append(RedisReceiver(graph, node, f"_SHARD.{i}.{n}.{head}.*"))
        else:
            receivers.append(NatsReceiver(graph, node, f"{head}.*", f"_SHARD.{i}.{n}"))
    publish, close = _publisher(graph, *publisher)
    try:
        got = _split(receivers, publish, head)
    finally:
        close()
        for rcv in receivers:
            rcv.close()
    want = {f"{head}.{i}" for i in range(COUNT)}
    assert all(got), [len(x) for x in got]
    assert sum(map(len, got)) == COUNT and set().union(*got) == want, (
        [len(x) for x in got], sorted(set().union(*got) ^ want)[:5])


def _answers(read: Callable[[], list[dict[str, object]]], want: int) -> list[dict[str, object]]:
    got: list[dict[str, object]] = []
    _until(lambda: (got.extend(read()), len(got) >= want)[1], 10)
    time.sleep(0.3)  # late extra answers would show by now
    got.extend(read())
    return got


@pytest.mark.parametrize("kind", ["ack", "trace"])
def test_redis_publish_with_ack_or_trace(graph: Graph, kind: str) -> None:
    """PUBLISH on A with a third argument `_ACK.<inbox>` / `_TRACE.<inbox>`: the message
    reaches a Redis subscriber on D and the answers come back on A's inbox channel."""
    channel, inbox = f"ra.{kind}", f"ans.r.{kind}"
    d = redis.Redis(port=int(str(graph["D"]["redis"])), socket_timeout=TIMEOUT)
    dsub = d.pubsub(ignore_subscribe_messages=True)
    dsub.subscribe(channel)
    a = redis.Redis(port=int(str(graph["A"]["redis"])), socket_timeout=TIMEOUT)
    asub = a.pubsub(ignore_subscribe_messages=True)
    asub.subscribe(inbox)
    try:
        assert _until(lambda: a.publish(channel, b"probe") >= 1, 20)  # D's filter reached A
        head = "_ACK." if kind == "ack" else "_TRACE."
        assert a.execute_command("PUBLISH", channel, b"hello", head + inbox) >= 1
        with pytest.raises(redis.ResponseError, match="wrong number of arguments"):
            a.execute_command("PUBLISH", channel, b"x", head + inbox, b"extra")
        delivered: list[bytes] = []
        _until(lambda: (delivered.extend(m["data"] for m in iter(lambda: dsub.get_message(timeout=0.0), None)),
                        b"hello" in delivered)[1], 10)
        assert delivered[-1] == b"hello"

        def read() -> list[dict[str, object]]:
            return [json.loads(m["data"]) for m in iter(lambda: asub.get_message(timeout=0.0), None)]

        got = _answers(read, 1 if kind == "ack" else 2)
    finally:
        for c in (dsub, d, asub, a):
            c.close()
    _check_answers(got, kind, f"svc.{channel}")


def _check_answers(got: list[dict[str, object]], kind: str, subject: str) -> None:
    assert got and all(g["kind"] == kind and g["subject"] == subject for g in got), got
    users = sorted(str(g["user"]) for g in got)
    if kind == "ack":  # the one node that delivered it
        assert users == ["D"], got
    else:  # every router on the way from A to D answers, D included
        assert "D" in users and len(users) >= 2 and set(users) <= {"B", "C", "D"}, got


@pytest.mark.parametrize("kind", ["ack", "trace"])
def test_sbus_publish_with_ack_or_trace(graph: Graph, kind: str) -> None:
    """`CMSG raims/ack` (trace) on A's sbus: the message reaches an sbus subscriber on D
    and the answers come back as MSG packets on A's inbox key."""
    key, inbox = f"sa/{kind}".encode(), f"ans/s/{kind}".encode()
    d, a = Raw(str(graph["D"]["path"])), Raw(str(graph["A"]["path"]))
    try:
        d.sub(key)
        d.sync()
        a.sub(inbox)
        a.sync()
        assert _until(lambda: (a.send(b"CMSG raims/visible\x00" + key), a.recv().endswith(b"\x001"))[1], 20)
        a.send(b"CMSG raims/" + kind.encode() + b"\x00" + inbox + b"\x00" + key + b"\x00hello")
        assert d.recv() == b"MSG " + key + b"\x00hello"
        a.s.setblocking(False)

        def read() -> list[dict[str, object]]:
            out = []
            while True:
                try:
                    packet = a.s.recv(1 << 16)
                except BlockingIOError:
                    return out
                if packet.startswith(b"CMSG raims/visible"):
                    continue
                assert packet.startswith(b"MSG " + inbox + b"\x00"), packet
                out.append(json.loads(packet[len(inbox) + 5:]))

        got = _answers(read, 1 if kind == "ack" else 2)
        a.s.setblocking(True)
        a.send(b"CMSG raims/ack\x00" + inbox + b"\x00not.mappable\x00x")  # '.' in a key: refused, counted
        a.sync()
    finally:
        a.close()
        d.close()
    _check_answers(got, kind, f"svc.sa.{kind}")


def test_sbus_client_gets_stats_of_every_peer(graph: Graph) -> None:
    """`SUB _N/` on A's sbus: the `_N.` statistics of B, C and D arrive as MSG packets on
    keys `_N/PEER/<user>/...`, `_N/ALL/<user>` (the `_N.` space is every service's)."""
    a = Raw(str(graph["A"]["path"]))
    try:
        a.sub(b"_N/")
        a.sync()
        a.s.settimeout(1.0)
        seen: set[str] = set()

        def more() -> bool:
            try:
                packet = a.s.recv(1 << 16)
            except TimeoutError:
                return False
            key = packet[4:packet.index(b"\x00")].decode()
            assert packet.startswith(b"MSG _N/"), packet[:40]
            json.loads(packet[packet.index(b"\x00") + 1:])
            seen.add(key)
            return all(f"_N/ALL/{n}" in seen and any(k.startswith(f"_N/PEER/{n}/") for k in seen) for n in "BCD")

        assert _until(more, 15), sorted(seen)
    finally:
        a.close()
