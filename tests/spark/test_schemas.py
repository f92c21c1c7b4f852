"""Schema files and their enforcement (no Spark needed)."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_app.errors import SchemaError, SchemaViolation
from spark_app.schemas import (
    COMMON_COLUMNS,
    SCHEMA_DIR,
    TABLES,
    load_schema,
    load_schemas,
    parse_schema,
    parse_type,
)
from tests.spark.synthetic import snapshot_rows

NOW = datetime(2026, 3, 20, 18, 37, 34, 182000, tzinfo=UTC)


def test_one_schema_file_per_table_with_common_columns_and_date_partition() -> None:
    schemas = load_schemas()
    assert sorted(schemas) == sorted(TABLES)
    for name, schema in schemas.items():
        assert schema.names[:3] == COMMON_COLUMNS, name
        assert schema.partition_by == ("date",)
        date_col = schema.columns[-1]
        assert (date_col.name, date_col.generated_from) == ("date", "collected_at")
        assert not any(c.nullable for c in schema.columns if c.name in COMMON_COLUMNS)


def test_console_columns_follow_the_manual() -> None:
    # manual "show peers" / "show adjacency" / "show loss" headers, lower-cased, _ for spaces
    assert load_schema("peers").names[3:-1] == (
        "user",
        "bridge",
        "sub",
        "seq",
        "link",
        "lat",
        "max",
        "avg",
        "time",
        "tport",
        "cost",
    )
    assert load_schema("links").names[3:8] == ("user", "adj", "tport", "type", "cost")
    assert load_schema("loss").names[3:-1] == (
        "user",
        "repeat",
        "rep_time",
        "not_sub",
        "not_time",
        "msg_loss",
        "loss_time",
        "ibx_loss",
        "ibx_time",
    )


def test_synthetic_snapshot_conforms_to_every_table() -> None:
    schemas = load_schemas()
    for table, rows in snapshot_rows("s1", NOW).items():
        out = schemas[table].conform(rows)
        assert out.schema == schemas[table].arrow_schema()
        assert out.num_rows == len(rows)
        assert set(out.column("date").to_pylist()) == {NOW.date()}


def test_date_is_the_utc_date_of_collected_at() -> None:
    late_evening_ny = datetime(2026, 1, 1, 23, 30, tzinfo=timezone(timedelta(hours=-5)))
    rows = snapshot_rows("s1", late_evening_ny)["events"]
    out = load_schema("events").conform(rows)
    assert set(out.column("date").to_pylist()) == {date(2026, 1, 2)}


def test_integer_timestamps_are_nanoseconds() -> None:
    rows = snapshot_rows("s1", NOW)["events"]
    ns = 1_774_031_854_182_000_123
    out = load_schema("events").conform([{**r, "stamp": ns} for r in rows])
    assert out.column("stamp")[0].as_py() == datetime(2026, 3, 20, 18, 37, 34, 182000, tzinfo=UTC)


def test_missing_column_names_table_and_column() -> None:
    rows = [
        {k: v for k, v in r.items() if k != "bridge"} for r in snapshot_rows("s1", NOW)["peers"]
    ]
    with pytest.raises(SchemaViolation, match=r"table 'peers', column 'bridge': missing") as err:
        load_schema("peers").conform(rows)
    assert (err.value.table, err.value.column) == ("peers", "bridge")


def test_unknown_column_is_rejected() -> None:
    rows = [{**r, "colour": "red"} for r in snapshot_rows("s1", NOW)["links"]]
    with pytest.raises(SchemaViolation, match=r"table 'links', column 'colour': not in the schema"):
        load_schema("links").conform(rows)


def test_generated_date_may_not_be_supplied() -> None:
    rows = [{**r, "date": NOW.date()} for r in snapshot_rows("s1", NOW)["links"]]
    with pytest.raises(SchemaViolation, match=r"column 'date': is generated from collected_at"):
        load_schema("links").conform(rows)


@pytest.mark.parametrize(
    ("column", "value", "problem"),
    [
        ("cost", "1000", "int, str where int is declared"),
        ("cost", 1.5, "truncated"),
        ("cost", 2**40, "not in range"),
        ("user", 7, "int, str where string is declared"),
        ("node", None, "null value"),
    ],
)
def test_wrong_values_name_the_column(column: str, value: object, problem: str) -> None:
    rows = snapshot_rows("s1", NOW)["links"]
    rows[3] = {**rows[3], column: value}
    with pytest.raises(SchemaViolation, match=rf"table 'links', column '{column}': .*({problem})"):
        load_schema("links").conform(rows)


def test_arrow_input_is_cast_losslessly() -> None:
    schema = load_schema("links")
    rows = snapshot_rows("s1", NOW)["links"]
    table = pa.Table.from_pylist(rows)  # ints inferred as int64, declared int
    assert table.schema.field("cost").type == pa.int64()
    assert schema.conform(table).equals(schema.conform(rows))
    bad = table.set_column(
        table.schema.get_field_index("cost"), "cost", pa.array([2**40] * table.num_rows)
    )
    with pytest.raises(SchemaViolation, match="column 'cost': cannot convert int64 to int"):
        schema.conform(bad)
    text = table.set_column(
        table.schema.get_field_index("cost"), "cost", pa.array(["1000"] * table.num_rows)
    )
    with pytest.raises(SchemaViolation, match="column 'cost': values of type string where int"):
        schema.conform(text)


def test_nested_types_from_python_values() -> None:
    out = load_schema("rollouts").conform(snapshot_rows("s1", NOW)["rollouts"])
    assert out.column("stage_seconds")[0].as_py() == [("start", 1.0), ("converge", 2.0)]
    routes = load_schema("routes").conform(snapshot_rows("s1", NOW)["routes"])
    assert routes.schema.field("path").type == pa.list_(pa.int32())


def test_empty_rows_give_an_empty_table_of_the_schema() -> None:
    out = load_schema("subs").conform([])
    assert out.num_rows == 0 and out.schema == load_schema("subs").arrow_schema()


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.text(min_size=1, max_size=8), st.integers(1, 2**31 - 1)), max_size=20))
def test_conform_keeps_every_value(pairs: list[tuple[str, int]]) -> None:
    base = snapshot_rows("s1", NOW)["links"][1]
    rows = [{**base, "user": u, "cost": c} for u, c in pairs]
    out = load_schema("links").conform(rows)
    assert (
        list(zip(out.column("user").to_pylist(), out.column("cost").to_pylist(), strict=True))
        == pairs
    )


@pytest.mark.parametrize("text", ["long", "array<string>", "map<string,double>", "timestamp"])
def test_parse_type_knows_spark_names(text: str) -> None:
    assert parse_type(text) is not None


@pytest.mark.parametrize("text", ["varchar", "map<int,string>", "array<>"])
def test_parse_type_rejects_unknown(text: str) -> None:
    with pytest.raises(SchemaError, match="unknown column type"):
        parse_type(text)


def _raw(table: str) -> dict[str, object]:
    raw: dict[str, object] = json.loads((SCHEMA_DIR / f"{table}.json").read_text())
    return raw


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda r: r["columns"].pop(0), "needs column 'snapshot_id'"),
        (lambda r: r["columns"][-1].update(generated="month(collected_at)"), "only a date column"),
        (lambda r: r["columns"][-1].update(generated="date(node)"), "not a timestamp column"),
        (lambda r: r.update(partition_by=["day"]), "partition column 'day'"),
        (lambda r: r["columns"].append(dict(r["columns"][3])), "duplicate column"),
        (lambda r: r["columns"][3].pop("nullable"), "needs name, type and nullable"),
    ],
)
def test_bad_schema_files_are_rejected(edit, message: str) -> None:  # type: ignore[no-untyped-def]
    raw = _raw("links")
    edit(raw)
    with pytest.raises(SchemaError, match=message):
        parse_schema(raw)


def test_missing_schema_file(tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match="no schema file for table 'links'"):
        load_schema("links", tmp_path)
