"""`raims_delta`: a Spark Python data source that reads Delta tables through delta-rs.

DESIGN.md "Delta without Maven": locally Spark has no Delta (its jars come from Maven),
yet the lake's tables must be queryable with Spark SQL:

    CREATE TEMP VIEW links USING raims_delta OPTIONS (path '/lake/links')
    CREATE TEMP VIEW old USING raims_delta OPTIONS (path '/lake/links', version '3')

The reader pins the table version when the query is planned, lists that version's data
files from the Delta log (so deleted and overwritten files are never read: the folder is
never scanned as plain Parquet) and gives each Spark task a group of files, which it
streams as Arrow record batches on the executor. Nothing is collected into the driver.

Spark ships the source and its reader to Python workers with cloudpickle; `register`
pickles this module (and spark_app.errors) by value, so executors need pyarrow, deltalake
and raims_node (for the root error class) but not spark_app.
Decision: a task reads whole files, grouped up to TARGET_PARTITION_BYTES, since Delta
files are the unit delta-rs lists. No filter is pushed down: with Python filter pushdown
(`spark.sql.python.filterPushdown.enabled`) Spark 4 reused the reader one query had
pushed its filters into for the next query on the same view, so a notebook's
`WHERE snapshot_id = ...` made the next `GROUP BY snapshot_id` over the view lose every
other snapshot (the Spark probe, 2026-11-26; tests/spark/test_lake.py). Every filter
runs in Spark, after a scan of the version's files.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    InputPartition,
)
from pyspark.sql.types import StructType

from spark_app.errors import LakeError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SOURCE_NAME: Final = "raims_delta"
TARGET_PARTITION_BYTES: Final = 128 * 1024 * 1024
BATCH_ROWS: Final = 64 * 1024


def spark_arrow_type(t: pa.DataType) -> pa.DataType:
    """`t` with the large and view variants delta-rs may return replaced by the plain
    ones Spark's Arrow conversion knows."""
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t):
        return pa.list_(spark_arrow_type(t.value_type))
    if pa.types.is_map(t):
        return pa.map_(spark_arrow_type(t.key_type), spark_arrow_type(t.item_type))
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(spark_arrow_type(f.type)) for f in t])
    return t


def spark_arrow_schema(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f.with_type(spark_arrow_type(f.type)) for f in schema])


def _open(path: str, version: int | None = None) -> Any:
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return DeltaTable(path) if version is None else DeltaTable(path, version=version)
    except TableNotFoundError:
        raise LakeError(f"no Delta table at {path!r}") from None


@dataclass(frozen=True)
class FilesPartition(InputPartition):
    """Data files (paths relative to the table, as in the Delta log) one task reads."""

    files: tuple[str, ...]


def plan_partitions(sizes: Sequence[tuple[str, int]], target_bytes: int) -> list[FilesPartition]:
    """Files grouped in log order into partitions of about `target_bytes` each; at least
    one partition, so that an empty table still plans a (empty) scan."""
    parts: list[FilesPartition] = []
    group: list[str] = []
    total = 0
    for path, size in sizes:
        if group and total + size > target_bytes:
            parts.append(FilesPartition(tuple(group)))
            group, total = [], 0
        group.append(path)
        total += size
    if group or not parts:
        parts.append(FilesPartition(tuple(group)))
    return parts


class DeltaReader(DataSourceReader):
    def __init__(self, path: str, version: int, arrow_schema: pa.Schema) -> None:
        self.path = path
        self.version = version
        self.arrow_schema = arrow_schema

    def partitions(self) -> Sequence[InputPartition]:
        actions = pa.table(_open(self.path, self.version).get_add_actions(flatten=True))
        paths = actions.column("path").to_pylist()
        sizes = actions.column("size_bytes").to_pylist()
        return plan_partitions(list(zip(paths, sizes, strict=True)), TARGET_PARTITION_BYTES)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        import pyarrow.dataset as pads

        assert isinstance(partition, FilesPartition)
        if not partition.files:
            return
        dataset = _open(self.path, self.version).to_pyarrow_dataset()
        wanted = set(partition.files)
        fragments = [f for f in dataset.get_fragments() if f.path in wanted]
        if len(fragments) != len(wanted):
            raise LakeError(
                f"table {self.path!r} version {self.version}: "
                f"{len(wanted) - len(fragments)} data file(s) of the log not found"
            )
        files = pads.FileSystemDataset(
            fragments, dataset.schema, dataset.format, dataset.filesystem
        )
        try:
            for batch in files.to_batches(
                columns=self.arrow_schema.names, batch_size=BATCH_ROWS
            ):
                yield batch.cast(self.arrow_schema)
        except pa.ArrowException as exc:  # a data file cut short: name the table, not only the file
            raise LakeError(
                f"table {self.path!r} version {self.version}: unreadable data ({exc})"
            ) from None


OPTIONS: Final = ("path", "version")


def check_options(options: Any) -> None:
    """LakeError naming an option the source does not take (compared without case, as
    Spark passes keys lowercased) and the valid ones: `OPTIONS (path '...', verison '3')`
    read the current version without a word."""
    import difflib

    for key in options:
        if str(key).lower() not in OPTIONS:
            close = difflib.get_close_matches(str(key).lower(), OPTIONS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise LakeError(f"data source {SOURCE_NAME}: unknown option {key!r}{hint}; "
                            f"valid options: {', '.join(OPTIONS)}")


class RaimsDeltaSource(DataSource):
    """Options: `path` (required), `version` (optional: read that version of the table);
    any other is refused (`check_options`)."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def _path(self) -> str:
        check_options(self.options)
        path = self.options.get("path")
        if not path:
            raise LakeError(f"data source {SOURCE_NAME} needs OPTIONS (path '<delta table>')")
        return str(path)

    def _version(self) -> int | None:
        version = self.options.get("version")
        if version is None:
            return None
        try:
            number = int(str(version).strip())
        except ValueError:
            number = -1
        if number < 0:
            raise LakeError(f"data source {SOURCE_NAME}: version {version!r} is not a table version "
                            "(a whole number, 0 or more)")
        return number

    def _arrow_schema(self, table: Any) -> pa.Schema:
        return spark_arrow_schema(pa.schema(table.schema().to_arrow()))

    def schema(self) -> StructType:
        from pyspark.sql.pandas.types import from_arrow_schema

        return from_arrow_schema(self._arrow_schema(_open(self._path(), self._version())))

    def reader(self, schema: StructType) -> DataSourceReader:
        table = _open(self._path(), self._version())
        return DeltaReader(self._path(), table.version(), self._arrow_schema(table))


def register(spark: SparkSession) -> None:
    """Make `USING raims_delta` available in `spark` (idempotent)."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    cloudpickle.register_pickle_by_value(sys.modules[LakeError.__module__])
    spark.dataSource.register(RaimsDeltaSource)
