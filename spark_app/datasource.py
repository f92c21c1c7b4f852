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
files are the unit delta-rs lists. Filters on `snapshot_id` and `date` (=, IN, <, <=, >,
>=) are pushed down (`pushFilters`, which needs `spark.sql.python.filterPushdown.enabled`,
set by `register`): files whose partition value or min/max statistics exclude them are
not planned, and the scan applies them exactly; other filters run in Spark after it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)
from pyspark.sql.types import StructType

from spark_app.errors import LakeError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SOURCE_NAME: Final = "raims_delta"
TARGET_PARTITION_BYTES: Final = 128 * 1024 * 1024
BATCH_ROWS: Final = 64 * 1024
PUSHDOWN_COLUMNS: Final = ("snapshot_id", "date")  # what the lake's queries select on
PUSHDOWN_CONF: Final = "spark.sql.python.filterPushdown.enabled"


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


# A pushed filter: (column, operator, values); operators of `_OPS`.
Pushed = tuple[str, str, tuple[Any, ...]]
_OPS: Final = {
    EqualTo: "==", In: "in", GreaterThan: ">", GreaterThanOrEqual: ">=",
    LessThan: "<", LessThanOrEqual: "<=",
}


def _pushable(f: Filter, columns: Sequence[str]) -> Pushed | None:
    op = _OPS.get(type(f))
    attr: tuple[str, ...] = tuple(getattr(f, "attribute", ()))
    if op is None or len(attr) != 1 or attr[0] not in columns or attr[0] not in PUSHDOWN_COLUMNS:
        return None
    value: Any = getattr(f, "value", None)
    values: tuple[Any, ...] = tuple(value) if op == "in" else (value,)
    if any(v is None or isinstance(v, float | bool) for v in values):
        return None
    return attr[0], op, values


def _key(v: Any) -> str:
    """Comparable text of a filter value, a partition value or a min/max statistic:
    strings as they are, dates as ISO dates (the lake's pushable columns are both)."""
    return v.isoformat() if hasattr(v, "isoformat") else str(v)


def _compare(op: str, lo: str, hi: str, keys: Sequence[str]) -> bool:
    """Whether some value in [lo, hi] can pass `op` against `keys`."""
    if op == "==":
        return lo <= keys[0] <= hi
    if op == "in":
        return any(lo <= k <= hi for k in keys)
    if op == ">":
        return hi > keys[0]
    if op == ">=":
        return hi >= keys[0]
    if op == "<":
        return lo < keys[0]
    return lo <= keys[0]  # "<="


def may_match(pushed: Sequence[Pushed], bounds: dict[str, tuple[Any, Any]]) -> bool:
    """Whether a file whose columns lie within `bounds` (column -> (min, max); a column
    absent or with a null bound: unknown) can hold rows passing every pushed filter."""
    for col, op, values in pushed:
        lo, hi = bounds.get(col, (None, None))
        if lo is not None and hi is not None and not _compare(op, _key(lo), _key(hi), [_key(v) for v in values]):
            return False
    return True


def _one(col: str, op: str, values: tuple[Any, ...]) -> Any:
    import pyarrow.compute as pc

    field = pc.field(col)
    if op == "in":
        return field.isin(list(values))
    v = values[0]
    if op == "==":
        return field == v
    if op == ">":
        return field > v
    if op == ">=":
        return field >= v
    if op == "<":
        return field < v
    return field <= v


def _expression(pushed: Sequence[Pushed]) -> Any:
    """The pushed filters as one pyarrow dataset expression (None: no filter)."""
    expr = None
    for col, op, values in pushed:
        one = _one(col, op, values)
        expr = one if expr is None else expr & one
    return expr


class DeltaReader(DataSourceReader):
    def __init__(self, path: str, version: int, arrow_schema: pa.Schema) -> None:
        self.path = path
        self.version = version
        self.arrow_schema = arrow_schema
        self.pushed: tuple[Pushed, ...] = ()

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:  # noqa: N802 (Spark's name)
        """Filters on `PUSHDOWN_COLUMNS` prune files (partition values and min/max
        statistics from the Delta log) and are applied exactly in the scan; the others
        are left to Spark."""
        pushed = []
        for f in filters:
            p = _pushable(f, self.arrow_schema.names)
            if p is None:
                yield f
            else:
                pushed.append(p)
        self.pushed = tuple(pushed)

    def partitions(self) -> Sequence[InputPartition]:
        actions = pa.table(_open(self.path, self.version).get_add_actions(flatten=True))
        names = actions.column_names
        paths = actions.column("path").to_pylist()
        sizes = actions.column("size_bytes").to_pylist()
        keep = [True] * len(paths)
        if self.pushed:
            cols = {c for c, _, _ in self.pushed}
            bounds: list[dict[str, tuple[Any, Any]]] = [{} for _ in paths]
            for col in cols:
                if f"partition.{col}" in names:
                    vals = actions.column(f"partition.{col}").to_pylist()
                    for b, v in zip(bounds, vals, strict=True):
                        b[col] = (v, v)
                elif f"min.{col}" in names and f"max.{col}" in names:
                    lows = actions.column(f"min.{col}").to_pylist()
                    highs = actions.column(f"max.{col}").to_pylist()
                    for b, lo, hi in zip(bounds, lows, highs, strict=True):
                        b[col] = (lo, hi)
            keep = [may_match(self.pushed, b) for b in bounds]
        sized = [(p, n) for p, n, k in zip(paths, sizes, keep, strict=True) if k]
        return plan_partitions(sized, TARGET_PARTITION_BYTES)

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
        for batch in files.to_batches(
            columns=self.arrow_schema.names, filter=_expression(self.pushed), batch_size=BATCH_ROWS
        ):
            yield batch.cast(self.arrow_schema)


class RaimsDeltaSource(DataSource):
    """Options: `path` (required), `version` (optional: read that version of the table)."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def _path(self) -> str:
        path = self.options.get("path")
        if not path:
            raise LakeError(f"data source {SOURCE_NAME} needs OPTIONS (path '<delta table>')")
        return str(path)

    def _version(self) -> int | None:
        version = self.options.get("version")
        return None if version is None else int(version)

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
    spark.conf.set(PUSHDOWN_CONF, "true")  # the reader pushes filters: Spark refuses it otherwise
    spark.dataSource.register(RaimsDeltaSource)
