"""raims_node.client against a real ms_server: found through its endpoints file,
pub/sub (iterator, callback, asyncio), flush, wait_visible, request, reconnect, and the
subscriptions' pending limits (slow consumers)."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from raims_node.client import (
    AsyncSubscription,
    Client,
    ClientError,
    MaxPayload,
    Message,
    NoNode,
    SlowConsumer,
    Subscription,
    aconnect,
    connect,
    endpoints,
    sync,
)
from tests.integration.harness import NodeProc, graph_config


class Node:
    def __init__(self, tmp: Path) -> None:
        cfg, _ = graph_config(tmp, "node A\n", web=False)
        data = yaml.safe_load(cfg.read_text())
        data["transports"] += [{"tport": "bus", "type": "ipc", "route": {}}]
        cfg.write_text(yaml.safe_dump(data, sort_keys=False))
        self.tmp, self.cfg = tmp, cfg
        self.proc = self.start()

    def start(self) -> NodeProc:
        proc = NodeProc("A", ["-d", str(self.cfg), "-u", "A", "-t", "bus.listen"], self.tmp)
        proc.wait_for(r"listening on .*A\.test\.sock")
        deadline = threading.Event()
        for _ in range(100):  # the endpoints file follows the listeners
            if endpoints.endpoints_file("A", "test").exists():
                break
            deadline.wait(0.05)
        return proc


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Node]:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    for var in (endpoints.ENV_FILE, endpoints.ENV_NODE):
        monkeypatch.delenv(var, raising=False)
    n = Node(tmp_path)
    yield n
    n.proc.stop()


def test_no_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.delenv(endpoints.ENV_FILE, raising=False)
    with pytest.raises(NoNode, match="no raims node runs on this host"):
        connect()
    with pytest.raises(NoNode, match="no node 'Z' runs"):
        connect(node="Z")


def test_endpoints_file(node: Node) -> None:
    ep = endpoints.find()
    assert ep.node == "A" and ep.service == "test" and ep.sbus == [str(endpoints.endpoints_dir() / "A.test.sock")]
    assert endpoints.find("A.test") == endpoints.find("A") == ep
    node.proc.stop()
    assert not endpoints.endpoints_file("A", "test").exists()  # removed at stop


def test_pubsub_iterator_callback_flush_visible(node: Node) -> None:
    with connect() as c, connect() as d:
        seen: list[Message] = []
        done = threading.Event()

        def on_msg(m: Message) -> None:
            seen.append(m)
            if len(seen) == 3:
                done.set()

        assert not c.visible("it/x")
        with c.subscribe("it/*") as sub:
            d.subscribe("it/", callback=on_msg)
            d.wait_visible("it/x", timeout=5)
            for i in range(3):
                c.publish("it/x", b"%d" % i)
            c.flush()
            assert [sub.next(5).payload for _ in range(3)] == [b"0", b"1", b"2"]
            assert done.wait(5) and [m.subject for m in seen] == ["it/x"] * 3
        with pytest.raises(ClientError, match="no subscriber"):
            c.wait_visible("nobody/listens", timeout=0.3)


def test_a_secret_key_subscription_with_empty_fields_delivers(node: Node) -> None:
    """Seed 001: empty `!/cred/` fields match the client's own credentials. The server
    filled them in and delivered; the library matched the unfilled pattern and dropped."""
    with connect() as c, connect() as d:
        sub = c.subscribe("!/cred////sec/")
        c.flush()
        d.publish(f"!/cred/{os.getgid()}/{os.getuid()}/{os.getpid()}/sec/1", b"for me")
        d.flush()
        assert sub.next(5).payload == b"for me"


def test_a_subscribe_that_returned_sees_the_next_publish(node: Node) -> None:
    """A publisher on the same node whose packets were queued before the subscription:
    its next publish after `subscribe` returned was read by the node before the SUB and
    missed the subscriber (20 of 20 before; `subscribe` now returns once the node has it)."""
    with connect() as a, connect() as b:
        missed = []
        for i in range(10):
            for _ in range(300):  # b's earlier packets: one read burst of the node's
                b.publish("noise/x", b"n" * 100)
            sub = a.subscribe(f"sub/{i}")
            b.publish(f"sub/{i}", b"first")
            b.flush()
            a.flush()
            try:
                assert sub.next(timeout=2).payload == b"first"
            except ClientError:
                missed.append(i)
            sub.unsubscribe()
        assert missed == []

        async def run() -> bytes:
            async with await aconnect() as ac:
                for _ in range(300):
                    b.publish("noise/x", b"n" * 100)
                asub = await ac.subscribe("sub/async")
                b.publish("sub/async", b"first")
                return (await asub.next(timeout=5)).payload

        assert asyncio.run(run()) == b"first"


def test_a_subscribe_or_flush_across_a_node_restart_returns(node: Node) -> None:
    """The node takes a subscribe's SUB and ping into its socket and dies (stopped, then
    SIGKILL) before it answers: the client reconnects to the restarted node and asks
    again, so subscribe returns with the subscription in place. Before, the ping waited
    for an answer from the dead node: ClientError after the timeout."""
    with connect(reconnect_s=20) as c:
        node.proc.proc.send_signal(signal.SIGSTOP)
        result: list[object] = []
        t = threading.Thread(target=lambda: result.append(c.subscribe("rs/x", timeout=15)))
        t.start()
        node.proc.stop(signal.SIGKILL)
        node.proc = node.start()
        t.join(20)
        assert result and isinstance(result[0], Subscription)
        with connect() as d:
            d.publish("rs/x", b"after")
            assert result[0].next(5).payload == b"after"
        c.flush(timeout=5)
        assert c._waiters == {}  # answered and timed-out questions leave nothing behind


def test_request(node: Node) -> None:
    with connect() as server, connect() as c:
        server.subscribe("svc/echo", callback=lambda m: m.respond(b"re:" + m.payload))
        server.flush()
        assert c.request("svc/echo", b"hi", timeout=5).payload == b"re:hi"


def test_reconnect_restores_subscriptions(node: Node) -> None:
    with connect(reconnect_s=20) as c, connect(reconnect_s=20) as d:
        sub = c.subscribe("rc/x")
        c.flush()
        node.proc.stop(signal.SIGKILL)  # the socket and endpoints file stay behind
        node.proc = node.start()
        d.wait_visible("rc/x", timeout=20)  # c's subscription is back
        d.publish("rc/x", b"after")
        assert sub.next(10).payload == b"after"


def test_a_packet_too_large_for_the_socket_is_refused_and_the_client_goes_on(node: Node) -> None:
    """A 2 MB publish used to clear the client's connected flag: it and every later call
    waited `reconnect_s` and raised NoNode("no node for ... s"), the connection fine."""
    with connect(reconnect_s=5) as c:
        sub = c.subscribe("big/x")
        t0 = time.monotonic()
        with pytest.raises(MaxPayload, match="Maximum Payload Violation"):
            c.publish("big/x", b"x" * 2_000_000)
        c.publish("big/x", b"small")
        assert sub.next(5).payload == b"small"
        c.flush(timeout=5)
        assert time.monotonic() - t0 < 4


def test_a_packet_over_max_packet_raises_or_is_reported(node: Node) -> None:
    """A publish between the node's max_packet (192 KiB) and what the socket takes was
    dropped by the node without a word: publish returned and nothing came. Now publish
    raises MaxPayload; a packet the node drops all the same reaches error_cb."""
    errors: list[ClientError] = []
    with connect(error_cb=errors.append) as c:
        assert c.max_packet == 192 * 1024
        sub = c.subscribe("mp/x")
        with pytest.raises(MaxPayload, match="Maximum Payload Violation"):
            c.publish("mp/x", b"x" * 200_000)
        c.publish("mp/x", b"x" * (192 * 1024 - 100))
        assert len(sub.next(5).payload) == 192 * 1024 - 100
        c.max_packet = None  # as with a node that does not say: the node's report
        c._sock.setsockopt(socket.SOL_SOCKET, 32, 1 << 20)  # SO_SNDBUFFORCE (root)
        c.publish("mp/x", b"x" * 200_000)
        c.flush(5)
        assert [type(e) for e in errors] == [MaxPayload] and "196608" in str(errors[0])
        c._node_error(b"Message Too Large\x00tl/x\x00300009")  # as the node sends it (test_ipc_bus)
        assert str(errors[1]) == ("the node dropped a message on 'tl/x' of 300009 bytes: "
                                  "larger than this client's socket takes")


def test_close_in_a_callback_returns(node: Node) -> None:
    """close() in a callback raised RuntimeError('cannot join current thread')."""
    closed: list[BaseException | None] = []
    c = connect()
    ran = threading.Event()

    def on_msg(_: Message) -> None:
        try:
            c.close()
            closed.append(None)
        except BaseException as exc:
            closed.append(exc)
        ran.set()

    c.subscribe("cb/close", callback=on_msg)
    c.flush()
    with connect() as d:
        d.publish("cb/close", b"x")
    assert ran.wait(10)
    assert closed == [None]
    c._reader.join(5)
    assert not c._reader.is_alive()


def test_a_closed_subscription_stays_closed(node: Node) -> None:
    """After iteration met the end, next() without a timeout waited for ever."""
    c = connect()
    sub = c.subscribe("sync/end")
    c.close()
    assert list(sub) == []
    for _ in range(2):
        with pytest.raises(ClientError, match="subscription closed"):
            sub.next(5)
    assert list(sub) == []


def test_close_ends_a_flush_that_waits_for_the_node(node: Node) -> None:
    """A flush of another thread waited its whole timeout after close() (the stream
    writer's is 120 s) and then blamed the node."""
    c = connect()
    outcome: list[BaseException] = []
    node.proc.proc.send_signal(signal.SIGSTOP)  # the node answers nothing
    try:
        def flush() -> None:
            try:
                c.flush(timeout=30)
            except BaseException as exc:
                outcome.append(exc)

        t = threading.Thread(target=flush)
        t.start()
        for _ in range(500):
            if c._waiters:
                break
            threading.Event().wait(0.01)
        assert c._waiters
        c.close()
        t.join(5)
        assert not t.is_alive()
    finally:
        node.proc.proc.send_signal(signal.SIGCONT)
    assert len(outcome) == 1 and isinstance(outcome[0], ClientError) and "closed" in str(outcome[0])


def test_once_the_reader_gives_up_calls_fail_at_once(node: Node) -> None:
    """Each call waited reconnect_s (30 s by default) for a reconnect nobody would make."""
    c = connect(reconnect_s=1)
    node.proc.stop()
    c._reader.join(15)
    assert not c._reader.is_alive()
    for _ in range(3):
        t0 = time.monotonic()
        with pytest.raises(NoNode, match="not back within reconnect_s"):
            c.publish("gone/x", b"1")
        assert time.monotonic() - t0 < 0.5
    c.close()


def test_calls_that_wait_for_an_answer_refuse_to_run_in_a_callback(node: Node) -> None:
    """A request (or flush, wait_visible) in a callback waited its whole timeout: the reply
    comes to the reader thread, which the callback holds."""
    outcome: list[tuple[str, float]] = []
    done = threading.Event()
    with connect() as server, connect() as c:
        server.subscribe("svc/cb", callback=lambda m: m.respond(b"re"))
        server.flush()

        def on_msg(_: Message) -> None:
            for call in (lambda: c.request("svc/cb", b"", timeout=5), lambda: c.flush(timeout=5),
                         lambda: c.wait_visible("svc/cb", timeout=5)):
                t0 = time.monotonic()
                try:
                    call()
                    outcome.append(("returned", time.monotonic() - t0))
                except ClientError as exc:
                    outcome.append((str(exc), time.monotonic() - t0))
            done.set()

        c.subscribe("cb/req", callback=on_msg)
        c.flush()
        c.publish("cb/req", b"x")
        assert done.wait(30)
    assert [what.split(" in a callback")[0] for what, _ in outcome] == ["request", "flush", "wait_visible"]
    assert all(took < 1 for _, took in outcome)


def test_asyncio_iteration_ends_when_the_client_closes(node: Node) -> None:
    """`async for` over a subscription hung for ever once its client was closed (the end
    went to the sync subscription's unused queue)."""
    async def run() -> list[bytes]:
        c = await aconnect()
        sub = await c.subscribe("aio/end")
        await c.publish("aio/end", b"1")
        got = [(await sub.next(5)).payload]
        await c.close()

        async def drain() -> None:
            async for msg in sub:
                got.append(msg.payload)

        await asyncio.wait_for(drain(), 5)
        for _ in range(2):  # and stays ended
            with pytest.raises(ClientError, match="subscription closed"):
                await asyncio.wait_for(sub.next(), 5)
        await asyncio.wait_for(drain(), 5)
        return got

    assert asyncio.run(run()) == [b"1"]


def test_asyncio_client(node: Node) -> None:
    async def run() -> list[bytes]:
        async with await aconnect() as c:
            sub = await c.subscribe("aio/*")
            await c.wait_visible("aio/x", timeout=5)
            for i in range(3):
                await c.publish("aio/x", b"%d" % i)
            return [(await sub.next(5)).payload for _ in range(3)]

    assert asyncio.run(run()) == [b"0", b"1", b"2"]


@pytest.mark.parametrize("xdg", [False, True])
def test_ipc_name_parameter_alone_starts_a_named_bus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     xdg: bool) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    if xdg:
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "xdg"))
        want = tmp_path / "xdg" / "raims" / "named.sock"
    else:
        monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
        want = tmp_path / f"raims-{os.getuid()}" / "named.sock"
    cfg, _ = graph_config(tmp_path, "node A\n", web=False)
    data = yaml.safe_load(cfg.read_text())
    data["parameters"]["ipc_name"] = "named"
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))
    proc = NodeProc("A", ["-d", str(cfg), "-u", "A"], tmp_path)
    try:
        proc.wait_for(re.escape(f"listening on {want}"))
        with connect(path=str(want)) as c:
            c.subscribe("n/x")
            c.wait_visible("n/x", timeout=5)
    finally:
        proc.stop()


# ---------------------------------------------------------------- pending limits

LIMIT = 20


def _payloads(start: int, stop: int) -> list[bytes]:
    return [b"%d" % i for i in range(start, stop)]


def _lockstep(pub: Client, fast: Subscription, start: int, stop: int) -> list[bytes]:
    """Publish `slow/<i>` then `fast/<i>` for each i and read `fast` as it comes: once
    fast's message i is here, the reader thread has handed on slow's message i too."""
    got = []
    for payload in _payloads(start, stop):
        pub.publish("sc/slow", payload)
        pub.publish("sc/fast", payload)
        got.append(fast.next(5).payload)
    return got


def test_a_subscriber_that_does_not_read_drops_past_its_limit(node: Node) -> None:
    """The queue holds LIMIT messages, the rest are dropped and counted, the error
    callback hears of it once per episode, the reading subscription loses nothing; after
    draining, new messages arrive again in order."""
    notices: list[SlowConsumer] = []
    with connect(error_cb=notices.append) as c, connect() as d:
        slow = c.subscribe("sc/slow", pending_msgs_limit=LIMIT)
        fast = c.subscribe("sc/fast", pending_msgs_limit=LIMIT)
        c.flush()
        sent = 3 * LIMIT
        assert _lockstep(d, fast, 0, sent) == _payloads(0, sent) and fast.dropped == 0
        assert slow.queue.qsize() == slow.pending_msgs == LIMIT
        assert slow.pending_bytes == sum(map(len, _payloads(0, LIMIT)))
        assert slow.dropped == c.dropped == sent - LIMIT
        assert len(notices) == 1
        n = notices[0]
        assert (n.subscription, n.pattern, n.subject, n.msgs, n.msgs_limit, n.dropped) == \
            (slow, "sc/slow", "sc/slow", LIMIT, LIMIT, 1)
        assert "slow consumer on 'sc/slow'" in str(n)

        assert [slow.next(5).payload for _ in range(LIMIT)] == _payloads(0, LIMIT)
        assert slow.pending_msgs == slow.pending_bytes == slow.queue.qsize() == 0
        assert _lockstep(d, fast, sent, sent + LIMIT + 5) == _payloads(sent, sent + LIMIT + 5)
        assert slow.dropped == c.dropped == sent - LIMIT + 5
        assert len(notices) == 2  # a second episode, a second notice
        assert [slow.next(5).payload for _ in range(LIMIT)] == _payloads(sent, sent + LIMIT)
        assert fast.dropped == 0 and fast.pending_msgs == 0


def test_client_byte_limit_and_the_rate_limited_log(node: Node, caplog: pytest.LogCaptureFixture,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The client's byte limit for its subscriptions; the bytes come back as messages are
    taken out; without an error callback a warning per episode, at most one per
    SLOW_LOG_EVERY_S (the episodes in between are counted in the next one)."""
    caplog.set_level(logging.WARNING, logger="raims.client")

    def warnings() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.name == "raims.client"]

    payload = b"x" * 10
    with connect(pending_bytes_limit=10 * len(payload)) as c, connect() as d:
        slow = c.subscribe("sc/slow")
        fast = c.subscribe("sc/fast")
        c.flush()

        def send(count: int) -> None:
            for _ in range(count):
                d.publish("sc/slow", payload)
            d.publish("sc/fast", b"mark")
            assert fast.next(5).payload == b"mark"

        send(25)
        assert (slow.pending_msgs, slow.pending_bytes, slow.dropped) == (10, 100, 15)
        assert len(warnings()) == 1 and "100 bytes pending (limits 524288, 100)" in warnings()[0]
        slow.next(5)
        assert slow.pending_bytes == 90
        send(2)  # one fits, the episode goes on (over the low-water mark): no notice
        assert (slow.pending_msgs, slow.dropped, c.dropped) == (10, 16, 16)
        for _ in range(5):
            slow.next(5)  # down to half the limit: the episode ends
        send(6)  # five fit, a second episode within SLOW_LOG_EVERY_S: not logged
        assert (slow.pending_msgs, slow.dropped, c.dropped) == (10, 17, 17)
        assert len(warnings()) == 1
        monkeypatch.setattr(sync, "SLOW_LOG_EVERY_S", 0.0)
        for _ in range(5):
            slow.next(5)
        send(6)
        assert len(warnings()) == 2 and "(1 more slow-consumer episodes not logged)" in warnings()[1]
        assert [slow.next(5).payload for _ in range(10)] == [payload] * 10
        assert slow.pending_msgs == slow.pending_bytes == 0


@pytest.mark.parametrize("coroutine", [False, True])
def test_asyncio_subscriber_that_does_not_read_drops_past_its_limit(node: Node, coroutine: bool) -> None:
    """The same as the blocking client's, with the messages in the loop's hands counted
    as pending; error_cb runs on the loop, a plain function or a coroutine function."""

    async def run() -> None:
        notices: list[SlowConsumer] = []
        noticed = asyncio.Event()

        def on_error(err: SlowConsumer) -> None:
            notices.append(err)
            noticed.set()

        async def on_error_async(err: SlowConsumer) -> None:
            on_error(err)

        async def lockstep(fast: AsyncSubscription, start: int, stop: int) -> list[bytes]:
            got = []
            for payload in _payloads(start, stop):
                await c.publish("sc/slow", payload)
                await c.publish("sc/fast", payload)
                got.append((await fast.next(5)).payload)
            return got

        async with await aconnect(error_cb=on_error_async if coroutine else on_error) as c:
            slow = await c.subscribe("sc/slow", pending_msgs_limit=LIMIT)
            fast = await c.subscribe("sc/fast", pending_msgs_limit=LIMIT)
            await c.flush()
            sent = 3 * LIMIT
            assert await lockstep(fast, 0, sent) == _payloads(0, sent) and fast.dropped == 0
            await asyncio.wait_for(noticed.wait(), 5)
            assert slow.queue.qsize() == slow.pending_msgs == LIMIT
            assert slow.dropped == c.dropped == sent - LIMIT
            assert len(notices) == 1 and notices[0].subscription is slow and notices[0].msgs == LIMIT
            noticed.clear()

            assert [(await slow.next(5)).payload for _ in range(LIMIT)] == _payloads(0, LIMIT)
            assert slow.pending_msgs == slow.pending_bytes == 0
            assert await lockstep(fast, sent, sent + LIMIT + 5) == _payloads(sent, sent + LIMIT + 5)
            await asyncio.wait_for(noticed.wait(), 5)
            assert slow.dropped == c.dropped == sent - LIMIT + 5
            assert len(notices) == 2
            got = []
            async for msg in slow:
                got.append(msg.payload)
                if len(got) == LIMIT:
                    break
            assert got == _payloads(sent, sent + LIMIT) and slow.pending_msgs == 0

    asyncio.run(run())
