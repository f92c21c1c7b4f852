"""Sequence numbers, publish/subscribe windows and loss classification."""

import random

from raims_node.router.seqwin import (
    FRAME_SHIFT,
    PubWindow,
    SubWindow,
    Verdict,
    frame_start_ns,
    new_stream_seqno,
)

NS = 1_000_000_000
T0 = 1659131646 * NS
SRC = b"s" * 16


def test_manual_example_sequence() -> None:
    # manual: nano time 0x17066b710b706c00 -> first seqno 0x5c19adc000000001
    assert T0 == 0x17066B710B706C00
    assert new_stream_seqno(T0) == 0x5C19ADC000000001
    assert frame_start_ns(new_stream_seqno(T0)) <= T0 < frame_start_ns(new_stream_seqno(T0)) + (1 << 33)


def test_publisher_counts_within_a_stream_and_stamps_the_first() -> None:
    w = PubWindow(4 << 20, 10 * NS, T0)
    s1, first = w.next_seqno("a.b", T0)
    s2, again = w.next_seqno("a.b", T0 + 1)
    assert first and not again and s2 == s1 + 1
    other, first_other = w.next_seqno("c", T0)
    assert first_other and other == s1


def test_publisher_window_rotates_by_size_and_time() -> None:
    w = PubWindow(1000, 10 * NS, T0)
    for i in range(50):
        w.next_seqno(f"subject.{i}", T0)
    seq, first = w.next_seqno("subject.0", T0 + 11 * NS)  # rotation happens on a new subject
    assert not first
    w.next_seqno("new.one", T0 + 11 * NS)
    for i in range(1, 50):
        w.next_seqno(f"x.{i}", T0 + 22 * NS)
    w.next_seqno("y", T0 + 33 * NS)
    seq2, restarted = w.next_seqno("subject.5", T0 + 33 * NS)
    assert restarted and seq2 >> FRAME_SHIFT > seq >> FRAME_SHIFT


def test_window_stats_follow_the_generations() -> None:
    """show windows: the current and old generations, the largest size, the rotations' times."""
    w = PubWindow(1000, 10 * NS, T0)
    for i in range(50):
        w.next_seqno(f"subject.{i}", T0)
    before = w.stats()
    assert (before.count, before.old_count, before.old_size, before.rotate_ns) == (50, 0, 0, T0)
    assert before.size == before.max_size > 1000 and before.win_size == 1000 and before.interval_ns == 10 * NS
    w.next_seqno("new.one", T0 + 11 * NS)  # rotates: the 50 are the old generation
    after = w.stats()
    assert (after.count, after.old_count, after.old_size) == (0, 51, after.max_size)
    assert (after.rotate_ns, after.old_rotate_ns) == (T0 + 11 * NS, T0) and after.max_size > before.size


def test_restart_in_the_same_time_frame_moves_to_the_next_frame() -> None:
    w = PubWindow(4 << 20, 10 * NS, T0)
    s, _ = w.next_seqno("a", T0)
    # force a wrap of the 35-bit counter: the next sequence must be a later frame
    w._w.put("a", 1, (s | ((1 << FRAME_SHIFT) - 1)))
    s2, start = w.next_seqno("a", T0)
    assert start and s2 >> FRAME_SHIFT == (s >> FRAME_SHIFT) + 1


def test_subscriber_verdicts() -> None:
    w = SubWindow(8 << 20, 10 * NS, T0)
    s = new_stream_seqno(T0)
    assert w.check(SRC, "a", s, T0, T0) == (Verdict.FIRST, 0)
    assert w.check(SRC, "a", s + 1, 0, T0) == (Verdict.OK, 0)
    assert w.check(SRC, "a", s + 1, 0, T0) == (Verdict.REPEAT, 0)
    assert w.check(SRC, "a", s, T0, T0) == (Verdict.REPEAT, 0)  # replayed stream start
    assert w.check(SRC, "a", s + 5, 0, T0) == (Verdict.LOSS, 3)
    assert w.check(SRC, "a", s + 6, 0, T0) == (Verdict.OK, 0)
    later = new_stream_seqno(T0 + 20 * NS)
    assert w.check(SRC, "a", later, T0 + 20 * NS, T0) == (Verdict.RESTART, 0)
    assert w.check(SRC, "a", later + 2 * (1 << FRAME_SHIFT), 0, T0) == (Verdict.LOSS, 1)
    assert w.check(b"t" * 16, "a", s + 100, 0, T0) == (Verdict.FIRST, 0)  # per source


def test_windows_list_their_entries() -> None:
    pub = PubWindow(4 << 20, 10 * NS, T0)
    s, _ = pub.next_seqno("a", T0)
    pub.next_seqno("a", T0)
    assert pub.entries() == [("a", s + 1)]
    sub = SubWindow(8 << 20, 10 * NS, T0)
    sub.check(SRC, "b", s, T0, T0)
    assert sub.entries() == [((SRC, "b"), s)]


def test_an_anycast_and_the_message_after_it_restart_the_count() -> None:
    """`any S M` reaches one of many subscribers, each seeing a share of the stream: the
    anycast and the next message of the subject carry a stamp, so a subscriber restarts
    its count instead of counting the others' share as loss."""
    pub, sub = PubWindow(4 << 20, 10 * NS, T0), SubWindow(4 << 20, 10 * NS, T0)
    first, start = pub.next_seqno("s", T0)
    assert start and sub.check(b"A", "s", first, T0, T0) == (Verdict.FIRST, 0)
    shares = [pub.next_seqno("s", T0 + i, share=True) for i in range(1, 4)]
    assert all(start for _, start in shares)
    seq, start = pub.next_seqno("s", T0 + 5)  # a plain publish after them: stamped once
    assert start and not pub.next_seqno("s", T0 + 6)[1]
    assert sub.check(b"A", "s", shares[1][0], T0 + 2, T0) == (Verdict.RESTART, 0)  # this node's share
    assert sub.check(b"A", "s", seq, T0 + 5, T0) == (Verdict.RESTART, 0)


def test_anycast_subjects_are_forgotten_with_the_window() -> None:
    """A 503 no-responders goes to each request's own `_INBOX.` subject as a share:
    those subjects were kept until published again, which an inbox never is (60,000
    requests without a responder: 60,000 kept). A subject the window forgot starts a
    new stream, stamped, anyway: the set keeps only subjects in the window."""
    pub = PubWindow(1000, 10 * NS, T0)
    for i in range(5000):
        pub.next_seqno(f"_INBOX.abc.{i}", T0 + i * 10_000_000, share=True)  # 10 ms apart: 50 s
    assert len(pub._shared) <= len(pub) < 2500  # two generations of 10 s each at most
    seq, start = pub.next_seqno("_INBOX.abc.4999", T0 + 60 * NS)  # the last share is still known
    assert start and not pub.next_seqno("_INBOX.abc.4999", T0 + 60 * NS + 1)[1]


def test_an_anycast_picks_at_random() -> None:
    """`any S M` chooses among the matching nodes at random (the manual); an `_INBOX.`
    reply goes to each of them (router/point.py, tests/sim/test_sim_inbox_each.py)."""
    from raims_node.router.point import _pick

    nodes, rng = [bytes([i]) * 16 for i in range(4)], random.Random(1)
    assert len({_pick(nodes, rng) for _ in range(200)}) > 1


def test_unseen_start_counts_a_streams_start_once_when_the_window_kept_all_since_its_frame() -> None:
    """forward.first_lost: a stream's first message here (no stamp) whose time frame
    began after `known_ns` (the links' last change, the window's oldest generation)."""
    from raims_node.router.seqwin import FRAME_SHIFT, SubWindow, Verdict

    now = 1 << 40
    frame = ((now >> 33) + 2) << FRAME_SHIFT  # a stream's seqnos, its frame 2 frames on
    w = SubWindow(1 << 20, 10_000_000_000, now)
    w.changed_ns = now
    assert w.check(b"a", "s", frame + 5, 0, now) == (Verdict.FIRST, 0)
    assert w.unseen_start(b"a", "s", frame + 5, now - 1) == 0  # the links changed after known_ns
    assert w.unseen_start(b"a", "s", frame + 5, now) == 4
    assert w.unseen_start(b"a", "s", frame + 5, now) == 0  # once
    assert w.check(b"a", "s", frame + 6, 0, now, start=now, owed=True) == (Verdict.OK, 0)  # a start told later
    w.check(b"a", "t", frame + 9, 0, now)
    assert w.unseen_start(b"a", "t", frame + 8, now) == 0  # not the first seen


def test_unseen_start_counts_nothing_once_the_window_may_have_forgotten_the_stream() -> None:
    from raims_node.router.seqwin import FRAME_SHIFT, SubWindow

    now = 1 << 40
    w = SubWindow(0, 10_000_000_000, now)  # rotates at every chance
    w.changed_ns = 0
    for t in (now + 10_000_000_000, now + 20_000_000_000):
        w.check(b"a", "other", 1 << FRAME_SHIFT, 0, t)  # two rotations: entries before `now + 10 s` are gone
    frame = (now >> 33) << FRAME_SHIFT
    w.check(b"a", "s", frame + 5, 0, now + 20_000_000_000)
    assert w.unseen_start(b"a", "s", frame + 5, now) == 0
    assert w.unseen_start(b"a", "s", frame + 5, now + 10_000_000_000) == 4
