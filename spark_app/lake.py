"""The lake: append-only Delta tables of network snapshots, one folder per table.

Issue "The main job", item 6, and DESIGN.md "Delta without Maven". `Lake(path, spark)`
writes `<path>/<table>` for the tables declared in data/schemas/ (see `schemas`),
partitioned by date, after enforcing the declared schema on the rows. Two writers
produce the same standard Delta tables:
- `spark-delta`: `DataFrame.write.format("delta")`, when the session has Delta
  (Databricks, or a cluster with the delta-spark jars);
- `delta-rs`: `deltalake.write_deltalake` on the driver, everywhere else (local runs:
  the delta-spark jars would come from Maven, which this machine cannot reach).
Reading is through Spark either way: `format("delta")`, or the `raims_delta` Python data
source over delta-rs (`datasource`), so `register_views()` makes every table a SQL view.

Decisions where the issue is silent:
- Writes are idempotent per snapshot: rows of snapshot S replace the rows of S the table
  already holds, in one Delta commit (delta-rs `predicate`, Spark `replaceWhere`), so a
  collector's retry or an `--audit-only` rerun leaves the row counts as they were. A
  writer therefore gives all of a snapshot's rows of a table in one `write`.
- A write of zero rows creates the table (with its schema) if it does not exist and is
  otherwise a no-op: a snapshot with no subscriptions still leaves a queryable table.
- Schemas may grow: a nullable column added to a schema file is merged into an existing
  table on the next write; any other difference from the table (a column dropped or
  retyped, other partitioning) is a LakeError naming the table and the column.
- Views are pinned to the table version current when they are created (Spark plans the
  scan then); the lake re-creates its views after each of its own writes, and
  `register_views()` again picks up writes made by other processes.
- The rows given to `write` are small (the rollouts row, validations, audit findings);
  a Spark DataFrame is converted to Arrow on the driver for the same enforcement. A
  snapshot's rows do not pass through the driver: the collection's tasks write them as
  data files (`spark_app.parts`) and `commit_parts` commits the files' metadata, once per
  snapshot (a Delta transaction app id: a second commit of the snapshot adds nothing).
- A delta-rs error (a corrupt log, a refused commit) is a LakeError naming the table and
  its path, with delta-rs's first line (its message goes on with a Rust backtrace); so is
  a data file the log names that Arrow cannot read (half-written: ArrowInvalid, "magic
  bytes not found"), in the driver's reads and in the `raims_delta` scan alike.
- When a snapshot's commit fails, `discard_parts` deletes the files its tasks wrote for
  the tables that did not take it (they would stay in the table folders, unreferenced,
  until a vacuum). A table whose log cannot be read has taken nothing: a commit needs it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession

from spark_app import datasource, parts
from spark_app.errors import LakeError, delta_message
from spark_app.room import check_room
from spark_app.schemas import TableSchema, load_schemas
from spark_app.session import DATA_SOURCE_NOT_FOUND, has_delta

if TYPE_CHECKING:
    from deltalake import DeltaTable

SNAPSHOT_COLUMN: Final = "snapshot_id"
UNREADABLE_LOG: Final = "unreadable Delta log"

Rows: TypeAlias = pa.Table | Sequence[Mapping[str, Any]] | DataFrame


class Backend(StrEnum):
    SPARK_DELTA = "spark-delta"
    DELTA_RS = "delta-rs"


def select_backend(delta_in_spark: bool) -> Backend:
    """Spark's own Delta writer when the session has one, else delta-rs."""
    return Backend.SPARK_DELTA if delta_in_spark else Backend.DELTA_RS


def snapshot_predicate(data: pa.Table) -> str | None:
    """The SQL predicate selecting the snapshots of `data` (None without rows)."""
    ids = sorted(str(x) for x in pc.unique(data.column(SNAPSHOT_COLUMN)).to_pylist() if x is not None)
    if not ids:
        return None
    quoted = ", ".join("'" + x.replace("'", "''") + "'" for x in ids)
    return f"{SNAPSHOT_COLUMN} IN ({quoted})"


def _partition_folders(data: pa.Table, keys: Sequence[str]) -> list[str]:
    """The partition folders (`k=v/...`) the rows of `data` go to, as Delta names them."""
    if not keys:
        return []
    combos = {tuple(row[k] for k in keys) for row in data.select(list(keys)).to_pylist()}
    return ["/".join(f"{k}={'__HIVE_DEFAULT_PARTITION__' if v is None else v}" for k, v in zip(keys, combo, strict=True))
            for combo in sorted(combos, key=str)]


class Lake:
    def __init__(
        self,
        path: str | Path,
        spark: SparkSession,
        *,
        backend: Backend | None = None,
        schemas: Mapping[str, TableSchema] | None = None,
    ) -> None:
        text = str(path)
        self.path = text if "://" in text or text.startswith("dbfs:") else str(Path(text).resolve())
        self.spark = spark
        self.backend = backend if backend is not None else select_backend(has_delta(spark))
        self.schemas = dict(schemas) if schemas is not None else load_schemas()
        self._views: set[str] = set()
        if self.backend is Backend.DELTA_RS:
            datasource.register(spark)

    def check_writable(self) -> None:
        """A local lake directory is made and a file written in it, before a rollout starts
        anything: a read-only or misplaced lake failed only at the first write, after the
        daemons had started and converged (~20 s). A URL's lake is the cluster's to check."""
        if "://" in self.path or self.path.startswith("dbfs:"):
            return
        try:
            Path(self.path).mkdir(parents=True, exist_ok=True)
            probe = Path(self.path) / f".write-probe-{os.getpid()}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise LakeError(f"lake {self.path} cannot be written: {exc.strerror or exc}") from None

    def table_path(self, table: str) -> str:
        return f"{self.path.rstrip('/')}/{table}"

    def schema(self, table: str) -> TableSchema:
        try:
            return self.schemas[table]
        except KeyError:
            raise LakeError(
                f"unknown table {table!r} (tables: {', '.join(sorted(self.schemas))})"
            ) from None

    @contextmanager
    def _delta_rs(self, table: str, what: str = UNREADABLE_LOG) -> Iterator[None]:
        """delta-rs's errors in the block as LakeError naming `table` (see Decisions)."""
        from deltalake.exceptions import DeltaError

        try:
            yield
        except (DeltaError, pa.ArrowException, OSError) as exc:  # Arrow: a data file cut short, not Parquet
            # OSError: delta-rs's store errors (a log it cannot write), in coloured lines
            raise LakeError(f"table {table!r} at {self.table_path(table)}: {what} ({delta_message(exc)})") from None

    def _open(self, table: str) -> DeltaTable:
        from deltalake import DeltaTable

        with self._delta_rs(table):
            return DeltaTable(self.table_path(table))

    def exists(self, table: str) -> bool:
        path = self.table_path(table)
        if self.backend is Backend.DELTA_RS:
            from deltalake import DeltaTable

            with self._delta_rs(table):
                return bool(DeltaTable.is_deltatable(path))
        try:
            _ = self.spark.read.format("delta").load(path).schema
        except Exception as exc:  # Spark raises a bare Py4JJavaError when Delta is absent
            if DATA_SOURCE_NOT_FOUND in str(exc):
                raise LakeError(
                    f"backend {self.backend} needs Delta in the Spark session, "
                    f"which has none (table {path})"
                ) from None
            return False
        return True

    def tables(self) -> list[str]:
        """The declared tables that exist in the lake."""
        return [t for t in sorted(self.schemas) if self.exists(t)]

    def write(self, table: str, rows: Rows) -> int:
        """Append `rows` to `table` after enforcing its schema; returns the rows written.

        Raises SchemaViolation (naming table and column) when the rows do not fit.
        """
        schema = self.schema(table)
        data = schema.conform(rows.toArrow() if isinstance(rows, DataFrame) else rows)
        existed = self.exists(table)
        if existed and data.num_rows == 0:
            return 0
        merge = existed and self._added_columns(schema)
        # idempotent: the snapshots in `data` replace their earlier rows, in one commit
        replace = snapshot_predicate(data) if existed else None
        if self.backend is Backend.DELTA_RS:
            from deltalake import write_deltalake

            partition_by = list(schema.partition_by) or None
            schema_mode: Literal["merge"] | None = "merge" if merge else None
            if data.num_rows:  # delta-rs panics on a data file it cannot write (spark_app.room)
                check_room(self.table_path(table), table, data.nbytes, _partition_folders(data, partition_by or []))
            with self._delta_rs(table, "write failed"):
                if replace:
                    write_deltalake(self.table_path(table), data, mode="overwrite", predicate=replace,
                                    partition_by=partition_by, schema_mode=schema_mode)
                else:
                    write_deltalake(self.table_path(table), data, mode="append",
                                    partition_by=partition_by, schema_mode=schema_mode)
        else:
            # one chunk per column: PySpark 4.2.1's createDataFrame(pyarrow.Table) loses
            # the rows of a table whose first chunk is empty
            frame = self.spark.createDataFrame(data.combine_chunks())
            writer = frame.write.format("delta").mode("overwrite" if replace else "append")
            if replace:
                writer = writer.option("replaceWhere", replace)
            if merge:
                writer = writer.option("mergeSchema", "true")
            writer.partitionBy(*schema.partition_by).save(self.table_path(table))
        if table in self._views:
            self._create_view(table)
        return data.num_rows

    def target(self, snapshot_id: str) -> parts.Target:
        """Where the collection's tasks write `snapshot_id`'s parts (see spark_app.parts)."""
        return parts.Target(self.path, snapshot_id, dict(self.schemas), staged=self.backend is Backend.SPARK_DELTA)

    def commit_parts(self, table: str, written: Sequence[parts.Part], snapshot_id: str) -> int:
        """Commit the data files tasks wrote for `snapshot_id` to `table` in one Delta
        commit carrying the snapshot's transaction app id; the rows added (0, and the
        files deleted, when the table already took this snapshot). Creates the table
        when it does not exist, merges new nullable schema columns like `write`."""
        schema = self.schema(table)
        path = self.table_path(table)
        app = parts.app_id(snapshot_id)
        rows = sum(p.rows for p in written)
        if self.backend is Backend.SPARK_DELTA:
            return self._commit_staged(table, written, app, rows)
        from deltalake import write_deltalake
        from deltalake.transaction import AddAction, CommitProperties, RemoveAction, Transaction

        if not self.exists(table):
            self.write(table, [])
        elif self._added_columns(schema):
            with self._delta_rs(table, "schema merge failed"):
                write_deltalake(path, schema.conform([]), mode="append", schema_mode="merge",
                                partition_by=list(schema.partition_by) or None)
        dt = self._open(table)
        if self._took(dt, table, app):  # this snapshot is in the table already
            parts.delete_files(path, [p.path for p in written])
            return 0
        actions: list[AddAction | RemoveAction] = [AddAction(p.path, p.size, dict(p.partition_values), p.modification_time, True, p.stats)
                   for p in written]
        with self._delta_rs(table, "commit failed"):
            dt.create_write_transaction(actions, "append", dt.schema(), list(schema.partition_by) or None,
                                        commit_properties=CommitProperties(
                                            app_transactions=[Transaction(app, parts.TXN_VERSION)]))
        parts.delete_files(path, parts.uncommitted(path, written, snapshot_id))
        if table in self._views:
            self._create_view(table)
        return rows

    def _took(self, dt: DeltaTable, table: str, app: str) -> bool:
        with self._delta_rs(table):
            return dt.transaction_version(app) is not None

    def discard_parts(self, table: str, written: Sequence[parts.Part], snapshot_id: str) -> int:
        """Delete the files tasks wrote for `snapshot_id` to `table` when the table did not
        take the snapshot (its commit failed, or was never tried); the files deleted.
        Staged files are never the table's: they go whatever the table holds."""
        if self.backend is Backend.SPARK_DELTA:
            return parts.delete_files(self.path, [p.path for p in written])
        path = self.table_path(table)
        try:
            if self._took(self._open(table), table, parts.app_id(snapshot_id)):
                return 0
        except LakeError:  # an unreadable log took nothing (see Decisions)
            pass
        return parts.delete_files(path, [*(p.path for p in written), *parts.uncommitted(path, written, snapshot_id)])

    def discard_snapshot(self, table: str, snapshot_id: str, dates: Iterable[str]) -> int:
        """Delete the files of `snapshot_id` that tasks wrote into `table`'s partitions of
        `dates` (YYYY-MM-DD) when the stage that wrote them failed before any commit (the
        traffic check, the collection): nothing knows their paths, and on a full disk they
        kept it full. A table that took the snapshot keeps them; the files deleted."""
        if self.backend is Backend.SPARK_DELTA:
            return int(parts.delete_staging(self.path, snapshot_id))
        path = self.table_path(table)
        try:
            if self._took(self._open(table), table, parts.app_id(snapshot_id)):
                return 0
        except LakeError:  # no table yet, or an unreadable log: took nothing
            pass
        keys = self.schema(table).partition_by
        folders = [f"{keys[0]}={d}" for d in dates] if len(keys) == 1 else [""]
        return parts.delete_files(path, parts.snapshot_files(path, folders, snapshot_id))

    def _commit_staged(self, table: str, written: Sequence[parts.Part], app: str, rows: int) -> int:
        """Spark's Delta writer: the staged files, read by the executors, appended in one
        commit with the snapshot's txnAppId (Delta skips a version it already took)."""
        schema = self.schema(table)
        from pyspark.sql.pandas.types import from_arrow_schema

        frame = (self.spark.read.schema(from_arrow_schema(schema.arrow_schema())).parquet(*[p.path for p in written])
                 if written else self.spark.createDataFrame([], from_arrow_schema(schema.arrow_schema())))
        writer = frame.write.format("delta").mode("append").option("txnAppId", app)
        writer = writer.option("txnVersion", str(parts.TXN_VERSION)).option("mergeSchema", "true")
        writer.partitionBy(*schema.partition_by).save(self.table_path(table))
        parts.delete_files(self.path, [p.path for p in written])
        if table in self._views:
            self._create_view(table)
        return rows

    def _added_columns(self, schema: TableSchema) -> bool:
        """Whether the schema file has nullable columns the table lacks (to be merged);
        raises LakeError for any other difference between the two."""
        table_schema = self._table_arrow_schema(schema.table)
        declared = datasource.spark_arrow_schema(schema.arrow_schema())
        for field in table_schema:
            if field.name not in declared.names:
                raise LakeError(
                    f"table {schema.table!r} has column {field.name!r}, "
                    "which its schema file no longer declares"
                )
            want = declared.field(field.name).type
            if datasource.spark_arrow_type(field.type) != want:
                raise LakeError(
                    f"table {schema.table!r}, column {field.name!r}: the table "
                    f"holds {field.type}, the schema file declares {want}"
                )
        added = [f for f in declared if f.name not in table_schema.names]
        for field in added:
            if not field.nullable:
                raise LakeError(
                    f"table {schema.table!r}: new column {field.name!r} must be "
                    "nullable to be added to existing rows"
                )
        return bool(added)

    def _table_arrow_schema(self, table: str) -> pa.Schema:
        path = self.table_path(table)
        if self.backend is Backend.DELTA_RS:
            dt = self._open(table)
            partitions = tuple(dt.metadata().partition_columns)
            if partitions != self.schema(table).partition_by:
                raise LakeError(
                    f"table {table!r} is partitioned by {partitions}, "
                    f"its schema file says {self.schema(table).partition_by}"
                )
            return datasource.spark_arrow_schema(pa.schema(dt.schema().to_arrow()))
        from pyspark.sql.pandas.types import to_arrow_schema

        return to_arrow_schema(self.spark.read.format("delta").load(path).schema)

    def read(self, table: str, version: int | None = None) -> DataFrame:
        """`table` as a Spark DataFrame (read lazily by the executors), optionally at a
        past version."""
        self.schema(table)
        path = self.table_path(table)
        if self.backend is Backend.SPARK_DELTA:
            reader = self.spark.read.format("delta")
            if version is not None:
                reader = reader.option("versionAsOf", str(version))
            return reader.load(path)
        if not self.exists(table):
            raise LakeError(f"table {table!r} does not exist at {path}")
        self._open(table)  # a corrupt log is named here, not deep in the data source's Java trace
        reader = self.spark.read.format(datasource.SOURCE_NAME).option("path", path)
        if version is not None:
            reader = reader.option("version", str(version))
        return reader.load()

    def _create_view(self, table: str) -> None:
        self.read(table).createOrReplaceTempView(table)
        self._views.add(table)

    def register_views(self, tables: Iterable[str] | None = None) -> list[str]:
        """A temporary view named after each existing table (all declared tables by
        default), so `spark.sql("SELECT ... FROM links")` works; returns the names."""
        names = [
            t for t in (tables if tables is not None else sorted(self.schemas)) if self.exists(t)
        ]
        for table in names:
            self._create_view(table)
        return names

    def snapshot(
        self, snapshot_id: str, tables: Iterable[str] | None = None
    ) -> dict[str, pa.Table]:
        """The rows of one snapshot, table by table (a snapshot fits in the driver: it is
        what one collection produced); tables that do not exist are left out."""
        out: dict[str, pa.Table] = {}
        for table in tables if tables is not None else sorted(self.schemas):
            if not self.exists(table):
                continue
            if self.backend is Backend.DELTA_RS:
                dt = self._open(table)
                with self._delta_rs(table, "unreadable data"):
                    got = dt.to_pyarrow_table(filters=[(SNAPSHOT_COLUMN, "=", snapshot_id)])
                out[table] = got.cast(datasource.spark_arrow_schema(got.schema))
            else:
                from pyspark.sql.functions import col

                out[table] = self.read(table).where(col(SNAPSHOT_COLUMN) == snapshot_id).toArrow()
        return out
