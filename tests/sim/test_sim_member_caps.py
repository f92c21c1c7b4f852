"""What a member (a valid key) may make the other nodes hold or spend, capped (2026-11-27,
branch member-caps). See docs/DESIGN-NOTES.md, "Link adversary"."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from functools import cache

import numpy as np
import pytest

from raims_node.bloom import BloomFilter
from raims_node.bloom.codec import FilterImage, encode_image
from raims_node.crypto.credentials import Credentials
from raims_node.crypto.mac import MacKey
from raims_node.linkstate.db import MAX_PEER_LINKS
from raims_node.linkstate.records import MAX_SEQNO, LinkRecord
from raims_node.router.interest import MAX_BLOOM_BYTES
from raims_node.router.messages import summary_fields
from raims_node.router.node import NS, Node
from raims_node.router.sim import Jitter, SimNetwork
from raims_node.wire import Fid, MsgType, encode_frame
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


def _forge_own_bloom(net: SimNetwork, b: Node, sub_seqno: int, flood_seqno: int, via: str) -> None:
    """A member's `_Z.BLM` of B (signed with B's key, which every member holds): B's
    filter emptied, at `sub_seqno`, sent to `via` only (the member's neighbour)."""
    frame = encode_frame(MsgType.RTR_ALERT, S.Z_BLM, b.bridge, [
        (Fid.SEQNO, flood_seqno), (Fid.TIME, net.now), (Fid.SUB_SEQNO, sub_seqno),
        (Fid.BLOOM, BloomFilter().to_bytes())])
    MacKey(b.session_key).sign(frame)
    node = net.nodes[via].node
    conn = next(c for c in node.conns.values() if c.peer is not None and c.peer != b.bridge)
    net._apply(via, node.on_frame(conn.conn_id, bytes(frame), net.now))


@pytest.mark.parametrize("seed", [1, 2, 5])
def test_a_forged_own_filter_above_our_seqno_is_reclaimed(creds: Callable[[str], Credentials], seed: int) -> None:
    """B's filter forged with sub seqno 2**63 (and a flood seqno far above B's): the
    others held it, and B's real subscriptions were frozen out (every later update of B
    was below it) until B restarted. Now B, seeing its own state above its seqnos, jumps
    above and re-announces; the others follow B's real subscriptions again."""
    net = build(creds, seed=seed, cls=lambda c, seed: SimNetwork(c, seed=seed, jitter=Jitter(seed=seed)))
    a, b = net.nodes["A"].node, net.nodes["B"].node
    net.subscribe("B", "real.subject")
    net.run_until(lambda: all(n.node.interest("real.subject")[1] == 1 for n in net.live() if n.node is not b),
                  timeout_ns=2 * NS)
    _forge_own_bloom(net, b, 1 << 63, b.state.bcast_seqno + 1000, "C")
    net.run_for(NS)
    net.subscribe("B", "later.subject")
    net.run_for(2 * NS)
    for name in "ACD":
        n = net.nodes[name].node
        assert n.interest("real.subject")[1] == 1 and n.interest("later.subject")[1] == 1, name
        assert n.peers[b.bridge].sub_seqno == b.state.sub_seqno
        assert n.peers[b.bridge].subjects == {"real.subject", "later.subject"}
    assert b.state.sub_seqno > 1 << 63 and b.state.counters.rejects.get("own_seqno") == 1
    assert a.state.converged


def test_a_forged_own_filter_at_the_top_of_the_seqno_space_is_counted(creds: Callable[[str], Credentials]) -> None:
    """At 2**64 - 1 no seqno is above: B counts and logs it (only a restart reclaims)."""
    net = build(creds)
    b = net.nodes["B"].node
    _forge_own_bloom(net, b, MAX_SEQNO, MAX_SEQNO, "C")
    net.run_for(NS)
    assert b.state.counters.rejects.get("own_seqno_top", 0) >= 1 and b.state.sub_seqno < 1 << 32
    net.subscribe("B", "x")  # B's own announcements still work
    net.run_for(NS)
    assert net.nodes["B"].node.sub_seqno < 1 << 32
