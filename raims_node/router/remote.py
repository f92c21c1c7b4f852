"""Operator services between nodes on inboxes: ping/pong, remote console commands, and
the ack and trace replies of publishes that ask for them.

Manual "Inbox Subjects" and the console's `ping`, `tping`, `mping`, `rem`, `ack`,
`trace`: a ping to one random peer every 1.5 heartbeats measures latency and clock skew
and compares the peer's link and subscription seqnos with ours ("ping_adj"); `rem` runs
a console command on the target node and its text returns on the numeric inbox
`_I.<source>.<token>`.

The console's pings carry a token: the pong echoes it, and the reply reaches the
console as a `Deliver` to the owner that asked (sid = the token, subject
`ping.<user>`, payload the round trip in ns and the arrival transport). `tping` sets the
trace option on the ping: every router that passes it on answers `_I.<source>.trace`.
`mping` publishes `_M.ping` on a chosen path; every node answers it with a pong (module
forward.py: `_M.` subjects go to every node on the tree, no filter pruning).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from raims_node.router.actions import Deliver
from raims_node.router.messages import MalformedMessage, get_int, get_str
from raims_node.router.peer import Peer
from raims_node.router.state import OPT_TRACE, NodeState
from raims_node.wire import Fid, Fields

ACK_HISTORY = 1024


class Remote:
    def __init__(self, st: NodeState) -> None:
        self.st = st
        self.acks: deque[tuple[str, str, str, int, str, int]] = deque(maxlen=ACK_HISTORY)  # (kind, user, ...)
        self.rem_handler: Callable[[str], str] | None = None
        self.next_ping_ns = st.start_ns + st.params.heartbeat_ns * 3 // 2
        self._rem_token = 0
        self._rem_waiters: dict[int, object] = {}

    def tick(self, now_ns: int) -> None:
        if now_ns >= self.next_ping_ns:
            self._ping(now_ns)

    def _ping(self, now_ns: int) -> None:
        st = self.st
        self.next_ping_ns = now_ns + st.params.heartbeat_ns * 3 // 2
        known = [b for b, p in st.peers.items() if p.session_key is not None]
        if not known:
            return
        b = known[st.rng.randrange(len(known))]
        peer = st.peers[b]
        peer.ping_sent += 1
        peer.ping_time_ns = now_ns
        st.send_inbox(b, "ping", [(Fid.STAMP, now_ns), (Fid.LINK_STATE, st.link_seqno),
                                  (Fid.SUB_SEQNO, st.sub_seqno)], now_ns)

    def ping(self, dest: bytes, owner: object, now_ns: int, trace: bool = False) -> int:
        """A console ping of `dest` (tping: `trace`); the pong comes back to `owner`."""
        token = self._waiter(owner)
        self.st.send_inbox(dest, "ping", [(Fid.STAMP, now_ns), (Fid.TOKEN, token)], now_ns,
                           opt=OPT_TRACE if trace else 0)
        return token

    def expect(self, owner: object) -> int:
        """A token whose replies go to `owner` (an mping's pongs)."""
        return self._waiter(owner)

    def cancel(self, token: int) -> None:
        self._rem_waiters.pop(token, None)

    def _waiter(self, owner: object) -> int:
        self._rem_token += 1
        self._rem_waiters[self._rem_token] = owner
        return self._rem_token

    def in_ping(self, peer: Peer, d: dict[int, object], via: bytes, now_ns: int) -> None:
        st = self.st
        peer.ping_recv += 1
        stamp = get_int(d, Fid.STAMP)
        if stamp > 0:
            peer.ping_skew_ns, peer.skew_time_ns = stamp + peer.latency_ns // 2 - now_ns, now_ns
        token = d.get(Fid.TOKEN)
        answer: Fields = [(Fid.STAMP, stamp), (Fid.TIME, now_ns)]
        if isinstance(token, int):  # a console's ping: its row names the transport it came in on here
            conn = st.neighbor_conn(via)
            answer += [(Fid.TOKEN, token), *([(Fid.TPORT, conn.tport.name)] if conn is not None else [])]
        st.send_inbox(peer.bridge, "pong", answer, now_ns)
        rec = st.db.peer(peer.bridge)
        if rec is not None and get_int(d, Fid.LINK_STATE) > rec.link_seqno:
            peer.ping_adj += 1
            st.request("adj", peer.bridge, peer.bridge, now_ns)
        elif rec is not None and get_int(d, Fid.SUB_SEQNO) > peer.sub_seqno:
            peer.ping_adj += 1
            st.sub_claim(peer, get_int(d, Fid.SUB_SEQNO), peer.bridge, now_ns)  # its floods may be on the way

    def in_pong(self, peer: Peer, d: dict[int, object], via: bytes, now_ns: int) -> None:
        sent = get_int(d, Fid.STAMP)
        if sent <= 0 or sent > now_ns:
            return
        peer.pong_recv += 1
        lat = now_ns - sent
        peer.latency_ns = lat
        peer.lat_max_ns = max(peer.lat_max_ns, lat)
        peer.lat_sum_ns += lat
        # their clock at the midpoint of the round trip, against ours
        peer.pong_skew_ns, peer.skew_time_ns = get_int(d, Fid.TIME) - (sent + lat // 2), now_ns
        token = d.get(Fid.TOKEN)
        owner = self._rem_waiters.get(token) if isinstance(token, int) else None
        if owner is not None:
            text = f"{lat} {get_str(d, Fid.TPORT)}".rstrip()
            self.st.out.append(Deliver(owner, str(token), f"ping.{peer.user}", None, text.encode(), peer.bridge))

    def pong(self, dest: bytes, stamp: int, token: int, tport: str, now_ns: int) -> None:
        """Answer an `_M.ping` from `dest` (forward.py), naming the transport it came on."""
        self.st.send_inbox(dest, "pong", [(Fid.STAMP, stamp), (Fid.TIME, now_ns), (Fid.TOKEN, token),
                                          (Fid.TPORT, tport)], now_ns)

    def in_ack(self, peer: Peer, d: dict[int, object], via: bytes, now_ns: int, kind: str = "ack") -> None:
        self.acks.append((kind, peer.user, get_str(d, Fid.SUBJECT), get_int(d, Fid.REF_SEQNO),
                          get_str(d, Fid.TPORT), now_ns))

    def in_trace(self, peer: Peer, d: dict[int, object], via: bytes, now_ns: int) -> None:
        self.in_ack(peer, d, via, now_ns, "trace")

    def remote(self, dest: bytes, command: str, owner: object, now_ns: int) -> None:
        token = self._waiter(owner)
        self.st.send_inbox(dest, "rem", [(Fid.TOKEN, token), (Fid.DATA, command.encode())], now_ns)

    def in_rem(self, peer: Peer, d: dict[int, object], via: bytes, now_ns: int) -> None:
        """A console command from another node: run it (when a handler is set) and send
        its text back on the numeric inbox `_I.<source>.<token>`."""
        command = d.get(Fid.DATA)
        token = get_int(d, Fid.TOKEN)
        if not isinstance(command, bytes):
            raise MalformedMessage("rem without a command")
        text = (self.rem_handler(command.decode(errors="replace")) if self.rem_handler is not None
                else "remote commands are not enabled on this node")
        self.st.send_inbox(peer.bridge, str(token), [(Fid.DATA, text.encode())], now_ns)

    def in_reply(self, peer: Peer, suffix: str, d: dict[int, object], now_ns: int) -> None:
        owner = self._rem_waiters.pop(int(suffix), None)
        data = d.get(Fid.DATA)
        if owner is not None and isinstance(data, bytes):
            self.st.out.append(Deliver(owner, suffix, f"rem.{peer.user}", None, data, peer.bridge))
