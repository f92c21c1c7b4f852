"""A member that holds the service key and lies (2026-11-27, branch link-adversary): what
it can make the other nodes spend. See docs/DESIGN-NOTES.md, "Link adversary"."""

from __future__ import annotations

import os
from collections.abc import Callable

from raims_node.crypto.credentials import Credentials
from raims_node.crypto.mac import MacKey
from raims_node.linkstate.records import LinkRecord
from raims_node.router.messages import link_fields
from raims_node.router.node import NS, Node
from raims_node.router.sim import MS, Jitter, SimNetwork
from raims_node.router.state import PARK_BYTES, PARK_SOURCES
from raims_node.wire import Fid, MsgType, encode_frame
from raims_node.wire import subjects as S
from tests.sim.test_sim_basic import build


def _advert_fake_link(b: Node, now_ns: int) -> None:
    """B's `_Z.ADJ`, validly signed, adding a link to a bridge no node knows."""
    st = b.state
    link = LinkRecord(st.bridge, "evil", 7, os.urandom(16), (1, 1, 1, 1), "tcp")
    st.link_seqno += 1
    st.db.apply_delta(st.bridge, st.link_seqno, True, link)
    st.bcast(S.Z_ADJ, [(Fid.LINK_STATE, st.link_seqno), (Fid.LINK_ADD, True),
                       (Fid.ADJACENCY, link_fields(link))], now_ns)


def test_links_to_unknown_bridges_are_asked_about_a_bounded_number_of_times(
        creds: Callable[[str], Credentials]) -> None:
    """Each node asks its neighbours for the peer at the end of a new link; a failed
    reply was followed by another request 20-40 ms later, forever: 200 made-up links
    kept 200 requests pending on every node, A sent 40,000 sync_req in 10 s (2,000
    links: 115 s of CPU for 20 s of the 4 nodes). Now each is given up after
    SYNC_FAIL_LIMIT failures in a row."""
    net = build(creds)
    a, b = net.nodes["A"].node, net.nodes["B"].node
    for _ in range(200):
        _advert_fake_link(b, net.now)
    net.run_for(2 * NS)
    assert len(a.db.links(b.bridge)) >= 200  # believed: a member's adverts are trusted
    net.run_for(8 * NS)
    assert not a.state.sync.pending
    before = a.counters.pub_send.get("u_inbox_sync_req", 0)
    net.run_for(10 * NS)
    assert a.counters.pub_send.get("u_inbox_sync_req", 0) == before


def test_a_node_restarted_every_100_ms_leaves_no_ghost(creds: Callable[[str], Credentials]) -> None:
    """B restarted (kill -9, new bridge, same user) every 100 ms, 50 times: the others'
    state stays bounded and the network converges on the last B alone. Before, a sync
    reply about an incarnation already removed brought it back (with links no node
    listed any more) and the network never converged again (seed 3: 1 of 12 seeds)."""
    net = build(creds, seed=3, cls=lambda c, seed: SimNetwork(c, seed=seed, jitter=Jitter(seed=seed)))
    for _ in range(50):
        net.restart("B")
        net.run_for(100 * MS)
    net.run_until(net.converged, timeout_ns=10 * NS)
    for s in net.live():
        assert sorted(p.user for p in s.node.peers.values()) == sorted(set("ABCD") - {s.name})
        assert len(s.node.state._bcast_seen) <= 16_384 and not s.node.state.sync.pending


def test_frames_from_made_up_sources_are_parked_within_a_budget_and_released(
        creds: Callable[[str], Credentials]) -> None:
    """A member sends 256 KiB frames from 300 bridges no node knows. A parks the frames
    of an unknown source until its key comes (the sync reply may be behind the frame):
    at most PARK_BYTES and PARK_SOURCES, and none once the requests are given up. Before,
    64 MiB stayed parked for good and every source got an entry past the cap."""
    net = build(creds)
    a = net.nodes["A"].node
    link = net.links["link_ab"]
    conn = link.conn_a if link.a == "A" else link.conn_b
    big = bytes(256 << 10)
    for _ in range(300):
        frame = encode_frame(MsgType.MCAST, "x.y", os.urandom(16), [(Fid.SEQNO, 1), (Fid.DATA, big)])
        MacKey(os.urandom(32)).sign(frame)
        a.on_frame(conn, bytes(frame), net.now)
    sync = a.state.sync
    assert len(sync.parked) <= PARK_SOURCES
    assert sum(len(d) for frames in sync.parked.values() for _, d in frames) == sync.parked_bytes <= PARK_BYTES
    net.run_for(30 * NS)
    assert not sync.parked and sync.parked_bytes == 0
