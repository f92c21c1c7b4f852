"""Table schemas of the lake (data/schemas/<table>.json) and their enforcement on write.

Issue "The main job", item 6: every row has `snapshot_id`, `collected_at` and `node`;
tables are append-only, partitioned by date, and their schemas live in
`data/schemas/*.json` and are enforced on write. The columns of the snapshot tables are the
columns of the console's `show` commands (manual, console section "The Show Commands"),
lower-cased with spaces turned into underscores, because the daemon's admin JSON returns
exactly those rows.

A schema file is one JSON object:

    {"table": "links", "description": "...", "source": "show adjacency",
     "partition_by": ["date"],
     "columns": [{"name": "snapshot_id", "type": "string", "nullable": false,
                  "comment": "..."}, ...,
                 {"name": "date", "type": "date", "nullable": false,
                  "generated": "date(collected_at)", "comment": "..."}]}

Types are Spark SQL type names: string, int, long, double, boolean, timestamp, date,
binary, array<T>, map<string,T>. Arrow (and through it Delta and Spark) types follow:
timestamps are microseconds in UTC (Spark's precision), int is 32 bits, long 64.

Decisions where the seed is silent:
- Enforcement is strict on names (a missing or an unknown column is an error naming the
  table and the column) and on nullability; values are converted only by lossless casts
  (an int into a long or double column, a string into a string column), anything else is
  an error naming the column and both types. A key absent from some rows of a list of
  dicts is a null in those rows; absent from every row it is a missing column.
- Integers given for a timestamp column are nanoseconds since the epoch, the unit of the
  router's clock (`stamp_ns`, `start_ns`); datetimes are taken as they are (naive = UTC).
- The partition column `date` is generated, `date(collected_at)` in UTC, and may not be
  supplied: one rule, so that a snapshot never straddles two partitions by accident.
- Durations (lat, max, avg, idle) are seconds as doubles.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc

from spark_app.errors import SchemaError, SchemaViolation

# in a checkout: data/schemas beside the package; in an installed wheel: packaged inside it
_REPO_SCHEMAS = Path(__file__).resolve().parent.parent / "data" / "schemas"
SCHEMA_DIR: Final = _REPO_SCHEMAS if _REPO_SCHEMAS.is_dir() else Path(__file__).resolve().parent / "data" / "schemas"
COMMON_COLUMNS: Final = ("snapshot_id", "collected_at", "node")
TABLES: Final = (
    "rollouts",
    "peers",
    "links",
    "routes",
    "subs",
    "blooms",
    "ports",
    "counters",
    "loss",
    "events",
    "validations",
    "forward",
    "names",
    "audit_lsdb",
    "audit_routes",
    "audit_blooms",
    "msglog",
)
TIMESTAMP_UNIT: Final = "us"
TIMESTAMP_TZ: Final = "UTC"
NS_PER_TIMESTAMP_UNIT: Final = 1_000
MAX_NAMED_COLUMNS: Final = 12  # how many expected columns an error message lists

_SCALARS: Final[Mapping[str, pa.DataType]] = {
    "string": pa.string(),
    "int": pa.int32(),
    "long": pa.int64(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
    "timestamp": pa.timestamp(TIMESTAMP_UNIT, tz=TIMESTAMP_TZ),
    "date": pa.date32(),
    "binary": pa.binary(),
}
_GENERATED = re.compile(r"^date\((\w+)\)$")
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def parse_type(text: str) -> pa.DataType:
    """The Arrow type of a Spark SQL type name such as `long` or `map<string,double>`."""
    t = text.strip().lower()
    if t in _SCALARS:
        return _SCALARS[t]
    if t.startswith("array<") and t.endswith(">"):
        return pa.list_(parse_type(t[6:-1]))
    if t.startswith("map<") and t.endswith(">"):
        key, sep, value = t[4:-1].partition(",")
        if sep and key.strip() == "string":
            return pa.map_(pa.string(), parse_type(value))
    raise SchemaError(
        f"unknown column type {text!r} (known: {', '.join(_SCALARS)}, array<T>, map<string,T>)"
    )


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: str
    nullable: bool
    comment: str = ""
    generated_from: str | None = None  # the timestamp column a generated date comes from

    @property
    def arrow_type(self) -> pa.DataType:
        return parse_type(self.type)

    @property
    def field(self) -> pa.Field:
        return pa.field(self.name, self.arrow_type, nullable=self.nullable)


@dataclass(frozen=True, slots=True)
class TableSchema:
    table: str
    columns: tuple[Column, ...]
    partition_by: tuple[str, ...]
    description: str = ""

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def input_columns(self) -> tuple[Column, ...]:
        """The columns a writer supplies: all but the generated ones."""
        return tuple(c for c in self.columns if c.generated_from is None)

    def arrow_schema(self) -> pa.Schema:
        return pa.schema([c.field for c in self.columns])

    def conform(self, data: pa.Table | Sequence[Mapping[str, Any]]) -> pa.Table:
        """`data` as a table of exactly this schema, generated columns filled in.

        Raises SchemaViolation naming the table and the first offending column.
        """
        given = _columns_of(data)
        if given is not None:
            self._check_names(given)
        arrays: dict[str, pa.Array | pa.ChunkedArray] = {}
        for col in self.input_columns:
            if isinstance(data, pa.Table):
                arr = _cast(self.table, col, data.column(col.name))
            else:
                arr = _from_values(self.table, col, [row.get(col.name) for row in data])
            if not col.nullable and arr.null_count:
                raise SchemaViolation(
                    self.table, col.name, f"{arr.null_count} null value(s) in a non-nullable column"
                )
            arrays[col.name] = arr
        for col in self.columns:
            if col.generated_from is not None:
                arrays[col.name] = pc.cast(arrays[col.generated_from], col.arrow_type)
        return pa.table([arrays[n] for n in self.names], schema=self.arrow_schema())

    def _check_names(self, given: Sequence[str]) -> None:
        known = {c.name: c for c in self.columns}
        for name in given:
            col = known.get(name)
            if col is None:
                listed = ", ".join(self.names[:MAX_NAMED_COLUMNS])
                raise SchemaViolation(self.table, name, f"not in the schema ({listed}, ...)")
            if col.generated_from is not None:
                raise SchemaViolation(
                    self.table, name, f"is generated from {col.generated_from}; do not supply it"
                )
        for col in self.input_columns:
            if col.name not in given:
                raise SchemaViolation(self.table, col.name, "missing")


def _columns_of(data: pa.Table | Sequence[Mapping[str, Any]]) -> list[str] | None:
    """Column names given, or None for an empty list of rows (nothing to check)."""
    if isinstance(data, pa.Table):
        return list(data.column_names)
    if not data:
        return None
    names: dict[str, None] = {}
    for row in data:
        names.update(dict.fromkeys(row))
    return list(names)


def _kind(t: pa.DataType) -> str:
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return "number"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return "binary"
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t):
        return "list"
    return str(t.id)


def _convertible(src: pa.DataType, dst: pa.DataType) -> bool:
    """Whether a value of `src` may be stored in `dst`: same kind of value, or an integer
    count of nanoseconds into a timestamp. Strings never become numbers or the reverse."""
    if pa.types.is_null(src) or src == dst:
        return True
    if pa.types.is_timestamp(dst):
        return pa.types.is_timestamp(src) or pa.types.is_integer(src)
    if _kind(src) == _kind(dst) == "list":
        return _convertible(src.value_type, dst.value_type)
    return _kind(src) == _kind(dst)


def _cast(table: str, col: Column, arr: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """`arr` as the column's type by a safe (lossless) cast, else a SchemaViolation."""
    target = col.arrow_type
    if arr.type == target:
        return arr
    if not _convertible(arr.type, target):
        raise SchemaViolation(
            table, col.name, f"values of type {arr.type} where {col.type} is declared"
        )
    if pa.types.is_timestamp(target) and pa.types.is_integer(arr.type):
        arr = pc.divide(pc.cast(arr, pa.int64()), NS_PER_TIMESTAMP_UNIT)
    try:
        return pc.cast(arr, target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise SchemaViolation(
            table, col.name, f"cannot convert {arr.type} to {col.type}: {exc}"
        ) from None


def _from_values(table: str, col: Column, values: list[Any]) -> pa.Array:
    """A column of Python values: inferred, then safely cast; maps (inferred as structs)
    and other nested values that inference cannot type are built with the declared type."""
    target = col.arrow_type
    try:
        inferred = pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
        inferred = None
    if inferred is not None and (
        not pa.types.is_nested(target) or _convertible(inferred.type, target)
    ):
        return _cast(table, col, inferred)
    try:
        return pa.array(values, type=target)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError) as exc:
        kinds = ", ".join(sorted({type(v).__name__ for v in values if v is not None}))
        raise SchemaViolation(
            table, col.name, f"values of Python type(s) {kinds} where {col.type} is declared: {exc}"
        ) from None


def _parse_column(table: str, raw: Mapping[str, Any]) -> Column:
    try:
        name, type_, nullable = raw["name"], raw["type"], raw["nullable"]
    except (KeyError, TypeError):
        raise SchemaError(
            f"table {table!r}: a column needs name, type and nullable: {raw!r}"
        ) from None
    if not isinstance(name, str) or not _NAME.match(name):
        raise SchemaError(f"table {table!r}: bad column name {name!r}")
    if not isinstance(nullable, bool):
        raise SchemaError(f"table {table!r}, column {name!r}: nullable must be true or false")
    parse_type(type_)
    generated = raw.get("generated")
    source = None
    if generated is not None:
        m = _GENERATED.match(str(generated))
        if m is None or type_ != "date":
            raise SchemaError(
                f"table {table!r}, column {name!r}: only a date column "
                f"'date(<timestamp column>)' can be generated, not {generated!r}"
            )
        source = m.group(1)
    return Column(name, type_, nullable, str(raw.get("comment", "")), source)


def parse_schema(raw: Mapping[str, Any]) -> TableSchema:
    """A TableSchema from the JSON object of a schema file, checked for consistency."""
    table = raw.get("table")
    if not isinstance(table, str) or not _NAME.match(table):
        raise SchemaError(f"schema without a valid table name: {table!r}")
    columns = tuple(_parse_column(table, c) for c in raw.get("columns", ()))
    by_name = {c.name: c for c in columns}
    if len(by_name) != len(columns):
        raise SchemaError(f"table {table!r}: duplicate column names")
    for name in COMMON_COLUMNS:
        if name not in by_name:
            raise SchemaError(f"table {table!r}: every table needs column {name!r}")
    for c in columns:
        if (
            c.generated_from is not None
            and getattr(by_name.get(c.generated_from), "type", None) != "timestamp"
        ):
            raise SchemaError(
                f"table {table!r}, column {c.name!r}: generated from "
                f"{c.generated_from!r}, which is not a timestamp column"
            )
    partition_by = tuple(raw.get("partition_by", ()))
    for name in partition_by:
        if name not in by_name:
            raise SchemaError(f"table {table!r}: partition column {name!r} is not a column")
    return TableSchema(table, columns, partition_by, str(raw.get("description", "")))


def load_schema(table: str, directory: Path = SCHEMA_DIR) -> TableSchema:
    """The schema of `table` from `<directory>/<table>.json`."""
    path = directory / f"{table}.json"
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise SchemaError(f"no schema file for table {table!r} at {path}") from None
    except json.JSONDecodeError as exc:
        raise SchemaError(f"schema file {path} is not valid JSON: {exc}") from None
    schema = parse_schema(raw)
    if schema.table != table:
        raise SchemaError(f"schema file {path} declares table {schema.table!r}, not {table!r}")
    return schema


def load_schemas(directory: Path = SCHEMA_DIR) -> dict[str, TableSchema]:
    """Every table schema in `directory`, by table name."""
    return {p.stem: load_schema(p.stem, directory) for p in sorted(directory.glob("*.json"))}
