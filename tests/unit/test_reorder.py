"""ReorderHold (router/reorder.py): which frames wait for a gap, and how they come out.

The stream and the window are real (router/seqwin.SubWindow); `redeliver` records what
the router would deliver again, checking the window as Forward._deliver_frame does."""

from __future__ import annotations

from raims_node.router.reorder import FLUX_NS, HELD_LIMIT, HOLD_NS, ReorderHold
from raims_node.router.seqwin import SubWindow, Verdict

SRC, SUBJ = b"S" * 16, "data.x"
T0 = 1_700_000_000_000_000_000
FIRST = (T0 >> 33 << 35) + 1  # a stream's first sequence at T0 (seqwin.new_stream_seqno)


class Receiver:
    """A subscriber's window and hold, delivering what does not wait."""

    def __init__(self) -> None:
        self.window = SubWindow(1 << 20, 10 * 10**9, T0)
        self.hold = ReorderHold(self.window, self.redeliver)
        self.delivered: list[tuple[int, int]] = []  # (seqno, loss)

    def receive(self, seqno: int, now_ns: int, due_ns: int = 0) -> None:
        frame = seqno.to_bytes(8, "big")
        if self.hold.busy(now_ns) and self.hold.wait(SRC, SUBJ, seqno, 0, frame, 0, 8, now_ns, due_ns):
            return
        verdict, loss = self.window.check(SRC, SUBJ, seqno, 0, now_ns)
        if verdict is not Verdict.REPEAT:
            self.delivered.append((seqno, loss))
        self.hold.release((SRC, SUBJ), now_ns)

    def redeliver(self, source: bytes, subject: str, frame: bytes, off: int, end: int, due_ns: int,
                  now_ns: int) -> None:
        self.receive(int.from_bytes(frame[off:end], "big"), now_ns, due_ns)


def started() -> Receiver:
    r = Receiver()
    r.receive(FIRST, T0)
    return r


def test_outside_a_route_change_a_gap_is_loss_at_once() -> None:
    r = started()
    r.receive(FIRST + 3, T0 + 1)
    assert r.delivered == [(FIRST, 0), (FIRST + 3, 2)] and not r.hold.held


def test_during_a_change_frames_ahead_of_a_gap_wait_for_it_and_follow_in_order() -> None:
    r = started()
    r.hold.routes_changed(T0)
    for s in (FIRST + 3, FIRST + 4, FIRST + 2):
        r.receive(s, T0 + 1_000)
    assert r.delivered == [(FIRST, 0)]
    assert r.hold.next_due_ns() == T0 + 1_000 + HOLD_NS
    r.receive(FIRST + 1, T0 + 2_000)  # the gap fills: everything after it, in order
    assert r.delivered == [(FIRST, 0), (FIRST + 1, 0), (FIRST + 2, 0), (FIRST + 3, 0), (FIRST + 4, 0)]
    assert not r.hold.held and r.hold.next_due_ns() is None


def test_what_never_comes_is_counted_lost_when_the_held_frames_are_due() -> None:
    r = started()
    r.hold.routes_changed(T0)
    r.receive(FIRST + 5, T0 + 1_000)
    r.receive(FIRST + 6, T0 + 2_000)
    r.hold.release_due(T0 + 1_000 + HOLD_NS - 1)
    assert r.delivered == [(FIRST, 0)]
    r.hold.release_due(T0 + 1_000 + HOLD_NS)
    assert r.delivered == [(FIRST, 0), (FIRST + 5, 4), (FIRST + 6, 0)]


def test_a_stream_that_holds_frames_keeps_holding_after_the_change() -> None:
    r = started()
    r.hold.routes_changed(T0)
    r.receive(FIRST + 2, T0 + 1)
    r.receive(FIRST + 3, T0 + FLUX_NS + 1)  # none may overtake what waits
    assert len(r.hold.held[(SRC, SUBJ)]) == 2
    r.receive(FIRST + 1, T0 + FLUX_NS + 2)
    assert [s for s, _ in r.delivered] == [FIRST, FIRST + 1, FIRST + 2, FIRST + 3]


def test_a_stream_holds_a_bounded_number_of_frames() -> None:
    r = started()
    r.hold.routes_changed(T0)
    for i in range(HELD_LIMIT + 1):
        r.receive(FIRST + 2 + i, T0 + 1)
    assert not r.hold.held  # the one past the limit: what waited went on first, the gap counted once
    assert r.delivered == [(FIRST, 0), (FIRST + 2, 1)] + [(FIRST + 3 + i, 0) for i in range(HELD_LIMIT)]
