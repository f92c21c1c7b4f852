"""crypto/replay.SeqWindow: a peer's auth seqnos, each taken once, in any order within
AUTH_WINDOW of the highest."""

from __future__ import annotations

from raims_node.crypto.replay import AUTH_WINDOW, SeqWindow


def test_out_of_order_seqnos_are_taken_once() -> None:
    w = SeqWindow()
    for seqno in (5, 2, 7, 6, 1):
        assert w.fresh(seqno)
        w.mark(seqno)
    assert not any(w.fresh(s) for s in (1, 2, 5, 6, 7))
    assert w.fresh(3) and w.fresh(4) and w.fresh(8)


def test_older_than_the_window_is_a_replay() -> None:
    w = SeqWindow()
    w.mark(1)
    w.mark(1 + AUTH_WINDOW)
    assert not w.fresh(1) and w.fresh(2)
    w.mark(10 * AUTH_WINDOW)  # a jump past the window forgets everything below it
    assert not w.fresh(10 * AUTH_WINDOW - AUTH_WINDOW) and w.fresh(10 * AUTH_WINDOW - 1)
    assert not w.fresh(0)
