"""The audit kernels without Spark: fault injection on synthetic snapshots made with the
router's own code, the routing rules on the manual's example, and each check alone.
tests/spark/test_audit.py runs the same scenarios through Spark local mode."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raims_node.bloom import BloomFilter
from spark_app.jobs.synthetic import (
    Fault,
    SyntheticSpec,
    finding_keys,
    make_snapshot,
)
from spark_app.schemas import load_schema
from spark_app.udfs.bloom import ProbeSet, audit_blooms_local
from spark_app.udfs.frames import kernel_frame, merge_summaries
from spark_app.udfs.labels import UNKNOWN_TPORT_ID, chunk_of, is_self_label, peer_names, tport_ids
from spark_app.udfs.local import audit_tables
from spark_app.udfs.lsdb import REFERENCE_COLUMNS
from spark_app.udfs.routing import Graph, audit_routes, forward_rows, hop_rows

NOW = datetime(2026, 3, 20, 12, 0, tzinfo=UTC)
SPEC = SyntheticSpec(nodes=16, degree=4, subscriptions=20, seed=3)
AUDITS = ("audit_lsdb", "audit_routes", "audit_blooms")


@pytest.fixture(scope="module")
def probes() -> ProbeSet:
    return ProbeSet(1 << 14)


# -- fault injection -----------------------------------------------------------------------


@pytest.mark.parametrize("fault", [None, *Fault], ids=lambda f: str(f or "clean"))
def test_each_fault_is_reported_exactly_and_nothing_else(fault: Fault | None, probes: ProbeSet) -> None:
    tables, injected = make_snapshot(SPEC, "s1", NOW, fault)
    out = audit_tables(tables, probes, now=lambda: NOW)
    want = injected.findings if injected is not None else frozenset()
    assert finding_keys(out) == want, injected.description if injected else "clean snapshot"
    for table in AUDITS:
        rows = out[table].to_pandas()
        summary = rows[rows["check"] == "summary"]
        assert len(summary) == 1
        assert int(summary["findings"].iat[0]) == int(rows["finding"].sum())
        assert int(summary["checked"].iat[0]) > 0
        load_schema(table).conform(out[table])  # what the lake will accept


def test_clean_snapshot_reports_what_it_checked(probes: ProbeSet) -> None:
    tables, _ = make_snapshot(SPEC, "s1", NOW)
    out = audit_tables(tables, probes)
    routes = out["audit_routes"].to_pandas()
    detail = json.loads(routes.loc[routes["check"] == "summary", "detail"].iat[0])
    n = SPEC.nodes
    assert detail["checked"]["trees"] == 4 * n
    assert detail["checked"]["forward_sets"] == 4 * n * n  # every node lists every source
    assert detail["checked"]["trees_covered"] == 4 * n
    blooms = out["audit_blooms"].to_pandas()
    filters = blooms[blooms["check"] == "filter"]
    assert len(filters) == n and not filters["finding"].any()
    assert (filters["fp_measured"] < 0.01).all()


@settings(max_examples=12, deadline=None)
@given(
    nodes=st.integers(3, 24),
    degree=st.integers(2, 5),
    seed=st.integers(0, 10_000),
)
def test_recomputed_routes_agree_with_the_router_on_random_networks(
    nodes: int, degree: int, seed: int
) -> None:
    spec = SyntheticSpec(nodes=nodes, degree=degree, subscriptions=2, seed=seed)
    tables, _ = make_snapshot(spec, "s1", NOW)
    out = audit_tables({t: tables[t] for t in ("peers", "links", "routes", "forward")})
    assert finding_keys(out) == frozenset()


# -- the routing rules, on the manual's example ------------------------------------------


def _reference(nodes: list[tuple[str, int]], links: list[tuple[str, str, str, int]]) -> pd.DataFrame:
    """A reference database: nodes (name, start us), links (user, adj, tport, cost)."""
    rows = [
        {"snapshot_id": "s", "kind": "node", "peer": name, "bridge": f"{i:022d}", "start": start}
        for i, (name, start) in enumerate(nodes)
    ]
    rows += [
        {"snapshot_id": "s", "kind": "link", "peer": u, "adj": a, "tport": t, "type": "tcp", "cost": c}
        for u, a, t, c in links
    ]
    frame = pd.DataFrame(rows)
    for name, _ in REFERENCE_COLUMNS:
        if name not in frame:
            frame[name] = None
    return frame


def _square(ruby_start: int, bond_start: int) -> pd.DataFrame:
    # manual "The Forwarding Set": dyna -- ruby, dyna -- bond, ruby -- chex, bond -- chex
    nodes = [("dyna", 1), ("ruby", ruby_start), ("bond", bond_start), ("chex", 40)]
    pairs = [("dyna", "ruby"), ("dyna", "bond"), ("ruby", "chex"), ("bond", "chex")]
    links = []
    for a, b in pairs:
        links += [(a, b, f"tcp_{b}.1", 1000), (b, a, f"tcp_{a}.1", 1000)]
    return _reference(nodes, links)


@pytest.mark.parametrize(("ruby_start", "bond_start"), [(10, 20), (20, 10)])
def test_equal_cost_routes_are_ranked_by_forwarder_age(ruby_start: int, bond_start: int) -> None:
    older, younger = ("ruby", "bond") if ruby_start < bond_start else ("bond", "ruby")
    for path in range(4):
        g = Graph(_square(ruby_start, bond_start), path)
        dyna, chex = list(g.names).index("dyna"), list(g.names).index("chex")
        (_, dist, parent), = g.trees(np.array([dyna]), path)
        forwarder = g.names[g.eu[parent[0, chex]]]
        # "half of the subjects ... would take the first path and the other half the second"
        assert forwarder == (older if path % 2 == 0 else younger)
        assert dist[0, chex] == 2000


def test_a_link_is_used_only_when_both_ends_list_it() -> None:
    ref = _square(10, 20)
    one_way = ref[~((ref["peer"] == "chex") & (ref["adj"] == "bond"))]
    g = Graph(one_way, 0)
    pairs = {(g.names[u], g.names[v]) for u, v in zip(g.eu, g.ev, strict=True)}
    assert ("bond", "chex") not in pairs and ("chex", "bond") not in pairs
    assert len(pairs) == 6


def test_a_disconnected_reference_is_a_partition() -> None:
    ref = _reference(
        [("a", 1), ("b", 2), ("c", 3), ("d", 4)],
        [("a", "b", "t.1", 1), ("b", "a", "t.1", 1), ("c", "d", "t.1", 1), ("d", "c", "t.1", 1)],
    )
    out = audit_routes(ref, hop_rows(pd.DataFrame(columns=["snapshot_id", "node", "user", "tport", "cost", "path"])), 0)
    found = out[out["finding"].astype(bool)]
    assert list(found["check"]) == ["partition"]
    assert json.loads(found["detail"].iat[0]) == {"sizes": [2, 2]}


def test_a_path_listed_by_two_routes_is_a_next_hop_finding() -> None:
    ref = _square(10, 20)
    routes = pd.DataFrame(
        {
            "snapshot_id": "s", "node": "dyna", "user": ["chex.3", "chex.3"],
            "tport": ["tcp_ruby.1", "tcp_bond.1"], "cost": [2000, 2000], "path": [[0, 2], [1, 2, 3]],
        }
    )
    out = audit_routes(ref, hop_rows(routes), 2)
    found = out[out["finding"].astype(bool)]
    assert list(found["check"]) == ["next_hop"]
    assert (found["expected"].iat[0], found["reported"].iat[0]) == ("tcp_ruby.1", "tcp_bond.1,tcp_ruby.1")


def test_forward_rows_name_their_source_and_chunk() -> None:
    fwd = pd.DataFrame(
        {"snapshot_id": "s", "node": "a", "path": [0, 1], "source": ["b.4", "a.*"], "tport": ["t.1", None], "cost": [5, None]}
    )
    rows = forward_rows(fwd, 3)
    assert list(rows["target"]) == ["b", "a"]
    assert list(rows["chunk"]) == list(chunk_of(np.array(["b", "a"], dtype=object), 3))


# -- labels --------------------------------------------------------------------------------


def test_labels_lose_their_uid_and_keep_their_name() -> None:
    labels = pd.Series(["n1.3", "n1.*", "n1", "a.b.12", None, "x.y"])
    assert list(peer_names(labels)) == ["n1", "n1", "n1", "a.b", None, "x.y"]
    assert list(tport_ids(pd.Series(["mesh.3", "tcp_a.12", "ipc", None]))) == [3, 12, UNKNOWN_TPORT_ID, UNKNOWN_TPORT_ID]
    chunks = chunk_of(np.array(["n1", "n2", "n1"], dtype=object), 7)
    assert chunks[0] == chunks[2] and ((chunks >= 0) & (chunks < 7)).all()
    assert list(is_self_label(pd.Series(["n1.*", "n1", "n1.2"]), pd.Series(["n1", "n1", "n1"]))) == [True, True, False]


# -- bloom checks --------------------------------------------------------------------------


def _bloom_tables(f: BloomFilter, subjects: list[str], **row: object) -> tuple[pd.DataFrame, pd.DataFrame]:
    subs = pd.DataFrame({"snapshot_id": "s", "node": "n", "user": "n.*", "subject": subjects,
                         "pattern": False, "syntax": None})
    blooms = pd.DataFrame([{"snapshot_id": "s", "node": "n", "dest": "ipc", "filter": f.to_bytes(),
                            "size_bits": f.size_bits, "num_hashes": f.num_hashes, "seed": f.seed, **row}])
    return subs, blooms


def test_probing_with_subscribed_subjects_is_far_above_theory() -> None:
    subjects = [f"s.{i}" for i in range(50)]
    f = BloomFilter()
    for s in subjects:
        f.add_subject(s)
    out = audit_blooms_local(*_bloom_tables(f, subjects), ProbeSet(subjects=[s.encode() for s in subjects]))
    fp = out[out["check"] == "fp_rate"]
    assert len(fp) == 1 and fp["fp_hits"].iat[0] == 50
    assert set(json.loads(fp["detail"].iat[0])["p_value_above"]) == {"theory", "target"}


def test_multi_hash_filters_hold_their_subjects_and_match_theory(probes: ProbeSet) -> None:
    subjects = [f"s.{i}" for i in range(25)]
    f = BloomFilter(seed=7, num_hashes=3)
    for s in subjects:
        f.add_subject(s)
    out = audit_blooms_local(*_bloom_tables(f, subjects), probes)
    assert not out["finding"].any()
    row = out[out["check"] == "filter"].iloc[0]
    assert row["num_hashes"] == 3 and row["fp_hits"] <= 3  # theory: ~1e-10 per probe


def test_header_disagreeing_with_the_bytes_and_bad_patterns_are_findings(probes: ProbeSet) -> None:
    f = BloomFilter()
    f.add_subject("a.b")
    subs, blooms = _bloom_tables(f, ["a.b"], size_bits=1 << 20)
    bad = pd.DataFrame({"snapshot_id": ["s"], "node": ["n"], "user": ["n.*"], "subject": ["x.>"],
                        "pattern": [True], "syntax": ["nosuch"]})
    out = audit_blooms_local(pd.concat([subs, bad], ignore_index=True), blooms, probes)
    found = out[out["finding"].astype(bool)]
    assert sorted(found["check"]) == ["geometry", "unhashable"]
    geometry = json.loads(found.loc[found["check"] == "geometry", "detail"].iat[0])
    assert geometry == {"row": {"size_bits": 1 << 20}, "bytes": {"size_bits": f.size_bits}}


def test_subscriptions_without_a_filter_are_a_finding(probes: ProbeSet) -> None:
    subs, _ = _bloom_tables(BloomFilter(), ["a"])
    blooms = pd.DataFrame(columns=["snapshot_id", "node", "dest", "filter", "size_bits", "num_hashes", "seed"])
    out = audit_blooms_local(subs, blooms, probes)
    assert list(out.loc[out["finding"].astype(bool), "check"]) == ["no_filter"]


# -- summaries -----------------------------------------------------------------------------


def test_summaries_of_groups_add_up_to_one_per_snapshot() -> None:
    rows = kernel_frame(
        "audit_lsdb",
        {
            "snapshot_id": ["s", "s", "s", "t"],
            "node": ["*", "*", "n1", "*"],
            "check": ["summary", "summary", "zombie", "summary"],
            "finding": [False, False, True, False],
            "checked": [3, 4, None, 1],
            "findings": [0, 1, None, 0],
            "detail": [json.dumps({"checked": {"views": 3}}), json.dumps({"checked": {"views": 4, "links": 2}}), None, None],
        },
    )
    out = merge_summaries("audit_lsdb", rows, {"absent_tables": []}, ["s", "t", "u"])
    out = out.set_index(["snapshot_id", "check"])
    assert out.loc[("s", "summary"), "checked"] == 7
    assert out.loc[("s", "summary"), "findings"] == 1
    assert json.loads(out.loc[("s", "summary"), "detail"]) == {
        "checked": {"views": 7, "links": 2}, "absent_tables": []
    }
    assert out.loc[("t", "summary"), "findings"] == 0
    assert out.loc[("u", "summary"), "checked"] == 0  # nothing to audit still gets a summary
    assert len(out) == 4


def test_audit_rows_fit_their_tables(probes: ProbeSet) -> None:
    tables, _ = make_snapshot(SPEC, "s1", NOW, Fault.WRONG_TREE_EDGE)
    out = audit_tables(tables, probes, now=lambda: NOW)
    for table, rows in out.items():
        conformed = load_schema(table).conform(rows)
        assert conformed.column("date").to_pylist()[0] == NOW.date()
        assert set(conformed.column("audited_at").to_pylist()) == {NOW}
        assert isinstance(conformed, pa.Table)
