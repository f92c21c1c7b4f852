"""A client the node cuts as a slow consumer (bridges/ipc_client.py) is told, and
tells its application (client/errors.py): before, it reconnected and restored its
subscriptions and the messages dropped with the cut were lost without a word."""

from __future__ import annotations

import asyncio
import logging
import signal
import threading

import pytest

from raims_node.client import (
    ClientError,
    ConnectionLost,
    Message,
    SlowConsumerCut,
    aconnect,
    connect,
)
from tests.integration import test_client
from tests.integration.harness import poll
from tests.integration.test_client import Node

node = test_client.node
SENT = 20_000  # past the node's 10,000 queued packets for one client (max_queue_packets)
CUT = ("blocking/hard/error",)  # cut at max_queue_packets (the default hard/block cuts at 64 MiB)


def _flood(subject: str, n: int = SENT, size: int = 256) -> None:
    with connect() as pub:
        for _ in range(n):
            pub.publish(subject, b"x" * size)
        pub.flush(30)


def _blocked(release: threading.Event, got: list[Message]) -> object:
    def cb(msg: Message) -> None:
        got.append(msg)
        if len(got) == 1:
            release.wait(10)  # the application stalls on its first message
    return cb


@pytest.mark.parametrize("flood,n,size", [(CUT, SENT, 256), ((), 10_000, 8192)], ids=["hard-error", "block-cap"])
def test_a_cut_is_reported_with_the_messages_the_node_dropped(node: Node, flood: tuple[str, ...], n: int,
                                                               size: int) -> None:
    errors: list[ClientError] = []
    got: list[Message] = []
    release = threading.Event()
    with connect(flood=flood, error_cb=errors.append, reconnect_s=10) as c:
        c.subscribe("cut/x", callback=_blocked(release, got))
        _flood("cut/x", n, size)
        release.set()
        assert poll(lambda: bool(errors), timeout=10), "the cut was not reported"
        [err] = errors
        assert isinstance(err, SlowConsumerCut) and err.reconnected
        assert err.dropped is not None and err.dropped > 0 and "Slow Consumer" in str(err)
        assert c.cuts == 1 and c.cut_dropped == err.dropped
        assert len(got) + err.dropped <= n  # the rest went after the cut, before the reconnect
        c.flush()
        _flood("cut/x", 1)  # the subscription is back
        assert poll(lambda: len(got) > 0 and got[-1].payload == b"x" * 256, timeout=5)
        assert len(errors) == 1


def test_a_cut_whose_notice_found_no_room_is_still_reported(node: Node) -> None:
    """The application holds the reader past the node's 1 s linger: the notice is
    lost with the connection, the client infers the cut (the same node closed it)."""
    errors: list[ClientError] = []
    got: list[Message] = []
    release = threading.Event()
    with connect(flood=CUT, error_cb=errors.append, reconnect_s=10) as c:
        c.subscribe("cut/y", callback=_blocked(release, got))
        mark = len(node.proc.lines)
        _flood("cut/y")
        node.proc.wait_for(r"closed: cannot deliver", 10, after=mark)  # the cut (ipc_client.py)
        threading.Timer(1.5, release.set).start()  # past the node's linger after it (CUT_LINGER_S)
        assert poll(lambda: bool(errors), timeout=10), "the cut was not reported"
        [err] = errors
        assert isinstance(err, SlowConsumerCut) and err.dropped is None and err.reconnected
        assert c.cuts == 1


def test_without_error_cb_a_cut_is_a_warning(node: Node, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="raims.client")
    got: list[Message] = []
    release = threading.Event()
    with connect(flood=CUT, reconnect_s=10) as c:
        c.subscribe("cut/w", callback=_blocked(release, got))
        mark = len(node.proc.lines)
        _flood("cut/w")
        node.proc.wait_for(r"closed: cannot deliver", 10, after=mark)  # the cut made (not only queued)
        release.set()
        assert poll(lambda: c.cuts == 1, timeout=10)
        assert any("Slow Consumer: the node cut this client" in r.getMessage() for r in caplog.records
                   if r.name == "raims.client")


def test_a_node_restart_is_a_lost_connection_not_a_cut(node: Node) -> None:
    errors: list[ClientError] = []
    with connect(reconnect_s=20, error_cb=errors.append) as c:
        c.subscribe("cut/r")
        node.proc.stop(signal.SIGKILL)
        node.proc = node.start()
        assert poll(lambda: bool(errors), timeout=20)
        [err] = errors
        assert type(err) is ConnectionLost and err.reconnected and c.cuts == 0


def test_the_asyncio_client_hears_of_a_cut_on_its_loop(node: Node) -> None:
    async def run() -> list[ClientError]:
        errors: list[ClientError] = []
        loop = asyncio.get_running_loop()
        async with await aconnect(flood=CUT, error_cb=errors.append, pending_msgs_limit=0) as c:
            got: list[Message] = []
            release = threading.Event()
            c.sync.subscribe("cut/a", callback=_blocked(release, got))
            await loop.run_in_executor(None, _flood, "cut/a")
            release.set()
            for _ in range(200):
                if errors:
                    break
                await asyncio.sleep(0.05)
            assert c.cuts == 1
        return errors

    errors = asyncio.run(run())
    assert len(errors) == 1 and isinstance(errors[0], SlowConsumerCut)
