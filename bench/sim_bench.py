"""Simulated network: convergence time, and the router's forwarding rate.

Convergence: 16, 64, 128 and 256 nodes (1,024 with `--sizes`) on a ring plus random chords (2n links, average
degree 4, so every node has two disjoint paths), link latencies of 1-4 ms, every link
connected at time 0 and the nodes started within one second: the virtual seconds until
the simulator reports every node converged with identical databases, and the CPU
seconds the simulation took. A run stops when the CPU budget left runs out (default
100 s for all sizes together, `--budget 0` for none); it is then reported with the share
of (node, peer) pairs known by then.

Forwarding: in the converged 64-node network, with 3 of 40 topics subscribed at every
node, a node that forwards for many sources receives multicast frames from its tree
parents. Two rates, route cache warm (every (source, path) tree already computed):
- `forward_links`: RouteTable.forward_links with the bloom filters of the peers behind
  each link, the decision alone (no forwarding cache);
- `on_frame`: the whole receive path of one frame (peek, MAC check, decision, the
  Send actions, local delivery check). Target: >= 200,000 decisions/s on one core.

    .venv/bin/python bench/sim_bench.py [--sizes 16 64 128 256] [--budget 100] [--seed 1]
"""

from __future__ import annotations

import argparse
import gc
import itertools
import os
import random
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from raims_node.bloom import BloomFilter, SubjectHashes  # noqa: E402
from raims_node.config.gen_key import new_network_config  # noqa: E402
from raims_node.config.keyset import ServiceKeys  # noqa: E402
from raims_node.config.tree import from_dict  # noqa: E402
from raims_node.crypto.credentials import Credentials  # noqa: E402
from raims_node.linkstate import path_for_hash  # noqa: E402
from raims_node.router.actions import Send  # noqa: E402
from raims_node.router.node import NS, Node  # noqa: E402
from raims_node.router.sim import MS, SimNetwork  # noqa: E402
from raims_node.wire import peek  # noqa: E402

from _report import rate, report  # noqa: E402

FORWARD_NODES = 64
FORWARD_TARGET = 200_000
FORWARD_CALLS = 50_000
TOPICS = 40
SUBS_PER_NODE = 3
COSTS = (100, 100, 200, 1000)
TIMEOUT_NS = 120 * NS
CHECK_EVERY = 256  # simulator steps between CPU budget checks


def creds_for(names: list[str]) -> Callable[[str], Credentials]:
    keys = ServiceKeys.from_tree(from_dict(new_network_config("bench", names)), "bench")
    return keys.credentials  # the key set parsed once: per user it is O(users), 1,024 users O(n^2)


def build(n: int, seed: int) -> SimNetwork:
    """n nodes on a ring plus random chords up to 2n links, not yet run."""
    names = [f"n{i}" for i in range(n)]
    rng = random.Random(seed)
    net = SimNetwork(creds_for(names), seed=seed)
    for name in names:
        net.add_node(name, start_offset_ns=rng.randrange(NS))
    edges = {(i, (i + 1) % n) for i in range(n)}
    while len(edges) < 2 * n:
        a, b = rng.sample(range(n), 2)
        if (a, b) not in edges and (b, a) not in edges:
            edges.add((a, b))
    for a, b in sorted(edges):
        net.add_link(f"l{a}_{b}", names[a], names[b], (rng.choice(COSTS),) * 4,
                     latency_ns=rng.randrange(1, 5) * MS)
    return net


@contextmanager
def quiet_gc() -> Iterator[None]:
    """No cyclic collection while a network converges. One process holds every
    simulated node's state (7 GB at 1,024 nodes), and the frames and records of a
    converging network die young but not young enough: CPython's default thresholds
    set off full collections of that whole heap (a third of the CPU at 256 nodes), the
    server's (`raims_node.server._tune_gc`) still an eighth at 512 in young ones. A run
    makes almost no cyclic garbage (474 objects at 256 nodes), collected after it."""
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.unfreeze()  # the network may be dropped after: its cycles are collectable again


@contextmanager
def frozen_heap() -> Iterator[None]:
    """What is alive now left out of cyclic collection (the converged networks: after
    1,024 nodes a full collection set off by the forwarding measurement's allocations
    walked that whole heap, and on_frame measured 122k decisions/s against 216k with
    64 nodes alone); what the measurement allocates is collected as usual."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def converge(net: SimNetwork, budget_s: float) -> tuple[bool, float, float]:
    """Step until converged or out of CPU budget: (converged, virtual s, CPU s)."""
    with quiet_gc():
        return _converge(net, budget_s)


def _converge(net: SimNetwork, budget_s: float) -> tuple[bool, float, float]:
    start, cpu0 = net.now, time.process_time()
    checked_at = -1
    for steps in itertools.count():
        if net.now != checked_at:  # test once every event at one instant has run
            checked_at = net.now
            if net.converged():
                return True, (net.now - start) / NS, time.process_time() - cpu0
        if steps % CHECK_EVERY == 0 and budget_s and time.process_time() - cpu0 > budget_s:
            break
        if net.now - start > TIMEOUT_NS:
            break
        net.step()
    return False, (net.now - start) / NS, time.process_time() - cpu0


def known_share(net: SimNetwork) -> float:
    n = len(net.nodes)
    return sum(len(s.node.peers) for s in net.nodes.values()) / (n * (n - 1))


def subscribe_topics(net: SimNetwork, seed: int) -> dict[str, set[str]]:
    rng = random.Random(seed)
    subs = {name: {f"topic.{rng.randrange(TOPICS)}" for _ in range(SUBS_PER_NODE)} for name in net.nodes}
    for name, subjects in subs.items():
        for subject in subjects:
            net.subscribe(name, subject)
    net.run_for(2 * NS)
    return subs


def forwarding_workload(net: SimNetwork, subs: dict[str, set[str]]) -> tuple[Node, list[tuple[int, bytes]]]:
    """The node with the most forwarding work, and frames (conn, data) it receives from
    its tree parents on topics it does not subscribe (so only forwarding is measured)."""
    nodes = {s.node.bridge: s for s in net.nodes.values()}

    def children(sim_name: str, src: bytes, path: int) -> int:
        return len(net.nodes[sim_name].node.routes.forward_links(src, path))

    x = max(net.nodes, key=lambda name: sum(children(name, b, 0) for b in nodes))
    node = net.nodes[x].node
    conn_of = {}
    for link in net.links.values():
        if x in (link.a, link.b):
            other = link.b if link.a == x else link.a
            conn_of[(net.nodes[other].node.bridge, link.name)] = link.conn_a if link.a == x else link.conn_b
    frames = []
    for src, sim in nodes.items():
        if src == node.bridge:
            continue
        for t in range(TOPICS):
            subject = f"topic.{t}"
            path = path_for_hash(SubjectHashes(subject.encode()).full)
            if subject in subs[x] or not node.routes.forward_links(src, path):
                continue
            parent = next((e for e in node.routes.tree(src, path) if e.dest == node.bridge), None)
            sends = [a for a in sim.node.publish(subject, b"x" * 100, net.now) if isinstance(a, Send)]
            if parent is None or not sends:
                continue
            conn = conn_of[(parent.src, parent.link.tport_name)]
            frames.append((conn, sends[0].data))
    return node, frames


def forwarding_rates(net: SimNetwork, seed: int) -> list[dict[str, object]]:
    subs = subscribe_topics(net, seed)
    node, frames = forwarding_workload(net, subs)
    now = net.now
    for conn, data in frames:  # warm: every tree and subtree computed once
        node.on_frame(conn, data, now)
    decisions = []
    for _, data in frames:
        head = peek(data)
        decisions.append((head.bridge, path_for_hash(SubjectHashes(head.subject).full), SubjectHashes(head.subject)))

    def matcher(hashes: SubjectHashes) -> Callable[[bytes], bool]:
        def matches(b: bytes) -> bool:
            peer = node.peers.get(b)
            return peer is not None and isinstance(peer.bloom, BloomFilter) and peer.bloom.might_match(hashes)
        return matches

    cycle_d = itertools.cycle([(src, path, matcher(h)) for src, path, h in decisions])
    cycle_f = itertools.cycle(frames)

    def decide() -> None:
        src, path, m = next(cycle_d)
        node.routes.forward_links(src, path, m)

    def receive() -> None:
        conn, data = next(cycle_f)
        node.on_frame(conn, data, now)

    note = f"{len(frames)} frames from {len({d[0] for d in decisions})} sources"
    rows: list[dict[str, object]] = []
    for name, fn in (("forward_links", decide), ("on_frame", receive)):
        cpu0 = time.process_time()
        r = rate(fn, FORWARD_CALLS)
        rows.append({"measure": name, "nodes": FORWARD_NODES, "value": round(r), "unit": "decisions/s",
                     "cpu_s": round(time.process_time() - cpu0, 2), "frames_per_node": "-",
                     "cpu_ms_per_node": "-",
                     "note": note + (f", target {FORWARD_TARGET:,}" if name == "on_frame" else ", uncached")})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[16, 64, 128, 256])
    ap.add_argument("--budget", type=float, default=100.0, help="CPU seconds for all convergence runs (0: none)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="16 and 64 nodes only")
    args = ap.parse_args()
    wall0 = time.perf_counter()
    if args.quick:
        args.sizes = [16, 64]
    rows: list[dict[str, object]] = []
    left = args.budget
    forward_net = None
    for n in sorted(args.sizes):
        net = build(n, args.seed + n)
        ok, virtual_s, cpu_s = converge(net, left if args.budget else 0)
        left = max(left - cpu_s, 1.0)
        note = f"{net.frames_sent:,} frames, " + (
            "converged" if ok else f"stopped: {known_share(net):.0%} of peers known")
        rows.append({"measure": "converge", "nodes": n, "value": round(virtual_s, 3), "unit": "virtual s",
                     "cpu_s": round(cpu_s, 2), "frames_per_node": round(net.frames_sent / n),
                     "cpu_ms_per_node": round(cpu_s / n * 1000, 1), "note": note})
        if n == FORWARD_NODES and ok:
            forward_net = net
    if forward_net is None:
        forward_net = build(FORWARD_NODES, args.seed + FORWARD_NODES)
        if not converge(forward_net, 0)[0]:
            raise SystemExit("the 64-node network did not converge")
    with frozen_heap():
        rows += forwarding_rates(forward_net, args.seed)
    report("sim", rows, {"process_cpu_s": round(time.process_time(), 1), "wall_s": round(time.perf_counter() - wall0, 1)})
    # exit without freeing the networks object by object (7 GB and ~30 s at 1,024 nodes)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
