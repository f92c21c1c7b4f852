"""The lake on real Delta files (delta-rs) read through real Spark (local mode)."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from spark_app.datasource import FilesPartition, plan_partitions
from spark_app.errors import LakeError, SchemaViolation
from spark_app.lake import Backend, Lake, select_backend
from spark_app.schemas import SCHEMA_DIR, TABLES, load_schemas, parse_schema
from tests.spark.synthetic import NODES, snapshot_rows

DAY1 = datetime(2026, 3, 20, 23, 59, 58, tzinfo=UTC)
DAY2 = DAY1 + timedelta(seconds=4)


def counts(spark: SparkSession, sql: str) -> dict[object, int]:
    return {row[0]: row[1] for row in spark.sql(sql).collect()}


def test_write_append_and_query_through_views(spark: SparkSession, lake: Lake) -> None:
    rows = snapshot_rows("s1", DAY1)
    assert lake.write("links", rows["links"]) == len(rows["links"])
    assert lake.register_views() == ["links"]
    per_node = len(rows["links"]) // len(NODES)
    assert counts(spark, "SELECT node, count(*) FROM links GROUP BY node") == dict.fromkeys(
        NODES, per_node
    )

    lake.write("links", snapshot_rows("s2", DAY2)["links"])  # the view follows the lake's writes
    assert counts(spark, "SELECT snapshot_id, count(*) FROM links GROUP BY snapshot_id") == {
        "s1": len(rows["links"]),
        "s2": len(rows["links"]),
    }
    reverse = spark.sql("""
        SELECT count(*) FROM links a LEFT JOIN links b
          ON a.snapshot_id = b.snapshot_id AND a.node = b.node AND a.user = b.adj AND a.adj = b.user
        WHERE a.adj IS NOT NULL AND b.user IS NULL""").collect()[0][0]
    assert reverse == 0


def test_every_table_gets_its_declared_schema(spark: SparkSession, lake: Lake) -> None:
    for sid in ("s1", "s2"):  # the second write appends to tables of every column type
        rows = snapshot_rows(sid, DAY1)
        for table in TABLES:
            lake.write(table, rows.get(table, []))  # validations: zero rows still create the table
    assert lake.register_views() == sorted(TABLES)
    schemas = load_schemas()
    for table in TABLES:
        got = spark.table(table).schema
        want = from_arrow_schema(schemas[table].arrow_schema())
        assert [(f.name, f.dataType) for f in got] == [(f.name, f.dataType) for f in want], table
        assert spark.table(table).count() == 2 * len(rows.get(table, [])), table
    peers = spark.sql("SELECT node, count(DISTINCT bridge) FROM peers GROUP BY node").collect()
    assert {r[0]: r[1] for r in peers} == dict.fromkeys(NODES, len(NODES))
    stages = spark.sql("SELECT stage_seconds['converge'] FROM rollouts").collect()[0][0]
    assert stages == 2.0


def test_sql_create_view_using_the_source_with_time_travel(spark: SparkSession, lake: Lake) -> None:
    lake.write("peers", snapshot_rows("s1", DAY1)["peers"])
    lake.write("peers", snapshot_rows("s2", DAY1)["peers"])
    path = lake.table_path("peers")
    spark.sql(f"CREATE OR REPLACE TEMP VIEW peers_now USING raims_delta OPTIONS (path '{path}')")
    spark.sql(
        f"CREATE OR REPLACE TEMP VIEW peers_v0 USING raims_delta OPTIONS (path '{path}', version '0')"
    )
    n = len(NODES) ** 2
    assert spark.sql("SELECT count(*) FROM peers_now").collect()[0][0] == 2 * n
    assert spark.sql("SELECT count(*) FROM peers_v0").collect()[0][0] == n
    assert lake.read("peers", version=0).count() == n


def test_tables_are_partitioned_by_utc_date(spark: SparkSession, lake: Lake) -> None:
    lake.write("events", snapshot_rows("s1", DAY1)["events"])
    lake.write("events", snapshot_rows("s2", DAY2)["events"])
    table = DeltaTable(lake.table_path("events"))
    assert table.metadata().partition_columns == ["date"]
    assert sorted(p["date"] for p in table.partitions()) == ["2026-03-20", "2026-03-21"]
    assert {Path(f).parent.name for f in table.file_uris()} == {
        "date=2026-03-20",
        "date=2026-03-21",
    }
    lake.register_views(["events"])
    assert counts(
        spark, "SELECT string(date), count(DISTINCT snapshot_id) FROM events GROUP BY date"
    ) == {"2026-03-20": 1, "2026-03-21": 1}


def test_reads_follow_the_delta_log_not_the_folder(spark: SparkSession, lake: Lake) -> None:
    lake.write("loss", snapshot_rows("s1", DAY1)["loss"])
    lake.write("loss", snapshot_rows("s2", DAY1)["loss"])
    DeltaTable(lake.table_path("loss")).delete("snapshot_id = 's1'")
    parquet_files = list(Path(lake.table_path("loss")).rglob("*.parquet"))
    assert len(parquet_files) >= 2  # the deleted rows' file is still in the folder
    lake.register_views(["loss"])
    assert counts(spark, "SELECT snapshot_id, count(*) FROM loss GROUP BY snapshot_id") == {
        "s2": len(NODES) * (len(NODES) - 1)
    }


def test_many_files_are_read_in_full(spark: SparkSession, lake: Lake) -> None:
    for i in range(5):
        lake.write("counters", snapshot_rows(f"s{i}", DAY1 + timedelta(days=i))["counters"])
    assert lake.read("counters").count() == 5 * len(NODES) ** 2


def test_plan_partitions_groups_files_by_size() -> None:
    files = [("a", 60), ("b", 50), ("c", 10), ("d", 200), ("e", 1)]
    assert plan_partitions(files, 100) == [
        FilesPartition(("a",)),
        FilesPartition(("b", "c")),
        FilesPartition(("d",)),
        FilesPartition(("e",)),
    ]
    assert plan_partitions([], 100) == [FilesPartition(())]


def test_schema_violation_writes_nothing(lake: Lake) -> None:
    rows = snapshot_rows("s1", DAY1)["links"]
    lake.write("links", rows)
    bad = [{k: v for k, v in r.items() if k != "cost4"} for r in rows]
    with pytest.raises(SchemaViolation, match="table 'links', column 'cost4': missing"):
        lake.write("links", bad)
    assert DeltaTable(lake.table_path("links")).version() == 0


def test_unknown_table(lake: Lake) -> None:
    with pytest.raises(LakeError, match="unknown table 'link'"):
        lake.write("link", [])


def test_spark_dataframe_rows_are_enforced_too(spark: SparkSession, lake: Lake) -> None:
    rows = snapshot_rows("s1", DAY1)["routes"]
    df = spark.createDataFrame(load_schemas()["routes"].conform(rows).drop_columns(["date"]))
    assert lake.write("routes", df) == len(rows)
    with pytest.raises(SchemaViolation, match="column 'fd': missing"):
        lake.write("routes", df.drop("fd"))


def test_snapshot_returns_only_that_snapshot(lake: Lake) -> None:
    for sid, at in (("s1", DAY1), ("s2", DAY2)):
        rows = snapshot_rows(sid, at)
        lake.write("peers", rows["peers"])
        lake.write("links", rows["links"])
    got = lake.snapshot("s2", ["peers", "links", "subs"])
    assert sorted(got) == ["links", "peers"]
    assert set(got["peers"].column("snapshot_id").to_pylist()) == {"s2"}
    assert got["links"].num_rows == len(snapshot_rows("s2", DAY2)["links"])


def _schemas_with(edit) -> dict:  # type: ignore[no-untyped-def]
    raw = json.loads((SCHEMA_DIR / "links.json").read_text())
    edit(raw["columns"])
    return {**load_schemas(), "links": parse_schema(raw)}


def test_a_new_nullable_column_is_merged(spark: SparkSession, tmp_path: Path) -> None:
    rows = snapshot_rows("s1", DAY1)["links"]
    Lake(tmp_path, spark).write("links", rows)
    grown = _schemas_with(
        lambda cols: cols.insert(-1, {"name": "note", "type": "string", "nullable": True})
    )
    lake = Lake(tmp_path, spark, schemas=grown)
    lake.write("links", [{**r, "snapshot_id": "s2", "note": "new"} for r in rows])
    notes = (
        pa.table(DeltaTable(lake.table_path("links")).to_pyarrow_table()).column("note").to_pylist()
    )
    assert sorted(notes, key=str) == [None] * len(rows) + ["new"] * len(rows)


def test_a_retyped_column_is_refused(spark: SparkSession, tmp_path: Path) -> None:
    rows = snapshot_rows("s1", DAY1)["links"]
    Lake(tmp_path, spark).write("links", rows)
    retyped = _schemas_with(
        lambda cols: next(c for c in cols if c["name"] == "cost").update(type="long")
    )
    with pytest.raises(LakeError, match="table 'links', column 'cost': the table holds int32"):
        Lake(tmp_path, spark, schemas=retyped).write("links", rows)


def test_backend_selection(spark: SparkSession, lake: Lake) -> None:
    assert select_backend(True) is Backend.SPARK_DELTA
    assert select_backend(False) is Backend.DELTA_RS
    assert lake.backend is Backend.DELTA_RS  # local Spark has no Delta jars


def test_spark_delta_writer_gets_the_declared_types(spark: SparkSession) -> None:
    """The spark-delta backend hands Delta `createDataFrame(conformed rows)`: check that
    every table keeps its declared Spark types on the way (UTC timestamps, maps, arrays)."""
    rows = snapshot_rows("s1", DAY1)
    for table, schema in load_schemas().items():
        df = spark.createDataFrame(schema.conform(rows.get(table, [])))
        want = from_arrow_schema(schema.arrow_schema())
        assert [(f.name, f.dataType) for f in df.schema] == [(f.name, f.dataType) for f in want]


def test_spark_delta_backend_needs_delta_in_the_session(
    spark: SparkSession, tmp_path: Path
) -> None:
    lake = Lake(tmp_path, spark, backend=Backend.SPARK_DELTA)
    with pytest.raises(LakeError, match="backend spark-delta needs Delta in the Spark session"):
        lake.write("links", snapshot_rows("s1", DAY1)["links"])
    assert not Path(lake.table_path("links")).exists()


LOCAL_CLUSTER_SCRIPT = """
import json, sys
from datetime import UTC, datetime
from spark_app.lake import Lake
from spark_app.session import LOCAL_CLUSTER_MASTER, build_session
from tests.spark.synthetic import snapshot_rows

spark = build_session(LOCAL_CLUSTER_MASTER, app_name="raims-test-cluster")
lake = Lake(sys.argv[1], spark)
lake.write("links", snapshot_rows("s1", datetime(2026, 3, 20, tzinfo=UTC))["links"])
lake.register_views()
rows = spark.sql("SELECT node, count(*) FROM links GROUP BY node").collect()
executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
print(json.dumps({"counts": {r[0]: r[1] for r in rows}, "executors": executors}))
spark.stop()
"""


@pytest.mark.slow
def test_views_work_on_a_local_cluster_with_executor_jvms(tmp_path: Path) -> None:
    """The source is shipped to separate executor JVMs' Python workers (the rollout's
    local master), which cannot import spark_app: it travels by value."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", LOCAL_CLUSTER_SCRIPT, str(tmp_path / "lake")],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    per_node = len(snapshot_rows("s1", DAY1)["links"]) // len(NODES)
    assert got == {"counts": dict.fromkeys(NODES, per_node), "executors": 2}


def test_writing_a_snapshot_again_replaces_its_rows(spark: SparkSession, tmp_path: Path) -> None:
    lake = Lake(tmp_path, spark)
    rows = snapshot_rows("s1", DAY1)["links"]
    lake.write("links", rows)
    lake.write("links", snapshot_rows("s2", DAY1)["links"])
    lake.write("links", rows)  # a collector's retry of s1
    table = DeltaTable(lake.table_path("links")).to_pyarrow_table()
    ids = table.column("snapshot_id").to_pylist()
    assert (ids.count("s1"), ids.count("s2")) == (len(rows), len(rows))


def test_a_filtered_query_on_a_view_leaves_the_next_query_every_row(spark: SparkSession, lake: Lake) -> None:
    """With filters pushed into the Python reader, Spark reused the reader of a filtered
    query for the next query on the same view: a GROUP BY after `WHERE snapshot_id = 's1'`
    saw only s1 (the Spark probe; notebook 03 lost a snapshot from its charts)."""
    for i, day in enumerate((DAY1, DAY2, DAY2 + timedelta(days=1))):
        lake.write("links", snapshot_rows(f"s{i}", day)["links"])
    lake.register_views(["links"])
    every = "SELECT snapshot_id, count(*) AS n FROM links GROUP BY snapshot_id"
    before = {r.snapshot_id: r.n for r in spark.sql(every).collect()}
    assert set(before) == {"s0", "s1", "s2"}
    one = spark.sql("SELECT count(*) FROM links WHERE snapshot_id = 's1' AND date >= DATE'2026-03-21'").collect()
    assert one[0][0] == before["s1"]
    assert {r.snapshot_id: r.n for r in spark.sql(every).collect()} == before
    assert lake.read("links").where("snapshot_id IN ('s0', 's2')").count() == before["s0"] + before["s2"]


def test_lake_maintain_compacts_and_keeps_every_row(spark: SparkSession, lake: Lake) -> None:
    from spark_app.maintain import main as maintain_main
    from spark_app.maintain import maintain

    for i in range(4):
        lake.write("links", snapshot_rows(f"s{i}", DAY1)["links"])
    lake.write("peers", snapshot_rows("s0", DAY1)["peers"])
    before = {t: lake.read(t).count() for t in ("links", "peers")}
    done = {m.table: m for m in maintain(lake.path, retention_hours=0)}
    assert done["links"].files_before == 4 and done["links"].files_after == 1
    assert done["links"].vacuumed >= 4 and done["links"].rows == before["links"]
    assert {t: lake.read(t).count() for t in ("links", "peers")} == before
    assert maintain_main(["--lake", lake.path, "--retention-hours", "0"]) == 0  # again: nothing to do


def _staged(lake: Lake, snapshot: str, day: datetime, tag: str) -> list:
    from spark_app.parts import write_parts

    rows = snapshot_rows(snapshot, day)["links"]
    half = len(rows) // 2  # two "hosts", each writing its own rows
    return [*write_parts(lake.target(snapshot), "links", rows[:half], f"{tag}a"),
            *write_parts(lake.target(snapshot), "links", rows[half:], f"{tag}b")]


def test_parts_written_by_tasks_commit_once_per_snapshot(spark: SparkSession, lake: Lake) -> None:
    want = len(snapshot_rows("s1", DAY1)["links"])
    assert lake.commit_parts("links", _staged(lake, "s1", DAY1, "h0"), "s1") == want
    retry = _staged(lake, "s1", DAY1, "h1")  # the collection again: same snapshot
    assert lake.commit_parts("links", retry, "s1") == 0
    assert lake.commit_parts("links", _staged(lake, "s2", DAY2, "h0"), "s2") == want
    ids = DeltaTable(lake.table_path("links")).to_pyarrow_table().column("snapshot_id").to_pylist()
    assert (ids.count("s1"), ids.count("s2")) == (want, want)
    assert not any(os.path.exists(os.path.join(lake.table_path("links"), p.path)) for p in retry)
    # the log's statistics prune by snapshot, the partition value by date
    assert lake.read("links").where("snapshot_id = 's2' AND date = DATE'2026-03-21'").count() == want
    actions = pa.table(DeltaTable(lake.table_path("links")).get_add_actions(flatten=True)).to_pylist()
    assert {(a["min.snapshot_id"], a["max.snapshot_id"]) for a in actions} == {("s1", "s1"), ("s2", "s2")}


def test_a_failed_attempts_files_are_removed_at_the_commit(lake: Lake) -> None:
    from spark_app.parts import write_parts

    rows = snapshot_rows("s1", DAY1)["peers"]
    lake.write("peers", [])
    stray = write_parts(lake.target("s1"), "peers", rows, "attempt0")  # its task failed later
    done = write_parts(lake.target("s1"), "peers", rows, "attempt1")
    assert lake.commit_parts("peers", done, "s1") == len(rows)
    assert not os.path.exists(os.path.join(lake.table_path("peers"), stray[0].path))
    assert DeltaTable(lake.table_path("peers")).to_pyarrow_table().num_rows == len(rows)


def _corrupt_peers(lake: Lake) -> None:
    """A peers table whose second commit's log entry is garbage (the Spark probe's case)."""
    lake.write("peers", snapshot_rows("s0", DAY1)["peers"])
    lake.write("peers", snapshot_rows("s00", DAY1)["peers"])
    entry = Path(lake.table_path("peers")) / "_delta_log" / "00000000000000000001.json"
    entry.write_text('{"add": garbage\n')


def test_a_corrupt_delta_log_is_named_and_the_snapshots_files_are_discarded(lake: Lake) -> None:
    from spark_app.parts import write_parts

    _corrupt_peers(lake)
    rows = snapshot_rows("s1", DAY1)["peers"]
    stray = write_parts(lake.target("s1"), "peers", rows, "attempt0")  # a failed task attempt's
    done = write_parts(lake.target("s1"), "peers", rows, "attempt1")
    path = lake.table_path("peers")
    with pytest.raises(LakeError, match=rf"^table 'peers' at {path}: unreadable Delta log \(Kernel error: Json error: "
                                        r"[^\n]*\)$"):
        lake.commit_parts("peers", done, "s1")
    with pytest.raises(LakeError, match=rf"^table 'peers' at {path}: unreadable Delta log"):
        lake.read("peers")  # named on the driver, not in the data source's Java trace
    assert lake.discard_parts("peers", done, "s1") == 2
    assert not any(os.path.exists(os.path.join(path, p.path)) for p in [*stray, *done])
    links = _staged(lake, "s1", DAY1, "h0")
    lake.commit_parts("links", links, "s1")
    assert lake.discard_parts("links", links, "s1") == 0  # the table took them: they stay
    assert all(os.path.exists(os.path.join(lake.table_path("links"), p.path)) for p in links)


def test_a_failed_write_stage_removes_the_files_no_table_committed(spark: SparkSession, lake: Lake) -> None:
    from spark_app.controller import Rollout
    from spark_app.jobs.collect import Snapshot
    from spark_app.parts import write_parts
    from spark_app.settings import Settings

    _corrupt_peers(lake)
    rows = snapshot_rows("s1", DAY1)
    snap = Snapshot("s1", {"links": _staged(lake, "s1", DAY1, "h0"),  # committed before peers fails
                           "peers": write_parts(lake.target("s1"), "peers", rows["peers"], "h0"),
                           "subs": write_parts(lake.target("s1"), "subs", rows["subs"], "h0")},  # never tried
                    tuple(NODES))
    said: list[str] = []
    with pytest.raises(LakeError, match="table 'peers' at .*: unreadable Delta log"):
        Rollout(Settings(lake=lake.path), spark, say=said.append).write(snap)
    left = {t: [os.path.exists(os.path.join(lake.table_path(t), p.path)) for p in ps] for t, ps in snap.parts.items()}
    assert all(left["links"]) and not any(left["peers"]) and not any(left["subs"])
    removed = len(snap.parts["peers"]) + len(snap.parts["subs"])
    assert any(f"failed; removed {removed} uncommitted file(s) of the snapshot" in line for line in said)


def test_a_half_written_data_file_is_named_with_its_table(spark: SparkSession, lake: Lake) -> None:
    """A data file the log names, cut short (a crash mid-write, a full disk): the driver's
    snapshot read raised a bare ArrowInvalid, Spark SQL over the view a Python worker's
    trace with no table in it."""
    lake.write("peers", snapshot_rows("s1", DAY1)["peers"])
    (data,) = Path(lake.table_path("peers")).rglob("*.parquet")
    with data.open("r+b") as fh:
        fh.truncate(100)
    with pytest.raises(LakeError, match=rf"table 'peers' at {lake.table_path('peers')}: unreadable data .*{data.name}"):
        lake.snapshot("s1", ["peers"])
    with pytest.raises(Exception, match=rf"LakeError: table '{lake.table_path('peers')}' version 0: unreadable data"):
        lake.read("peers").count()
