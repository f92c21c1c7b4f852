"""Exactly-once, in-order delivery per origin over redundant links (seed 004 section 1.7):
two servers whose logs hold the same messages in different interleavings feed one client
at once, in random pieces; the client's log gets each origin's messages once, in order.
Also the feed's fall-back to the log when its link pushes back, and the link protocol."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from raims_node.msglog import config, paths, wire
from raims_node.msglog.errors import ProtocolError
from raims_node.msglog.feed import Feed
from raims_node.msglog.log import FsyncPolicy, MessageLog, create_log
from raims_node.msglog.node import CabalNode
from raims_node.msglog.reader import LogReader
from raims_node.msglog.record import encode_message
from raims_node.msglog.state import State

CAB = config.build(
    "cab",
    ["a", "b", "c"],
    {
        n: {"id": i, "type": "hub", "server": f"unix:///tmp/{n}.s", "client": f"unix:///tmp/{n}.c"}
        for i, n in enumerate(["a", "b", "c"], 1)
    },
)


def server_log(root: Path, name: str, number: int, order: list[tuple[int, int]]) -> MessageLog:
    create_log(root, "cab", name, number)
    log = MessageLog.open(root, "cab", name, fsync=FsyncPolicy.NONE, max_file_size=4096)
    for origin, mid in order:
        log.append(origin, mid, b"%d:%d" % (origin, mid))
    return log


def interleaving(rng: random.Random, counts: dict[int, int]) -> list[tuple[int, int]]:
    nxt = dict.fromkeys(counts, 1)
    out = []
    while any(nxt[o] <= counts[o] for o in counts):
        o = rng.choice([o for o in counts if nxt[o] <= counts[o]])
        out.append((o, nxt[o]))
        nxt[o] += 1
    return out


@pytest.mark.parametrize("seed", range(5))
def test_two_redundant_feeds_deliver_once_in_order(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    counts = {1: 300, 2: 200, 9: 50}
    a = server_log(tmp_path, "a", 1, interleaving(rng, counts))
    b = server_log(tmp_path, "b", 2, interleaving(rng, counts))
    create_log(tmp_path, "cab", "c", 3)
    c_log = MessageLog.open(tmp_path, "cab", "c", fsync=FsyncPolicy.NONE)
    c_log.append(2, 1, b"2:1")  # the client already has one message
    node = CabalNode(CAB, "c", c_log)
    pipes: list[bytearray] = [bytearray(), bytearray()]
    feeds = [
        Feed(log, c_log.state, 3, pipe.extend) for log, pipe in zip((a, b), pipes, strict=True)
    ]
    decoders = [wire.Decoder(records=True), wire.Decoder(records=True)]
    for d in decoders:
        d.feed(wire.encode_hello({"role": "server"}))
    for f in feeds:
        f.pump()
    assert all(f.live for f in feeds)
    a.append(1, 301, b"1:301")  # live, after catch-up, on one path only
    while any(pipes):
        i = rng.randrange(2)
        n = rng.randrange(1, 700)
        piece, pipes[i][:] = bytes(pipes[i][:n]), pipes[i][n:]
        for ev in decoders[i].feed(piece):
            assert isinstance(ev, wire.Messages)
            node.receive(ev.data, ev.spans)
    got: dict[int, list[int]] = {}
    for r in LogReader(paths.log_dir(tmp_path, "cab", "c")).all_records():
        got.setdefault(r.origin, []).append(r.mid)
        assert r.data == b"%d:%d" % (r.origin, r.mid)
    assert got == {1: list(range(1, 302)), 2: list(range(1, 201)), 9: list(range(1, 51))}
    assert node.counters["duplicates"] > 0 and node.counters["gaps"] == 0
    for log in (a, b, c_log):
        log.close()


def test_feed_falls_back_to_the_log_when_the_link_pushes_back(tmp_path: Path) -> None:
    log = server_log(tmp_path, "a", 1, [(1, i) for i in range(1, 51)])
    out = bytearray()
    feed = Feed(log, State(), 3, out.extend)
    feed.pump()
    assert feed.live
    feed.pause()
    for i in range(51, 151):  # rolls over files too (4 KiB files)
        log.originate(b"1:%d" % i)
    n_paused = len(out)
    feed.resume()
    assert len(out) > n_paused and feed.live
    log.originate(b"1:151")
    d = wire.Decoder(records=True)
    d.feed(wire.encode_hello({}))
    (msgs,) = d.feed(bytes(out))
    assert isinstance(msgs, wire.Messages)
    assert [s[1] for s in msgs.spans] == list(range(1, 152))
    # never the client's own messages, never what its state has
    out2 = bytearray()
    Feed(log, State({1: 140}), 1, out2.extend).pump()
    assert out2 == b""
    out3 = bytearray()
    Feed(log, State({1: 140}), 2, out3.extend).pump()
    (m3,) = d.feed(bytes(out3))
    assert isinstance(m3, wire.Messages) and [s[1] for s in m3.spans] == list(range(141, 152))
    log.close()


def test_link_protocol_rejects_bad_bytes() -> None:
    with pytest.raises(ProtocolError, match="hello"):
        wire.Decoder(records=True).feed(b"GET / HTTP/1.1\r\n\r\n")
    d = wire.Decoder(records=True)
    d.feed(wire.encode_hello({"x": 1}))
    rec = bytearray(encode_message(1, 1, 5, b"abc"))
    rec[-1] ^= 1
    with pytest.raises(ProtocolError, match="checksum"):
        d.feed(bytes(rec))
    s = wire.Decoder(records=False)
    s.feed(wire.encode_hello({}))
    assert s.feed(b"x") == []  # not yet a whole record
    with pytest.raises(ProtocolError, match="other than a keepalive"):
        s.feed(encode_message(1, 1, 0, b"")[1:])
    partial = wire.Decoder(records=True)
    whole = wire.encode_hello({"a": 1}) + encode_message(2, 7, 5, b"xyz")
    events = [ev for i in range(len(whole)) for ev in partial.feed(whole[i : i + 1])]
    assert isinstance(events[0], wire.Hello) and events[0].fields == {"a": 1}
    assert isinstance(events[1], wire.Messages) and events[1].spans[0][1] == 7


@pytest.mark.parametrize(
    ("client_number", "have"), [(0, {}), (3, {1: 500, 3: 1200}), (3, {3: 1200})]
)
def test_bulk_catch_up_sends_raw_runs_and_delivers_exactly_once(
    tmp_path: Path, client_number: int, have: dict[int, int]
) -> None:
    order = interleaving(random.Random(7), {1: 3000, 3: 1200})
    create_log(tmp_path, "cab", "a", 1)
    log = MessageLog.open(tmp_path, "cab", "a", fsync=FsyncPolicy.NONE, max_file_size=200_000)
    for origin, mid in order:
        log.append(origin, mid, b"%d:%d" % (origin, mid) + bytes(100))
    name = "c" if client_number else "s"
    create_log(tmp_path, "cab", name, client_number)
    c_log = MessageLog.open(tmp_path, "cab", name, fsync=FsyncPolicy.NONE)
    for origin, mid in order:  # what the client already has, in the same order
        if mid <= have.get(origin, 0):
            c_log.append(origin, mid, b"%d:%d" % (origin, mid) + bytes(100))
    cab = config.build(
        "cab",
        ["a", "c", "s"],
        {
            "a": {"id": 1, "type": "hub", "server": "unix:///a", "client": "unix:///b"},
            "c": {"id": 3, "type": "hub", "server": "unix:///c", "client": "unix:///d"},
            "s": {"id": 0, "type": "spoke"},
        },
    )
    node = CabalNode(cab, name, c_log)
    pipe = bytearray()
    feed = Feed(log, c_log.state, client_number, pipe.extend)
    feed.pump()
    log.append(1, 3001, b"1:3001" + bytes(100))  # live after the catch-up
    assert feed.live and feed.bulk_bytes > 0
    d = wire.Decoder(records=True)
    d.feed(wire.encode_hello({}))
    for i in range(0, len(pipe), 50_000):
        for ev in d.feed(bytes(pipe[i : i + 50_000])):
            assert isinstance(ev, wire.Messages)
            node.receive(ev.data, ev.spans)
    got: dict[int, list[int]] = {}
    for r in LogReader(paths.log_dir(tmp_path, "cab", name)).all_records():
        got.setdefault(r.origin, []).append(r.mid)
    assert got == {1: list(range(1, 3002)), 3: list(range(1, 1201))}
    assert node.counters["gaps"] == 0
    log.close()
    c_log.close()


def test_keepalives_pass_between_messages_and_are_never_delivered() -> None:
    client = wire.Decoder(records=True)
    client.feed(wire.encode_hello({}))
    stream = (
        encode_message(1, 1, 5, b"a")
        + wire.KEEPALIVE
        + encode_message(1, 2, 5, b"b")
        + wire.KEEPALIVE
    )
    events = [ev for i in range(0, len(stream), 7) for ev in client.feed(stream[i : i + 7])]
    runs = [ev for ev in events if isinstance(ev, wire.Messages)]
    assert [s[1] for r in runs for s in r.spans] == [1, 2] and client.keepalives == 2
    assert all(b"K" not in r.data[4:5] for r in runs)
    server = wire.Decoder(records=False)
    assert server.feed(wire.encode_hello({}) + wire.KEEPALIVE * 3) == [wire.Hello({})]
    assert server.keepalives == 3
    bad = bytearray(wire.KEEPALIVE)
    bad[8] = 1  # a "keepalive" with data
    with pytest.raises(ProtocolError, match="keepalive"):
        server.feed(bytes(bad) + b"x")
