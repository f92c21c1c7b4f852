"""Wildcard subscriptions at scale on one node (issue 19): publish rate, memory, churn.

For 10, 1,000, 10,000 and 100,000 pattern subscriptions of mixed kinds (RV/NATS '*' and
'>', Redis globs with '*', '?' and classes, sbus '*' and trailing '/') on one sans-IO
node, publishing to subjects that each match two of them:
- `publish_per_s`: `Node.publish` (frame built and signed, local deliveries) with a new
  subject every time, so the per-subject cache never helps (the issue's case);
- `match_per_s` / `cached_match_per_s`: the node's subscription lookup alone, new
  subjects / one subject again;
- `ratio`: publish_per_s against the 10-subscription row of the same run (target >= 0.5);
- `bytes_per_sub`: memory the node holds per subscription (tracemalloc: the compiled
  pattern, the node's tables, the index and the bloom filter together), and
  `index_bytes_per_sub` the compiled pattern and the index alone;
- `index_churn_s`: compiling and adding all the patterns to a `SubjectIndex`, then
  removing them all, one by one (target < 2 s at 100,000; best of 3 runs), and
  `index_ops_s` the adds and removes of that run without the compiling;
- `table_churn_s`: the same through the node's subscription table (`LocalSubs`: the
  index plus the records and reference counts), and `node_churn_s` through
  `Node.psubscribe` / `unsubscribe`, which also update the bloom filter and announce
  each change to the network (a `_P.PSUB` / `_P.STOP` frame).
Times are CPU seconds of this process (`time.process_time`): on a shared machine they do
not count the time other processes hold the cores. Then the worst-case glob `a*a*a*a*a*a*a*a*a*a*b` against thirty 'a's (a Python regex took
11 s): the matcher alone and a node publish with it subscribed (target < 1 ms).

    .venv/bin/python bench/match_bench.py [--quick] [--publishes N]
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent))
from raims_node.config.gen_key import new_network_config  # noqa: E402
from raims_node.config.keyset import credentials  # noqa: E402
from raims_node.config.tree import from_dict  # noqa: E402
from raims_node.router.actions import Deliver  # noqa: E402
from raims_node.router.localsubs import LocalSubs  # noqa: E402
from raims_node.router.node import Node  # noqa: E402
from raims_node.subject import compile_pattern  # noqa: E402
from raims_node.subject.index import SubjectIndex  # noqa: E402
from raims_node.subject.pattern import _compile  # noqa: E402

from _report import report  # noqa: E402

SIZES = (10, 1_000, 10_000, 100_000)
QUICK_SIZES = (10, 1_000, 10_000)
PUBLISHES = 30_000
CHURN_REPEAT = 3  # the index and table churn figures are the best of this many runs
PAYLOAD = bytes(100)
WORST_GLOB = "a*a*a*a*a*a*a*a*a*a*b"
NOW = 1_700_000_000 * 10**9

# Every published subject matches exactly two of these (one family each).
HOT = [("rv", "_nats.px.7.*.bid"), ("rv", "_nats.px.>"),
       ("glob", "_redis.cache:7:*"), ("glob", "_redis.cache:7:?[0-9]*"),
       ("sbus", "ipc/7/*/c/"), ("sbus", "ipc/7/")]
SUBJECTS = ("_nats.px.7.{i}.bid", "_redis.cache:7:{i}", "ipc/7/{i}/c/d")


def filler(k: int) -> tuple[str, str]:
    """The k-th other pattern, of one of six kinds, matching none of the subjects."""
    return [("rv", f"_nats.px.{k}.*.bid"), ("rv", f"_nats.feed.{k}.>"),
            ("glob", f"_redis.cache:{k}:*"), ("glob", f"_redis.user:{k}:[0-9]*:name"),
            ("sbus", f"ipc/{k}/*/c/"), ("sbus", f"ipc/svc{k}*/x")][k % 6]


def patterns(n: int) -> list[tuple[str, str]]:
    return HOT + [filler(k) for k in range(100, 100 + n - len(HOT))]


class Owner:
    __slots__ = ()


def new_node() -> Node:
    tree = from_dict(new_network_config("bench", ["A"]))
    return Node(credentials(tree, "A", "bench"), now_ns=NOW)


def subscribe_all(node: Node, owner: Owner, pats: list[tuple[str, str]]) -> float:
    t0 = time.process_time()
    for i, (syntax, text) in enumerate(pats):
        node.psubscribe(owner, str(i), text, syntax, NOW)
    return time.process_time() - t0


def memory_per_sub(pats: list[tuple[str, str]]) -> float:
    node, owner = new_node(), Owner()
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    subscribe_all(node, owner, pats)
    node.subs.match("_nats.px.7.0.bid")
    gc.collect()
    used = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return used / len(pats)


def index_memory_per_sub(pats: list[tuple[str, str]]) -> float:
    """Bytes a compiled pattern and its place in a `SubjectIndex` take."""
    _compile.cache_clear()
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    index: SubjectIndex[int] = SubjectIndex()
    for i, (syntax, text) in enumerate(pats):
        index.add_pattern(compile_pattern(text, syntax), i)  # type: ignore[arg-type]
    _compile.cache_clear()  # what stays is held by the index
    gc.collect()
    used = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return used / len(pats)


def publish_rate(node: Node, count: int, start: int) -> float:
    subjects = [SUBJECTS[i % 3].format(i=start + i) for i in range(count)]
    delivered = 0
    t0 = time.process_time()
    for s in subjects:
        for act in node.publish(s, PAYLOAD, NOW):
            delivered += type(act) is Deliver
    dt = time.process_time() - t0
    assert delivered == 2 * count, f"{delivered} deliveries for {count} publishes"
    return count / dt


def match_rates(node: Node, count: int, start: int) -> tuple[float, float]:
    subjects = [SUBJECTS[i % 3].format(i=start + i) for i in range(count)]
    match = node.subs.match
    t0 = time.process_time()
    for s in subjects:
        match(s)
    fresh = count / (time.process_time() - t0)
    one = subjects[0]
    t0 = time.process_time()
    for _ in range(count):
        match(one)
    return fresh, count / (time.process_time() - t0)


def index_churn(pats: list[tuple[str, str]]) -> tuple[float, float]:
    """Seconds to compile and add every pattern to an index, then remove them all; and
    the adding and removing alone."""
    _compile.cache_clear()
    index: SubjectIndex[int] = SubjectIndex()
    values = list(range(len(pats)))
    t0 = time.process_time()
    compiled = [compile_pattern(text, syntax) for syntax, text in pats]  # type: ignore[arg-type]
    t1 = time.process_time()
    for p, v in zip(compiled, values, strict=True):
        index.add_pattern(p, v)
    for p, v in zip(compiled, values, strict=True):
        index.remove_pattern(p, v)
    t2 = time.process_time()
    assert len(index) == 0
    return t2 - t0, t2 - t1


def table_churn(pats: list[tuple[str, str]]) -> float:
    _compile.cache_clear()
    table, owner = LocalSubs(), Owner()
    t0 = time.process_time()
    for i, (syntax, text) in enumerate(pats):
        table.add(owner, str(i), text, syntax)
    for i in range(len(pats)):
        table.remove(owner, str(i))
    return time.process_time() - t0


def size_row(n: int, publishes: int) -> dict[str, object]:
    pats = patterns(n)
    index_s, ops_s = min(index_churn(pats) for _ in range(CHURN_REPEAT))
    table_s = min(table_churn(pats) for _ in range(CHURN_REPEAT))
    _compile.cache_clear()
    node, owner = new_node(), Owner()
    sub_s = subscribe_all(node, owner, pats)
    best_pub = max(publish_rate(node, publishes, r * publishes) for r in range(2))
    fresh, cached = match_rates(node, publishes, 10 * publishes)
    t0 = time.process_time()
    for i in range(len(pats)):
        node.unsubscribe(owner, str(i), NOW)
    unsub_s = time.process_time() - t0
    assert len(node.subs) == 0
    return {"subs": n, "publish_per_s": best_pub, "match_per_s": fresh, "cached_match_per_s": cached,
            "bytes_per_sub": round(memory_per_sub(pats)),
            "index_bytes_per_sub": round(index_memory_per_sub(pats)), "index_churn_s": round(index_s, 3),
            "index_ops_s": round(ops_s, 3),
            "table_churn_s": round(table_s, 3), "node_churn_s": round(sub_s + unsub_s, 3)}


def worst_glob() -> dict[str, object]:
    p = compile_pattern(WORST_GLOB, "glob")
    subject = "a" * 30
    best = min(_timed(lambda: p.matches(subject)) for _ in range(20))
    node, owner = new_node(), Owner()
    node.psubscribe(owner, "w", "_redis." + WORST_GLOB, "glob", NOW)
    publish = min(_timed(lambda i=i: node.publish(f"_redis.{subject}{'a' * i}", PAYLOAD, NOW))  # type: ignore[misc]
                  for i in range(20))
    return {"glob": WORST_GLOB, "subject": "a * 30", "match_ms": round(best * 1e3, 4),
            "node_publish_ms": round(publish * 1e3, 4), "target_ms": 1.0,
            "meets_target": best < 1e-3 and publish < 1e-3}


def _timed(fn: object) -> float:
    t0 = time.process_time()
    fn()  # type: ignore[operator]
    return time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="sizes up to 10,000, fewer publishes")
    ap.add_argument("--publishes", type=int, default=None)
    args = ap.parse_args()
    sizes = QUICK_SIZES if args.quick else SIZES
    publishes = args.publishes or (PUBLISHES // 3 if args.quick else PUBLISHES)
    rows = [size_row(n, publishes) for n in sizes]
    base = float(rows[0]["publish_per_s"])  # type: ignore[arg-type]
    for r in rows:
        r["ratio"] = round(float(r["publish_per_s"]) / base, 3)  # type: ignore[arg-type]
        r["meets_target"] = r["ratio"] >= 0.5 and float(r["index_churn_s"]) < 2  # type: ignore[arg-type, operator]
    worst = worst_glob()
    print(f"worst glob {WORST_GLOB!r} vs 30 'a's: {worst['match_ms']} ms matcher, "
          f"{worst['node_publish_ms']} ms node publish (target < 1 ms)")
    report("match", rows, {"worst_glob": worst})


if __name__ == "__main__":
    main()
