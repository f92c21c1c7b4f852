"""RouterBus on a real Daemon and node, and the asyncio glue on real sockets, in-process.

The bus is driven through its contract (bus.py) by recording clients; the glue through
loopback sockets to a started Daemon: slow consumers, backpressure between connections,
malformed and mutated input next to well-behaved clients, `show ports` rows.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from raims_node.bridges.bus import shard_subject
from raims_node.bridges.flow import FlowLimits
from raims_node.bridges.router_bus import InvalidService, RouterBus
from raims_node.config.tree import load
from raims_node.daemon import Daemon
from raims_node.router.actions import Deliver
from raims_node.turns import TURNS_LIMIT
from tests.integration.harness import graph_config

WAIT_S = 10.0


def make_daemon(tmp: Path) -> Daemon:
    cfg, _ = graph_config(tmp, "node A\n", web=False)
    data = yaml.safe_load(cfg.read_text())
    data["transports"] = [{"tport": "nats", "type": "nats", "route": {"port": 0}},
                          {"tport": "redis", "type": "redis", "route": {"port": 0}}]
    cfg.write_text(yaml.safe_dump(data))
    return Daemon(load(str(cfg)), "A")


class Client:
    """A session as the bus sees it, recording what it is given."""

    _ids = iter(range(1, 1 << 30))

    def __init__(self, echo: bool = True) -> None:
        self.client_id = next(self._ids)
        self.echo = echo
        self.got: list[tuple[str, str, str | None, bytes | None, bytes]] = []

    def deliver(self, sid: str, subject: str, reply: str | None, headers: bytes | None, payload: bytes) -> None:
        self.got.append((sid, subject, reply, headers, payload))


class Console:
    def __init__(self) -> None:
        self.got: list[Deliver] = []

    def on_deliver(self, d: Deliver) -> None:
        self.got.append(d)


@pytest.fixture
def daemon(tmp_path: Path) -> Daemon:
    return make_daemon(tmp_path)


# ---------------------------------------------------------------- the bus

def test_subjects_map_into_the_service_and_back(daemon: Daemon) -> None:
    bus = RouterBus(daemon, "_redis")
    sub, pub = Client(), Client()
    bus.subscribe(sub, "c:a.b", "a.b")
    bus.psubscribe(sub, "p:a*", "a*", "glob")
    assert set(daemon.node.subs.subjects()) == {"_redis.a.b"}
    assert list(daemon.node.subs.patterns()) == [("glob", "_redis.a*")]
    assert bus.publish(pub, "a.b", None, None, b"x") == 2
    assert sub.got == [("c:a.b", "a.b", None, None, b"x"), ("p:a*", "a.b", None, None, b"x")]
    console = Console()
    daemon.subscribe(console, "s", "_redis.a.b")
    assert bus.publish(pub, "a.b", "r.1", b"NATS/1.0\r\n\r\n", b"y") == 3
    assert [(d.subject, d.reply, d.payload) for d in console.got] == [("_redis.a.b", "r.1", b"y")]
    other = RouterBus(daemon, "_nats")
    assert other.publish(pub, "a.b", None, None, b"z") == 0  # another namespace
    with pytest.raises(InvalidService):
        RouterBus(daemon, "a.*")


def test_patterns_never_match_shard_channels(daemon: Daemon) -> None:
    bus = RouterBus(daemon, "_redis")
    glob, shard, pub = Client(), Client(), Client()
    bus.psubscribe(glob, "p:*", "*", "glob")
    bus.psubscribe(glob, "p:>", ">", "rv")
    bus.subscribe(shard, "s:orders", shard_subject("orders"))
    assert bus.publish(pub, shard_subject("orders"), None, None, b"s") == 1
    assert shard.got == [("s:orders", shard_subject("orders"), None, None, b"s")]
    assert glob.got == []
    assert bus.channels(None, shard=True) == ["orders"] and bus.channels(None) == []
    assert bus.numsub(["orders", "x"], shard=True) == [1, 0]
    assert bus.numpat() == 2


def test_echo_queue_groups_and_introspection(daemon: Daemon) -> None:
    bus = RouterBus(daemon, "_nats")
    quiet, loud, m1, m2 = Client(echo=False), Client(), Client(), Client()
    for c in (quiet, loud):
        bus.subscribe(c, "1", "jobs")
    bus.subscribe(m1, "q", "jobs", "workers")
    bus.subscribe(m2, "q", "jobs", "workers")
    assert [bus.publish(quiet, "jobs", None, None, b"%d" % i) for i in range(4)] == [2, 2, 2, 2]
    assert quiet.got == [] and len(loud.got) == 4
    assert len(m1.got) == len(m2.got) == 2  # one member of the group per message, in turn
    assert bus.channels(None) == ["jobs"]  # the queue marker is not a channel
    assert bus.channels("jo?s") == ["jobs"] and bus.channels("x*") == []
    bus.psubscribe(loud, "2", "jobs.*", "rv")
    assert bus.numsub(["jobs"]) == [4] and bus.numpat() == 1
    assert bus.has_interest("jobs") and bus.has_interest("jobs.x") and not bus.has_interest("nobody")
    bus.drop_client(loud)
    bus.unsubscribe(m1, "q")
    assert bus.numsub(["jobs"]) == [2] and bus.numpat() == 0


def test_queue_groups_that_come_and_go_are_forgotten(daemon: Daemon) -> None:
    """A group per job: the bus kept the turn of every group it ever delivered to (the
    router's own QueueTurns forgets them at TURNS_LIMIT, queue_choice.py)."""
    bus = RouterBus(daemon, "_nats")
    m1, m2 = Client(), Client()
    for i in range(TURNS_LIMIT + 100):
        for m in (m1, m2):
            bus.subscribe(m, "q", f"job.{i}", f"workers.{i}")
        assert bus.publish(None, f"job.{i}", None, None, b"x") == 1
        for m in (m1, m2):
            bus.unsubscribe(m, "q")
    assert len(bus._queue_turn) <= TURNS_LIMIT and len(m1.got) + len(m2.got) == TURNS_LIMIT + 100


def test_binary_subjects_cross_and_oversized_ones_are_refused(daemon: Daemon) -> None:
    bus = RouterBus(daemon, "_redis")
    c = Client()
    bus.subscribe(c, "c:bin", "bin\udcff")  # Redis channel bytes that are not UTF-8: carried
    bus.subscribe(c, "c:long", "x" * 70_000)
    bus.psubscribe(c, "p:[", "[abc", "glob")  # Redis accepts it, raims' glob does not
    assert (bus.refused, bus.bad_patterns) == (1, 1)
    assert len(daemon.node.subs) == 1
    assert bus.publish(c, "bin\udcff", None, None, b"x") == 1
    assert bus.publish(c, "x" * 70_000, None, None, b"x") == 0


# ---------------------------------------------------------------- the glue on sockets

@pytest.fixture
async def running(daemon: Daemon) -> AsyncIterator[Daemon]:
    await daemon.start(["nats", "redis"], [])
    yield daemon
    await daemon.stop()


def port(d: Daemon, tport: str) -> int:
    return int(d.running[tport].bound[0].rpartition(":")[2])


async def nats_client(d: Daemon, subs: bytes = b"") -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    r, w = await asyncio.open_connection("127.0.0.1", port(d, "nats"))
    assert (await asyncio.wait_for(r.readline(), WAIT_S)).startswith(b"INFO ")
    w.write(b'CONNECT {"verbose":false,"pedantic":false}\r\n' + subs + b"PING\r\n")
    assert await asyncio.wait_for(r.readline(), WAIT_S) == b"PONG\r\n"
    return r, w


async def roundtrip(d: Daemon) -> None:
    """A fresh client publishes to itself: the node still serves."""
    r, w = await nats_client(d, b"SUB ok 1\r\n")
    w.write(b"PUB ok 2\r\nhi\r\n")
    assert await asyncio.wait_for(r.readexactly(16), WAIT_S) == b"MSG ok 1 2\r\nhi\r\n"
    w.close()


async def poll(check: object, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.01)


async def test_slow_consumer_holds_publishers_then_is_cut(running: Daemon) -> None:
    bridge = running.running["nats"].bridge
    assert bridge is not None
    bridge.config = replace(bridge.config, limits=FlowLimits(64 * 1024, 16 * 1024, 1024 * 1024))  # type: ignore[attr-defined]
    running.bridges.gate.deadline_s = 0.3
    sub_r, sub_w = await nats_client(running, b"SUB flood 1\r\n")  # and never reads again
    pub_r, pub_w = await nats_client(running)

    async def flood() -> None:
        batch = (b"PUB flood 100\r\n" + b"x" * 100 + b"\r\n") * 500
        while not bridge.slow_consumers:
            pub_w.write(batch)
            await pub_w.drain()

    flooding = asyncio.create_task(flood())
    gate = running.bridges.gate
    await poll(lambda: gate.stalls, "the consumer never stalled its publisher")
    await asyncio.wait_for(flooding, 60)
    assert bridge.slow_consumers == 1 and bridge.error_closes == 0
    assert not any(gate.stalled(p) for p in gate.conns)  # cut: its producer runs again
    pub_w.write(b"PING\r\n")
    assert await asyncio.wait_for(pub_r.readuntil(b"PONG\r\n"), WAIT_S)
    rest = await asyncio.wait_for(sub_r.read(), WAIT_S)  # up to EOF
    assert rest.endswith(b"-ERR 'Slow Consumer'\r\n")
    await roundtrip(running)
    sub_w.close()
    pub_w.close()


@pytest.mark.parametrize(("kind", "data", "reply"), [
    ("nats", b"PUB big 2000000\r\n", b"-ERR 'Maximum Payload Violation'\r\n"),
    ("nats", b"SUB " + b"x" * 5000 + b" 1\r\n", b"-ERR 'maximum control line exceeded'\r\n"),
    ("nats", b"HELLO\r\n", b"-ERR 'Unknown Protocol Operation'\r\n"),
    ("redis", b"*1\r\n$x\r\n", b"-ERR Protocol error: invalid bulk length\r\n"),
])
async def test_protocol_errors_close_only_the_offender(running: Daemon, kind: str, data: bytes,
                                                       reply: bytes) -> None:
    r, w = await asyncio.open_connection("127.0.0.1", port(running, kind))
    if kind == "nats":
        await r.readline()
    w.write(data)
    assert await asyncio.wait_for(r.read(), WAIT_S) == reply  # then EOF
    await roundtrip(running)
    assert running.running[kind].bridge.error_closes == 1  # type: ignore[union-attr]


async def test_mutated_input_never_disturbs_other_clients(running: Daemon) -> None:
    rng = random.Random(8)
    valid = {
        "nats": b'CONNECT {"verbose":true}\r\nSUB a.* 1\r\nPUB a.b 5\r\nhello\r\nHPUB a.c 12 14\r\n'
                b"NATS/1.0\r\n\r\nhi\r\nUNSUB 1 3\r\nPING\r\n",
        "redis": b"*2\r\n$9\r\nSUBSCRIBE\r\n$1\r\na\r\n*3\r\n$7\r\nPUBLISH\r\n$1\r\na\r\n$2\r\nhi\r\n"
                 b"PING\r\n*2\r\n$4\r\nECHO\r\n$3\r\nabc\r\n*1\r\n$4\r\nQUIT\r\n",
    }
    watcher_r, watcher_w = await nats_client(running, b"SUB a.b 9\r\n")
    for i in range(60):
        kind = "nats" if i % 2 else "redis"
        data = bytearray(valid[kind])
        for _ in range(rng.randint(1, 4)):
            pos = rng.randrange(len(data))
            match rng.randrange(3):
                case 0:
                    data[pos] = rng.randrange(256)
                case 1:
                    del data[pos:pos + rng.randint(1, 8)]
                case _:
                    data[pos:pos] = rng.randbytes(rng.randint(1, 8))
        r, w = await asyncio.open_connection("127.0.0.1", port(running, kind))
        w.write(bytes(data))
        w.write_eof()
        await asyncio.wait_for(r.read(), WAIT_S)  # answered, then closed by one side or the other
        w.close()
    watcher_w.write(b"PUB a.b 3\r\nend\r\n")
    while True:  # what mutants published to a.b, then ours
        head = await asyncio.wait_for(watcher_r.readline(), WAIT_S)
        assert head.startswith(b"MSG a.b 9 "), head
        if await watcher_r.readexactly(int(head.split()[-1]) + 2) == b"end\r\n":
            break
    rows = {}
    await poll(lambda: rows.update({r["type"]: r for r in running.port_rows()})
               or (rows["nats"]["conns"], rows["redis"]["conns"]) == (1, 0), "mutants' connections stay open")
    assert int(rows["nats"]["mr"]) >= 1 and int(rows["redis"]["br"]) > 0  # type: ignore[call-overload]
    watcher_w.close()


async def test_clients_that_stop_answering_pings_are_closed(daemon: Daemon,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("raims_node.bridges.nats.PING_INTERVAL_S", 0.05)
    await daemon.start(["nats"], [])
    try:
        answering_r, answering_w = await nats_client(daemon)
        mute_r, mute_w = await nats_client(daemon)
        assert await asyncio.wait_for(mute_r.read(), WAIT_S) == \
            b"PING\r\nPING\r\n-ERR 'Stale Connection'\r\n"  # max_pings_out 2, then closed
        assert await asyncio.wait_for(answering_r.readline(), WAIT_S) == b"PING\r\n"
        answering_w.write(b"PONG\r\n")
        assert await asyncio.wait_for(answering_r.readline(), WAIT_S) == b"PING\r\n"
        assert daemon.running["nats"].bridge.error_closes >= 1  # type: ignore[union-attr]
        for w in (answering_w, mute_w):
            w.close()
    finally:
        await daemon.stop()


def test_a_client_dropped_during_a_run_gets_none_of_the_rest(daemon: Daemon) -> None:
    """A client with many subscriptions leaves matching at once (its subscriptions
    leave the table a slice per loop turn, router/localsubs.py `detach`): a run being
    delivered when a delivery closes it (a slow consumer cut) gives it no more."""
    bus = RouterBus(daemon, "_nats")
    victim = Client()

    class Closer(Client):
        def deliver(self, sid: str, subject: str, reply: str | None, headers: bytes | None, payload: bytes) -> None:
            super().deliver(sid, subject, reply, headers, payload)
            bus.drop_client(victim)

    closer = Closer()
    bus.subscribe(closer, "1", "jobs")
    for i in range(2000):  # more than leave the table at once (interest.DROP_SLICE without a clock)
        bus.subscribe(victim, str(i), "jobs" if i == 1999 else f"other.{i}")  # left for a later turn
    assert bus.publish_run(Client(), "jobs", [b"1", b"2", b"3"]) == 4  # 3 to the closer, 1 before the close
    assert [m[4] for m in victim.got] == [b"1"] and len(closer.got) == 3


async def _proto_of(d: Daemon, w: asyncio.StreamWriter) -> object:
    """The node's connection for the client whose writer is `w`."""
    here = w.get_extra_info("sockname")
    bridge = d.running["nats"].bridge
    assert bridge is not None
    await poll(lambda: any(p.transport and p.transport.get_extra_info("peername") == here
                           for p in bridge.conns), "no connection")  # type: ignore[attr-defined]
    return next(p for p in bridge.conns if p.transport and p.transport.get_extra_info("peername") == here)  # type: ignore[attr-defined]


async def _flood(w: asyncio.StreamWriter, until: object) -> None:
    batch = (b"PUB flood 100\r\n" + b"x" * 100 + b"\r\n") * 500
    while not until():  # type: ignore[operator]
        w.write(batch)
        await w.drain()


async def test_a_stalled_publisher_holds_no_other_client(running: Daemon) -> None:
    """A consumer that does not read stalls the publisher feeding it; another pair of
    clients (and a new client) runs on. Before, the whole node's clients were held, for
    the gate's deadline (set long here: 30 s)."""
    gate = running.bridges.gate
    gate.deadline_s = 30.0
    sub_r, sub_w = await nats_client(running, b"SUB flood 1\r\n")  # and never reads again
    pub_r, pub_w = await nats_client(running)
    pub = await _proto_of(running, pub_w)
    flooding = asyncio.create_task(_flood(pub_w, lambda: False))
    await poll(lambda: gate.stalled(pub), "the publisher was never stalled")  # type: ignore[arg-type]
    flooding.cancel()
    assert not gate.closed
    await roundtrip(running)  # a new client, subscriber and publisher at once
    other_r, other_w = await nats_client(running, b"SUB other 1\r\n")
    pub2_r, pub2_w = await nats_client(running)
    for _ in range(3):
        pub2_w.write(b"PUB other 2\r\nhi\r\n")
        assert await asyncio.wait_for(other_r.readexactly(19), WAIT_S) == b"MSG other 1 2\r\nhi\r\n"
    assert gate.stalls >= 1 and running.running["nats"].bridge.slow_consumers == 0  # type: ignore[union-attr]
    for w in (sub_w, pub_w, other_w, pub2_w):
        w.close()

