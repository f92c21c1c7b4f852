"""Every notebook of notebooks/ run as a Python script against a lake from a local rollout.

The lake comes from 01_rollout itself (a real local[2] rollout of 4 daemons, then the
audit), in one SparkSession shared with the other notebooks (runpy, as `__main__`), so the
whole file costs one rollout. Each notebook must leave its tables (CSV) and figures (PNG),
non-empty and consistent with the lake.
"""

from __future__ import annotations

import runpy
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import SparkSession

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
EXPECTED = {
    "01_rollout": ({"written", "stages", "nodes"}, set()),
    "02_network_health": ({"rollouts", "peers", "link_agreement", "loss_over_time", "loss_by_peer", "event_counts"},
                          {"convergence", "topology", "loss", "events"}),
    "03_route_and_bloom_audit": ({"findings_by_check", "findings_by_node", "node_findings", "bloom_fp",
                                  "findings_over_time"}, {"bloom_fp", "findings_over_time"}),
    "04_sql_examples": ({f"sql_{i:02d}" for i in range(1, 9)}, set()),
}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
MIN_FIGURE_BYTES = 10_000  # a figure with axes, labels and data, not a blank canvas


@pytest.fixture(scope="module")
def notebook_env(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("notebooks")
    mp = pytest.MonkeyPatch()
    mp.setenv("RAIMS_LAKE", str(root / "lake"))
    mp.setenv("RAIMS_RUN_DIR", str(root / "run"))
    mp.setenv("RAIMS_OUTPUT_DIR", str(root / "out"))
    mp.setenv("RAIMS_SCHEMA", "raims_absent_schema")
    mp.syspath_prepend(str(NOTEBOOKS))
    yield root
    mp.undo()


def run_notebook(name: str, root: Path) -> Path:
    path = NOTEBOOKS / f"{name}.py"
    assert path.read_text().startswith("# Databricks notebook source\n")
    runpy.run_path(str(path), run_name="__main__")
    return root / "out" / name


@pytest.mark.slow
def test_notebooks_in_order(notebook_env: Path) -> None:
    produced = {name: run_notebook(name, notebook_env) for name in EXPECTED}
    for name, (tables, figures) in EXPECTED.items():
        out = produced[name]
        assert {p.stem for p in out.glob("*.csv")} >= tables, name
        assert {p.stem for p in out.glob("*.png")} == figures, name
        for fig in figures:
            data = (out / f"{fig}.png").read_bytes()
            assert data.startswith(PNG_MAGIC) and len(data) > MIN_FIGURE_BYTES, (name, fig, len(data))

    written = pd.read_csv(produced["01_rollout"] / "written.csv").set_index("table")["rows_written"]
    nodes = pd.read_csv(produced["01_rollout"] / "nodes.csv")
    assert len(nodes) == 4 and written["peers"] == 16  # 4 observers x 4 peers (themselves included)

    health = produced["02_network_health"]
    peers = pd.read_csv(health / "peers.csv")
    assert sorted(peers["node"]) == sorted(nodes["node"]) and (peers["peers_seen"] == 3).all()
    agreement = pd.read_csv(health / "link_agreement.csv").iloc[0]
    assert agreement["observers"] == 4 and agreement["distinct_views"] == 1
    assert agreement["links_per_view"] == 12  # a mesh of 4: every node links to 3 others
    rollouts = pd.read_csv(health / "rollouts.csv")
    assert list(rollouts["status"]) == ["ok"] and rollouts["converged"].all()

    audit = pd.read_csv(produced["03_route_and_bloom_audit"] / "findings_by_check.csv")
    assert set(audit["audit"]) == {"audit_routes", "audit_blooms", "audit_lsdb"}
    routes = audit[audit["audit"] == "audit_routes"]
    assert routes["findings"].sum() == 0 and routes["checked"].sum() > 0  # the router routes right

    first = pd.read_csv(produced["04_sql_examples"] / "sql_01.csv")  # the rollouts query
    assert list(first["nodes"]) == [4] and list(first["status"]) == ["ok"]
    assert pd.read_csv(produced["04_sql_examples"] / "sql_03.csv")["links"].eq(12).all()


def test_the_latest_snapshot_is_the_newest_run_that_wrote_one(
        spark: SparkSession, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A run failed before its write stage (a port in use) has a rollouts row and no
    snapshot; the notebooks took it as the latest, and 02_network_health died on its empty
    peers (ValueError: cannot convert float NaN to integer)."""
    from datetime import datetime

    monkeypatch.syspath_prepend(str(NOTEBOOKS))
    monkeypatch.delenv("RAIMS_SNAPSHOT", raising=False)
    import _raims

    spark.createDataFrame([("A", "ok", datetime(2026, 1, 1)), ("B", "failed", datetime(2026, 1, 2))],
                          "snapshot_id string, status string, started_at timestamp").createOrReplaceTempView("rollouts")
    spark.createDataFrame([("A", "node0")], "snapshot_id string, node string").createOrReplaceTempView("peers")
    lake = _raims.RaimsLake(spark, "test views", ["peers", "rollouts"])
    assert _raims.latest_snapshot(lake) == "A"
    assert "the 1 newer run(s) wrote none (B failed)" in capsys.readouterr().out
    spark.createDataFrame([], "snapshot_id string, node string").createOrReplaceTempView("peers")
    with pytest.raises(_raims.NotebookError, match="no rollout .* wrote a snapshot: 2 run.*newest B failed"):
        _raims.latest_snapshot(lake)
    monkeypatch.setenv("RAIMS_SNAPSHOT", "Z")
    assert _raims.latest_snapshot(lake) == "Z"
