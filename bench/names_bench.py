"""Service names (issue 21): lookup latency, and bind-to-visible-everywhere time.

- `lookup_us`: one `_NAMES.LOOKUP`-style table read (NameTable.lookup through the
  service, cluster domain, round-robin among 16 publications) on a table of BINDINGS
  bindings over 10 name types; target < 50 us. Peer, same run: `subs_match_us`, the
  router's own local subscription match (LocalSubs.match) over as many subjects.
- `visible_s_<n>`: in a simulated network of n nodes (bench/sim_bench.py's: a ring plus
  random chords, link latencies 1-4 ms), converged, with a name service on every
  node: the virtual seconds from one bind at a random node until every node's table
  holds it. Peers, same run: `flood_s_<n>`, the time a subscription's `_S.JOIN` takes to
  reach every node's copy of the subscriber's filter (one link-state flood), and
  `converge_s_<n>`, the time the network took to converge; target visible < 2 x flood
  (and far below converge).

    .venv/bin/python bench/names_bench.py [--quick] [--seed 1]

`--quick` uses fewer lookups and binds (the same sizes, so the same JSON keys).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent))
from sim_bench import build  # noqa: E402

from raims_node.names.service import NameService  # noqa: E402
from raims_node.names.sim import NamesSim  # noqa: E402
from raims_node.names.table import Domain  # noqa: E402
from raims_node.router.localsubs import LocalSubs  # noqa: E402
from raims_node.router.node import NS  # noqa: E402
from raims_node.router.sim import SimNetwork  # noqa: E402

BINDINGS = 1000
RR_PUBS = 16
LOOKUP_TARGET_US = 50.0
SIZES = (16, 64)


def lookup_us(calls: int, seed: int) -> tuple[float, float]:
    """(lookup, local subscription match) microseconds per call, best of 3."""
    rng = random.Random(seed)
    svc = NameService(b"A" * 16, "A", 0)
    for k in range(BINDINGS):
        svc.request(f"c{k}", "", "BIND", None, None,
                    json.dumps({"type": 100 + k % 10, "lower": k * 10, "upper": k * 10 + 9,
                                "inbox": f"p.{k}"}).encode(), 0)
    for i in range(RR_PUBS):  # a round-robin group: 16 nodes' publications of one sequence
        svc.node_event("names", bytes([i + 1]) * 16, f"n{i}",
                       json.dumps({"o": "d", "s": 1, "p": [[7, 0, 99, 2, 1, 1, f"rr.{i}"]]}).encode(), 0)
    probes = [(100 + k % 10, k * 10 + rng.randrange(10)) for k in (rng.randrange(BINDINGS) for _ in range(1000))]
    probes += [(7, rng.randrange(100)) for _ in range(1000)]
    cluster = Domain("cluster")
    subs = LocalSubs()
    for k in range(BINDINGS):
        subs.add(object(), "s", f"p.{k}", None)
    subjects = [f"p.{rng.randrange(BINDINGS)}" for _ in range(2000)]

    def best(fn: Callable[[int], object]) -> float:
        out = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            for i in range(calls):
                fn(i)
            out = min(out, time.perf_counter() - t0)
        return out / calls * 1e6

    def one_lookup(i: int) -> object:
        t, inst = probes[i % len(probes)]
        found = svc.lookup(t, inst, cluster)
        assert found is not None
        return found

    return best(one_lookup), best(lambda i: subs.match(subjects[i % len(subjects)]))


def network(n: int, seed: int) -> tuple[SimNetwork, NamesSim, list[str], float]:
    """bench/sim_bench.py's network (same seed, same graph), a name service on every
    node, converged; the virtual seconds convergence took."""
    net = build(n, seed)
    ns = NamesSim(net)
    ns.attach_all()  # before any peer is authenticated: the services see every peer up
    took = net.run_until(net.converged, timeout_ns=120 * NS, max_events=50_000_000)
    net.run_until(ns.converged, timeout_ns=30 * NS)
    return net, ns, list(net.nodes), took / NS


def visible(n: int, binds: int, seed: int) -> dict[str, object]:
    net, ns, names, converge_s = network(n, seed)
    rng = random.Random(seed)
    vis, flood = [], []
    for i in range(binds):
        at = rng.choice(names)
        before = {name: len(s.table) for name, s in ns.services.items()}
        ns.request(at, "BIND", {"type": 5, "lower": i, "upper": i, "inbox": f"v.{i}"})
        vis.append(net.run_until(lambda b=before: all(len(s.table) == b[k] + 1 for k, s in ns.services.items()),
                                 timeout_ns=10 * NS) / NS)
        subject = f"flood.{i}"
        net.subscribe(at, subject)
        flood.append(net.run_until(lambda a=at, s=subject: net.interest_known(a, s), timeout_ns=10 * NS) / NS)
    return {"nodes": n, "visible_s": max(vis), "flood_s": max(flood), "converge_s": converge_s,
            "ratio_to_flood": max(vis) / max(flood)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    calls, binds = (2_000, 3) if args.quick else (50_000, 20)
    cpu = time.process_time()
    look, match = lookup_us(calls, args.seed)
    rows: list[dict[str, object]] = [{"measure": "lookup_us", "value": look, "peer": "subs_match_us",
                                      "peer_value": match, "target": f"< {LOOKUP_TARGET_US:g}"}]
    out: dict[str, object] = {"bench": "names", "lookup_us": round(look, 3), "subs_match_us": round(match, 3)}
    for n in SIZES:
        r = visible(n, binds, args.seed)
        rows.append({"measure": f"visible_s_{n}", "value": r["visible_s"], "peer": f"flood_s_{n}",
                     "peer_value": r["flood_s"], "target": "< 2 x flood"})
        rows.append({"measure": f"converge_s_{n}", "value": r["converge_s"], "peer": "", "peer_value": "",
                     "target": ""})
        out[f"visible_s_{n}"] = round(float(r["visible_s"]), 6)  # type: ignore[arg-type]
        out[f"flood_s_{n}"] = round(float(r["flood_s"]), 6)  # type: ignore[arg-type]
        out[f"converge_s_{n}"] = round(float(r["converge_s"]), 3)  # type: ignore[arg-type]
    out["cpu_s"] = round(time.process_time() - cpu, 1)
    cols = list(rows[0])
    cells = [[_fmt(r[c]) for c in cols] for r in rows]
    width = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    print("  ".join(c.ljust(w) for c, w in zip(cols, width, strict=True)))
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, width, strict=True)))
    print(json.dumps(out))


def _fmt(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.3f}" if v >= 0.01 else f"{v:.6f}"
    return str(v)


if __name__ == "__main__":
    main()
