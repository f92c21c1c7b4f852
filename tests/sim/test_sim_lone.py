"""The lone-frame path (router/lone.py) against the general one (Node.on_frames).

`LoneSim` delivers every multicast data frame the way the daemon does when a link read
holds exactly that frame (transports/tcp.py -> transports/lone.py): `forward_lone`,
the frame sent on to what it returns, the deliveries taken from `take_actions`. The
same traffic through both simulators must give the same deliveries and counters; a
forged or corrupted frame is refused on the lone path too."""

from __future__ import annotations

import struct
from collections.abc import Callable

import pytest

from raims_node.bridges.gate import FlowGate
from raims_node.crypto.credentials import Credentials
from raims_node.linkstate.routes import path_for_hash
from raims_node.router.actions import Send
from raims_node.router.node import NS
from raims_node.router.reorder import FLUX_NS
from raims_node.router.sim import SimNetwork
from raims_node.transports.lone import LoneFrames
from raims_node.wire import (
    MsgType,
    encode_frame,
    encode_message_fields,
    frame_with_body,
    path_opt,
    subject_hash,
)
from raims_node.wire.batch import BATCH_DESC
from raims_node.wire.fields import Fid, FieldType, descriptor
from raims_node.wire.frame import BRIDGE_DESC, DIGEST_OFFSET, HEADER_SIZE
from tests.sim.test_sim_basic import build as build_manual

_HEAD = struct.Struct(">IIH")
_SEQNO_DESC = descriptor(FieldType.U64, Fid.SEQNO)


def lone_candidate(data: bytes) -> bool:
    """transports/tcp.py's test of a read: one whole multicast data frame."""
    word, _, bdesc = _HEAD.unpack_from(data)
    return word >> 29 == 0b100 and (word & 0xFFFFFF) + HEADER_SIZE == len(data) and bdesc == BRIDGE_DESC


class LoneSim(SimNetwork):
    lone_taken = 0

    def _send(self, who: str, act: Send) -> None:
        owner = self._conn_owner.get(act.conn_id)
        if owner is None or not owner[1].connected:
            return
        link = owner[1]
        if not lone_candidate(act.data):
            super()._send(who, act)
            return
        self.frames_sent += 1
        if self.drop is not None and self.drop(who, act):
            self.frames_dropped += 1
            return
        dest, dest_conn = (link.b, link.conn_b) if act.conn_id == link.conn_a else (link.a, link.conn_a)
        data = act.data

        def arrive() -> None:
            sim = self.nodes[dest]
            if not (sim.alive and link.connected and link.up):
                return
            lone = sim.node.lone
            sends = lone.forward_lone(dest_conn, data, self.now)
            if sends is None:
                self._apply(dest, sim.node.on_frame(dest_conn, data, self.now))
                return
            self.lone_taken += 1
            for cid in sends:
                self._send(dest, Send(cid, data))
            if lone.has_actions:
                self._apply(dest, lone.take_actions())

        self._schedule(self.arrival_ns(link, act.conn_id, dest), arrive)


def build(cls: type[SimNetwork], creds: Callable[[str], Credentials]) -> SimNetwork:
    net = build_manual(creds, seed=3, cls=cls)
    net.subscribe("D", "RSF.IBM.N")
    net.subscribe("B", "RSF.IBM.N")
    net.run_until(lambda: net.interest_known("D", "RSF.IBM.N") and net.interest_known("B", "RSF.IBM.N"))
    return net


def _traffic(net: SimNetwork) -> None:
    for i in range(40):
        net.publish("A", "RSF.IBM.N", f"m{i}".encode())
        net.publish("A", "RSF.MSFT.N", b"nobody wants this")
        net.publish("C", "RSF.IBM.N", f"c{i}".encode())
    net.run_for(NS // 10)


def _counters(net: SimNetwork, name: str) -> tuple[int, ...]:
    c = net.nodes[name].node.counters
    return c.frames_in, c.mcast_recv, c.forwarded, c.delivered, c.bad_mac


def test_lone_path_delivers_and_counts_as_the_general_path(creds: Callable[[str], Credentials]) -> None:
    plain, lone = build(SimNetwork, creds), build(LoneSim, creds)
    before = {n: (_counters(plain, n), _counters(lone, n)) for n in "ABCD"}
    _traffic(plain)
    _traffic(lone)
    assert isinstance(lone, LoneSim) and lone.lone_taken >= 150  # the path was taken
    for name in "BD":
        got = [(d.subject, d.payload, d.loss) for d in lone.nodes[name].delivered]
        assert got == [(d.subject, d.payload, d.loss) for d in plain.nodes[name].delivered]
        assert [p for s, p, _ in got if p.startswith(b"m")] == [f"m{i}".encode() for i in range(40)]  # in order
        assert [p for s, p, _ in got if p.startswith(b"c")] == [f"c{i}".encode() for i in range(40)]
    for name in "ABCD":
        p0, l0 = before[name]
        grew_plain = [a - b for a, b in zip(_counters(plain, name), p0, strict=True)]
        grew_lone = [a - b for a, b in zip(_counters(lone, name), l0, strict=True)]
        assert grew_lone == grew_plain
        for peer in lone.nodes[name].node.peers.values():
            assert (peer.loss.repeat, peer.loss.msg_loss) == (0, 0)


def _frame_from_a(net: SimNetwork) -> tuple[bytes, int]:
    """A frame A published for D's subscription, and B's connection it arrives on."""
    captured: list[tuple[bytes, int]] = []
    real = net._send

    def spy(who: str, act: Send) -> None:
        owner = net._conn_owner.get(act.conn_id)
        if who == "A" and owner is not None and lone_candidate(act.data) and "B" in (owner[1].a, owner[1].b):
            link = owner[1]
            captured.append((act.data, link.conn_b if act.conn_id == link.conn_a else link.conn_a))
        real(who, act)

    net._send = spy  # type: ignore[method-assign]
    net.publish("A", "RSF.IBM.N", b"probe")
    net.run_for(NS // 100)
    net._send = real  # type: ignore[method-assign]
    assert captured
    return captured[0]


@pytest.mark.parametrize("where", [DIGEST_OFFSET, DIGEST_OFFSET + 20, -3, 5])
def test_a_corrupted_frame_is_refused_on_the_lone_path(creds: Callable[[str], Credentials], where: int) -> None:
    net = build(LoneSim, creds)
    frame, conn_b = _frame_from_a(net)
    b = net.nodes["B"].node
    bad = bytearray(frame)
    bad[where] ^= 0x40  # the digest, the subject, the payload, the subject hash
    before_bad, before_delivered = b.counters.bad_mac, b.counters.delivered
    sends = b.lone.forward_lone(conn_b, bytes(bad), net.now)
    assert sends == () and b.counters.bad_mac == before_bad + 1
    assert not b.lone.has_actions and b.counters.delivered == before_delivered
    # the genuine frame, replayed after the network already delivered it: a repeat
    sends = b.lone.forward_lone(conn_b, frame, net.now)
    assert sends is not None and not b.lone.has_actions


def test_frames_the_lone_path_leaves_to_the_general_one(creds: Callable[[str], Credentials]) -> None:
    net = build(LoneSim, creds)
    frame, conn_b = _frame_from_a(net)
    b = net.nodes["B"].node
    acked = bytearray(frame)
    acked[0] |= 0x01  # the ACK option: answered on the full path
    assert b.lone.forward_lone(conn_b, bytes(acked), net.now) is None
    stranger = encode_frame(MsgType.MCAST, "RSF.IBM.N", bytes(range(16)), [])
    assert b.lone.forward_lone(conn_b, bytes(stranger), net.now) is None  # no key for that source
    own = encode_frame(MsgType.MCAST, "RSF.IBM.N", b.bridge, [])
    assert b.lone.forward_lone(conn_b, bytes(own), net.now) is None
    assert b.lone.forward_lone(99_999, frame, net.now) is None  # no such connection


@pytest.mark.parametrize("subject", ["RSF.IBM.N", "odd.len", "RSF.MSFT.N"])
def test_lone_publish_builds_the_general_frame(creds: Callable[[str], Credentials], subject: str) -> None:
    net = build(LoneSim, creds)
    net.run_for(FLUX_NS + 1)  # the links settled: no start told again (router/stream_start.py)
    a = net.nodes["A"].node
    general = [act for act in a.publish(subject, b"first", net.now) if isinstance(act, Send)]
    last = dict(a.state.pub_window.entries())[subject]  # lone.publish takes the next seqno
    before = (a.counters.published, a.counters.forwarded, a.counters.frames_out)
    made = a.lone.publish(subject, subject.encode(), net.now, None)  # odd and even sizes
    assert made is not None
    frame, sends = made
    sub = subject.encode()
    want = frame_with_body(MsgType.MCAST, sub, a.bridge, encode_message_fields(last + 1, 0, None, None, subject.encode()),
                           path_opt(path_for_hash(subject_hash(sub))), subject_hash(sub))
    a.state.mac.sign(want)
    assert frame == bytes(want)
    assert sends == tuple(act.conn_id for act in general)
    n = len(sends)
    assert (a.counters.published, a.counters.forwarded, a.counters.frames_out) == (
        before[0] + 1, before[1] + n, before[2] + n)
    assert a.lone.publish(subject, bytes(2 << 20), net.now, None) is None  # too large for the template
    assert a.lone.publish("_INBOX.x", b"r", net.now, None) is None  # anycast


def test_loss_and_repeats_are_counted_on_the_lone_path(creds: Callable[[str], Credentials]) -> None:
    net = build(LoneSim, creds)
    a, b = net.nodes["A"].node, net.nodes["B"].node
    net.publish("A", "RSF.IBM.N", b"start")  # the stream's first message (with a stamp) goes first
    net.run_for(FLUX_NS)  # past the routes' change (router/reorder.py): a gap is loss at once
    frames = []
    for i in range(3):
        made = a.lone.publish("RSF.IBM.N", b"p%d" % i, net.now, None)
        assert made is not None
        frames.append(made[0])
    conn_b = next(c.conn_id for c in b.state.conns.values() if c.peer == a.bridge)
    peer = b.peers[a.bridge]
    b.lone.forward_lone(conn_b, frames[0], net.now)
    b.lone.forward_lone(conn_b, frames[2], net.now)  # frames[1] lost on the way
    b.lone.forward_lone(conn_b, frames[2], net.now)  # and a replay
    got = [(act.payload, act.loss) for act in b.lone.take_actions()]  # type: ignore[attr-defined]
    assert got == [(b"p0", 0), (b"p2", 1)]
    assert (peer.loss.msg_loss, peer.loss.repeat) == (1, 1)


def test_a_signed_frame_with_a_bad_field_is_counted_not_raised(creds: Callable[[str], Credentials]) -> None:
    """A frame with a good MAC whose batch field overruns it (a faulty peer): on the lone
    path as on Node.on_frames, counted in bad_frames; the link's reader never sees it."""
    net = build(LoneSim, creds)
    a, b = net.nodes["A"].node, net.nodes["B"].node
    bad = frame_with_body(MsgType.MCAST, b"RSF.IBM.N", a.bridge,
                          struct.pack(">HQHI", _SEQNO_DESC, 1 << 40, BATCH_DESC, 999) + b"xx", 0,
                          subject_hash(b"RSF.IBM.N"))
    a.state.mac.sign(bad)
    conn_b = next(c.conn_id for c in b.state.conns.values() if c.peer == a.bridge)
    applied: list[object] = []
    lone = LoneFrames(b, {}, applied.extend, FlowGate())
    before = b.counters.bad_frames
    lone.received(conn_b, bytes(bad))
    assert b.counters.bad_frames == before + 1 and applied == []
