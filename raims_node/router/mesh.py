"""Mesh membership: every member of a mesh transport learns every other member's url.

Manual "Mesh": a new member tells the member it joined through its url (`mesh_req`);
the answer (`mesh_rpy`) lists the other members, and those members are told of the new
one, so every pair learns of each other. Of a pair, the member with the smaller bridge
id dials, so a pair makes one link.
"""

from __future__ import annotations

from raims_node.router.actions import Connect
from raims_node.router.messages import get_bytes, get_str, nested_fields
from raims_node.router.peer import Peer
from raims_node.router.state import Conn, NodeState, Tport
from raims_node.wire import Fid


class Mesh:
    def __init__(self, st: NodeState) -> None:
        self.st = st
        self.urls: dict[int, str] = {}  # tport_id -> our listener's url
        self.member_urls: dict[tuple[int, bytes], str] = {}  # (tport_id, peer) -> its url
        self.dialed: set[tuple[int, bytes]] = set()

    def on_link_up(self, conn: Conn, peer: Peer, now_ns: int) -> None:
        url = self.urls.get(conn.tport.tport_id)
        if conn.tport.type == "mesh" and url is not None:
            self.st.send_inbox(peer.bridge, "mesh_req", [(Fid.TPORT, conn.tport.name), (Fid.MESH_URL, url)], now_ns)

    def on_link_down(self, conn: Conn, b: bytes) -> None:
        self.dialed.discard((conn.tport.tport_id, b))

    def forget(self, b: bytes) -> None:
        """A removed peer's urls: a restarted member is a new bridge that tells its own."""
        self.member_urls = {k: u for k, u in self.member_urls.items() if k[1] != b}
        self.dialed = {k for k in self.dialed if k[1] != b}

    def in_mesh_req(self, peer: Peer, d: dict[int, object], via: bytes, now_ns: int) -> None:
        """A mesh member tells us its url: answer with the other members we know, and
        tell those members about it, so that every pair of members learns of each other."""
        st = self.st
        tport = self._tport(get_str(d, Fid.TPORT))
        url = get_str(d, Fid.MESH_URL)
        if tport is None or not url:
            return
        self.member_urls[(tport.tport_id, peer.bridge)] = url
        members = [(b, u) for (tid, b), u in self.member_urls.items()
                   if tid == tport.tport_id and b != peer.bridge and st.conn_for(tid, b)]
        me = self.urls.get(tport.tport_id)
        entries = [(Fid.MESH_DB, [(Fid.SYNC_BRIDGE, b), (Fid.MESH_URL, u)]) for b, u in members]
        if me:
            entries.append((Fid.MESH_DB, [(Fid.SYNC_BRIDGE, st.bridge), (Fid.MESH_URL, me)]))
        st.send_inbox(peer.bridge, "mesh_rpy", [(Fid.TPORT, tport.name), (Fid.MESH_DB, entries)], now_ns)
        news = [(Fid.MESH_DB, [(Fid.SYNC_BRIDGE, peer.bridge), (Fid.MESH_URL, url)])]
        for b, _ in members:
            st.send_inbox(b, "mesh_rpy", [(Fid.TPORT, tport.name), (Fid.MESH_DB, news)], now_ns)

    def in_mesh_rpy(self, peer: Peer, d: dict[int, object], via: bytes, now_ns: int) -> None:
        st = self.st
        tport = self._tport(get_str(d, Fid.TPORT))
        entries = nested_fields(d.get(Fid.MESH_DB))  # decoded lazily (node.py)
        if tport is None or entries is None:
            return
        for fid, sub in entries:
            if fid != Fid.MESH_DB or not isinstance(sub, list):
                continue
            e = dict(sub)
            b, url = get_bytes(e, Fid.SYNC_BRIDGE), get_str(e, Fid.MESH_URL)
            key = (tport.tport_id, b)
            if b == st.bridge or not url or st.conn_for(tport.tport_id, b):
                continue
            self.member_urls[key] = url
            # the member with the smaller bridge dials, so a pair makes one link
            if st.bridge < b and key not in self.dialed:
                self.dialed.add(key)
                st.out.append(Connect(tport.tport_id, url))

    def _tport(self, name: str) -> Tport | None:
        return next((t for t in self.st.tports if t.name == name and t.type == "mesh"), None)
