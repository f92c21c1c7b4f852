"""Properties of routes and forwarding sets over random connected networks (hypothesis).

Networks have up to 60 nodes, random (often tied) costs per path, asymmetric costs,
parallel links, pgm groups and equal start times. Trees are checked against an
independent pure-Python Dijkstra that applies the ranking rule directly.
"""

from __future__ import annotations

import heapq
import random
from collections import Counter
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from raims_node.linkstate import (
    NUM_PATHS,
    LinkRecord,
    LinkStateDB,
    PeerRecord,
    RouteTable,
    expand_cost,
)
from tests.unit.test_linkstate_routes import flood, tables

MAX_NODES = 60


@dataclass(frozen=True)
class Net:
    peers: tuple[PeerRecord, ...]
    links: dict[bytes, list[LinkRecord]]

    def db(self, shuffle_seed: int | None = None) -> LinkStateDB:
        """The database, with peers and links inserted in a shuffled order if asked."""
        peers = list(self.peers)
        rng = random.Random(shuffle_seed)
        if shuffle_seed is not None:
            rng.shuffle(peers)
        db = LinkStateDB()
        for p in peers:
            db.put_peer(p)
        for p in peers:
            links = list(self.links[p.bridge])
            if shuffle_seed is None:
                db.apply_full(p.bridge, 1, links)
            else:  # replay as deltas in a random order
                rng.shuffle(links)
                db.apply_full(p.bridge, 0, [])
                for seqno, lk in enumerate(links, start=1):
                    db.apply_delta(p.bridge, seqno, True, lk)
        return db


@st.composite
def networks(draw: st.DrawFn, same_cost: bool | None = None) -> Net:
    n = draw(st.integers(2, MAX_NODES))
    rng = random.Random(draw(st.integers(0, 2**32)))
    costs = draw(st.sampled_from([(1,), (1, 2), (1, 2, 3), (100, 1000), (5, 6, 7, 8, 9)]))
    if same_cost is None:
        same_cost = draw(st.booleans())
    start_spread = draw(st.sampled_from([1, 3, 10**9]))  # small spreads: equal start times
    bridges = [rng.randbytes(16) for _ in range(n)]
    peers = tuple(
        PeerRecord(b, f"n{i}", rng.randrange(start_spread)) for i, b in enumerate(bridges)
    )
    links: dict[bytes, list[LinkRecord]] = {b: [] for b in bridges}
    next_tid = dict.fromkeys(bridges, 1)

    def tid(b: bytes) -> int:
        next_tid[b] += 1
        return next_tid[b] - 1

    def cost() -> tuple[int, int, int, int]:
        if same_cost:
            return (rng.choice(costs),) * 4
        return expand_cost(rng.choices(costs, k=4))

    pairs = [(rng.randrange(i), i) for i in range(1, n)]
    for _ in range(rng.randrange(2 * n)):  # extra links, repeats making parallel links
        a, b = rng.sample(range(n), 2)
        pairs.append((a, b))
    for a, b in pairs:
        c = cost()
        back = c if rng.random() < 0.7 else cost()
        links[bridges[a]].append(LinkRecord(bridges[a], f"t{a}_{b}", tid(bridges[a]), bridges[b], c))
        links[bridges[b]].append(LinkRecord(bridges[b], f"t{a}_{b}", tid(bridges[b]), bridges[a], back))
    if n >= 3 and draw(st.booleans()):  # one pgm group: one tport id per member
        members = rng.sample(bridges, rng.randrange(3, min(n, 6) + 1))
        c = cost()
        for m in members:
            t = tid(m)
            links[m] += [LinkRecord(m, "pgm", t, o, c, "pgm") for o in members if o != m]
    return Net(peers, links)


class Oracle:
    """Heap Dijkstra over the links both ends list, then per node the shortest-path
    links into it ranked by their forwarder's (start, bridge), then tport id."""

    def __init__(self, net: Net) -> None:
        self.age = {q.bridge: (q.start_ns, q.bridge) for q in net.peers}
        lists = {(lk.bridge, lk.peer_bridge) for ls in net.links.values() for lk in ls}
        self.out: dict[bytes, list[LinkRecord]] = {b: [] for b in self.age}
        self.into: dict[bytes, list[LinkRecord]] = {b: [] for b in self.age}
        for ls in net.links.values():
            for lk in ls:
                if (lk.peer_bridge, lk.bridge) in lists:
                    self.out[lk.bridge].append(lk)
                    self.into[lk.peer_bridge].append(lk)

    def tree(self, source: bytes, p: int) -> tuple[dict[bytes, int], dict[bytes, list[LinkRecord]]]:
        dist = {source: 0}
        heap = [(0, source)]
        while heap:
            d, u = heapq.heappop(heap)
            if d > dist[u]:
                continue
            for lk in self.out[u]:
                if d + lk.cost[p] < dist.get(lk.peer_bridge, 1 << 62):
                    dist[lk.peer_bridge] = d + lk.cost[p]
                    heapq.heappush(heap, (d + lk.cost[p], lk.peer_bridge))
        ranked = {}
        for v in dist:
            cands = [lk for lk in self.into[v]
                     if lk.bridge in dist and dist[lk.bridge] + lk.cost[p] == dist[v]]
            if cands:
                ranked[v] = sorted(cands, key=lambda lk: (self.age[lk.bridge], lk.tport_id))
        return dist, ranked


def sample_sources(net: Net, k: int) -> list[bytes]:
    return random.Random(len(net.peers)).sample([p.bridge for p in net.peers], min(k, len(net.peers)))


@settings(max_examples=25, deadline=None)
@given(networks())
def test_flood_reaches_every_node_exactly_once(net: Net) -> None:
    tabs = tables(net.db())
    for p in range(NUM_PATHS):
        for rt in tabs.values():
            rt.forward_table(p)  # flood through the all-sources tables
        for src in tabs:
            assert flood(tabs, src, p) == Counter({b: 1 for b in tabs if b != src})


@settings(max_examples=25, deadline=None)
@given(networks())
def test_trees_match_the_oracle_and_every_node_agrees(net: Net) -> None:
    db = net.db()
    oracle = Oracle(net)
    per_source = tables(db)  # forward_links from trees, one per source
    all_sources = tables(db)  # forward_table, the batched computation
    some, other = list(per_source.values())[0], list(per_source.values())[-1]
    for src in sample_sources(net, 5):
        for p in range(NUM_PATHS):
            dist, ranked = oracle.tree(src, p)
            parent = {v: cands[p % len(cands)] for v, cands in ranked.items()}
            tree = some.tree(src, p)
            assert tree == other.tree(src, p)
            assert {e.dest: e.link for e in tree} == parent
            assert all(e.cost == dist[e.dest] for e in tree)
            for b, rt in per_source.items():
                assert rt.path_cost(b, p, source=src) == dist.get(b)
                got = rt.forward_links(src, p)
                assert set(got) == {lk for lk in parent.values() if lk.bridge == b}
                assert got == all_sources[b].forward_table(p)[src]


@settings(max_examples=20, deadline=None)
@given(networks(), st.integers(0, 2**32))
def test_results_do_not_depend_on_insertion_order(net: Net, shuffle: int) -> None:
    me = net.peers[0].bridge
    a, b = RouteTable(net.db(), me), RouteTable(net.db(shuffle), me)
    for p in range(NUM_PATHS):
        assert a.routes(p) == b.routes(p)
        assert a.forward_table(p) == b.forward_table(p)
        for src in sample_sources(net, 3):
            assert a.tree(src, p) == b.tree(src, p)
            assert a.next_hops(src, p) == b.next_hops(src, p)


@settings(max_examples=20, deadline=None)
@given(networks(same_cost=True))
def test_equal_cost_alternatives_put_paths_on_different_links(net: Net) -> None:
    """With the same cost on every path, a node with k equal-cost parent links is
    reached over min(k, 4) different links across the 4 paths."""
    rt = RouteTable(net.db(), net.peers[0].bridge)
    oracle = Oracle(net)
    for src in sample_sources(net, 4):
        _, ranked = oracle.tree(src, 0)
        trees = [{e.dest: e.link for e in rt.tree(src, p)} for p in range(NUM_PATHS)]
        for v, cands in ranked.items():
            assert len({t[v] for t in trees}) == min(len(cands), NUM_PATHS)
            if len(cands) > 1:
                assert trees[0][v] != trees[1][v]


@settings(max_examples=20, deadline=None)
@given(networks(), st.integers(0, 2**32))
def test_bloom_pruned_flood_reaches_each_subscriber_once(net: Net, seed: int) -> None:
    rng = random.Random(seed)
    subscribers = {p.bridge for p in net.peers if rng.random() < 0.2}
    tabs = tables(net.db())
    for src in sample_sources(net, 3):
        for p in range(NUM_PATHS):
            got = flood(tabs, src, p, subscribers.__contains__)
            assert max(got.values(), default=1) == 1
            assert {b for b in subscribers if b != src} <= set(got)
            for b in got:  # a transit node only gets the message when it passes it on
                if b not in subscribers:
                    assert tabs[b].forward_links(src, p, subscribers.__contains__)
