"""nats-py 2.16 against ms_server's NATS transport: one node, and the manual's A-D graph.

Every wait is on an event with a deadline: a message, a callback, an exception. Across
nodes a subscription takes effect once its `_S.JOIN` reaches the publisher's node, so
cross-node tests first publish probes until the subscriber sees one (`settle`), then a
marker that every earlier probe precedes (same source, same subject: same path, in order).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout

from tests.integration.harness import MANUAL_GRAPH, get_json
from tests.integration.test_bridges_net import BridgeNet, Transport, start_network

WAIT_S = 10
SECURE: Transport = {"tport": "secure", "type": "nats", "route": {"port": 0, "user": "alice", "password": "s3cret"}}


@pytest.fixture(scope="module")
def one(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BridgeNet]:
    net = start_network(tmp_path_factory.mktemp("one"), "node A\n", [SECURE])
    yield net
    net.stop()


@pytest.fixture(scope="module")
def abcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BridgeNet]:
    net = start_network(tmp_path_factory.mktemp("abcd"), MANUAL_GRAPH)
    yield net
    net.stop()


class Clients:
    """nats-py connections opened by a test, closed at its end."""

    def __init__(self) -> None:
        self.open: list[Client] = []

    async def __call__(self, net: BridgeNet, node: str, tport: str = "nats", **kw: Any) -> Client:
        nc = await nats.connect(f"nats://127.0.0.1:{net.port(node, tport)}", connect_timeout=5,
                                max_reconnect_attempts=0, **kw)
        self.open.append(nc)
        return nc


@pytest.fixture
async def connect() -> AsyncIterator[Clients]:
    clients = Clients()
    yield clients
    for nc in clients.open:
        if not nc.is_closed:
            await nc.close()


async def settle(pub: Client, subject: str, *subs: Subscription) -> None:
    """Publish probes on `subject` until every sub got one, then drain every probe."""
    deadline = time.monotonic() + WAIT_S
    waiting = list(subs)
    while waiting:
        await pub.publish(subject, b"probe")
        await pub.flush()
        for sub in list(waiting):
            try:
                await sub.next_msg(timeout=0.1)
                waiting.remove(sub)
            except NatsTimeout:
                pass
        assert time.monotonic() < deadline, f"no probe on {subject} reached every subscriber"
    await pub.publish(subject, b"settled")
    for sub in subs:
        while (await sub.next_msg(timeout=WAIT_S)).data != b"settled":
            pass


async def collect(sub: Subscription, n: int) -> list[Msg]:
    return [await sub.next_msg(timeout=WAIT_S) for _ in range(n)]


# ---------------------------------------------------------------- one node

async def test_pub_sub_wildcards_and_echo(one: BridgeNet, connect: Clients) -> None:
    nc = await connect(one, "A")
    star = await nc.subscribe("orders.*")
    full = await nc.subscribe("orders.>")
    exact = await nc.subscribe("orders.new")
    await nc.flush()
    for subject in ("orders.new", "orders.old.x", "other.new", "orders.done"):
        await nc.publish(subject, subject.encode())
    assert [m.subject for m in await collect(full, 3)] == ["orders.new", "orders.old.x", "orders.done"]
    assert [m.data for m in await collect(star, 2)] == [b"orders.new", b"orders.done"]
    assert [m.subject for m in await collect(exact, 1)] == ["orders.new"]
    assert star.pending_msgs == exact.pending_msgs == 0  # orders.done came after everything
    quiet = await connect(one, "A", no_echo=True)
    mine = await quiet.subscribe("echo.test")
    other = await nc.subscribe("echo.test")
    await quiet.flush()
    await nc.flush()
    await quiet.publish("echo.test", b"1")
    await quiet.flush()  # the server has "1" before "2" is sent
    await nc.publish("echo.test", b"2")
    assert [m.data for m in await collect(other, 2)] == [b"1", b"2"]
    assert (await mine.next_msg(timeout=WAIT_S)).data == b"2"  # its own "1" never came back


async def test_headers_request_reply_and_no_responders(one: BridgeNet, connect: Clients) -> None:
    server, client = await connect(one, "A"), await connect(one, "A")

    async def answer(msg: Msg) -> None:
        await msg.respond(b"re:" + msg.data)

    await server.subscribe("svc.echo", cb=answer)
    hdr = await server.subscribe("with.headers")
    await server.flush()
    reply = await client.request("svc.echo", b"ping", timeout=WAIT_S)
    assert reply.data == b"re:ping"
    assert reply.subject.startswith("_INBOX.")
    await client.publish("with.headers", b"body", headers={"Trace-Id": "42", "X": "y"})
    msg = await hdr.next_msg(timeout=WAIT_S)
    assert (msg.data, msg.headers) == (b"body", {"Trace-Id": "42", "X": "y"})
    with pytest.raises(NoRespondersError):
        await client.request("nobody.home", b"?", timeout=WAIT_S)
    # echo off: its own subscription does not answer its request (nats-server's 503 at once)
    quiet = await connect(one, "A", no_echo=True)
    await quiet.subscribe("svc.own", cb=answer)
    started = time.monotonic()
    with pytest.raises(NoRespondersError):
        await quiet.request("svc.own", b"?", timeout=WAIT_S)
    assert time.monotonic() - started < WAIT_S / 2
    assert (await quiet.request("svc.echo", b"x", timeout=WAIT_S)).data == b"re:x"  # others' still do


async def test_unsubscribe_with_max_ends_the_subscription_in_the_server(one: BridgeNet, connect: Clients) -> None:
    nc, other = await connect(one, "A"), await connect(one, "A")
    limited = await nc.subscribe("limited")
    await limited.unsubscribe(limit=2)
    watcher = await nc.subscribe("limited")
    await nc.flush()
    for i in range(4):
        await other.publish("limited", b"%d" % i)
    assert [m.data for m in await collect(watcher, 4)] == [b"0", b"1", b"2", b"3"]
    assert [m.data for m in await collect(limited, 2)] == [b"0", b"1"]
    await watcher.unsubscribe()
    await nc.flush()
    # the server dropped `limited` after 2: nobody is left to answer a request
    with pytest.raises(NoRespondersError):
        await other.request("limited", b"?", timeout=WAIT_S)


async def test_flush_and_drain(one: BridgeNet, connect: Clients) -> None:
    nc, pub = await connect(one, "A"), await connect(one, "A")
    got: list[bytes] = []

    async def slow(msg: Msg) -> None:
        await asyncio.sleep(0)
        got.append(msg.data)

    await nc.subscribe("drain.me", cb=slow)
    await nc.flush(timeout=WAIT_S)
    for i in range(20):
        await pub.publish("drain.me", b"%d" % i)
    await pub.flush(timeout=WAIT_S)
    probe = await nc.subscribe("drain.probe")  # answered after the 20 were written to nc
    await nc.flush()
    await pub.publish("drain.probe", b"")
    await probe.next_msg(timeout=WAIT_S)
    await nc.drain()
    assert nc.is_closed
    assert got == [b"%d" % i for i in range(20)]
    with pytest.raises(NoRespondersError):  # drain unsubscribed in the server
        await pub.request("drain.me", b"?", timeout=WAIT_S)


def _raw(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
    _upto(s, b"\r\n")  # INFO
    s.sendall(b'CONNECT {"verbose":false,"pedantic":false}\r\nPING\r\n')
    _upto(s, b"PONG\r\n")
    return s


def _upto(s: socket.socket, end: bytes) -> bytes:
    got = b""
    while not got.endswith(end):
        chunk = s.recv(65536)
        assert chunk, got
        got += chunk
    return got


def test_a_pong_follows_the_local_deliveries_of_the_messages_before_its_ping(one: BridgeNet) -> None:
    """nats-server queues a PUB's local deliveries before it reads the PING after it, so
    a flush returns with them on their way (nats.py's test_drain_connection counts on it).
    Before, the publisher's own output (the PONG) was written before its subscribers'."""
    port = one.port("A")
    sub, pub = _raw(port), _raw(port)
    try:
        sub.sendall(b"SUB pong.order 1\r\nPING\r\n")
        _upto(sub, b"PONG\r\n")
        n, short = 201, []
        for _ in range(10):
            pub.sendall(b"PUB pong.order 4\r\nhelp\r\n" * n + b"PING\r\n")
            _upto(pub, b"PONG\r\n")
            sub.setblocking(False)  # what the subscriber's socket holds at the PONG
            got = b""
            with contextlib.suppress(BlockingIOError):
                while chunk := sub.recv(1 << 20):
                    got += chunk
            sub.settimeout(WAIT_S)
            if got.count(b"MSG ") < n:
                short.append(got.count(b"MSG "))
                while got.count(b"MSG ") < n:
                    got += sub.recv(1 << 20)
        assert short == []
    finally:
        sub.close()
        pub.close()


async def test_user_and_password(one: BridgeNet, connect: Clients) -> None:
    nc = await connect(one, "A", "secure", user="alice", password="s3cret")
    sub = await nc.subscribe("secured")
    await nc.publish("secured", b"ok")
    assert (await sub.next_msg(timeout=WAIT_S)).data == b"ok"
    errors: list[Exception] = []

    async def on_error(exc: Exception) -> None:
        errors.append(exc)

    with pytest.raises(Exception):  # noqa: B017  nats-py raises its own error type per version
        await connect(one, "A", "secure", user="alice", password="wrong", error_cb=on_error,
                      allow_reconnect=False)
    assert any("authorization violation" in str(e).lower() for e in errors)


async def test_reconnect_after_restart_resubscribes(tmp_path: Path, connect: Clients) -> None:
    net = start_network(tmp_path, "node A\n")
    try:
        reconnected = asyncio.Event()

        async def on_reconnect() -> None:
            reconnected.set()

        nc = await nats.connect(f"nats://127.0.0.1:{net.port('A')}", reconnected_cb=on_reconnect,
                                reconnect_time_wait=0.1, max_reconnect_attempts=-1)
        connect.open.append(nc)
        sub = await nc.subscribe("survives.restart")
        await nc.flush()
        net.restart("A")
        await asyncio.wait_for(reconnected.wait(), WAIT_S * 2)
        await nc.flush(timeout=WAIT_S)  # the SUB replayed on reconnect is in the new server
        pub = await connect(net, "A")
        await pub.publish("survives.restart", b"after")
        assert (await sub.next_msg(timeout=WAIT_S)).data == b"after"
    finally:
        net.stop()


# ---------------------------------------------------------------- the A-D network

async def test_pub_sub_across_the_network(abcd: BridgeNet, connect: Clients) -> None:
    a, d = await connect(abcd, "A"), await connect(abcd, "D")
    wild = await d.subscribe("net.*.tick")
    full = await d.subscribe("net.>")
    await d.flush()
    # each pattern's own interest reaches A: a probe both match may be routed for one of them
    # alone (D delivers it to both), and net.y.tock below needs net.>'s
    await settle(a, "net.probe", full)
    await settle(a, "net.x.tick", wild, full)
    await a.publish("net.y.tick", b"1", headers={"Seq": "1"})
    await a.publish("net.y.tock", b"2")
    await a.publish("net.z.tick", b"3")
    assert [(m.subject, m.data) for m in await collect(wild, 2)] == [("net.y.tick", b"1"), ("net.z.tick", b"3")]
    got = await collect(full, 3)
    assert [m.subject for m in got] == ["net.y.tick", "net.y.tock", "net.z.tick"]
    assert got[0].headers == {"Seq": "1"}


async def test_request_reply_with_inbox_across_the_network(abcd: BridgeNet, connect: Clients) -> None:
    a, d = await connect(abcd, "A"), await connect(abcd, "D")

    async def answer(msg: Msg) -> None:
        await msg.respond(msg.data.upper())

    await d.subscribe("far.svc", cb=answer)
    await d.flush()
    deadline = time.monotonic() + WAIT_S
    while True:  # no responders until D's subscription reaches A
        try:
            reply = await a.request("far.svc", b"hello", timeout=WAIT_S)
            break
        except NoRespondersError:
            assert time.monotonic() < deadline, "the subscription on D never reached A"
            await asyncio.sleep(0.05)
    assert reply.data == b"HELLO"
    with pytest.raises(NoRespondersError):
        await a.request("far.nobody", b"?", timeout=WAIT_S)


async def test_a_reply_taken_by_a_monitor_on_the_responders_node_still_reaches_the_requester(
        abcd: BridgeNet, connect: Clients) -> None:
    """A `_INBOX.` reply was anycast to one node whose filter passed it, and when a client
    of the responder's node also subscribed it (`>` or `_INBOX.>`, a monitor), it was
    delivered there only: every request from another node timed out (found with
    nats.py's own suite, 2026-11-27). nats-server delivers it to both."""
    a, d, mon = await connect(abcd, "A"), await connect(abcd, "D"), await connect(abcd, "D")

    async def answer(msg: Msg) -> None:
        await msg.respond(msg.data.upper())

    watched = await mon.subscribe("_INBOX.>")
    await mon.flush()
    await d.subscribe("mon.svc", cb=answer)
    await d.flush()
    deadline = time.monotonic() + WAIT_S
    while True:  # no responders until D's subscription reaches A
        try:
            reply = await a.request("mon.svc", b"hello", timeout=2)
            break
        except NoRespondersError:
            assert time.monotonic() < deadline, "the subscription on D never reached A"
            await asyncio.sleep(0.05)
    assert reply.data == b"HELLO"
    seen = await watched.next_msg(timeout=WAIT_S)
    assert seen.data == b"HELLO"


async def test_a_reply_reaches_the_requester_and_every_monitor_on_other_nodes(
        abcd: BridgeNet, connect: Clients) -> None:
    """An `_INBOX.` reply goes point to point to every node that subscribes it (the
    manual's "_INBOX subject"): before, to one node whose filter matched, chosen by the
    subject's hash, so with a `_INBOX.>` monitor on B and a `>` monitor on C, 14-17 of
    20 requests from A to D's responder timed out (the reply went to a monitor only).
    nats-server delivers a reply to every subscriber, each once."""
    a, d = await connect(abcd, "A"), await connect(abcd, "D")
    mon_b, mon_c = await connect(abcd, "B"), await connect(abcd, "C")

    async def answer(msg: Msg) -> None:
        await msg.respond(b"re:" + msg.data)

    await d.subscribe("each.svc", cb=answer)
    await d.flush()
    await settle_request(a, "each.svc")  # before the monitors: with C's `>`, no 503 would tell
    inboxes = await mon_b.subscribe("_INBOX.>")
    everything = await mon_c.subscribe(">")
    await mon_b.flush()
    await mon_c.flush()
    await settle(d, "_INBOX.settle", inboxes)
    await settle(d, "each.settle", everything)
    n = 20
    got = await asyncio.gather(*(a.request("each.svc", b"%d" % i, timeout=2) for i in range(n)),
                               return_exceptions=True)
    timed_out = sum(isinstance(r, NatsTimeout) for r in got)
    assert timed_out == 0 and [r.data for r in got] == [b"re:%d" % i for i in range(n)], f"{timed_out} timed out"
    await d.publish("_INBOX.each.end", b"end")  # after every reply, on D's paths to B and C
    await d.flush()
    for sub in (inboxes, everything):
        seen: list[bytes] = []
        while (m := await sub.next_msg(timeout=WAIT_S)).subject != "_INBOX.each.end":
            if m.subject.startswith("_INBOX.") and m.data.startswith(b"re:") :
                seen.append(m.data)
        assert sorted(seen) == sorted(b"re:%d" % i for i in range(n)), (sub.subject, seen)  # each once


async def test_what_a_client_subscribes_before_it_publishes_is_known_where_that_arrives(
        abcd: BridgeNet, connect: Clients) -> None:
    """Causal order across nodes, as in a nats-server cluster (router/batch.py): a fresh
    connection's first request (nats-py subscribes its reply inbox, then publishes) gets
    its reply from D; a subscriber on D that says "ready" after subscribing gets what A
    publishes on hearing it. Before, 40 of 40 first requests timed out and 19 of 20
    messages after "ready" were lost: the subscription waited in D's flood hold while the
    publish went on."""
    d = await connect(abcd, "D")

    async def answer(msg: Msg) -> None:
        await msg.respond(b"pong")

    await d.subscribe("causal.svc", cb=answer)
    await d.flush()
    a = await connect(abcd, "A")
    await settle_request(a, "causal.svc")
    for _ in range(10):
        fresh = await connect(abcd, "A")
        assert (await fresh.request("causal.svc", b"ping", timeout=WAIT_S)).data == b"pong"
        await fresh.close()
    heard: asyncio.Queue[str] = asyncio.Queue()

    async def on_ready(msg: Msg) -> None:
        await a.publish(msg.subject.replace("ready", "data"), b"x")
        heard.put_nowait(msg.subject)

    await a.subscribe("causal.ready.>", cb=on_ready)
    await a.flush()
    deadline = time.monotonic() + WAIT_S
    while True:  # until A's subscription reached D
        await d.publish("causal.ready.probe", b"")
        try:
            await asyncio.wait_for(heard.get(), 0.1)
            break
        except TimeoutError:
            assert time.monotonic() < deadline, "A's subscription never reached D"
    for i in range(20):
        sub = await d.subscribe(f"causal.data.{i}")
        await d.publish(f"causal.ready.{i}", b"")
        assert (await sub.next_msg(timeout=WAIT_S)).subject == f"causal.data.{i}"


async def settle_request(client: Client, subject: str) -> None:
    """Until a request on `subject` finds a responder (its subscription reached us)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            await client.request(subject, b"probe", timeout=WAIT_S)
            return
        except NoRespondersError:
            assert time.monotonic() < deadline, f"no responder for {subject} reached us"
            await asyncio.sleep(0.05)


async def test_queue_group_spreads_across_nodes_exactly_once(abcd: BridgeNet, connect: Clients) -> None:
    a = await connect(abcd, "A")
    members: dict[str, list[Subscription]] = {}
    watchers = []
    for node in ("B", "C", "D", "D"):
        nc = await connect(abcd, node)
        members.setdefault(node, []).append(await nc.subscribe("jobs", queue="workers"))
        watchers.append(await nc.subscribe("jobs"))  # sees every message, after its member's
        await nc.flush()
    await settle(a, "jobs", *watchers)
    await settle(a, "jobs", *watchers)  # a second round: every node has every member by now
    for sub in (s for subs in members.values() for s in subs):
        while sub.pending_msgs:
            await sub.next_msg(timeout=WAIT_S)  # probes, spread as they happened to be
    n = 60
    for i in range(n):
        await a.publish("jobs", b"%d" % i)
    await a.publish("jobs", b"end")
    for w in watchers:
        assert [m.data for m in await collect(w, n + 1)][-1] == b"end"
    got = {(node, i): [d for _ in range(s.pending_msgs) if (d := (await s.next_msg(timeout=WAIT_S)).data).isdigit()]
           for node, subs in members.items() for i, s in enumerate(subs)}  # no probes
    assert sorted(d for msgs in got.values() for d in msgs) == sorted(b"%d" % i for i in range(n))
    assert all(got.values()), got  # every member: a third to each node (router/queue_choice.py), D's in turn


async def test_the_consoles_rpc_gets_a_nats_responders_answer(abcd: BridgeNet, connect: Clients) -> None:
    """Console `rpc` (here over A's web) to a NATS responder on D: the inbox is in the
    subject's namespace, where the responder's bridge puts the reply."""
    d = await connect(abcd, "D")

    async def answer(msg: Msg) -> None:
        await msg.respond(b"echo:" + msg.data)

    await d.subscribe("console.svc", cb=answer)
    await d.flush()
    web = f"127.0.0.1:{abcd.port('A', 'web')}"
    rows: object = None
    for _ in range(50):  # until D's subscription reached A
        _, rows = await asyncio.to_thread(get_json, web, "rpc _nats.console.svc hi")
        if isinstance(rows, list) and rows and rows[0].get("reply"):
            break
    assert isinstance(rows, list) and rows[0]["reply"] == "echo:hi", rows
