"""The audit job: routing, bloom and link-state audits of a snapshot, into the lake.

Issue "Routing, bloom and link-state audits as vectorized UDFs", items 1-3 and 5. The
rollout calls `run_audits(spark, lake, snapshot_id)` at the end of every run;
`raims_rollout.py --audit-only --snapshot ID` calls `audit_only(args)`; on its own:

    python -m spark_app.jobs.audit --lake PATH --snapshot ID [--master local[2]]

Order: the LSDB audit first (it yields the reference database, checkpointed), then the
routing audit over that reference, then the bloom audit. Each audit's rows come back to
the driver as Arrow (findings, summaries and one row per filter: small next to the
snapshot), get one summary row per snapshot, and are appended to `audit_lsdb`,
`audit_routes` and `audit_blooms`.

Decisions where the issue is silent:
- A table missing from the lake skips what needs it (no `forward`: no tree checks; no
  `subs` or `blooms`: no bloom audit); the summaries' detail lists the absent tables.
- Audit rows carry the snapshot's `collected_at` (its earliest), so they share its date
  partition, and `audited_at`, when the audit ran.
- `audit_only` exits 0 when the snapshot has no findings, 1 when it has some (like a
  test run), and raises AuditError (one line) when it cannot audit: a lake path without
  Delta tables, or a snapshot none of the input tables holds (a mistyped path or id
  would otherwise audit no rows and pass), or a failed run. It stops the session it
  started (left running, its executors die in Java ERROR traces at exit), not one that
  was active already (a notebook's, Databricks', a test's).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_app.errors import AuditError, SparkAppError, first_lines
from spark_app.lake import SNAPSHOT_COLUMN, Lake
from spark_app.udfs import ship
from spark_app.udfs.bloom import PROBE_SEED, PROBES, blooms_spark
from spark_app.udfs.causes import classify
from spark_app.udfs.frames import SUMMARY, UNKEYED, finish
from spark_app.udfs.lsdb import lsdb_spark
from spark_app.udfs.routing import routing_spark

INPUT_TABLES: Final = ("peers", "links", "routes", "forward", "subs", "blooms")
REREAD_TABLES: Final = ("peers", "links", "blooms")
TABLE_OF: Final = {"lsdb": "audit_lsdb", "routing": "audit_routes", "blooms": "audit_blooms"}
DEFAULT_CHUNKS: Final = 4
DEFAULT_BUCKETS: Final = 4

log = logging.getLogger("raims.spark.audit")


@dataclass(frozen=True, slots=True)
class AuditOptions:
    route_chunks: int = DEFAULT_CHUNKS  # groups of sources per path for the routing audit
    lsdb_buckets: int = DEFAULT_BUCKETS  # groups of peers for the LSDB audit
    bloom_probes: int = PROBES
    bloom_seed: int = PROBE_SEED


@dataclass(frozen=True, slots=True)
class AuditResult:
    """The rows of each audit table (input columns, as written) and each audit's time."""

    tables: Mapping[str, pa.Table]
    seconds: Mapping[str, float]
    skipped: tuple[str, ...] = ()
    written: Mapping[str, int] = field(default_factory=dict)

    def findings(self) -> dict[str, int]:
        return {t: sum(bool(x) for x in rows.column("finding").to_pylist()) for t, rows in self.tables.items()}

    @property
    def ok(self) -> bool:
        return not any(self.findings().values())

    def checked(self, table: str) -> dict[str, int]:
        """What an audit checked (its summary rows' `checked` counts, added up)."""
        out: dict[str, int] = {}
        rows = self.tables.get(table)
        if rows is None or "check" not in rows.column_names:
            return out
        for check, detail in zip(rows.column("check").to_pylist(), rows.column("detail").to_pylist(), strict=True):
            if check == SUMMARY and detail:
                for k, v in (json.loads(detail).get("checked") or {}).items():
                    out[k] = out.get(k, 0) + int(v)
        return out

    def summary(self) -> str:
        parts = []
        for a, t in TABLE_OF.items():
            if (n := self.findings().get(t)) is None:
                continue
            checked = ", ".join(f"{k} {v}" for k, v in sorted(self.checked(t).items()))
            parts.append(f"{t}: {n} finding(s) in {self.seconds.get(a, 0.0):.1f}s" + (f" ({checked})" if checked else ""))
        if self.skipped:
            parts.append(f"skipped: {', '.join(self.skipped)}")
        return "; ".join(parts)


def _collected_at(frames: Mapping[str, DataFrame]) -> dict[str, datetime]:
    """The earliest collection time of each snapshot (the tables of one run share it)."""
    out: dict[str, datetime] = {}
    for df in frames.values():
        for row in df.groupBy(SNAPSHOT_COLUMN).agg(F.min("collected_at")).collect():
            when = row[1] if row[1].tzinfo else row[1].replace(tzinfo=UTC)
            out[row[0]] = min(out.get(row[0], when), when)
    return out


def audit_frames(
    frames: Mapping[str, DataFrame],
    options: AuditOptions | None = None,
    *,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> AuditResult:
    """Run the audits over `frames` (input table name -> its rows, of any snapshots;
    absent tables skip what needs them). The tables read more than once are cached for
    the run: a lake read goes through Python on every use otherwise."""
    opts = options or AuditOptions()
    ship()
    frames = {t: deduped(df) for t, df in frames.items()}
    cached = {t: df.persist() for t, df in frames.items() if t in REREAD_TABLES}
    inputs = {**frames, **cached}
    try:
        return _audit(inputs, opts, now)
    finally:
        for df in cached.values():
            df.unpersist()


def deduped(df: DataFrame) -> DataFrame:
    """`df` without repeated rows (a snapshot written twice), compared on every column
    but the collection time and its date (`frames.UNKEYED`)."""
    keys = [c for c in df.columns if c not in UNKEYED]
    return df.dropDuplicates(keys) if keys else df


def _audit(
    frames: Mapping[str, DataFrame], opts: AuditOptions, now: Callable[[], datetime]
) -> AuditResult:
    collected = _collected_at({t: frames[t] for t in ("peers", "blooms") if t in frames})
    audited_at = now()
    absent = tuple(t for t in INPUT_TABLES if t not in frames)
    tables: dict[str, pa.Table] = {}
    seconds: dict[str, float] = {}

    def timed(audit: str, run: Callable[[], DataFrame], started: float | None = None) -> None:
        t0 = time.perf_counter() if started is None else started
        rows = run().toArrow().to_pandas()
        tables[TABLE_OF[audit]] = finish(
            TABLE_OF[audit], rows, collected, audited_at, {"absent_tables": list(absent)}
        )
        seconds[audit] = time.perf_counter() - t0
        log.info("%s audit: %d rows in %.1fs", audit, len(rows), seconds[audit])

    if "peers" in frames and "links" in frames:
        t0 = time.perf_counter()
        findings, reference = lsdb_spark(frames["peers"], frames["links"], buckets=opts.lsdb_buckets)
        timed("lsdb", lambda: findings, started=t0)
        timed(
            "routing",
            lambda: routing_spark(
                reference, frames.get("routes"), frames.get("forward"), chunks=opts.route_chunks
            ),
        )
    if "subs" in frames and "blooms" in frames:
        timed(
            "blooms",
            lambda: blooms_spark(
                frames["subs"], frames["blooms"], probes=opts.bloom_probes, seed=opts.bloom_seed
            ),
        )
    return AuditResult(classify(tables), seconds, absent)


def snapshot_frames(lake: Lake, snapshot_id: str) -> dict[str, DataFrame]:
    """The input tables of one snapshot, as lazily read DataFrames."""
    return {
        t: lake.read(t).where(F.col(SNAPSHOT_COLUMN) == snapshot_id)
        for t in INPUT_TABLES
        if lake.exists(t)
    }


def check_snapshot(lake: Lake, snapshot_id: str) -> None:
    """AuditError unless some input table of `lake` holds rows of `snapshot_id`, naming
    the lake's latest snapshot (by collection time) to pick instead."""
    present = [t for t in INPUT_TABLES if lake.exists(t)]
    if not present and not lake.tables():
        raise AuditError(f"{lake.path} is not a raims lake (no Delta tables)")
    found, latest = False, None
    if present:
        ids = [lake.read(t).select(SNAPSHOT_COLUMN, "collected_at") for t in present]
        union = ids[0]
        for more in ids[1:]:
            union = union.unionByName(more)
        row = union.agg(F.max(F.col(SNAPSHOT_COLUMN) == snapshot_id),
                        F.max_by(SNAPSHOT_COLUMN, "collected_at")).first()
        found, latest = (bool(row[0]), row[1]) if row is not None else (False, None)
    if not found:
        raise AuditError(f"snapshot {snapshot_id} is not in {lake.path} (latest: {latest or 'none'})")


def run_audits(
    spark: SparkSession,
    lake: Lake,
    snapshot_id: str,
    options: AuditOptions | None = None,
    *,
    write: bool = True,
) -> AuditResult:
    """Audit snapshot `snapshot_id` of `lake` and append the rows to its audit tables."""
    del spark  # the lake's session runs the audit; the argument keeps the rollout's call shape
    result = audit_frames(snapshot_frames(lake, snapshot_id), options)
    written = {t: lake.write(t, rows) for t, rows in result.tables.items()} if write else {}
    result = AuditResult(result.tables, result.seconds, result.skipped, written)
    log.info("snapshot %s: %s", snapshot_id, result.summary())
    return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The audit's tuning options (the rollout adds `--audit-only` and `--snapshot`)."""
    parser.add_argument("--route-chunks", type=int, default=DEFAULT_CHUNKS,
                        help="groups of sources per path in the routing audit")
    parser.add_argument("--lsdb-buckets", type=int, default=DEFAULT_BUCKETS,
                        help="groups of peers in the link-state audit")
    parser.add_argument("--bloom-probes", type=int, default=PROBES,
                        help="random subjects probed per filter")


def options_from(args: argparse.Namespace) -> AuditOptions:
    return AuditOptions(
        route_chunks=getattr(args, "route_chunks", DEFAULT_CHUNKS),
        lsdb_buckets=getattr(args, "lsdb_buckets", DEFAULT_BUCKETS),
        bloom_probes=getattr(args, "bloom_probes", PROBES),
    )


def audit_only(args: argparse.Namespace) -> int:
    """`raims_rollout.py --audit-only --snapshot ID`: audit one snapshot already in the
    lake. Reads args.snapshot, args.lake, args.master (None: spark-submit's master) and
    the options of `add_arguments` when present; 0 when clean, 1 with findings."""
    from spark_app.session import build_session

    active = SparkSession.getActiveSession()
    spark = build_session(getattr(args, "master", None), archive=getattr(args, "archive", None))
    try:
        lake = Lake(args.lake, spark)
        check_snapshot(lake, args.snapshot)
        result = run_audits(spark, lake, args.snapshot, options_from(args))
    except SparkAppError:
        raise
    except Exception as exc:  # a failed Spark job: pages of Java trace around one Python error
        raise AuditError(f"audit of snapshot {args.snapshot} in {args.lake} failed: "
                         + " ".join(first_lines(exc, 1).split())) from exc
    finally:
        if spark is not active:
            spark.stop()
    print(f"snapshot {args.snapshot}: {result.summary()}")
    return 0 if result.ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    from spark_app.session import TEST_MASTER

    parser = argparse.ArgumentParser(prog="python -m spark_app.jobs.audit", description=__doc__.splitlines()[0])
    parser.add_argument("--lake", required=True, help="the lake's path")
    parser.add_argument("--snapshot", required=True, help="the snapshot to audit")
    parser.add_argument("--master", default=TEST_MASTER, help=f"Spark master (default {TEST_MASTER})")
    add_arguments(parser)
    try:
        return audit_only(parser.parse_args(argv))
    except SparkAppError as exc:
        print(f"audit: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    sys.exit(main())
