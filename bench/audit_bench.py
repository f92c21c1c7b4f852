"""Audit speed on synthetic snapshots (spark_app.jobs.synthetic), on local[2].

For each size: a network of N nodes (degree 4, 100 subscriptions a node) routed by the
router's own code, `--observers` of its nodes (16: the sample a collection takes of a
large network, see `collect`'s `observers` setting) reporting their views of the whole
network (peers, links, routes, forward, their copies of every peer's filter) and every
node its own subscriptions and filter, written
to a temporary lake; then `run_audits` reads the snapshot from the lake, runs the LSDB,
routing and bloom audits and appends their rows. Prints wall time and input rows per
second per audit, then one JSON line. Target: all audits of a 10,000-node snapshot in
under 10 minutes here. The default (1,000 nodes) takes well under a minute; the issue's
run is

    .venv/bin/python bench/audit_bench.py --sizes 1000 10000
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from spark_app.jobs.audit import TABLE_OF, AuditOptions, run_audits  # noqa: E402
from spark_app.jobs.synthetic import SyntheticSpec, build_network, snapshot_tables  # noqa: E402
from spark_app.lake import Lake  # noqa: E402
from spark_app.session import TEST_MASTER, build_session  # noqa: E402

from _report import report  # noqa: E402

TARGET_NODES = 10_000
TARGET_S = 600.0
INPUTS = {"lsdb": ("peers", "links"), "routing": ("routes", "forward"), "blooms": ("subs", "blooms")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=None, help="default 1000 (--quick: 200)")
    parser.add_argument("--quick", action="store_true", help="a small size only")
    parser.add_argument("--observers", type=int, default=16)
    parser.add_argument("--degree", type=int, default=4)
    parser.add_argument("--subs", type=int, default=100)
    parser.add_argument("--master", default=TEST_MASTER)
    args = parser.parse_args(argv)
    args.sizes = args.sizes or ([200] if args.quick else [1000])
    logging.basicConfig(level=logging.WARNING)
    spark = build_session(args.master, app_name="raims-audit-bench")
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="raims-audit-bench-") as tmp:
        lake = Lake(Path(tmp) / "lake", spark)
        for n in args.sizes:
            spec = SyntheticSpec(nodes=n, degree=args.degree, subscriptions=args.subs, observers=args.observers)
            t0 = time.perf_counter()
            tables = snapshot_tables(build_network(spec), f"bench-{n}", datetime.now(UTC))
            generate_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            for name, table in tables.items():
                lake.write(name, table.drop_columns(["date"]))
            write_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            result = run_audits(spark, lake, f"bench-{n}", AuditOptions())
            total_s = time.perf_counter() - t0
            findings = result.findings()
            for audit, inputs in INPUTS.items():
                count = sum(tables[t].num_rows for t in inputs)
                seconds = result.seconds[audit]
                rows.append({
                    "nodes": n, "observers": min(n, args.observers), "audit": audit,
                    "input_rows": count, "seconds": round(seconds, 2),
                    "rows_per_s": round(count / seconds), "findings": findings[TABLE_OF[audit]],
                })
            rows.append({
                "nodes": n, "observers": min(n, args.observers), "audit": "all (read, audit, write)",
                "input_rows": sum(t.num_rows for t in tables.values()), "seconds": round(total_s, 2),
                "rows_per_s": round(sum(t.num_rows for t in tables.values()) / total_s),
                "findings": sum(findings.values()),
            })
            print(f"# {n} nodes: synthetic snapshot {generate_s:.1f}s, lake write {write_s:.1f}s", file=sys.stderr)
    spark.stop()
    report("audit", rows)
    done = [r for r in rows if r["nodes"] == TARGET_NODES and str(r["audit"]).startswith("all")]
    if done:
        print(f"# target: all audits of {TARGET_NODES} nodes < {TARGET_S:.0f}s: "
              f"{'met' if float(done[0]['seconds']) < TARGET_S else 'MISSED'} ({done[0]['seconds']}s)",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
