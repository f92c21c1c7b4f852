"""A 64-node redundant network: convergence, 10,000 messages, injected loss (issue 6)."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable

from raims_node.crypto.credentials import Credentials
from raims_node.router.node import NS
from raims_node.router.sim import MS, SimNetwork
from tests.sim.conftest import USERS, creds_factory

N = 64


def random_redundant_graph(rng: random.Random, n: int, extra: int) -> list[tuple[int, int]]:
    """A ring (so every node has two disjoint paths) plus `extra` random chords."""
    edges = {(i, (i + 1) % n) for i in range(n)}
    while len(edges) < n + extra:
        a, b = rng.sample(range(n), 2)
        if (a, b) not in edges and (b, a) not in edges:
            edges.add((a, b))
    return sorted(edges)


def build64(seed: int) -> tuple[SimNetwork, list[str]]:
    names = USERS[:N]
    creds: Callable[[str], Credentials] = creds_factory("test", tuple(USERS[:80]))
    net = SimNetwork(creds, seed=seed)
    rng = random.Random(seed)
    for name in names:
        net.add_node(name, start_offset_ns=rng.randrange(10**9))
    for a, b in random_redundant_graph(rng, N, N):
        cost = rng.choice([100, 100, 200, 1000])
        net.add_link(f"l{a}_{b}", names[a], names[b], (cost,) * 4, latency_ns=rng.randrange(1, 5) * MS)
    net.run_until(net.converged, timeout_ns=30 * NS)
    return net, names


def test_64_nodes_converge_and_deliver_10000_messages_exactly_once() -> None:
    net, names = build64(seed=64)
    rng = random.Random(7)
    subs = {name: [f"topic.{rng.randrange(40)}" for _ in range(3)] for name in names}
    for name, subjects in subs.items():
        for subject in subjects:
            net.subscribe(name, subject, sid=f"{name}:{subject}")
    # every subject known everywhere (a node's later subscriptions follow its first by
    # up to one batch hold, router/batch.py)
    net.run_until(lambda: all(net.interest_known(n, x) for n, s in subs.items() for x in s), timeout_ns=10 * NS)
    expected: Counter[tuple[str, str, bytes]] = Counter()
    for i in range(10_000):
        src = rng.choice(names)
        subject = f"topic.{rng.randrange(40)}"
        payload = b"%d" % i
        net.publish(src, subject, payload)
        for name, subjects in subs.items():
            for s in set(subjects):
                if s == subject:
                    expected[(name, subject, payload)] += 1
        if i % 100 == 0:
            net.run_for(MS)
    net.run_for(200 * MS)
    got: Counter[tuple[str, str, bytes]] = Counter()
    for name in names:
        for d in net.nodes[name].delivered:
            got[(name, d.subject, d.payload)] += 1
            assert d.loss == 0
    assert got == expected
    for name in names:
        for p in net.nodes[name].node.peers.values():
            assert p.loss.msg_loss == 0 and p.loss.repeat == 0


def test_injected_link_loss_shows_in_the_loss_counters() -> None:
    net, names = build64(seed=65)
    src, dst = names[0], names[N // 2]
    net.subscribe(dst, "lossy.topic")
    net.run_until(lambda: net.interest_known(dst, "lossy.topic"), timeout_ns=10 * NS)
    for link in net.links.values():
        link.loss = 0.05
    sent = 300
    for i in range(sent):
        net.publish(src, "lossy.topic", b"%d" % i)
        net.run_for(MS)
    for link in net.links.values():
        link.loss = 0.0
    net.publish(src, "lossy.topic", b"last")
    net.run_for(100 * MS)
    delivered = net.nodes[dst].delivered
    lost = sent + 1 - len(delivered)
    counted = net.nodes[dst].node.peers[net.nodes[src].node.bridge].loss.msg_loss
    notified = sum(d.loss for d in delivered)
    assert lost > 0
    assert counted == notified == lost  # every lost message counted and reported
