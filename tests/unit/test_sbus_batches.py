"""The sbus server's batched syscalls (bridges/mmsg.py) on a real SOCK_SEQPACKET pair,
the Outbox's batch pop / put back in every order, and the raims conventions' parsers
(shard patterns, ack payloads) of sbus_proto."""

from __future__ import annotations

import errno
import socket
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from raims_node.bridges import mmsg
from raims_node.bridges import sbus_proto as sp

needs_mmsg = pytest.mark.skipif(not mmsg.available(), reason="no recvmmsg/sendmmsg on this platform")


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    a.setblocking(False)
    b.setblocking(False)
    yield a, b
    a.close()
    b.close()


@needs_mmsg
def test_packets_cross_whole_and_in_order(pair: tuple[socket.socket, socket.socket]) -> None:
    a, b = pair
    packets = [b"MSG k\x00" + bytes([i % 256]) * (i * 7 % 300) for i in range(600)]
    packets[5] = bytearray(b"MSG not-bytes\x00x")  # type: ignore[call-overload]  # copied, not mis-addressed
    tx, rx = mmsg.Sender(64), mmsg.Receiver(32, 1024)
    sent, got = 0, []
    for _ in range(1000):  # the socket holds a few hundred: send and read in turns
        sent += tx.send(a.fileno(), packets[sent:])
        try:
            sizes = rx.recv(b.fileno())
        except BlockingIOError:
            break
        got += [rx.mem[i * rx.slot:i * rx.slot + n] for i, n in enumerate(sizes)]
    assert sent == len(packets) and got == [bytes(p) for p in packets]


@needs_mmsg
def test_a_full_socket_takes_part_then_none(pair: tuple[socket.socket, socket.socket]) -> None:
    a, b = pair
    tx = mmsg.Sender(256)
    packet = b"MSG k\x00" + b"x" * 100
    taken = tx.send(a.fileno(), [packet] * 100_000)
    assert 0 < taken < 100_000
    assert tx.send(a.fileno(), [packet]) == 0  # would block: nothing taken, no error
    assert b.recv(4096) == packet  # the first one, whole


@needs_mmsg
def test_errors_and_end_of_file(pair: tuple[socket.socket, socket.socket]) -> None:
    a, b = pair
    tx, rx = mmsg.Sender(8), mmsg.Receiver(8, 64)
    with pytest.raises(BlockingIOError):
        rx.recv(b.fileno())
    huge = b"x" * (a.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) * 2)
    assert tx.send(a.fileno(), [b"one", huge, b"two"]) == 1  # stops before the one that fails
    with pytest.raises(OSError) as info:
        tx.send(a.fileno(), [huge, b"two"])
    assert info.value.errno == errno.EMSGSIZE
    assert rx.recv(b.fileno()) == [3]
    a.close()
    assert rx.recv(b.fileno())[0] == 0  # end-of-file reads as a zero-length packet


@given(st.sampled_from(["queue", "stack", "random"]), st.lists(st.binary(max_size=20), max_size=40),
       st.integers(0, 3), st.integers(1, 50), st.integers(0, 50))
def test_pop_batch_then_unpop_batch_restores_the_order(order: str, packets: list[bytes], answers: int,
                                                       k: int, sent: int) -> None:
    box = sp.Outbox()
    box.control(b"order/" + order.encode())
    for p in packets:
        assert box.offer(p) == "queued"
    for i in range(answers):
        box.force(b"answer %d" % i)
    ref = sp.Outbox()
    ref.control(b"order/" + order.encode())
    for p in packets:
        ref.offer(p)
    for i in range(answers):
        ref.force(b"answer %d" % i)
    expected = [ref.pop() for _ in range(len(ref))]
    batch = box.pop_batch(k)
    assert batch == expected[:len(batch)] and len(batch) == min(k, len(expected))
    sent = min(sent, len(batch))
    box.unpop_batch(batch[sent:])
    rest = [box.pop() for _ in range(len(box))]
    assert rest == expected[sent:]
    assert box.bytes == 0 and box.pop() is None


def test_offer_all_stops_at_an_error() -> None:
    box = sp.Outbox(max_bytes=10, max_packets=100)
    box.control(b"blocking/hard/error")
    assert box.offer_all([b"12345", b"12345", b"x", b"y"]) == "error"
    assert box.packets == 2
    box = sp.Outbox()
    box.control(b"blocking/soft/discard")
    assert box.offer_all([b"a", b"b"]) == "discarded" and box.discarded == 2 and not box


def test_shard_patterns_and_ack_payloads() -> None:
    assert sp.shard_split(b"_SHARD/1/4/foo/*") == (1, 4, b"foo/*")
    assert sp.shard_split(b"_SHARD/2/2/") == (2, 2, b"")
    assert sp.shard_split(b"_SHARD/x/4/foo") is None
    assert sp.shard_split(b"_SHARD/1/4") is None
    assert sp.shard_split(b"foo/_SHARD/1/4/x") is None
    assert sp.ack_request(b"in/box\x00a/b\x00hello\x00world") == (b"in/box", b"a/b", b"hello\x00world")
    assert sp.ack_request(b"in/box\x00a/b\x00") == (b"in/box", b"a/b", b"")
    for bad in (None, b"", b"in/box", b"in/box\x00a/b", b"\x00a/b\x00x", b"in\x00\x00x"):
        assert sp.ack_request(bad) is None
