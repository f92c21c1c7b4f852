"""The audits through Spark local mode: the fault scenarios of
tests/unit/test_audit_kernels.py (all in one run, one snapshot each), the same rows as the
kernels give without Spark, and `run_audits` / `audit_only` over a lake."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.testing import assertDataFrameEqual

from spark_app import session
from spark_app.errors import AuditError
from spark_app.jobs.audit import AuditOptions, AuditResult, audit_frames, audit_only, run_audits
from spark_app.jobs.synthetic import Fault, Injected, SyntheticSpec, finding_keys, make_snapshot
from spark_app.lake import Lake
from spark_app.raims_rollout import main as rollout_main
from spark_app.session import TEST_MASTER
from spark_app.udfs.bloom import ProbeSet
from spark_app.udfs.local import audit_tables

NOW = datetime(2026, 3, 20, 12, 0, tzinfo=UTC)
SPEC = SyntheticSpec(nodes=16, degree=4, subscriptions=20, seed=3)
PROBES = 1 << 14
OPTIONS = AuditOptions(route_chunks=2, lsdb_buckets=2, bloom_probes=PROBES)
SCENARIOS = [None, *Fault]


def _sid(fault: Fault | None) -> str:
    return str(fault or "clean")


@pytest.fixture(scope="module")
def snapshots() -> tuple[dict[str, pa.Table], dict[str, Injected | None]]:
    """Every scenario as one snapshot, the tables concatenated."""
    parts: dict[str, list[pa.Table]] = {}
    injected: dict[str, Injected | None] = {}
    for fault in SCENARIOS:
        tables, injected[_sid(fault)] = make_snapshot(SPEC, _sid(fault), NOW, fault)
        for name, table in tables.items():
            parts.setdefault(name, []).append(table)
    return {name: pa.concat_tables(ts) for name, ts in parts.items()}, injected


def _frames(spark: SparkSession, tables: Mapping[str, pa.Table]) -> dict[str, DataFrame]:
    return {name: spark.createDataFrame(t.drop_columns(["date"])) for name, t in tables.items()}


@pytest.fixture(scope="module")
def spark_result(spark: SparkSession, snapshots: tuple[dict[str, pa.Table], dict]) -> AuditResult:
    return audit_frames(_frames(spark, snapshots[0]), OPTIONS, now=lambda: NOW)


@pytest.mark.parametrize("fault", SCENARIOS, ids=_sid)
def test_each_fault_is_reported_exactly_through_spark(
    fault: Fault | None, spark_result: AuditResult, snapshots: tuple[dict, dict[str, Injected | None]]
) -> None:
    injected = snapshots[1][_sid(fault)]
    want = injected.findings if injected is not None else frozenset()
    assert finding_keys(spark_result.tables, _sid(fault)) == want


def test_spark_gives_the_rows_the_kernels_give(
    spark: SparkSession, spark_result: AuditResult, snapshots: tuple[dict[str, pa.Table], dict]
) -> None:
    local = audit_tables(snapshots[0], ProbeSet(PROBES), now=lambda: NOW)
    assert set(local) == set(spark_result.tables)
    for table, rows in local.items():
        # summaries add up group by group in Spark: their JSON detail may order floats'
        # sums differently, so they are compared without it
        expected = spark.createDataFrame(rows.drop_columns(["detail"]))
        actual = spark.createDataFrame(spark_result.tables[table].drop_columns(["detail"]))
        assertDataFrameEqual(actual, expected, rtol=1e-9)


@pytest.fixture
def audited_lake(lake: Lake, snapshots: tuple[dict[str, pa.Table], dict]) -> Lake:
    for name, table in snapshots[0].items():
        keep = pc.is_in(table.column("snapshot_id"), pa.array(["clean", str(Fault.STALE_SEQNO)]))
        lake.write(name, table.filter(keep).drop_columns(["date"]))
    return lake


def test_run_audits_appends_the_audit_tables_of_one_snapshot(
    spark: SparkSession, audited_lake: Lake, snapshots: tuple[dict, dict[str, Injected | None]]
) -> None:
    sid = str(Fault.STALE_SEQNO)
    result = run_audits(spark, audited_lake, sid, OPTIONS)
    assert result.written == {t: r.num_rows for t, r in result.tables.items()}
    assert not result.ok and result.findings() == {"audit_lsdb": 1, "audit_routes": 0, "audit_blooms": 0}
    audited_lake.register_views()
    rows = spark.sql("SELECT snapshot_id, check, node, peer FROM audit_lsdb WHERE finding").collect()
    injected = snapshots[1][sid]
    assert injected is not None
    ((_, (check, node, peer, _)),) = injected.findings
    assert [tuple(r) for r in rows] == [(sid, check, node, peer)]
    summary = spark.sql("SELECT findings, date FROM audit_routes WHERE check = 'summary'").collect()
    assert [(r.findings, r.date) for r in summary] == [(0, NOW.date())]


def test_audit_only_exits_by_whether_the_snapshot_is_clean(audited_lake: Lake) -> None:
    args = argparse.Namespace(lake=audited_lake.path, master=TEST_MASTER, bloom_probes=PROBES)
    assert audit_only(argparse.Namespace(**vars(args), snapshot="clean")) == 0
    assert audit_only(argparse.Namespace(**vars(args), snapshot=str(Fault.STALE_SEQNO))) == 1
    counts = {t: audited_lake.read(t).count() for t in ("audit_lsdb", "audit_routes", "audit_blooms")}
    assert audit_only(argparse.Namespace(**vars(args), snapshot=str(Fault.STALE_SEQNO))) == 1  # a rerun
    assert {t: audited_lake.read(t).count() for t in counts} == counts  # replaced its rows, added none


class _Owned:
    """The test session as a session `audit_only` started: its stop is counted, not done."""

    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark
        self.stopped = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._spark, name)

    def stop(self) -> None:
        self.stopped += 1


def test_audit_only_refuses_a_snapshot_or_a_lake_that_is_not_there_and_stops_its_session(
    spark: SparkSession, audited_lake: Lake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    owned = _Owned(spark)
    monkeypatch.setattr(session, "build_session", lambda *a, **k: owned)
    args = argparse.Namespace(lake=audited_lake.path, master=TEST_MASTER, bloom_probes=PROBES)
    with pytest.raises(AuditError, match=rf"^snapshot nosuch is not in {audited_lake.path} "
                                         rf"\(latest: (clean|{Fault.STALE_SEQNO})\)$"):
        audit_only(argparse.Namespace(**vars(args), snapshot="nosuch"))
    assert owned.stopped == 1
    (tmp_path / "empty").mkdir()
    (tmp_path / "afile").write_text("x")
    for where in ("empty", "afile", "nothere"):
        with pytest.raises(AuditError, match=rf"^{tmp_path / where} is not a raims lake \(no Delta tables\)$"):
            audit_only(argparse.Namespace(**{**vars(args), "lake": str(tmp_path / where)}, snapshot="clean"))
    assert owned.stopped == 4
    capsys.readouterr()
    assert rollout_main(["--lake", str(tmp_path / "afile"), "--audit-only", "--snapshot", "x",
                         "--master", TEST_MASTER]) == 1
    assert capsys.readouterr().err == f"raims_rollout: {tmp_path / 'afile'} is not a raims lake (no Delta tables)\n"
    assert owned.stopped == 5
