"""Expectation suites on a synthetic snapshot: all pass when consistent, and an injected
fault fails exactly the expectations about it."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pandas as pd
import pytest
from pyspark.sql import SparkSession

from spark_app.errors import QualityError
from spark_app.lake import Lake
from spark_app.quality import (
    EXPECTATIONS_DIR,
    PROBLEM_COLUMN,
    load_suites,
    parse_suite,
    reverse_links,
    validate_snapshot,
)
from spark_app.schemas import load_schemas
from tests.spark.synthetic import snapshot_rows

# GX 1.9 deprecated string row conditions (to go in GX 2): the suites use Condition objects
pytestmark = pytest.mark.filterwarnings("error:Passing a string to the row_condition:DeprecationWarning",
                                        "error:The condition_parser parameter:DeprecationWarning")

AT = datetime(2026, 3, 20, 12, 0, tzinfo=UTC)
Rows = dict[str, list[dict[str, Any]]]


def frames(rows: Rows) -> dict[str, Any]:
    schemas = load_schemas()
    return {t: schemas[t].conform(r) for t, r in rows.items()}


def validate(rows: Rows) -> Any:
    return validate_snapshot(frames(rows), snapshot_id="s1", collected_at=AT)


def test_suites_load_and_name_every_expectation() -> None:
    suites = load_suites()
    assert {s.name for s in suites} == {p.stem for p in EXPECTATIONS_DIR.glob("*.json")}
    names = [n for s in suites for n in s.expectation_names()]
    assert len(names) == len(set(names))
    assert {
        "reverse_links.every_link_has_reverse",
        "links.cost_positive",
        "peers.bridge_well_formed",
        "peers.one_row_per_peer_per_observer",
    } <= set(names)


def test_consistent_snapshot_passes_everything() -> None:
    report = validate(snapshot_rows("s1", AT))
    assert report.skipped == ()
    assert report.failed == [] and report.success
    assert len(report.rows) == sum(len(s.expectation_names()) for s in load_suites())
    assert "0 failed" in report.summary()


def _drop_one_direction(rows: Rows) -> None:
    rows["links"] = [
        r
        for r in rows["links"]
        if not (r["node"] == "n2" and r["user"] == "n3" and r["adj"] == "n1")
    ]


def _set(table: str, index: int, **values: Any) -> Callable[[Rows], None]:
    def edit(rows: Rows) -> None:
        rows[table][index] = {**rows[table][index], **values}

    return edit


def _duplicate_peer(rows: Rows) -> None:
    rows["peers"].append(dict(rows["peers"][5]))


def _hide_peer(rows: Rows) -> None:
    rows["peers"].pop(5)


def _second_route(state: list[str]) -> Callable[[Rows], None]:
    """Another route of an observer to the same peer, with `state`."""
    def edit(rows: Rows) -> None:
        rows["routes"].append({**rows["routes"][0], "tport": "mesh.9", "state": state})

    return edit


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        (_drop_one_direction, {"reverse_links.every_link_has_reverse"}),
        (_set("links", 4, cost=0), {"links.cost_positive"}),
        (_set("links", 4, cost3=-5), {"links.cost3_positive"}),
        (_set("peers", 2, bridge="not a bridge id!"), {"peers.bridge_well_formed"}),
        (_set("peers", 2, bridge="AAAAAAAAAAAAAAAAAAAAAAAA"), {"peers.bridge_well_formed"}),
        (
            _duplicate_peer,
            {"peers.one_row_per_peer_per_observer", "peer_views.every_observer_sees_every_node"},
        ),
        (_hide_peer, {"peer_views.every_observer_sees_every_node"}),
        (_second_route(["inbox", "mesh"]), {"routes.one_inbox_route_per_peer"}),
        (_second_route(["mesh"]), set()),  # an alternative route without the inbox is fine
        (_set("events", 1, event="exploded"), {"events.known_event"}),
        (_set("loss", 0, msg_loss=3), {"loss.msg_loss_zero"}),
        (_set("blooms", 0, subs=9), {"blooms.total_covers_subs"}),
    ],
)
def test_an_injected_fault_fails_exactly_its_expectations(
    fault: Callable[[Rows], None], expected: set[str]
) -> None:
    rows = snapshot_rows("s1", AT)
    fault(rows)
    report = validate(rows)
    assert set(report.failed) == expected
    for name in expected:
        assert f"FAILED {name}" in report.summary()


def test_failure_rows_say_what_is_wrong() -> None:
    rows = snapshot_rows("s1", AT)
    _drop_one_direction(rows)
    report = validate(rows)
    (row,) = [r for r in report.rows if not r["success"]]
    assert row["suite"] == "reverse_links" and row["column"] == PROBLEM_COLUMN
    assert row["unexpected_count"] == 1
    assert json.loads(row["unexpected_sample"]) == ["n2: n1 -> n3 (mesh.2) has no reverse link"]


def test_missing_tables_are_skipped_and_listed() -> None:
    rows = snapshot_rows("s1", AT)
    report = validate({"links": rows["links"]})
    assert {r["suite"] for r in report.rows} == {"links", "reverse_links"}
    assert "peers" in report.skipped and "suites skipped (no table): blooms" in report.summary()


def test_validations_are_stored_and_queryable(spark: SparkSession, lake: Lake) -> None:
    rows = snapshot_rows("s1", AT)
    rows["links"][4] = {**rows["links"][4], "cost": 0}
    report = validate(rows)
    assert lake.write("validations", report.rows) == len(report.rows)
    lake.register_views(["validations"])
    failed = spark.sql("SELECT expectation FROM validations WHERE NOT success").collect()
    assert [r[0] for r in failed] == ["links.cost_positive"]
    assert spark.sql("SELECT DISTINCT node FROM validations").collect()[0][0] == "*"


def test_reverse_links_ignores_links_without_a_peer() -> None:
    links = pd.DataFrame(
        [
            {"snapshot_id": "s", "node": "a", "user": "a", "adj": None, "tport": "ipc.0"},
            {"snapshot_id": "s", "node": "a", "user": "a", "adj": "b", "tport": "t.1"},
            {"snapshot_id": "s", "node": "a", "user": "b", "adj": "a", "tport": "t.2"},
            {"snapshot_id": "s", "node": "b", "user": "a", "adj": "b", "tport": "t.1"},
        ]
    )
    out = reverse_links(links)
    assert len(out) == 3
    assert out[PROBLEM_COLUMN].dropna().tolist() == ["b: a -> b (t.1) has no reverse link"]


def _suite(**changes: Any) -> dict[str, Any]:
    raw: dict[str, Any] = json.loads((EXPECTATIONS_DIR / "links.json").read_text())
    raw["expectations"][1].update(changes)
    return raw


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (_suite(kwargs={"column": "colour"}), "no column 'colour' in links"),
        (_suite(meta={}), "every expectation needs meta.name 'links.<what>'"),
        ({**_suite(), "meta": {"table": "nope"}}, "meta.table 'nope' is not a lake table"),
        ({**_suite(), "meta": {"table": "links", "derive": "magic"}}, "unknown derivation 'magic'"),
    ],
)
def test_bad_suites_are_rejected(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(QualityError, match=message):
        parse_suite(raw, load_schemas())


def test_peer_views_with_sampled_observers_expect_every_node() -> None:
    from spark_app.quality import peer_views

    rows = [{"snapshot_id": "s", "node": obs, "user": f"n{p}"} for obs in ("n0", "n5") for p in range(8)]
    assert peer_views(pd.DataFrame(rows))["problem"].isna().all()  # 2 observers of 8 nodes
    short = pd.DataFrame(rows[:-1])  # n5 misses a peer
    assert peer_views(short)["problem"].dropna().tolist() == ["n5 sees 7 peers, of 8 (2 nodes reported)"]
