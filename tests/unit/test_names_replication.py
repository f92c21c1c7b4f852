"""Replication: per-origin seqnos, dumps on peer up, held updates, gaps, repeats, bad frames."""

from __future__ import annotations

import json

from raims_node.names.replication import Delta, Flood, Replace, Replicator, Unicast
from raims_node.names.table import Publication, Scope

ME, B = b"A" * 16, b"B" * 16
NS = 1_000_000_000


def pub(key: int, scope: Scope = Scope.CLUSTER, node: bytes = B) -> Publication:
    return Publication(17, key, key, scope, node, 1, key, "in", "B")


def origin_frames() -> tuple[Replicator, list[bytes]]:
    """B's replicator and the three updates it floods."""
    b = Replicator(B, lambda: [pub(1), pub(3)])
    frames = []
    for out in (b.local_change([pub(1)], []), b.local_change([pub(2)], []), b.local_change([pub(3)], [pub(2)])):
        assert len(out) == 1 and isinstance(out[0], Flood)
        frames.append(out[0].data)
    assert b.local_change([pub(9, Scope.NODE)], []) == []  # node scope is never sent
    return b, frames


def test_peer_up_asks_for_a_dump_and_retries_until_answered() -> None:
    a = Replicator(ME, list)
    out = a.peer_up(B, "B", 0)
    assert len(out) == 1 and isinstance(out[0], Unicast) and out[0].dest == B
    assert a.tick(NS // 2) == []
    again = a.tick(NS)
    assert len(again) == 1 and isinstance(again[0], Unicast)
    b, _ = origin_frames()
    _, answer = b.frame(ME, "A", out[0].data, 0)
    assert isinstance(answer[0], Unicast) and answer[0].dest == ME
    changes, sends = a.frame(B, "B", answer[0].data, NS)
    assert sends == [] and isinstance(changes[0], Replace) and {p.key for p in changes[0].pubs} == {1, 3}
    assert a.tick(10 * NS) == []  # answered: no more requests
    a.peer_down(B)
    assert a.origins == {}


def test_updates_in_order_apply_repeats_are_ignored() -> None:
    a = Replicator(ME, list)
    _, frames = origin_frames()
    dump = json.dumps({"o": "d", "s": 0, "p": []}).encode()
    a.peer_up(B, "B", 0)
    a.frame(B, "B", dump, 0)
    got = [a.frame(B, "B", f, 0)[0] for f in frames]
    assert [type(c[0]) for c in got] == [Delta, Delta, Delta]
    assert got[2][0].removed == [2] and [p.key for p in got[2][0].added] == [3]  # type: ignore[union-attr]
    assert a.frame(B, "B", frames[1], 0) == ([], []) and a.repeats == 1


def test_updates_before_the_dump_are_held_and_replayed_after_it() -> None:
    a = Replicator(ME, list)
    _, frames = origin_frames()
    a.peer_up(B, "B", 0)
    assert a.frame(B, "B", frames[2], 0)[0] == []  # seq 3 before any dump: held
    dump = json.dumps({"o": "d", "s": 2, "p": [[17, 1, 1, 2, 1, 1, "in"], [17, 2, 2, 2, 1, 2, "in"]]}).encode()
    changes, sends = a.frame(B, "B", dump, 0)
    assert [type(c) for c in changes] == [Replace, Delta] and sends == []


def test_a_gap_asks_for_a_new_dump() -> None:
    a = Replicator(ME, list)
    _, frames = origin_frames()
    a.peer_up(B, "B", 0)
    a.frame(B, "B", json.dumps({"o": "d", "s": 0, "p": []}).encode(), 0)
    changes, sends = a.frame(B, "B", frames[2], 0)  # seq 3 after 0
    assert changes == [] and len(sends) == 1 and isinstance(sends[0], Unicast)


def test_bad_frames_are_counted_and_change_nothing() -> None:
    a = Replicator(ME, list)
    for data in (b"", b"[]", b"{", b'{"o":"u","s":"x"}', b'{"o":"u","s":1,"a":[[1]],"r":[]}',
                 b'{"o":"d","s":1,"p":[[17,5,4,2,1,1,"in"]]}', b'{"o":"z","s":1}',
                 b'{"o":"u","s":1,"a":[[17,1,1,3,1,1,"in"]],"r":[]}'):
        assert a.frame(B, "B", data, 0) == ([], [])
    assert a.bad_frames == 8


def test_a_beacon_ahead_of_the_table_asks_for_a_dump() -> None:
    b = Replicator(B, list, beacon_ns=10 * NS)
    assert b.tick(0) == []
    b.local_change([pub(1)], [])
    assert b.tick(5 * NS) == []
    beacon = b.tick(10 * NS)
    assert len(beacon) == 1 and isinstance(beacon[0], Flood)
    a = Replicator(ME, list)
    a.peer_up(B, "B", 0)
    a.frame(B, "B", json.dumps({"o": "d", "s": 1, "p": []}).encode(), 0)
    assert a.frame(B, "B", beacon[0].data, 0) == ([], [])  # up to date
    b.local_change([pub(2)], [])  # an update A never gets
    later = b.tick(20 * NS)
    _, ask = a.frame(B, "B", later[0].data, 0)
    assert len(ask) == 1 and isinstance(ask[0], Unicast) and a.lagging == 1
