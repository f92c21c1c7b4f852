"""The inbox stream's replay window and its loss count (NodeState.inbox_accept): a gap
counts as loss until the late message arrives; `show loss` keeps a time only while
there is a count (manual: "the count and time stamp of the last instance")."""

from __future__ import annotations

from raims_node.router.peer import Peer
from raims_node.router.state import NodeState


def _peer() -> Peer:
    return Peer(bridge=bytes(16), user="B", start_ns=1)


def test_a_gap_is_loss_with_its_time_until_the_late_message_fills_it() -> None:
    peer = _peer()
    accept = NodeState.inbox_accept
    assert accept(peer, 1, 100, "u_inbox_auth")
    assert accept(peer, 4, 200, "u_inbox_sync_req")  # 2 and 3 missing
    assert (peer.loss.ibx_loss, peer.loss.ibx_time) == (2, 200)
    assert accept(peer, 2, 300, "u_inbox_sync_req")
    assert (peer.loss.ibx_loss, peer.loss.ibx_time) == (1, 200)  # one gap left, seen at 200
    assert not accept(peer, 2, 350, "u_inbox_sync_req")  # a repeat: refused, counts nothing
    assert accept(peer, 3, 400, "u_inbox_sync_req")
    assert (peer.loss.ibx_loss, peer.loss.ibx_time) == (0, 0)  # nothing lost: no time either
    assert accept(peer, 6, 500, "u_inbox_sync_req")
    assert (peer.loss.ibx_loss, peer.loss.ibx_time) == (1, 500)
