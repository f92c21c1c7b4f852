"""crypto/replay.SeqWindow as the inbox stream's window (`Peer.inbox`): what
`NodeState.inbox_accept` and router/share_hold.py ask of it besides the auth check
(tests/unit/test_auth_replay_window.py)."""

from __future__ import annotations

from raims_node.crypto.replay import SeqWindow


def test_accept_tells_the_gap_each_seqno_opens_or_fills() -> None:
    w = SeqWindow(size=8)
    assert w.accept(3) == 0  # the first: nothing before it is counted
    assert w.accept(4) == 0
    assert w.accept(7) == 2  # 5 and 6 skipped
    assert w.accept(5) == -1  # a gap filled
    assert w.accept(5) is None and w.accept(7) is None  # repeats
    assert w.accept(0) is None  # no stream numbers from 0
    assert w.accept(20) == 12 and w.top == 20
    assert w.accept(12) is None and w.accept(13) == -1  # 8 below the top is out of the window


def test_has_is_arrived_or_too_old_to_come() -> None:
    w = SeqWindow(size=8)
    for seqno in (1, 2, 4, 9):
        w.mark(seqno)
    assert [s for s in range(1, 11) if w.has(s)] == [1, 2, 4, 9]  # 1 is 8 below 9: too old
    w.mark(10)
    assert w.has(2) and not w.has(3) and w.has(10) and not w.has(11)


def test_the_inbox_window_is_4096_wide() -> None:
    from raims_node.router.peer import INBOX_WINDOW, Peer

    peer = Peer(bridge=bytes(16), user="B", start_ns=1)
    assert peer.inbox.size == INBOX_WINDOW == 4096
    peer.inbox.mark(5000)
    assert peer.inbox_recv == 5000 and peer.inbox.fresh(5000 - 4095) and not peer.inbox.fresh(5000 - 4096)
    assert SeqWindow().size == 64  # the auth window's default
