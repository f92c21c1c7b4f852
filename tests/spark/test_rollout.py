"""The whole rollout as a user runs it: `python spark_app/raims_rollout.py` on
local-cluster[2,1,1024] with 2 nodes per executor, then its lake read back with Spark SQL.

One rollout (about a minute here) is shared by every test of the module; the lake is read
through the shared local[2] session of tests/spark/conftest.py.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from spark_app.jobs.collect import SOURCES
from spark_app.lake import Lake
from spark_app.quality import load_suites
from spark_app.schemas import load_schemas
from tests.spark.test_rollout_failures import raims_processes

REPO = Path(__file__).resolve().parents[2]
MASTER = "local-cluster[2,1,1024]"
NODES = [f"node{i}" for i in range(4)]
MESSAGES = 10
ROLLOUT_TIMEOUT_S = 420
STAGES = ("session", "keys", "start", "converge", "traffic", "collect", "write", "validate", "pipeline",
          "teardown")
TABLES = (*SOURCES, "rollouts", "validations")


@dataclass(frozen=True)
class Run:
    done: subprocess.CompletedProcess[str]
    lake: Path
    run_dir: Path


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    tmp = tmp_path_factory.mktemp("rollout")
    config = tmp / "rollout.yaml"
    conf = yaml.safe_load((REPO / "conf" / "rollout.yaml").read_text())
    conf.update(service="e2e", lake=str(tmp / "lake"), run_dir=str(tmp / "run"), traffic={"messages": MESSAGES})
    config.write_text(yaml.safe_dump(conf))
    done = subprocess.run([sys.executable, "spark_app/raims_rollout.py", "--config", str(config),
                           "--master", MASTER, "--nodes-per-host", "2"],
                          cwd=REPO, capture_output=True, text=True, timeout=ROLLOUT_TIMEOUT_S, check=False,
                          env={**os.environ, "TMPDIR": str(tmp)})  # its sbus sockets and endpoints files
    assert done.returncode == 0, f"stdout:\n{done.stdout[-4000:]}\nstderr:\n{done.stderr[-4000:]}"
    return Run(done, tmp / "lake", tmp / "run")


@pytest.fixture(scope="module")
def lake(run: Run, spark: SparkSession) -> Lake:
    lake = Lake(run.lake, spark)
    lake.register_views()
    return lake


def test_every_stage_reports_its_time_and_the_summary_follows(run: Run) -> None:
    out = run.done.stdout
    for stage in STAGES:
        assert re.search(rf"^\[\s*{stage}\s*\]\s+\d+\.\ds  \S", out, re.MULTILINE), stage
    assert "4 daemons on 2 host(s)" in out and "4 nodes agree on 12 links" in out
    assert f"sent {4 * MESSAGES}, received {4 * 2 * MESSAGES} of {4 * 2 * MESSAGES} via nats" in out
    assert re.search(r"^total\s+\d+\.\d$", out, re.MULTILINE)
    # the pipeline stage: stage one on one node, stage two on another, every row exactly once
    assert re.search(r"node\d\.e2e -> node\d\.e2e: 100000 of 100000 rows received \(100000 distinct, "
                     r"checksum ok\).*exactly once", out)
    assert "SELECT node, count(*) AS peers_seen" in out


def test_every_table_exists_with_its_declared_schema(lake: Lake, spark: SparkSession) -> None:
    schemas = load_schemas()
    assert set(TABLES) <= set(lake.tables())
    for table in TABLES:
        assert spark.table(table).schema == from_arrow_schema(schemas[table].arrow_schema()), table


def test_the_rollout_row_says_what_happened(lake: Lake, spark: SparkSession) -> None:
    (row,) = spark.sql("SELECT * FROM rollouts").collect()
    assert (row.status, row.converged, row.hosts, row.nodes, row.nodes_per_host) == ("ok", True, 2, 4, 2)
    assert (row.traffic_sent, row.traffic_received, row.validations_failed) == (4 * MESSAGES, 8 * MESSAGES, 0)
    assert row.master == MASTER and row.lake_backend == "delta-rs" and row.message is None
    assert set(row.stage_seconds) >= {"keys", "start", "converge", "traffic", "collect", "write", "validate"}


def test_each_of_four_observers_sees_the_same_four_peers(lake: Lake, spark: SparkSession) -> None:
    rows = spark.sql("SELECT node, count(*) AS n, count(DISTINCT bridge) AS b FROM peers GROUP BY node").collect()
    assert {r.node: (r.n, r.b) for r in rows} == dict.fromkeys(NODES, (4, 4))
    views = spark.sql("SELECT node, sort_array(collect_set(bridge)) AS bs FROM peers GROUP BY node").collect()
    assert len({tuple(r.bs) for r in views}) == 1


def test_links_are_consistent(lake: Lake, spark: SparkSession) -> None:
    per_node = spark.sql("SELECT node, count(*) AS n FROM links GROUP BY node").collect()
    assert {r.node: r.n for r in per_node} == dict.fromkeys(NODES, 12)  # full mesh: 4 x 3, both ends
    one_way = spark.sql("""
        SELECT count(*) FROM links a LEFT JOIN links b
          ON a.node = b.node AND a.user = b.adj AND a.adj = b.user
        WHERE b.user IS NULL""").collect()[0][0]
    assert one_way == 0
    views = spark.sql("""
        SELECT node, sort_array(collect_list(concat(split(user, '[.]')[0], '>', split(adj, '[.]')[0]))) AS ls
        FROM links GROUP BY node""").collect()
    assert len({tuple(r.ls) for r in views}) == 1  # every observer holds the same database


def test_validations_pass(lake: Lake, spark: SparkSession) -> None:
    rows = spark.sql("SELECT expectation, success FROM validations").collect()
    assert len(rows) == sum(len(s.expectation_names()) for s in load_suites() if s.table in TABLES)
    assert [r.expectation for r in rows if not r.success] == []


def test_teardown_leaves_no_raims_process(run: Run) -> None:
    assert "stopped 4 daemon(s)" in run.done.stdout
    assert raims_processes(run.run_dir) == []
    assert not list(run.run_dir.glob("e2e/*/ms_server.pid"))


def test_the_daemons_logged_no_exception(run: Run) -> None:
    """An exception a daemon survived still cost it something (tests/integration's
    no_node_tracebacks does the same for the integration tests' nodes)."""
    logs = sorted(run.run_dir.glob("e2e/*/ms_server.log*"))
    assert len(logs) >= 4
    assert [str(log.relative_to(run.run_dir)) for log in logs if "Traceback" in log.read_text(errors="replace")] == []


def test_each_observer_holds_every_nodes_type_0_name(lake: Lake, spark: SparkSession) -> None:
    """The `names` table (issue 21): each node's table holds the four nodes' own names."""
    rows = spark.sql("SELECT node, count(DISTINCT publisher) FROM names WHERE type = 0 GROUP BY node").collect()
    assert len(rows) == 4 and {r[1] for r in rows} == {4}


def test_the_bloom_audit_checked_live_subscriptions_and_peer_copies(run: Run) -> None:
    line = next(x for x in run.done.stdout.splitlines() if x.startswith("[  audit   ]"))
    checked = {k: int(v) for k, v in re.findall(r"(subscriptions|peer_copies) (\d+)", line)}
    assert checked.get("subscriptions", 0) > 0 and checked.get("peer_copies", 0) > 0, line


def test_the_executors_wrote_the_snapshot_and_the_driver_committed_it(run: Run, lake: Lake) -> None:
    line = next(x for x in run.done.stdout.splitlines() if x.startswith("[ collect  ]"))
    assert "written by the executors in" in line, line
    from deltalake import DeltaTable

    for table in ("peers", "links"):
        dt = DeltaTable(lake.table_path(table))
        ops = [h.get("operation") for h in dt.history()]
        assert "WRITE" in ops or "CREATE TABLE" in ops, ops
        snapshot = dt.to_pyarrow_table(columns=["snapshot_id"]).column("snapshot_id")[0].as_py()
        assert dt.transaction_version(f"raims.snapshot.{snapshot}") == 1
