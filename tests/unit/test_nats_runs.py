"""Pipelined PUB runs in the NATS parser (`runs=True`): the same operations as one by one."""

from __future__ import annotations

import pytest

from raims_node.bridges.nats_proto import NatsParser, NatsProtocolError, Ping, Pub, PubRun
from raims_node.wire.batch import PackedRun


def _flat(events: list[object]) -> list[tuple[str, bytes]]:
    out: list[tuple[str, bytes]] = []
    for ev in events:
        if isinstance(ev, PubRun):
            out += [(ev.subject, p) for p in ev.payloads]
        elif isinstance(ev, Pub):
            out.append((ev.subject, ev.payload))
    return out


def test_a_run_is_one_event_after_its_first_pub() -> None:
    data = b"".join(b"PUB a.b 4\r\n%04d\r\n" % i for i in range(100)) + b"PING\r\nPUB a.b 4\r\nlast\r\n"
    events = NatsParser(runs=True).feed(data)
    assert [type(e) for e in events] == [Pub, PubRun, Ping, PubRun]  # the line was seen before
    stream = NatsParser(runs=True).feed(data[:data.index(b"PING")] + b"PUB a.b 4\r\nxy")
    assert isinstance(stream[1].payloads, PackedRun)  # checked at once: kept in the read buffer
    assert _flat(stream) == _flat(events)[:100]
    assert _flat(events) == [("a.b", b"%04d" % i) for i in range(100)] + [("a.b", b"last")]


def test_runs_split_at_any_byte_give_the_same_messages() -> None:
    data = b"".join(b"PUB s %d\r\n%s\r\n" % (len(p), p) for p in [b"x" * 5] * 50 + [b"yy"] * 3 + [b"x" * 5] * 7)
    want = _flat(NatsParser().feed(data))
    for cut in (1, 7, 13, 100, len(data) - 3):
        parser = NatsParser(runs=True)
        assert _flat(parser.feed(data[:cut]) + parser.feed(data[cut:])) == want, cut


def test_a_payload_without_crlf_inside_a_run_is_still_an_error() -> None:
    data = b"PUB s 2\r\nab\r\nPUB s 2\r\ncd\r\nPUB s 2\r\nefXX"
    with pytest.raises(NatsProtocolError) as err:
        NatsParser(runs=True).feed(data)
    assert _flat(err.value.events) == [("s", b"ab"), ("s", b"cd")]


def test_a_bad_record_inside_a_long_run_is_found() -> None:
    good = b"PUB s 3\r\nabc\r\n"
    data = good * 20 + b"PUB s 3\r\nabcXX" + good * 20
    with pytest.raises(NatsProtocolError) as err:
        NatsParser(runs=True).feed(data)
    assert _flat(err.value.events) == [("s", b"abc")] * 20


def test_payloads_holding_the_control_line_are_payloads() -> None:
    body = b"PUB s 13\r\n\r\n0"  # 13 bytes that look like the next line
    data = b"PUB s 13\r\n" + body + b"\r\n"
    events = NatsParser(runs=True).feed(data * 40)
    assert _flat(events) == [("s", body)] * 40


@pytest.mark.parametrize(("first", "then", "lone"), [
    (b"PUB a.b 4\r\nabcd\r\n", b"PUB a.b 4\r\nwxyz\r\n", ("a.b", b"wxyz")),
    (b"PUB a.b 4\r\nabcd\r\n", b"PUB a.b 4\r\nwxyz\r\nPING\r\n", None),  # more than one operation
    (b"PUB a.b 4\r\nabcd\r\n", b"PUB a.b 5\r\nwxyzz\r\n", None),  # another line
    (b"PUB a.b 4\r\nabcd\r\n", b"PUB a.b 4\r\nwxyzXX", None),  # no CRLF after the payload
    (b"PUB a.b 4\r\nabcd\r\n", b"PUB a.b 4\r\nwx", None),  # incomplete
    (b"PUB a.b r 4\r\nabcd\r\n", b"PUB a.b r 4\r\nwxyz\r\n", None),  # a reply
    (b"HPUB a.b 2 4\r\nhhab\r\n", b"HPUB a.b 2 4\r\nhhcd\r\n", None),  # headers
    (b"PUB a.b 4\r\nab", b"cd\r\n", None),  # something buffered
])
def test_lone_pub_is_what_feed_would_give(first: bytes, then: bytes, lone: tuple[str, bytes] | None) -> None:
    parser, twin = NatsParser(runs=True), NatsParser(runs=True)
    parser.feed(first)
    twin.feed(first)
    assert parser.lone_pub(then) == lone
    if lone is not None:  # the state after it is the one feed leaves
        assert _flat(twin.feed(then)) == [lone]
        more = b"PUB a.b 4\r\nnext\r\nPUB c 1\r\nx\r\n"
        assert _flat(parser.feed(more)) == _flat(twin.feed(more))
