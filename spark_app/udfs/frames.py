"""The rows the audit kernels return, typed from the audit tables' schema files.

A kernel returns the columns of its audit table (data/schemas/audit_*.json) except those
the job adds once per run (`JOB_COLUMNS`: the snapshot's collection time and the audit's
own time; `date` is generated on write). `kernel_frame` builds such a frame with pandas
dtypes that Arrow converts to exactly the declared types (nullable integers, booleans),
so the same frame serves the Spark UDFs (`kernel_schema_ddl`) and the tests without Spark.

Decision: every audit table has a `finding` flag, a `check` naming what was checked, and a
`summary` row per kernel call with additive counts (`checked`, `findings`, and `detail`,
JSON of counts per check); `merge_summaries` adds them up into the one summary row a
snapshot gets, whatever the number of groups or batches the kernels ran over.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final

import numpy as np
import pandas as pd
import pyarrow as pa

from spark_app.schemas import load_schema

JOB_COLUMNS: Final = ("collected_at", "audited_at", "severity", "cause")  # causes.classify: the last two
SUMMARY: Final = "summary"
SNAPSHOT_NODE: Final = "*"
AUDIT_TABLES: Final = ("audit_lsdb", "audit_routes", "audit_blooms")

_PANDAS_DTYPES: Final[Mapping[str, str]] = {
    "string": "object",
    "binary": "object",
    "int": "Int32",
    "long": "Int64",
    "double": "float64",
    "boolean": "boolean",
}


def _kernel_columns(table: str) -> tuple[tuple[str, str], ...]:
    return tuple(
        (c.name, c.type) for c in load_schema(table).input_columns if c.name not in JOB_COLUMNS
    )


# (table, ((column, Spark type), ...)) read once, on the driver: the kernels run on
# executors, which get this value with the pickled kernels, not the schema files.
KERNEL_COLUMNS: Final = tuple((t, _kernel_columns(t)) for t in AUDIT_TABLES)


def kernel_columns(table: str) -> tuple[tuple[str, str], ...]:
    """(name, Spark type) of the columns `table`'s kernel returns."""
    return dict(KERNEL_COLUMNS)[table]


def typed(rows: Mapping[str, Any] | pd.DataFrame, columns: Sequence[tuple[str, str]]) -> pd.DataFrame:
    """A frame of exactly `columns` (name, Spark type) from column arrays (or a frame),
    with the pandas dtypes Arrow converts to those types; missing columns are null."""
    given = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(dict(rows))
    out: dict[str, pd.Series] = {}
    for name, type_ in columns:
        dtype = _PANDAS_DTYPES[type_]
        if name not in given:
            out[name] = pd.Series([None] * len(given), dtype=dtype)
            continue
        values = given[name].reset_index(drop=True)
        if dtype == "object":
            values = values.astype(object)
            out[name] = values.where(values.notna(), None)
        else:
            out[name] = values.astype(dtype)
    return pd.DataFrame(out)


def kernel_frame(table: str, rows: Mapping[str, Any] | pd.DataFrame) -> pd.DataFrame:
    """Rows of `table`'s kernel columns (see `typed`)."""
    return typed(rows, kernel_columns(table))


def finding_rows(table: str, snapshot_id: str, check: str, **columns: Any) -> pd.DataFrame:
    """Finding rows of one check: array-like columns give one value a row, anything
    else (a string, a number, None) is the value of every row."""
    arrays = {k: v for k, v in columns.items() if isinstance(v, list | tuple | np.ndarray | pd.Series)}
    n = len(next(iter(arrays.values()))) if arrays else 1
    data = {k: (list(v) if k in arrays else [v] * n) for k, v in columns.items()}
    return kernel_frame(
        table,
        {"snapshot_id": [snapshot_id] * n, "check": [check] * n, "finding": [True] * n, **data},
    )


def empty_frame(table: str) -> pd.DataFrame:
    return kernel_frame(table, {})


def summary_frame(
    table: str, snapshot_id: str, counts: Mapping[str, int], findings: pd.DataFrame
) -> pd.DataFrame:
    """The summary row of one kernel call: `counts` are the things checked per check."""
    by_check = findings.loc[findings["finding"].astype(bool), "check"].value_counts()
    detail = {
        "checked": {k: int(v) for k, v in sorted(counts.items())},
        "findings": {str(k): int(v) for k, v in sorted(by_check.items())},
    }
    return kernel_frame(
        table,
        {
            "snapshot_id": [snapshot_id],
            "node": [SNAPSHOT_NODE],
            "check": [SUMMARY],
            "finding": [False],
            "checked": [int(sum(counts.values()))],
            "findings": [int(by_check.sum())],
            "detail": [json.dumps(detail, sort_keys=True)],
        },
    )


def with_summary(
    table: str, snapshot_id: str, counts: Mapping[str, int], parts: Iterable[pd.DataFrame]
) -> pd.DataFrame:
    """The findings `parts` of one kernel call followed by its summary row."""
    frames = [p for p in parts if len(p)]
    findings = pd.concat(frames, ignore_index=True) if frames else empty_frame(table)
    return pd.concat(
        [findings, summary_frame(table, snapshot_id, counts, findings)], ignore_index=True
    )


def merge_summaries(
    table: str,
    frame: pd.DataFrame,
    context: Mapping[str, Any] | None = None,
    snapshots: Iterable[str] = (),
) -> pd.DataFrame:
    """`table`'s kernel rows with their summary rows added up into one per snapshot
    (`detail` numbers are added key by key; `context` keys are set as they are);
    `snapshots` without rows (nothing to audit) get a summary of zero."""
    idle = [s for s in snapshots if s not in set(frame["snapshot_id"])]
    frame = pd.concat(
        [frame, *(summary_frame(table, s, {}, empty_frame(table)) for s in idle)], ignore_index=True
    )
    is_summary = frame["check"] == SUMMARY
    rest = frame[~is_summary]
    merged = []
    for snapshot_id, group in frame[is_summary].groupby("snapshot_id", sort=True):
        detail: dict[str, Any] = {}
        for text in group["detail"].dropna():
            _add(detail, json.loads(text))
        row = group.iloc[:1].copy()
        row["checked"] = group["checked"].sum()
        row["findings"] = int(rest.loc[rest["snapshot_id"] == snapshot_id, "finding"].sum())
        row["detail"] = json.dumps({**detail, **(context or {})}, sort_keys=True)
        merged.append(row)
    return pd.concat([rest, *merged], ignore_index=True)


def _add(into: dict[str, Any], more: Mapping[str, Any]) -> None:
    for key, value in more.items():
        if isinstance(value, Mapping):
            _add(into.setdefault(key, {}), value)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            into[key] = into.get(key, 0) + value
        else:
            into[key] = value


def finish(
    table: str,
    frame: pd.DataFrame,
    collected_at: Mapping[str, datetime],
    audited_at: datetime,
    context: Mapping[str, Any] | None = None,
) -> pa.Table:
    """Kernel rows as rows of the audit table (its input columns, for `Lake.write`): one
    summary per snapshot (`context` added to its detail), `collected_at` of each row's
    snapshot, `audited_at`."""
    schema = load_schema(table)
    merged = merge_summaries(table, kernel_frame(table, frame), context, collected_at)
    columns: dict[str, list[Any]] = {
        name: merged[name].astype(object).where(merged[name].notna(), None).tolist()
        for name, _ in kernel_columns(table)
    }
    columns["collected_at"] = [collected_at[s] for s in merged["snapshot_id"]]
    columns["audited_at"] = [audited_at] * len(merged)
    columns["severity"] = columns["cause"] = [None] * len(merged)  # causes.classify fills them
    return pa.table(
        {c.name: pa.array(columns[c.name], type=c.arrow_type) for c in schema.input_columns}
    )


UNKEYED: Final = ("collected_at", "date")  # a collector's retry writes these anew


def dedupe(rows: pd.DataFrame) -> pd.DataFrame:
    """Input rows without repeats (the same snapshot written twice: a collector retry).
    Rows are equal when every column but `UNKEYED` is; array cells compare as tuples."""
    keys = [c for c in rows.columns if c not in UNKEYED]
    if rows.empty or not keys:
        return rows
    key = pd.DataFrame(
        {c: [tuple(v) if isinstance(v, list | tuple | np.ndarray) else v for v in rows[c]] for c in keys}
    )
    return rows[~key.duplicated().to_numpy()]


def kernel_schema_ddl(table: str) -> str:
    """Spark DDL of `table`'s kernel columns, the schema of its UDF's output."""
    return ddl(kernel_columns(table))


def ddl(columns: Sequence[tuple[str, str]]) -> str:
    """Spark DDL of (name, Spark SQL type) pairs."""
    return ", ".join(f"`{name}` {type_}" for name, type_ in columns)
