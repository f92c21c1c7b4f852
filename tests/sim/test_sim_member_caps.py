"""What a member (a valid key) may make the other nodes hold or spend, capped (2026-11-27,
branch member-caps). See docs/DESIGN-NOTES.md, "Link adversary"."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from functools import cache

import numpy as np

from raims_node.bloom import BloomFilter
from raims_node.bloom.codec import FilterImage, encode_image
from raims_node.crypto.credentials import Credentials
from raims_node.linkstate.db import MAX_PEER_LINKS
from raims_node.linkstate.records import LinkRecord
from raims_node.router.interest import MAX_BLOOM_BYTES
from raims_node.router.messages import summary_fields
from raims_node.router.node import NS, Node
from raims_node.wire import Fid
from raims_node.wire import subjects as S
from tests.sim.test_sim_basic import build
from tests.sim.test_sim_member_adversary import _advert_fake_link


@cache
def _filter_bytes(subjects: int) -> bytes:
    """A valid filter of `subjects` subjects at the last level (2**32 bits), as a node
    with that many subscriptions sends it (random positions: 1.76 bytes a subject at 1M)."""
    rng = np.random.default_rng(subjects)
    pos = np.sort(rng.integers(0, 1 << 32, subjects, dtype=np.uint64))
    return encode_image(FilterImage(1 << 32, 7, 1, subjects, 0, ((64, subjects, 0),), pos, ()))


def _flood_bloom(b: Node, seqno: int, raw: bytes, now_ns: int) -> None:
    b.state.bcast(S.Z_BLM, [(Fid.SUB_SEQNO, seqno), (Fid.BLOOM, raw)], now_ns)


def test_a_filter_over_the_cap_is_refused_unread_and_the_real_one_asked_again(
        creds: Callable[[str], Credentials]) -> None:
    """B's `_Z.BLM`, forged by a member with a valid 8.5 MB filter (6M subjects) and the
    next sub seqno: each node decoded it (~1.5 s each, 3.6 s for 21 MB) and held it as B's.
    Now it is a bad frame, counted, and each node asks for B's real filter again."""
    net = build(creds)
    b = net.nodes["B"].node
    big = _filter_bytes(6_000_000)
    assert len(big) > MAX_BLOOM_BYTES
    _flood_bloom(b, b.state.sub_seqno + 1, big, net.now)
    net.run_for(2 * NS)
    real = b.state.bloom.to_bytes()
    for name in "ACD":
        n = net.nodes[name].node
        peer = n.peers[b.bridge]
        assert isinstance(peer.bloom, BloomFilter) and peer.bloom.to_bytes() == real
        assert not peer.bloom_stale and peer.sub_seqno == b.state.sub_seqno
        assert n.state.counters.rejects.get("bad_bloom") == 1


def test_a_node_with_a_million_subscriptions_still_replicates(creds: Callable[[str], Credentials]) -> None:
    """1M subjects (1.76 MB, the manual's ~2 bytes a subscription) are well under the cap."""
    net = build(creds)
    b = net.nodes["B"].node
    raw = _filter_bytes(1_000_000)
    b.state.bloom = BloomFilter.from_bytes(raw)
    b.state.sub_seqno += 1
    _flood_bloom(b, b.state.sub_seqno, raw, net.now)
    net.run_for(NS)
    for name in "ACD":
        n = net.nodes[name].node
        peer = n.peers[b.bridge]
        assert peer.bloom_raw == raw and peer.sub_seqno == b.state.sub_seqno
        assert isinstance(peer.bloom, BloomFilter) and peer.bloom.subject_count == 1_000_000
        assert not n.state.counters.rejects.get("bad_bloom")


def test_a_peer_advertising_more_links_than_the_cap_is_trimmed(creds: Callable[[str], Credentials]) -> None:
    """B (a member) adverts links past MAX_PEER_LINKS (the Spark rollout's largest mesh
    lists 1,023 a node): every node held them all, each a route graph edge. Now each
    holds the cap, counts the rest, and the seqnos stay in step (no resync loop): a full
    set (one adjacency reply of 4,116 links), then deltas adding more."""
    net = build(creds)
    b = net.nodes["B"].node
    st = b.state
    fake = os.urandom(16)
    links = {(k.tport_id, k.peer_bridge): k for k in st.db.links(st.bridge)}
    for i in range(MAX_PEER_LINKS + 20 - len(links)):
        link = LinkRecord(st.bridge, "evil", 100 + i, fake, (1, 1, 1, 1), "tcp")
        links[(link.tport_id, link.peer_bridge)] = link
    st.link_seqno += 1
    st.db._links[st.bridge] = links  # B's own database lies too: bypass its cap
    st.db._sorted.pop(st.bridge, None)
    st.db._peers[st.bridge] = replace(st.db._peers[st.bridge], link_seqno=st.link_seqno)
    st.bcast(S.Z_ADD, [(Fid.PEER_DB, summary_fields(st.summary(st.bridge)))], net.now)
    net.run_for(NS)
    for _ in range(5):
        _advert_fake_link(b, net.now)
    net.run_for(NS)
    for name in "ACD":
        n = net.nodes[name].node
        assert len(n.db.links(b.bridge)) == MAX_PEER_LINKS
        assert n.db.peer(b.bridge).link_seqno == st.link_seqno  # type: ignore[union-attr]
        assert n.state.counters.rejects.get("link_cap") == 6
