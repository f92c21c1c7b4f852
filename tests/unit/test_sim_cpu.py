"""What makes a converging network cheaper to simulate (issue 24, lane 24e): lazy
nested fields, records interned by their bytes, shared filter replicas, the event ring
(a simulated network sharing one replica: tests/sim/test_sim_batch.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raims_node.bloom import BloomFilter, shared_replica
from raims_node.linkstate import LinkRecord
from raims_node.router.events import Ev, Event, EventRecorder
from raims_node.router.messages import (
    MalformedMessage,
    PeerSummary,
    link_fields,
    link_of,
    links_value,
    parse_link,
    parse_links,
    parse_summary,
    summary_fields,
)
from raims_node.wire import (
    BadField,
    Fid,
    Nested,
    decode_fields,
    encode_fields,
    encode_frame,
    peek,
    peeked_fields,
)
from raims_node.wire.fields import MAX_NESTING

A, B, C = bytes([1]) * 16, bytes([2]) * 16, bytes([3]) * 16


def _link(peer: bytes, tport_id: int = 1, cost: int = 100) -> LinkRecord:
    return LinkRecord(A, f"t{tport_id}", tport_id, peer, (cost, cost, 2 * cost, 70_000))


def _lazy(fields: list[tuple[int, object]]) -> dict[int, object]:
    return dict(decode_fields(encode_fields(fields), lazy=True))


def test_lazy_decode_leaves_nested_messages_encoded_and_they_decode_the_same() -> None:
    fields = [(Fid.SEQNO, 7), (Fid.ADJACENCY, [(Fid.ADJACENCY, link_fields(_link(B)))]), (Fid.BLOOM, b"raw")]
    raw = encode_fields(fields)
    lazy = decode_fields(raw, lazy=True)
    assert lazy[0] == (Fid.SEQNO, 7) and lazy[2] == (Fid.BLOOM, b"raw")  # opaque bytes stay bytes
    nested = lazy[1][1]
    assert isinstance(nested, Nested)
    assert nested.fields() == decode_fields(raw)[1][1]
    assert isinstance(nested.fields(lazy=True)[0][1], Nested)
    assert encode_fields(lazy) == raw  # a Nested is sent as it came


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 65_535), st.integers(0, 1 << 20)), max_size=6))
def test_lazy_and_eager_decode_agree(costs: list[tuple[int, int]]) -> None:
    fields: list[tuple[int, object]] = [
        (Fid.ADJACENCY, [(Fid.TPORTID, tid), (Fid.COST, cost)]) for cost, tid in costs
    ]
    raw = encode_fields(fields)
    assert [(f, v.fields() if isinstance(v, Nested) else v) for f, v in decode_fields(raw, lazy=True)] == \
        decode_fields(raw)


def test_nesting_depth_is_checked_when_a_lazy_message_is_decoded() -> None:
    value: list[tuple[int, object]] = [(Fid.SEQNO, 1)]
    for _ in range(MAX_NESTING):
        value = [(Fid.ADJACENCY, value)]
    raw = encode_fields(value)  # MAX_NESTING levels: fine
    decode_fields(raw)
    nested = decode_fields(raw, lazy=True)[0][1]
    assert isinstance(nested, Nested)
    nested.fields()  # depth travels with the Nested
    too_deep = Nested(nested.raw, MAX_NESTING + 1)
    with pytest.raises(BadField):
        too_deep.fields()


def test_peeked_fields_is_decode_frame_without_the_frame() -> None:
    data = bytes(encode_frame(2, "_Z.ADJ", A, [(Fid.SEQNO, 3), (Fid.LINK_STATE, 9)]))
    assert peeked_fields(data, peek(data)) == [(Fid.SEQNO, 3), (Fid.LINK_STATE, 9)]
    with pytest.raises(Exception, match="buffer has"):
        peeked_fields(data + b"\0\0", peek(data + b"\0\0"))


def test_links_and_summaries_parse_the_same_from_nested_bytes_and_are_interned() -> None:
    link = _link(B)
    d = _lazy([(Fid.ADJACENCY, link_fields(link))])
    got = link_of(A, d[Fid.ADJACENCY])
    assert got == link == parse_link(A, link_fields(link))
    again = link_of(A, _lazy([(Fid.ADJACENCY, link_fields(link))])[Fid.ADJACENCY])
    assert again is got  # the same bytes, the same record
    assert link_of(C, _lazy([(Fid.ADJACENCY, link_fields(_link(B)))])[Fid.ADJACENCY]).bridge == C
    s = PeerSummary(B, "b", 5, 6, 7)
    lazy_s = _lazy([(Fid.PEER_DB, summary_fields(s))])[Fid.PEER_DB]
    assert parse_summary(lazy_s) == s == parse_summary(summary_fields(s))
    with pytest.raises(MalformedMessage):
        parse_summary(b"not nested")
    with pytest.raises(MalformedMessage):
        link_of(A, None)


def test_a_full_state_sends_interned_links_as_their_received_bytes() -> None:
    links = [_link(B, 1), _link(C, 2, 1000)]
    value = [(Fid.ADJACENCY, link_fields(x)) for x in links]
    lazy = _lazy([(Fid.ADJACENCY, value)])[Fid.ADJACENCY]
    parsed = parse_links(A, lazy)
    assert parsed == links
    out = links_value(parsed)
    assert all(isinstance(v, Nested) for _, v in out)
    assert encode_fields(out) == encode_fields(links_value(links)) == encode_fields(value)  # same bytes
    assert parse_links(A, value) == links and parse_links(A, None) == []


def test_bad_link_in_nested_bytes_is_malformed_and_not_interned() -> None:
    bad = _lazy([(Fid.ADJACENCY, [(Fid.SYNC_BRIDGE, A)])])[Fid.ADJACENCY]  # a link of A to itself
    for _ in range(2):
        with pytest.raises(MalformedMessage):
            link_of(A, bad)


def test_shared_replica_is_decoded_once_and_copied_before_a_change() -> None:
    owner = BloomFilter(seed=11)
    owner.add_subject("a.b")
    raw = owner.to_bytes()
    f1, f2 = shared_replica(raw), shared_replica(bytes(raw))
    assert f1 is f2 and f1.matches("a.b") and f1.is_replica
    mine = f1.copy()
    mine.add_subject("x.y")
    assert mine.matches("x.y") and not f1.matches("x.y")
    mine.remove_subject("a.b")
    assert not mine.matches("a.b") and f1.matches("a.b")
    assert BloomFilter.from_bytes(raw).to_bytes() == raw == f1.copy().to_bytes()


def test_event_ring_keeps_tuples_and_reads_events() -> None:
    r = EventRecorder(size=2)
    for i in range(3):
        r.add(i, Ev.RECV_BLOOM, user=f"u{i}")
    assert len(r) == 2 and r.total == 3
    assert list(r) == [Event(1, "", "u1", "", Ev.RECV_BLOOM, ""), Event(2, "", "u2", "", Ev.RECV_BLOOM, "")]
    assert r.names() == ["recv_bloom", "recv_bloom"]
    assert r.rows()[0] == {"stamp": 1, "tport": "", "user": "u1", "peer": "", "event": "recv_bloom", "data": ""}
