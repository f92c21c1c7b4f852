"""Data quality of one snapshot: great-expectations suites, results as `validations` rows.

Issue "The main job", item 7: suites in data/schemas/expectations/ run on each snapshot,
e.g. every link has a reverse link, costs are positive, bridge ids are well formed, one
`peers` row per node per observer; results go to the `validations` table and a summary.

A suite file is great-expectations' own suite JSON (`name`, `expectations` of `type`,
`kwargs`, `meta`), so GX loads it as is, plus two keys of ours in the suite's `meta`:
`table`, the lake table it checks, and optionally `derive`, the name of a derivation
below that turns the table into one row per checked thing. Every expectation has a
`meta.name` (`<suite>.<what>`), which is how failures are named.

Decisions:
- Checks across rows (a link and its reverse, one observer's view against the others)
  are derivations in pandas that produce a `problem` column, null when the row is
  fine and a sentence when it is not, validated with expect_column_values_to_be_null,
  so that GX's sample of unexpected values reads as the list of faults.
- Validation runs on pandas frames of the snapshot on the driver: a snapshot is small
  (what one collection produced) and GX's pandas engine needs no Spark job per
  expectation. A suite whose table is absent from the snapshot is skipped and listed.
- `validations` rows concern the whole snapshot, so their `node` is "*".
- Names (`user`, `adj`) are compared within one observer's rows only: the console
  labels peers with the observer's own uids.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import pandas as pd
import pyarrow as pa

from spark_app.errors import QualityError
from spark_app.schemas import SCHEMA_DIR, TableSchema, load_schemas

EXPECTATIONS_DIR: Final = SCHEMA_DIR / "expectations"
SNAPSHOT_NODE: Final = "*"
MAX_SAMPLE: Final = 20
PROBLEM_COLUMN: Final = "problem"
_COLUMN_KWARGS: Final = ("column", "column_A", "column_B")
_COLUMN_LIST_KWARGS: Final = ("column_list",)

log = logging.getLogger("raims.spark.quality")


def reverse_links(links: pd.DataFrame) -> pd.DataFrame:
    """One row per link to a peer, with a problem when the observer's database has no
    link back from that peer."""
    keyed = links[links["adj"].notna()][["snapshot_id", "node", "user", "adj", "tport"]]
    back = keyed.rename(columns={"user": "adj", "adj": "user"})[
        ["snapshot_id", "node", "user", "adj"]
    ]
    back = back.drop_duplicates().assign(_back=True)
    out = keyed.merge(back, on=["snapshot_id", "node", "user", "adj"], how="left")
    missing = out["_back"].isna()
    out[PROBLEM_COLUMN] = None
    out.loc[missing, PROBLEM_COLUMN] = (
        out["node"]
        + ": "
        + out["user"]
        + " -> "
        + out["adj"]
        + " ("
        + out["tport"]
        + ") has no reverse link"
    )[missing]
    return out.drop(columns="_back").reset_index(drop=True)


def peer_views(peers: pd.DataFrame) -> pd.DataFrame:
    """One row per observer, with a problem when it does not see as many peers as the
    snapshot's nodes: the observers, or more when the collection sampled its observers
    (the `observers` setting: then the most any observer sees)."""
    seen = peers.groupby(["snapshot_id", "node"]).size().rename("peers").reset_index()
    seen["observers"] = seen.groupby("snapshot_id")["node"].transform("count")
    expected = seen.groupby("snapshot_id")["peers"].transform("max").clip(lower=seen["observers"])
    bad = seen["peers"] != expected
    seen[PROBLEM_COLUMN] = None
    seen.loc[bad, PROBLEM_COLUMN] = (
        seen["node"]
        + " sees "
        + seen["peers"].astype(str)
        + " peers, of "
        + expected.astype(str)
        + " ("
        + seen["observers"].astype(str)
        + " nodes reported)"
    )[bad]
    return seen


def inbox_routes(routes: pd.DataFrame) -> pd.DataFrame:
    """The routes with `inbox`: whether the route's state lists the inbox, as a column a
    GX row condition can compare (GX 1.9 deprecated string conditions, pandas queries
    among them, and its Condition objects have no "list contains")."""
    out = routes.copy()
    out["inbox"] = [state is not None and "inbox" in list(state) for state in routes["state"]]
    return out


DERIVATIONS: Final[Mapping[str, Callable[[pd.DataFrame], pd.DataFrame]]] = {
    "reverse_links": reverse_links,
    "peer_views": peer_views,
    "inbox_routes": inbox_routes,
}
DERIVED_COLUMNS: Final[Mapping[str, tuple[str, ...]]] = {
    "reverse_links": ("snapshot_id", "node", "user", "adj", "tport", PROBLEM_COLUMN),
    "peer_views": ("snapshot_id", "node", "peers", "observers", PROBLEM_COLUMN),
    "inbox_routes": ("inbox",),  # beside the table's own (KEEPS_TABLE)
}
KEEPS_TABLE: Final = frozenset(("inbox_routes",))  # derivations that add columns to the table's


@dataclass(frozen=True, slots=True)
class Suite:
    name: str
    table: str
    derive: str | None
    raw: Mapping[str, Any]  # the suite JSON, given to GX as is

    def expectation_names(self) -> list[str]:
        return [e["meta"]["name"] for e in self.raw["expectations"]]


def _referenced_columns(kwargs: Mapping[str, Any]) -> list[str]:
    cols = [kwargs[k] for k in _COLUMN_KWARGS if k in kwargs]
    for k in _COLUMN_LIST_KWARGS:
        cols.extend(kwargs.get(k, ()))
    return cols


def parse_suite(raw: Mapping[str, Any], schemas: Mapping[str, TableSchema]) -> Suite:
    """A Suite from suite JSON, checked against the table schemas: unknown table,
    derivation or column, or an expectation without a name, is a QualityError."""
    name = raw.get("name")
    meta = raw.get("meta") or {}
    table, derive = meta.get("table"), meta.get("derive")
    if not isinstance(name, str) or not isinstance(table, str) or table not in schemas:
        raise QualityError(f"suite {name!r}: meta.table {table!r} is not a lake table")
    if derive is not None and derive not in DERIVATIONS:
        raise QualityError(
            f"suite {name!r}: unknown derivation {derive!r} (known: {', '.join(DERIVATIONS)})"
        )
    columns = set(DERIVED_COLUMNS[derive]) if derive else set()
    if derive is None or derive in KEEPS_TABLE:
        columns |= set(schemas[table].names)
    expectations = raw.get("expectations")
    if not isinstance(expectations, list) or not expectations:
        raise QualityError(f"suite {name!r} has no expectations")
    for exp in expectations:
        exp_name = (exp.get("meta") or {}).get("name")
        if not isinstance(exp_name, str) or not exp_name.startswith(f"{name}."):
            raise QualityError(
                f"suite {name!r}: every expectation needs meta.name "
                f"'{name}.<what>', got {exp_name!r} for {exp.get('type')}"
            )
        for col in _referenced_columns(exp.get("kwargs") or {}):
            if col not in columns:
                raise QualityError(
                    f"suite {name!r}, expectation {exp_name!r}: "
                    f"no column {col!r} in {derive or table}"
                )
    return Suite(name, table, derive, raw)


def load_suites(
    directory: Path = EXPECTATIONS_DIR, schemas: Mapping[str, TableSchema] | None = None
) -> list[Suite]:
    """Every suite file in `directory`, checked against the lake's schemas."""
    schemas = schemas if schemas is not None else load_schemas()
    suites = []
    for path in sorted(directory.glob("*.json")):
        try:
            raw = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise QualityError(f"suite file {path} is not valid JSON: {exc}") from None
        suite = parse_suite(raw, schemas)
        if suite.name != path.stem:
            raise QualityError(f"suite file {path} names its suite {suite.name!r}")
        suites.append(suite)
    return suites


@dataclass(frozen=True, slots=True)
class ValidationReport:
    snapshot_id: str
    rows: list[dict[str, Any]]  # rows of the `validations` table
    skipped: tuple[str, ...] = field(default=())  # suites whose table was not in the snapshot

    @property
    def success(self) -> bool:
        return all(r["success"] for r in self.rows)

    @property
    def failed(self) -> list[str]:
        return [r["expectation"] for r in self.rows if not r["success"]]

    def summary(self) -> str:
        passed = sum(r["success"] for r in self.rows)
        lines = [
            f"validations of snapshot {self.snapshot_id}: {passed} passed, "
            f"{len(self.rows) - passed} failed"
            + (f", suites skipped (no table): {', '.join(self.skipped)}" if self.skipped else "")
        ]
        for r in self.rows:
            if not r["success"]:
                detail = r["exception"] or (
                    f"{r['unexpected_count']} of {r['element_count']} rows: {r['unexpected_sample']}"
                    if r["unexpected_count"] is not None
                    else f"observed {r['observed_value']}"
                )
                lines.append(f"  FAILED {r['expectation']} [{r['column'] or 'table'}] {detail}")
        return "\n".join(lines)


def missing_library() -> str | None:
    """Why validation cannot run here (great_expectations not installed), or None."""
    import importlib.util

    if importlib.util.find_spec("great_expectations") is None:
        return ("great_expectations is not installed (pip install 'great-expectations>=1.3,<2'; "
                "deploy/databricks-init.sh installs it)")
    return None


def _import_gx() -> Any:
    """great_expectations, imported so that a silent exit becomes an error: its import
    pulls in pyspark.sql.connect, which calls sys.exit(0) when grpcio is missing and the
    main module is not a file (`python -c`, stdin)."""
    try:
        import great_expectations as gx
    except SystemExit:
        raise QualityError(
            "importing great_expectations exited: pyspark.sql.connect needs grpcio when the "
            "main program is not a file (python -c or stdin); run from a file"
        ) from None
    return gx


def _gx_context() -> Any:
    gx = _import_gx()
    from great_expectations.data_context.types.base import (
        DataContextConfig,
        InMemoryStoreBackendDefaults,
        ProgressBarsConfig,
    )

    config = DataContextConfig(
        store_backend_defaults=InMemoryStoreBackendDefaults(),
        analytics_enabled=False,
        progress_bars=ProgressBarsConfig(globally=False),
    )
    return gx.get_context(project_config=config, mode="ephemeral")


def _to_pandas(frame: pd.DataFrame | pa.Table) -> pd.DataFrame:
    return frame.to_pandas() if isinstance(frame, pa.Table) else frame


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, default=str)


def _exception(info: Mapping[str, Any]) -> str | None:
    if "raised_exception" in info:
        return info.get("exception_message") if info["raised_exception"] else None
    messages = {v.get("exception_message") for v in info.values() if isinstance(v, Mapping)}
    return "; ".join(sorted(m for m in messages if m)) or None


def _row(suite: Suite, result: Any, base: Mapping[str, Any]) -> dict[str, Any]:
    config = result.expectation_config
    kwargs = {k: v for k, v in config.kwargs.items() if k != "batch_id"}
    res = result.result or {}
    columns = _referenced_columns(kwargs)
    sample = res.get("partial_unexpected_list")
    return {
        **base,
        "suite": suite.name,
        "expectation": config.meta["name"],
        "expectation_type": config.type,
        "column": ",".join(columns) or None,
        "success": bool(result.success),
        "element_count": res.get("element_count"),
        "unexpected_count": res.get("unexpected_count"),
        "unexpected_percent": res.get("unexpected_percent"),
        "observed_value": _json(res.get("observed_value")),
        "unexpected_sample": _json(sample[:MAX_SAMPLE]) if sample is not None else None,
        "kwargs": json.dumps(kwargs, sort_keys=True, default=str),
        "exception": _exception(result.exception_info or {}),
    }


def validate_snapshot(
    frames: Mapping[str, pd.DataFrame | pa.Table],
    *,
    snapshot_id: str,
    collected_at: datetime,
    suites: Sequence[Suite] | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> ValidationReport:
    """Run every suite whose table is in `frames` (table name -> that snapshot's rows)."""
    gx = _import_gx()
    suites = suites if suites is not None else load_suites()
    context = _gx_context()
    source = context.data_sources.add_pandas("raims_snapshot")
    base = {
        "snapshot_id": snapshot_id,
        "collected_at": collected_at,
        "node": SNAPSHOT_NODE,
        "validated_at": now(),
    }
    rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    pandas_frames: dict[str, pd.DataFrame] = {}
    for suite in suites:
        if suite.table not in frames:
            skipped.append(suite.name)
            continue
        if suite.table not in pandas_frames:
            pandas_frames[suite.table] = _to_pandas(frames[suite.table])
        frame = pandas_frames[suite.table]
        if suite.derive is not None:
            frame = DERIVATIONS[suite.derive](frame)
        batch = (
            source.add_dataframe_asset(suite.name)
            .add_batch_definition_whole_dataframe("snapshot")
            .get_batch(batch_parameters={"dataframe": frame})
        )
        result = batch.validate(gx.ExpectationSuite(**suite.raw), result_format="SUMMARY")
        by_name = {r.expectation_config.meta["name"]: r for r in result.results}
        rows.extend(_row(suite, by_name[name], base) for name in suite.expectation_names())
    report = ValidationReport(snapshot_id, rows, tuple(skipped))
    log.info("%s", report.summary())
    return report
