"""The message-log archive (issue 22 item 6): real logs, real Spark (local), real Delta;
a rerun adds zero rows, new messages are added once."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from raims_node.msglog.log import FsyncPolicy, MessageLog, create_log
from raims_node.msglog.record import LogKind
from spark_app.jobs.msglog_archive import archive, find_logs, log_rows
from spark_app.lake import Lake


def fill(root: Path, node: str, number: int, msgs: list[tuple[int, int]]) -> None:
    with MessageLog.open(root, "cab", node, fsync=FsyncPolicy.NONE, max_file_size=2000) as log:
        for origin, mid in msgs:
            if mid > log.state[origin]:
                log.append(origin, mid, b"%d/%d" % (origin, mid))


def test_log_rows_kernel(tmp_path: Path) -> None:
    create_log(tmp_path, "cab", "a", 1)
    fill(tmp_path, "a", 1, [(1, i) for i in range(1, 121)])
    (batch,) = list(log_rows("cab", "a", str(tmp_path / "cab" / "a")))
    assert batch.num_rows == 120 and batch.column("id").to_pylist() == list(range(1, 121))
    create_log(tmp_path, "cab", "s", 0, LogKind.STATE)
    assert [(c, n) for c, n, _ in find_logs(tmp_path)] == [("cab", "a")]


@pytest.mark.slow
def test_archive_rerun_adds_zero_rows(spark: SparkSession, lake: Lake, tmp_path: Path) -> None:
    root = tmp_path / "message"
    create_log(root, "cab", "a", 1)
    create_log(root, "cab", "b", 2)
    both = [(1, i) for i in range(1, 51)] + [(2, i) for i in range(1, 31)]
    fill(root, "a", 1, both)
    fill(root, "b", 2, both[50:] + both[:50])  # the same messages, another order
    first = archive(spark, lake, root)
    assert (first.logs, first.rows_read, first.rows_added) == (2, 160, 80)
    again = archive(spark, lake, root)
    assert (again.rows_read, again.rows_added) == (160, 0)
    fill(root, "b", 2, [(2, i) for i in range(31, 36)])
    third = archive(spark, lake, root)
    assert third.rows_added == 5
    df = lake.read("msglog")
    assert df.count() == 85
    assert df.groupBy("cabal", "origin", "id").count().where("count > 1").count() == 0
    row = df.where("origin = 2 AND id = 33").collect()[0]
    assert bytes(row["payload"]) == b"2/33" and row["node"] == "b"
