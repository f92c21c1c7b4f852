"""Our own state seen with a higher seqno than we hold: jumped above and re-announced.

Every node holds every peer's session key (a member can sign any node's frames), so a
member can forge our `_Z.BLM`, `_S`/`_P` updates or `_Z.ADJ` with a sub or link seqno
far above ours: the others then took none of our real updates (all below it) until we
restarted (2026-11-27, docs/DESIGN-NOTES.md "Link adversary"). OSPF's rule (RFC 2328
13.4): a router receiving its own LSA with a higher sequence number jumps its own above it
and re-originates. Floods reach every node, the origin included, so the forgery comes
back to us as an echo of our own floods does (Node._receive); ours never carry a seqno
above what we hold, so the check costs the echoes of our own floods only (never data).

Re-announcing: our sub and link seqnos jump one past the highest seen, our filter is
flooded (`_Z.BLM`: the others take it at once) and our summary (`_Z.ADD`: its link seqno
is newer than theirs, so they ask for our links and subject lists as after any update
they missed). A flood seqno seen above ours is jumped to as well (the others' duplicate
check would drop our next floods). At the top of the space (within ROOM of 2**64 - 1:
our later changes must still count up) no jump is made: counted
(`rejects.own_seqno_top`) and logged; only a restart (a new bridge: "a restart is a new
incarnation", docs/DESIGN-NOTES.md) reclaims it then. Any seqno the others accept can be
forged, so the top needs an incarnation, and ours is the bridge id.
"""

from __future__ import annotations

from raims_node.linkstate.records import MAX_SEQNO, PeerRecord
from raims_node.router.batch import Z_BAT
from raims_node.router.interest import Interest
from raims_node.router.messages import get_int, summary_fields
from raims_node.router.state import NodeState
from raims_node.wire import Fid, Header, MsgType, peek, peeked_fields
from raims_node.wire import subjects as S

_Z_BAT_B = Z_BAT.encode()
ROOM = 1 << 32  # seqnos a jump leaves for our later changes; above MAX_SEQNO - ROOM: the top


def _seqnos(data: bytes, head: Header, bridge: bytes) -> tuple[int, int, int]:
    """(flood seqno, sub seqno, link seqno) a flood of `bridge` carries (an origin batch:
    the highest of its updates)."""
    d = dict(peeked_fields(data, head, lazy=True))
    seqno, sub, link = get_int(d, Fid.SEQNO, 0), get_int(d, Fid.SUB_SEQNO, 0), get_int(d, Fid.LINK_STATE, 0)
    if head.subject == _Z_BAT_B:
        for fid, inner in peeked_fields(data, head, lazy=True):
            if fid == Fid.DATA and isinstance(inner, bytes):
                h = peek(inner)
                if h.bridge == bridge and h.msg_type == MsgType.RTR_ALERT and h.subject != _Z_BAT_B:
                    _, s, k = _seqnos(inner, h, bridge)
                    sub, link = max(sub, s), max(link, k)
    return seqno, sub, link


def own_flood(st: NodeState, interest: Interest, data: bytes, head: Header, now_ns: int) -> None:
    """A flood whose source is this node: an echo of ours (dropped), or a member's
    forgery above our seqnos (jumped above and re-announced, see the module doc)."""
    if head.msg_type != MsgType.RTR_ALERT:
        return
    seqno, sub, link = _seqnos(data, head, st.bridge)
    if seqno <= st.bcast_seqno and sub <= st.sub_seqno and link <= st.link_seqno:
        return  # an echo of ours
    if not st.mac.verify(data):
        st.counters.bad_mac += 1
        return
    if st.bcast_seqno < seqno < MAX_SEQNO - ROOM:
        st.bcast_seqno = seqno
    if sub <= st.sub_seqno and link <= st.link_seqno:
        return
    if max(sub, link) >= MAX_SEQNO - ROOM:
        st.count_reject("own_seqno_top")
        st.log("our state was seen at the top of the seqno space (a member forged it): only a restart "
               "reclaims it", key="own_seqno_top")
        return
    st.count_reject("own_seqno")
    st.log(f"our state was seen with a higher seqno (sub {sub}, link {link}): announced above it",
           key="own_seqno")
    st.sub_seqno = max(st.sub_seqno, sub) + 1
    st.link_seqno = max(st.link_seqno, link) + 1
    st.db.put_peer(PeerRecord(st.bridge, st.user, st.start_ns, st.sub_seqno))
    st.db.apply_full(st.bridge, st.link_seqno, st.db.links(st.bridge))
    interest.bcast_bloom(now_ns)
    st.bcast(S.Z_ADD, [(Fid.PEER_DB, summary_fields(st.summary(st.bridge)))], now_ns)
    st.changed("own_seqno")
