"""client/pending.py: a subscription's pending counters against its limits (messages,
payload bytes), drops counted, one notice per slow-consumer episode."""

from __future__ import annotations

import threading

from raims_node.client.pending import (
    ADMIT,
    DEFAULT_PENDING_BYTES_LIMIT,
    DEFAULT_PENDING_MSGS_LIMIT,
    DROP,
    NOTICE,
    Pending,
)


def test_defaults_are_nats_pys() -> None:
    p = Pending()
    assert (p.msgs_limit, p.bytes_limit) == (DEFAULT_PENDING_MSGS_LIMIT, DEFAULT_PENDING_BYTES_LIMIT)
    assert (DEFAULT_PENDING_MSGS_LIMIT, DEFAULT_PENDING_BYTES_LIMIT) == (512 * 1024, 128 * 1024 * 1024)


def test_message_limit_drops_past_it_and_notices_once_per_episode() -> None:
    p = Pending(msgs_limit=3, bytes_limit=0)
    assert [p.admit(1) for _ in range(6)] == [ADMIT, ADMIT, ADMIT, NOTICE, DROP, DROP]
    assert (p.msgs, p.bytes, p.dropped, p.slow) == (3, 3, 3, True)
    p.release(1)  # below the limit, above the low-water mark (1.5): the episode goes on
    assert p.slow
    assert [p.admit(1) for _ in range(3)] == [ADMIT, DROP, DROP]
    p.release(1)
    p.release(1)  # 1 left: at the low-water mark, the episode ends
    assert not p.slow
    assert [p.admit(1) for _ in range(4)] == [ADMIT, ADMIT, NOTICE, DROP]
    assert (p.msgs, p.dropped) == (3, 7)


def test_byte_limit_counts_payloads_and_release_gives_them_back() -> None:
    p = Pending(msgs_limit=0, bytes_limit=10)
    assert [p.admit(4), p.admit(4), p.admit(4), p.admit(2)] == [ADMIT, ADMIT, NOTICE, ADMIT]  # 2 still fits: 10
    assert (p.msgs, p.bytes, p.dropped) == (3, 10, 1)
    p.release(4)
    assert (p.msgs, p.bytes, p.slow) == (2, 6, True)  # 6 bytes: over the low-water mark (5)
    p.release(4)
    assert (p.msgs, p.bytes, p.slow) == (1, 2, False)
    assert p.admit(11) == NOTICE  # larger than the whole limit: never fits
    p.release(2)
    assert (p.msgs, p.bytes) == (0, 0)


def test_episode_lasts_while_the_queue_stays_at_the_limit() -> None:
    p = Pending(msgs_limit=0, bytes_limit=10)
    assert [p.admit(10), p.admit(1)] == [ADMIT, NOTICE]
    p.release(10)
    assert [p.admit(6), p.admit(6)] == [ADMIT, NOTICE]  # a new episode once it drained
    assert p.admit(4) == ADMIT and p.slow  # a smaller one fits; the queue is at its limit


def test_a_consumer_a_little_slower_gets_one_notice_not_one_per_drop() -> None:
    """The queue at its limit, the application taking every other message: each drop was
    a new episode and a notice (4,901 of 4,901); the low-water mark makes it one."""
    p = Pending(msgs_limit=100, bytes_limit=0)
    verdicts = []
    for i in range(10_000):
        verdicts.append(p.admit(10))
        if i % 2:
            p.release(10)
    assert verdicts.count(NOTICE) == 1 and p.dropped == 4901
    while p.msgs > 50:
        p.release(10)
    assert not p.slow  # drained to the low-water mark: the next overflow is news


def test_zero_limits_switch_limits_off() -> None:
    p = Pending(msgs_limit=0, bytes_limit=0)
    assert all(p.admit(1 << 20) == ADMIT for _ in range(1000))
    assert p.dropped == 0


def test_admit_and_release_from_two_threads_keep_the_counts() -> None:
    p = Pending(msgs_limit=50, bytes_limit=0)
    admitted = 0
    taken = threading.Semaphore(0)

    def reader() -> None:
        nonlocal admitted
        for _ in range(20_000):
            if p.admit(3) == ADMIT:
                admitted += 1
                taken.release()

    t = threading.Thread(target=reader)
    t.start()
    released = 0
    while t.is_alive() or released < admitted:
        if taken.acquire(timeout=0.1):
            p.release(3)
            released += 1
    t.join()
    assert (p.msgs, p.bytes) == (0, 0)
    assert admitted + p.dropped == 20_000
