"""Archive message logs (seed 004) into the Delta table `msglog`, idempotent by key.

Issue 22, item 6. `archive(spark, lake, root)` finds every log `<root>/<cabal>/<node>/`
(numbered files; state-only logs hold no messages and are skipped), reads them in Spark
tasks (`mapInArrow` over the list of logs, the pure kernel `log_rows` per log), keeps one
row per (cabal, origin, id) (the logs of a cabal's nodes hold the same messages), drops
the keys the table already has (a left anti-join with its key columns) and appends the
rest with the run's `snapshot_id` and `collected_at`. A rerun over the same logs adds
zero rows; a rerun after more messages adds just those. Pruned files are no problem:
what was archived stays archived.

The rows of one run are collected to the driver by `Lake.write` (delta-rs, or Spark's
own Delta writer when the session has it); a run is what the logs gained since the last
one, so run it often enough for that to fit.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from raims_node.msglog import paths
from raims_node.msglog.reader import LogReader
from spark_app.lake import Lake

TABLE: Final = "msglog"
KEYS: Final = ("cabal", "origin", "id")
ROW_SCHEMA: Final = pa.schema(
    [
        ("cabal", pa.string()),
        ("node", pa.string()),
        ("origin", pa.int32()),
        ("id", pa.int64()),
        ("time", pa.timestamp("us", tz="UTC")),
        ("payload", pa.binary()),
    ]
)
ROW_DDL: Final = "cabal string, node string, origin int, id long, time timestamp, payload binary"
BATCH_ROWS: Final = 50_000


@dataclass(frozen=True, slots=True)
class ArchiveResult:
    snapshot_id: str
    logs: int
    rows_read: int
    rows_added: int


def find_logs(root: str | Path) -> list[tuple[str, str, str]]:
    """(cabal, node, directory) of every content log under `root`."""
    out = []
    base = Path(root)
    for cabal_dir in sorted(p for p in base.iterdir() if p.is_dir()) if base.is_dir() else []:
        for node_dir in sorted(p for p in cabal_dir.iterdir() if p.is_dir()):
            if paths.named_file(node_dir, node_dir.name).is_symlink():
                out.append((cabal_dir.name, node_dir.name, str(node_dir)))
    return out


def log_rows(cabal: str, node: str, directory: str) -> Iterator[pa.RecordBatch]:
    """Every message of one log as Arrow batches of ROW_SCHEMA (the pure kernel)."""
    reader = LogReader(Path(directory))
    cols: dict[str, list[object]] = {n: [] for n in ROW_SCHEMA.names}

    def flush() -> pa.RecordBatch:
        batch = pa.RecordBatch.from_pydict(dict(cols), schema=ROW_SCHEMA)
        for v in cols.values():
            v.clear()
        return batch

    try:
        while True:
            got = reader.records()
            if not got:
                break
            for _, rec in got:
                cols["cabal"].append(cabal)
                cols["node"].append(node)
                cols["origin"].append(rec.origin)
                cols["id"].append(rec.mid)
                cols["time"].append(rec.time_ns // 1000)
                cols["payload"].append(rec.data)
            if len(cols["id"]) >= BATCH_ROWS:
                yield flush()
    finally:
        reader.close()
    if cols["id"]:
        yield flush()


def _read_logs(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        for row in batch.to_pylist():
            yield from log_rows(row["cabal"], row["node"], row["directory"])


def archive(spark: SparkSession, lake: Lake, root: str | Path) -> ArchiveResult:
    """Append to `msglog` the messages of the logs under `root` that it lacks."""
    logs = find_logs(root)
    snapshot_id = f"msglog-{uuid.uuid4().hex[:12]}"
    collected_at = datetime.now(UTC)
    if not logs:
        return ArchiveResult(snapshot_id, 0, 0, 0)
    listing = spark.createDataFrame(logs, "cabal string, node string, directory string")
    rows = listing.repartition(min(len(logs), spark.sparkContext.defaultParallelism)).mapInArrow(
        _read_logs, ROW_DDL
    )
    rows = rows.persist()
    try:
        read = rows.count()
        fresh = rows.dropDuplicates(list(KEYS))
        if lake.exists(TABLE):
            have = lake.read(TABLE).select(*KEYS)
            fresh = fresh.join(have, list(KEYS), "left_anti")
        out = fresh.select(
            F.lit(snapshot_id).alias("snapshot_id"),
            F.lit(collected_at).cast("timestamp").alias("collected_at"),
            "node",
            "cabal",
            "origin",
            "id",
            "time",
            "payload",
        )
        added = lake.write(TABLE, out)
    finally:
        rows.unpersist()
    return ArchiveResult(snapshot_id, len(logs), read, added)
