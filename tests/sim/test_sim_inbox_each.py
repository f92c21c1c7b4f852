"""`_INBOX.` replies go point to point to every node that subscribes them (router/point.py,
the manual's "The _INBOX subject"), frames jittered (sim.Jitter), on the manual's graph:
D streams replies to four inboxes of A (`_INBOX.A1.>`) while a `>` monitor on B and an
`_INBOX.>` monitor on C watch; steady, or while the A-B link comes up, or B joins (its
monitor subscribing once joined). Before, each inbox went to ONE node whose filter
matched, chosen by the subject's hash: A missed the inboxes that fell to a monitor and
the monitors those that fell to A or the other: 2,024 of the 3,036 deliveries missing in
every one of 30 seeds (1,012-1,149 of 2,024 at A and C while B joins), none counted as
loss. Now every subscriber gets every reply, once, in order: 0 in 30 seeds per kind."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from raims_node.bloom import BloomFilter
from raims_node.crypto.credentials import Credentials
from raims_node.router.node import NS
from raims_node.router.sim import MS, Jitter, SimNetwork
from tests.sim.test_sim_lone import LoneSim
from tests.sim.test_sim_route_change_kinds import (
    MANUAL,
    US,
    Stream,
    bring_up,
    build,
    problems,
    settle_and_close,
    stream,
)

COUNT = 1000
INBOXES = tuple(f"_INBOX.A1.{i}" for i in range(4))
WATCHED = [("A", "inbox", "_INBOX.A1.>"), ("B", "all", ">"), ("C", "inboxes", "_INBOX.>")]


def replies(net: SimNetwork, seed: int, kind: str) -> dict[str, int]:
    """Copies, disorder, missing and missing uncounted over A's inbox and the monitors."""
    rng = random.Random(seed)
    build(net, MANUAL, skip="B" if kind == "join" else "", skip_link="ab" if kind == "link_up" else "")
    for node, sid, pattern in WATCHED:
        if node in net.nodes:
            net.psubscribe(node, pattern, "rv", sid)
    net.run_until(lambda: all(net.interest_known(n, INBOXES[0]) for n, _, _ in WATCHED if n in net.nodes),
                  timeout_ns=30 * NS)
    net.run_for(50 * MS)
    sent: Stream = {}
    start = net.now
    end = stream(net, {"D": INBOXES}, COUNT, rng.choice((20, 50)) * US, sent)
    if kind != "steady":
        def change() -> None:
            bring_up(net, MANUAL, "ab" if kind == "link_up" else "B")
            if kind == "join":  # its monitor from its first moment: what it missed before is not asked for
                net.psubscribe("B", ">", "rv", "all")
        net.at(start + rng.randrange((end - start) // 2), change)
    settle_and_close(net, {"D": INBOXES}, end, sent)
    watched = WATCHED if kind != "join" else [w for w in WATCHED if w[0] != "B"]
    return problems(net, watched, sent)


@pytest.mark.parametrize("cls", [SimNetwork, LoneSim])
@pytest.mark.parametrize(("kind", "seed"), [("steady", 0), ("steady", 5), ("link_up", 2), ("link_up", 18),
                                            ("join", 21), ("join", 7)])
def test_inbox_replies_reach_the_requester_and_every_monitor(creds: Callable[[str], Credentials],
                                                             cls: type[SimNetwork], kind: str, seed: int) -> None:
    got = replies(cls(creds, seed=seed, jitter=Jitter(seed=seed)), seed, kind)
    assert got == {"copies": 0, "disorder": 0, "missing": 0, "uncounted": 0}


def test_a_false_match_is_dropped_and_counted(creds: Callable[[str], Credentials]) -> None:
    """A node whose filter passes an inbox it does not subscribe (a false positive) drops
    the reply and counts it; it is not passed on (every subscriber has its own copy)."""
    net = SimNetwork(creds, seed=4)
    build(net, MANUAL)
    net.subscribe("A", "_INBOX.A1.0", "inbox")
    net.run_until(lambda: net.interest_known("A", "_INBOX.A1.0"), timeout_ns=30 * NS)
    c = net.nodes["C"].node
    false = BloomFilter()  # D's replica of C's filter, with a false positive
    false.add_subject("_INBOX.A1.0")
    net.nodes["D"].node.peers[c.bridge].bloom = false
    before = [n.node.counters.anycast for n in net.nodes.values()]
    net.publish("D", "_INBOX.A1.0", b"r")
    net.run_for(50 * MS)
    assert [d.payload for d in net.nodes["A"].delivered] == [b"r"]
    sent = [n.node.counters.anycast - b for n, b in zip(net.nodes.values(), before, strict=True)]
    assert c.counters.inbox_false == 1 and sent == [2 if n == "D" else 0 for n in net.nodes]  # to A and C only
