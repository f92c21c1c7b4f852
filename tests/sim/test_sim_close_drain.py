"""An owner with very many subscriptions dropping them (a closing client, a Redis
UNSUBSCRIBE of all): router/localsubs.py `detach` / `drain`, router/interest.py.

Removing a closing client's 100,000 subscriptions from the local table took 130 ms in
one loop turn (290 ms for patterns), which every other client and link of the node
waited (nats-server: a few ms). They now leave matching at once and the table a time
slice per turn, each withdrawal made when its subscription leaves.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from raims_node.crypto.credentials import Credentials
from raims_node.router import interest
from raims_node.router.node import NS
from raims_node.router.sim import SimNetwork
from tests.sim.test_sim_basic import build

N = 30_000
TURN_CPU_S = 0.015  # the dropping call and each later turn (the whole drop took ~40 ms)


@pytest.mark.parametrize(("kind", "n"), [("subject", N), ("pattern", N // 3)])
def test_a_dropped_owners_subscriptions_leave_the_table_a_slice_per_turn(
        creds: Callable[[str], Credentials], kind: str, n: int) -> None:
    """Patterns: 10,000 took 30 ms in one call."""
    net = build(creds)
    d = net.nodes["D"].node
    d.interest_part.clock = time.perf_counter  # as the daemon's (wake.py)
    gone, other = object(), object()
    N = n  # noqa: N806
    suffix = "" if kind == "subject" else ".x"  # a subject the pattern takes

    def s(i: int) -> str:
        return f"many.{i}{suffix}"

    def sub(owner: object, sid: str, i: int) -> None:
        if kind == "subject":
            d.subscribe(owner, sid, f"many.{i}", net.now)
        else:
            d.psubscribe(owner, sid, f"many.{i}.*", "glob", net.now)

    for i in range(N):
        sub(gone, str(i), i)
    net.run_until(lambda: not d.interest_part.pending and net.interest_known("D", s(N - 1)), timeout_ns=60 * NS)
    start = time.thread_time()
    net._apply("D", d.drop_owner(gone, net.now))
    took = time.thread_time() - start
    assert took < TURN_CPU_S, f"dropping {N:,} subscriptions took {took * 1e3:.0f} ms CPU in one call"
    # gone at once for every use: matching, counts, listings
    assert not d.state.subs.match(s(N - 1)) and d.state.subs.count(s(N - 1)) == 0
    assert len(d.state.subs) == 0 and not list(d.state.subs.subjects()) and not list(d.state.subs.patterns())
    # another owner takes the first (drained already) and the last (still in the table)
    sub(other, "a", 0)
    sub(other, "b", N - 1)
    assert [m.owner for m in d.state.subs.match(s(N - 1))] == [other]
    turns, worst = 0, 0.0
    while d.interest_part.busy and turns < 10_000:
        start = time.thread_time()
        net._apply("D", d.tick(net.now))
        worst = max(worst, time.thread_time() - start)
        turns += 1
    assert not d.interest_part.busy
    assert worst < TURN_CPU_S, f"a turn took {worst * 1e3:.0f} ms CPU"
    assert turns > 1
    net.run_until(lambda: withdrawn(net, s(N - 2)), timeout_ns=60 * NS)
    assert net.interest_known("D", s(0)) and net.interest_known("D", s(N - 1))
    assert all(withdrawn(net, s(i)) for i in (1, N // 2, N - 3))
    net.nodes["D"].delivered.clear()
    net.publish("A", s(N - 1), b"x")
    net.publish("A", s(N // 2), b"x")
    net.run_for(NS)
    assert [(m.owner, m.sid) for m in net.nodes["D"].delivered] == [(other, "b")]


def withdrawn(net: SimNetwork, subject: str) -> bool:
    """Every other node holds D's filter, and it does not pass `subject`."""
    b = net.nodes["D"].node.bridge
    blooms = [s.node.peers[b].bloom for s in net.live() if s.name != "D"]
    return all(f is not None and not f.matches(subject) for f in blooms)  # type: ignore[attr-defined]


def test_an_owner_with_few_subscriptions_leaves_at_once(creds: Callable[[str], Credentials]) -> None:
    """No slices for a usual client: its withdrawals go out with the call."""
    net = build(creds)
    d = net.nodes["D"].node
    gone = object()
    for i in range(interest.DROP_MIN):
        d.subscribe(gone, str(i), f"few.{i}", net.now)
    seqno = d.state.sub_seqno
    net._apply("D", d.drop_owner(gone, net.now))
    assert d.state.sub_seqno == seqno + interest.DROP_MIN and not d.interest_part.busy
