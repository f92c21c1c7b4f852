"""Lake parts: data files the executors write, committed to the Delta tables by the driver.

Issue 26, "Collection": each executor writes its own host's rows; no snapshot data passes
through the driver. The collection's tasks read their host's daemons (jobs/collect.py),
turn the rows into each table's schema (`TableSchema.conform`) and write them as Parquet
files here (`write_parts`), returning only a `Part` per file: its path, size, row count,
partition values and statistics. The driver commits those (`Lake.commit_parts`).

Decisions (the issue offers per-task appends with transaction ids, or staged parts with
a driver commit; this is the second):
- One Delta commit per table and snapshot, made by the driver from the tasks' file
  metadata: a reader sees all hosts' rows of a snapshot or none of them, tasks never race
  each other for the log (64 hosts appending at once would need that many retries each),
  and the driver handles a few hundred bytes per file.
- With delta-rs (local lakes and any object store pyarrow reaches), a task writes its
  files straight into the table's folder, `date=<d>/part-<snapshot>-<tag>-<uuid>.parquet`,
  without the partition column (Delta keeps it in the log): until the commit adds them
  they are invisible to every reader. With Spark's Delta writer (Databricks) the files go
  to `<lake>/_staging/<snapshot>/<table>/` with every column; the driver's commit is a
  distributed `spark.read.parquet(...).write.format("delta")` (executors move the rows)
  and the staging folder is removed after it.
- Idempotence: the commit carries the Delta transaction (app id `raims.snapshot.<id>`,
  version 1; Spark: options txnAppId / txnVersion). A table whose log already holds it
  took this snapshot before (a collector's retry, a rerun of the stage): the commit is
  skipped and its new files deleted, so a snapshot written twice adds nothing. Delta's
  conflict check refuses a second commit of the same transaction racing the first.
- Statistics: numRecords, nullCount of every column, min/max of string and integer
  columns (what `raims_delta` prunes by: `snapshot_id`; `date` is a partition value).
  Timestamps get none: Delta stores them in milliseconds, and a max truncated below the
  true value would prune rows that match.
- Files of a task attempt that failed are never committed; the driver deletes those of
  the snapshot it finds beside the committed ones, `raims lake maintain` the rest (vacuum).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc

from spark_app.schemas import TableSchema

APP_PREFIX: Final = "raims.snapshot."
TXN_VERSION: Final = 1
STAGING_DIR: Final = "_staging"
PART_PREFIX: Final = "part-"


def app_id(snapshot_id: str) -> str:
    """The Delta transaction app id of a snapshot's commit to a table."""
    return f"{APP_PREFIX}{snapshot_id}"


def local_path(uri: str) -> str:
    """A path pyarrow can open: Databricks' `dbfs:/x` is the FUSE mount `/dbfs/x`."""
    return "/dbfs/" + uri[len("dbfs:"):].lstrip("/") if uri.startswith("dbfs:") else uri


@dataclass(frozen=True, slots=True)
class Part:
    """One data file a task wrote: what the driver needs to commit it."""

    table: str
    path: str  # delta-rs: relative to the table, as in the log; staged: absolute
    size: int
    rows: int
    partition_values: Mapping[str, str | None]
    modification_time: int  # ms since the epoch
    stats: str  # Delta's statistics JSON


@dataclass(frozen=True, slots=True)
class Target:
    """Where a snapshot's parts go: shipped to the tasks (small, picklable)."""

    lake: str  # the lake's root, absolute or a URI
    snapshot_id: str
    schemas: Mapping[str, TableSchema]
    staged: bool = False  # Spark's Delta writer commits: write to the staging folder

    def table_uri(self, table: str) -> str:
        return f"{self.lake.rstrip('/')}/{table}"

    def folder(self, table: str) -> str:
        if self.staged:
            return f"{self.lake.rstrip('/')}/{STAGING_DIR}/{self.snapshot_id}/{table}"
        return self.table_uri(table)


def _filesystem(uri: str) -> tuple[Any, str]:
    from pyarrow import fs

    path = local_path(uri)
    if "://" in path:
        return fs.FileSystem.from_uri(path)
    return fs.LocalFileSystem(), path


def _stat_value(v: Any) -> Any:
    return v.isoformat() if hasattr(v, "isoformat") else v


def stats_of(data: pa.Table) -> str:
    """Delta statistics of the rows of one file (see the module's decisions)."""
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for field, column in zip(data.schema, data.columns, strict=True):
        t = field.type
        if pa.types.is_nested(t):
            continue
        nulls[field.name] = column.null_count
        if (pa.types.is_string(t) or pa.types.is_integer(t)) and column.null_count < len(column):
            lo, hi = pc.min_max(column).values()
            mins[field.name], maxs[field.name] = _stat_value(lo.as_py()), _stat_value(hi.as_py())
    return json.dumps({"numRecords": data.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls})


def _partition_text(v: Any) -> str | None:
    return None if v is None else str(_stat_value(v))


def write_parts(target: Target, table: str, rows: Sequence[Mapping[str, Any]] | pa.Table, tag: str) -> list[Part]:
    """`rows` of `table`, conformed to its schema, written as one Parquet file per
    partition value under the target's folder; the files' Parts (none without rows).
    `tag` names the writer (host and task attempt) in the file names."""
    import pyarrow.parquet as pq

    schema = target.schemas[table]
    data = schema.conform(rows)
    if data.num_rows == 0:
        return []
    filesystem, root = _filesystem(target.folder(table))
    keys = list(schema.partition_by)
    groups: list[tuple[dict[str, str | None], pa.Table]] = []
    if keys:
        for values in data.select(keys).group_by(keys).aggregate([]).to_pylist():
            mask = None
            for k in keys:
                one = pc.is_null(data.column(k)) if values[k] is None else pc.equal(data.column(k), values[k])
                mask = one if mask is None else pc.and_(mask, one)
            groups.append(({k: _partition_text(values[k]) for k in keys}, data.filter(mask)))
    else:
        groups.append(({}, data))
    parts = []
    for values, rows_of in groups:
        folder = "/".join(f"{k}={'__HIVE_DEFAULT_PARTITION__' if v is None else v}" for k, v in values.items())
        name = f"{PART_PREFIX}{target.snapshot_id}-{tag}-{uuid.uuid4().hex[:12]}.parquet"
        relative = f"{folder}/{name}" if folder else name
        stored = rows_of if target.staged else rows_of.drop_columns(keys)
        full = f"{root}/{relative}"
        filesystem.create_dir(full.rpartition("/")[0], recursive=True)
        pq.write_table(stored, full, filesystem=filesystem, compression="snappy")
        info = filesystem.get_file_info(full)
        parts.append(Part(table, full if target.staged else relative, int(info.size), rows_of.num_rows,
                          values, int(time.time() * 1000), stats_of(stored)))
    return parts


def delete_files(uri: str, paths: Sequence[str]) -> int:
    """Delete `paths` (relative to `uri`, or absolute) that exist; how many were."""
    filesystem, root = _filesystem(uri)
    done = 0
    for p in paths:
        full = p if p.startswith("/") or "://" in p else f"{root.rstrip('/')}/{p}"
        try:
            filesystem.delete_file(full)
            done += 1
        except FileNotFoundError:
            pass
    return done


def uncommitted(uri: str, parts: Sequence[Part], snapshot_id: str) -> list[str]:
    """Files of `snapshot_id` in the partition folders of `parts` that are not among
    them: what failed task attempts left (relative to `uri`)."""
    from pyarrow import fs

    filesystem, root = _filesystem(uri)
    known = {p.path for p in parts}
    folders = {p.path.rpartition("/")[0] for p in parts}
    prefix = f"{PART_PREFIX}{snapshot_id}-"
    stray = []
    for folder in sorted(folders):
        where = f"{root.rstrip('/')}/{folder}" if folder else root
        for info in filesystem.get_file_info(fs.FileSelector(where, allow_not_found=True)):
            relative = f"{folder}/{info.base_name}" if folder else info.base_name
            if info.base_name.startswith(prefix) and relative not in known:
                stray.append(relative)
    return stray


def snapshot_files(uri: str, folders: Sequence[str], snapshot_id: str) -> list[str]:
    """The files of `snapshot_id` (by name) in `folders` of the table at `uri`, relative
    to it: what the tasks of a stage that failed before its commit wrote."""
    from pyarrow import fs

    filesystem, root = _filesystem(uri)
    prefix = f"{PART_PREFIX}{snapshot_id}-"
    found = []
    for folder in sorted(set(folders)):
        where = f"{root.rstrip('/')}/{folder}" if folder else root
        for info in filesystem.get_file_info(fs.FileSelector(where, allow_not_found=True)):
            if info.base_name.startswith(prefix):
                found.append(f"{folder}/{info.base_name}" if folder else info.base_name)
    return found


def delete_staging(lake: str, snapshot_id: str) -> bool:
    """Remove the staging folder of `snapshot_id` (Spark's Delta writer); whether there was one."""
    from pyarrow import fs

    filesystem, root = _filesystem(f"{lake.rstrip('/')}/{STAGING_DIR}/{snapshot_id}")
    if filesystem.get_file_info(root).type == fs.FileType.NotFound:
        return False
    filesystem.delete_dir(root)
    return True
