"""The sans-IO PGM core on a simulated LAN: discovery, in-order delivery through random
loss (NAK, NCF, RDATA), window expiry counted as unrecoverable loss, the wire codec."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from raims_node.transports import pgm_wire as w
from raims_node.transports.pgm import PgmError, parse_address
from raims_node.transports.pgm_core import Frames, Loss, PeerDown, PeerUp, PgmCore, PgmParams

Drop = Callable[[int, int, bytes], bool]


class Lan:
    """Cores on one broadcast domain; zero latency; `drop(src, dst, packet)` loses."""

    def __init__(self, n: int, params: PgmParams, seed: int = 1, drop: Drop | None = None) -> None:
        self.now = 0.0
        self.rng = random.Random(seed)
        self.drop: Drop = drop or (lambda s, d, p: False)
        self.cores = [PgmCore(bytes([i + 1]) * 8, (f"10.0.0.{i + 1}", 5000 + i), params, 0.0, random.Random(seed + i))
                      for i in range(n)]
        self.by_inbox = {c.inbox: i for i, c in enumerate(self.cores)}
        self.by_tsi = {c.tsi: i for i, c in enumerate(self.cores)}
        self.got: list[dict[int, list[bytes]]] = [{} for _ in range(n)]  # at i: from j
        self.peers: list[set[int]] = [set() for _ in range(n)]
        self.losses: list[int] = [0] * n
        self.downs: list[int] = [0] * n

    def pump(self) -> None:
        for _ in range(10_000):
            moved = False
            for i, core in enumerate(self.cores):
                out, events = core.take()
                for ev in events:
                    if isinstance(ev, PeerUp):
                        j = self.by_tsi[ev.tsi]
                        self.peers[i].add(j)
                        core.send_unicast(ev.tsi, b"hello from %d" % i, self.now)  # the router's HELLO
                        core.flush(self.now)
                        moved = True
                    elif isinstance(ev, Frames):
                        self.got[i].setdefault(self.by_tsi[ev.tsi], []).extend(ev.frames)
                    elif isinstance(ev, Loss):
                        self.losses[i] += ev.count
                    elif isinstance(ev, PeerDown):
                        self.downs[i] += 1
                for dest, pkt in out:
                    moved = True
                    targets = [j for j in range(len(self.cores)) if j != i] if dest is None else [self.by_inbox[dest]]
                    for j in targets:
                        if not self.drop(i, j, pkt):
                            self.cores[j].receive(pkt, self.now)
            if not moved:
                return
        raise AssertionError("the simulated LAN did not settle")

    def run(self, seconds: float) -> None:
        until = self.now + seconds
        for _ in range(1_000_000):
            due = min(c.next_due() for c in self.cores)
            self.now = max(self.now, min(due, until))
            for c in self.cores:
                c.tick(self.now)
            self.pump()
            if self.now >= until:
                return
        raise AssertionError("timers did not advance")

    def publish(self, i: int, frame: bytes) -> None:
        """Multicast data (frame byte 0 type bits 0) from node i to every peer it knows."""
        core = self.cores[i]
        for j in sorted(self.peers[i]):
            core.send_group(self.cores[j].tsi, frame)
        core.flush(self.now)
        self.pump()

    def data(self, i: int, j: int) -> list[bytes]:
        return [f for f in self.got[i].get(j, []) if not f.startswith(b"hello")]


def _msg(k: int, size: int = 40) -> bytes:
    return b"\x00" + k.to_bytes(4, "big") + bytes(size)


def test_discovery_and_hello_over_the_inbox() -> None:
    lan = Lan(3, PgmParams(mtu=1500))
    lan.run(1.0)
    assert lan.peers == [{1, 2}, {0, 2}, {0, 1}]
    for i in range(3):
        for j in range(3):
            if i != j:
                assert lan.got[i][j] == [b"hello from %d" % j]


def test_random_loss_is_repaired_in_order() -> None:
    rng = random.Random(7)
    lan = Lan(3, PgmParams(mtu=1500), drop=lambda s, d, p: rng.random() < 0.05)
    lan.run(1.0)
    sent = [_msg(k, 40 + (k % 7) * 300) for k in range(2000)]  # records span packets too
    for k, m in enumerate(sent):
        lan.publish(0, m)
        if k % 50 == 0:
            lan.run(0.01)
    lan.run(3.0)
    assert lan.data(1, 0) == sent
    assert lan.data(2, 0) == sent
    assert sum(c.counters.naks_sent for c in lan.cores) > 0
    assert lan.cores[0].counters.ncf > 0
    assert lan.losses == [0, 0, 0]


def test_group_records_reach_only_their_receivers() -> None:
    lan = Lan(3, PgmParams(mtu=1500))
    lan.run(1.0)
    core = lan.cores[0]
    core.send_group(lan.cores[1].tsi, _msg(1))
    core.flush(lan.now)
    lan.pump()
    assert lan.data(1, 0) == [_msg(1)]
    assert lan.data(2, 0) == []
    assert lan.cores[2].counters.not_for_us == 1


def test_window_expiry_is_unrecoverable_loss() -> None:
    cut = {"on": False}
    lan = Lan(2, PgmParams(mtu=1500, txw_sqns=8), drop=lambda s, d, p: cut["on"] and d == 1)
    lan.run(1.0)
    lan.publish(0, _msg(0))
    cut["on"] = True
    for k in range(1, 40):
        lan.publish(0, _msg(k))
    cut["on"] = False
    lan.publish(0, _msg(40))
    lan.run(2.0)
    got = lan.data(1, 0)
    assert got[0] == _msg(0) and got[-1] == _msg(40)
    assert lan.losses[1] > 0 and lan.cores[1].counters.lost == lan.losses[1]
    # what the window still held (the last 8 packets) was repaired and delivered in order
    assert got == [_msg(0)] + [_msg(k) for k in range(33, 41)]
    assert lan.losses[1] == 32


def test_silent_peer_expires() -> None:
    gone = {"on": False}
    lan = Lan(2, PgmParams(mtu=1500), drop=lambda s, d, p: gone["on"] and s == 1)
    lan.run(1.0)
    gone["on"] = True
    lan.run(12.0)
    assert lan.downs[0] == 1 and lan.cores[0].peers == {}


def test_codec_round_trip_and_refusals() -> None:
    tsi, inbox = b"\x01" * 8, ("10.1.2.3", 4000)
    pkt = w.decode(w.encode_data(tsi, inbox, True, 9, 5, 2, 7, 0, b"abc"))
    assert (pkt.type, pkt.unicast, pkt.sid, pkt.sqn, pkt.trail, pkt.glead, pkt.payload, pkt.inbox) == \
        (w.ODATA, True, 9, 5, 2, 7, b"abc", inbox)
    assert w.decode(w.as_rdata(w.encode_data(tsi, inbox, False, 0, 1, 0, 0, 0, b"x"))).type == w.RDATA
    nak = w.decode(w.encode_nak(tsi, inbox, False, b"\x02" * 8, 0, [3, 4]))
    assert nak.sqns == (3, 4) and nak.source == b"\x02" * 8
    for bad in (b"", b"Pg", b"XX" + bytes(30), w.encode_spm(tsi, inbox, False, 0, 1, 0, 0, 0) + b"!",
                w.encode_nak(tsi, inbox, False, tsi, 0, [1, 2])[:-1],
                w.encode_data(tsi, inbox, False, 0, 0, 0, 0, 9, b"ab")):
        with pytest.raises(w.PgmWireError):
            w.decode(bad)
    core = PgmCore(tsi, inbox, PgmParams(), 0.0)
    core.receive(b"garbage", 0.0)
    assert core.counters.bad == 1


def test_address_syntax() -> None:
    a = parse_address("192.168.1.0;224.4.4.4,225.5.5.5;226.6.6.6")
    assert (a.network, a.recv, a.send) == ("192.168.1.0", ("224.4.4.4", "225.5.5.5"), "226.6.6.6")
    a = parse_address("eth0;239.1.2.3")
    assert (a.network, a.recv, a.send) == ("eth0", ("239.1.2.3",), "239.1.2.3")
    assert parse_address(";239.192.0.1").network == ""
    for bad in ("eth0;10.0.0.1", "eth0;", "a;b;c;d", "eth0;239.1.2.3;nope"):
        with pytest.raises(PgmError):
            parse_address(bad)


def test_a_far_trail_is_counted_without_walking_the_range() -> None:
    lan = Lan(2, PgmParams(mtu=1500))
    lan.run(1.0)
    lan.publish(0, _msg(1))
    src, rx = lan.cores[0], lan.cores[1]
    far = 3_000_000_000
    rx.receive(w.encode_spm(src.tsi, src.inbox, False, 0, 99, far, far, far), lan.now)
    lan.pump()
    assert rx.counters.lost == far - 2  # sqns 2 .. far-1: never sent, as far as it knows
    src.group.next_sqn = far  # the source goes on from there: delivered again
    lan.publish(0, _msg(2))
    assert lan.data(1, 0) == [_msg(1), _msg(2)]


def test_made_up_sessions_are_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    from raims_node.transports import pgm_core

    monkeypatch.setattr(pgm_core, "MAX_PEERS", 5)
    core = PgmCore(b"\x01" * 8, ("10.0.0.1", 1), PgmParams(), 0.0)
    for k in range(20):
        core.receive(w.encode_spm(k.to_bytes(8, "big"), ("10.0.0.9", 9), False, 0, 1, 1, 0, 0), 0.0)
    assert len(core.peers) == 5 and core.counters.peers_refused == 15


def test_group_window_starts_when_the_first_inbox_packet_is_lost_for_good() -> None:
    """B never gets A's first unicast packet (its window moved on): B's window of A's
    group still opens, after the least group lead A's later unicast packets carried."""
    state = {"drop_uni": True}

    def drop(s: int, d: int, p: bytes) -> bool:
        return s == 0 and d == 1 and state["drop_uni"] and bool(p[3] & w.F_UNICAST) and p[2] != w.SPM

    lan = Lan(2, PgmParams(mtu=1500, txw_sqns=1), drop=drop)
    lan.run(1.0)
    a, b = lan.cores
    a.send_unicast(b.tsi, b"\x20second", lan.now)
    a.flush(lan.now)
    lan.pump()
    state["drop_uni"] = False
    a.send_unicast(b.tsi, b"\x20third", lan.now)
    a.flush(lan.now)
    lan.run(1.0)
    assert b.peers[a.tsi].group is not None
    lan.publish(0, _msg(5))
    assert lan.data(1, 0)[-1:] == [_msg(5)]
    assert b.counters.lost >= 1
