"""Every fault class the audits must catch, injected into snapshots of both topologies
(a full mesh whose links share one transport label, and a graph of separate links), and
flagged at the culprit, nothing else; clean snapshots and snapshots written twice give no
finding; no input crashes the audits.

Two kinds of snapshot: synthetic ones (`spark_app.jobs.synthetic`, routed with the
router's linkstate code) and "real" ones, the console rows of networks of real routers
(`raims_node.router.sim`, the router code the daemons run, in simulated time) read
through the collector's own row mapping (`collect.table_rows`): the rows a rollout
collects, without processes. Faults that change the network itself (an asymmetric link,
link ends of different costs) are made in the synthetic network; the others edit rows and
go into both kinds. The kernels run without Spark (tests/spark/test_audit.py runs the
same kernels through Spark).
"""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from raims_node.console import ConsoleContext, execute, render_json
from raims_node.router.node import NS
from raims_node.router.sim import SimNetwork
from spark_app.jobs.collect import MORE, NUM_PATHS, PER_PATH, SOURCES, table_rows
from spark_app.jobs.synthetic import (
    ROW_FAULTS,
    THIRTEEN,
    Fault,
    SyntheticSpec,
    finding_keys,
    inject_rows,
    make_snapshot,
)
from spark_app.schemas import load_schema, load_schemas
from spark_app.udfs.bloom import ProbeSet
from spark_app.udfs.local import audit_tables
from tests.sim.conftest import creds_factory

NOW = datetime(2026, 3, 20, 12, 0, tzinfo=UTC)
TOPOLOGIES = ("mesh", "graph")
FAULTS = (*THIRTEEN, Fault.STALE_PEER_COPY)
AUDIT_INPUTS = ("peers", "links", "routes", "forward", "subs", "blooms")
SIM_NODES = "ABCDEF"
GRAPH_LINKS = (("A", "B"), ("B", "C"), ("C", "D"), ("D", "E"), ("E", "F"), ("F", "A"), ("A", "D"), ("B", "E"))


@pytest.fixture(scope="module")
def probes() -> ProbeSet:
    return ProbeSet(1 << 12)


def _spec(topology: str) -> SyntheticSpec:
    if topology == "mesh":
        return SyntheticSpec(nodes=8, subscriptions=12, seed=4, mesh=True)
    return SyntheticSpec(nodes=12, degree=4, subscriptions=12, seed=4)


def _sim_snapshot(topology: str, snapshot_id: str) -> dict[str, pa.Table]:
    """A converged network of real routers, its console rows as the collector maps them."""
    net = SimNetwork(creds_factory(), seed=7)
    for n in SIM_NODES:
        net.add_node(n)
    if topology == "mesh":  # one mesh transport per node, a connection per pair
        for a, b in itertools.combinations(SIM_NODES, 2):
            net.add_link("mesh", a, b, (1000,) * 4, tport_type="mesh")
    else:
        for i, (a, b) in enumerate(GRAPH_LINKS):
            net.add_link(f"link{i}", a, b, (1000 + 100 * i, 1000, 1500, 1000 + 50 * i))
    net.run_until(net.converged, timeout_ns=30 * NS)
    for n in SIM_NODES:
        net.subscribe(n, f"data.{n}.x")
        net.subscribe(n, f"md.{n}.y")
        net.psubscribe(n, f"svc.{n}.>", "rv")
        net.psubscribe(n, f"cache.{n}.*.px", "rv")
    net.run_for(5 * NS)

    def show(n: str, line: str) -> list[dict[str, object]]:
        rows = json.loads(render_json(execute(ConsoleContext(net.nodes[n].node), line)))
        assert isinstance(rows, list), rows
        return rows

    tables = {}
    for t in AUDIT_INPUTS:
        command, _ = SOURCES[t]
        rows = []
        for n in SIM_NODES:
            if t in PER_PATH:
                raw = [{**r, "path": p} for p in range(NUM_PATHS) for r in show(n, f"{command} {p}")]
            else:
                raw = show(n, command)
            if t in MORE:
                raw += show(n, MORE[t])
            rows += table_rows(t, raw, {"snapshot_id": snapshot_id, "collected_at": NOW, "node": n})
        tables[t] = load_schemas()[t].conform(rows)
    return tables


@pytest.fixture(scope="module")
def sim_snapshots() -> dict[str, dict[str, pa.Table]]:
    return {t: _sim_snapshot(t, f"sim-{t}") for t in TOPOLOGIES}


def _findings(out: dict[str, pa.Table]) -> dict[str, int]:
    return {t: int(pc.sum(rows.column("finding")).as_py() or 0) for t, rows in out.items()}


def _twice(tables: dict[str, pa.Table]) -> dict[str, pa.Table]:
    """Every row written again by a collector retry (read a second later)."""
    out = {}
    for name, t in tables.items():
        at = t.schema.get_field_index("collected_at")
        later = t.set_column(at, t.schema.field(at), pc.add(t.column(at), pa.scalar(timedelta(seconds=1))))
        out[name] = pa.concat_tables([t, later])
    return out


def _assert_flagged(out: dict[str, pa.Table], want: frozenset, what: str) -> None:
    got = finding_keys(out)
    assert got == want, f"{what}: extra {sorted(got - want)}, missed {sorted(want - got)}"
    for table, rows in out.items():
        frame = rows.to_pandas()
        found = frame[frame["finding"]]
        assert found["severity"].notna().all() and found["cause"].notna().all(), table
        load_schema(table).conform(rows)


# -- synthetic snapshots ----------------------------------------------------------------


@pytest.mark.parametrize("topology", TOPOLOGIES)
@pytest.mark.parametrize("fault", FAULTS, ids=str)
def test_synthetic_fault_is_flagged_at_its_culprit(topology: str, fault: Fault, probes: ProbeSet) -> None:
    tables, injected = make_snapshot(_spec(topology), f"{topology}-{fault}", NOW, fault)
    assert injected is not None
    _assert_flagged(audit_tables(tables, probes, now=lambda: NOW), injected.findings, injected.description)


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_synthetic_clean_and_twice_written_snapshots_have_no_finding(topology: str, probes: ProbeSet) -> None:
    tables, _ = make_snapshot(_spec(topology), f"{topology}-clean", NOW)
    for snapshot in (tables, _twice(tables)):
        out = audit_tables(snapshot, probes, now=lambda: NOW)
        assert _findings(out) == dict.fromkeys(out, 0)
        summary = out["audit_blooms"].to_pandas().query("check == 'summary'")
        checked = json.loads(summary["detail"].iat[0])["checked"]
        assert checked["subscriptions"] > 0 and checked["peer_copies"] > 0


def test_a_fault_written_twice_is_flagged_once(probes: ProbeSet) -> None:
    tables, injected = make_snapshot(_spec("mesh"), "twice", NOW, Fault.DROPPED_TREE_EDGE)
    assert injected is not None
    once = audit_tables(tables, probes, now=lambda: NOW)
    twice = audit_tables(_twice(tables), probes, now=lambda: NOW)
    assert _findings(twice) == _findings(once)
    _assert_flagged(twice, injected.findings, injected.description)


def test_cascaded_findings_name_their_root_cause(probes: ProbeSet) -> None:
    tables, injected = make_snapshot(_spec("graph"), "cause", NOW, Fault.DROPPED_TREE_EDGE)
    routes = audit_tables(tables, probes, now=lambda: NOW)["audit_routes"].to_pandas()
    found = routes[routes["finding"]]
    edge = found[found["check"] == "tree_edge"]
    coverage = found[found["check"] == "tree_coverage"]
    assert len(edge) == 1 and len(coverage) == 1
    assert coverage["cause"].iat[0] == edge["cause"].iat[0]
    assert edge["cause"].iat[0].startswith("audit_routes:tree_edge:")
    assert (coverage["severity"].iat[0], edge["severity"].iat[0]) == ("critical", "major")


# -- snapshots of real routers ---------------------------------------------------------------


SIM_FAULTS = [f for f in FAULTS if f in ROW_FAULTS]


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_real_router_snapshots_are_clean_once_and_twice(
    topology: str, sim_snapshots: dict[str, dict[str, pa.Table]], probes: ProbeSet
) -> None:
    tables = sim_snapshots[topology]
    for snapshot in (tables, _twice(tables)):
        out = audit_tables(snapshot, probes, now=lambda: NOW)
        assert _findings(out) == dict.fromkeys(out, 0)


@pytest.mark.parametrize("topology", TOPOLOGIES)
@pytest.mark.parametrize("fault", SIM_FAULTS, ids=str)
def test_real_router_fault_is_flagged_at_its_culprit(
    topology: str, fault: Fault, sim_snapshots: dict[str, dict[str, pa.Table]], probes: ProbeSet
) -> None:
    tables = dict(sim_snapshots[topology])
    injected = inject_rows(tables, fault, seed=topology)
    _assert_flagged(audit_tables(tables, probes, now=lambda: NOW), injected.findings, injected.description)


# -- no input crashes the audits -----------------------------------------------------------


def test_empty_tables_and_null_filters_do_not_crash(probes: ProbeSet) -> None:
    tables, _ = make_snapshot(_spec("graph"), "odd", NOW)
    empty = {name: t.slice(0, 0) for name, t in tables.items()}
    out = audit_tables(empty, probes, now=lambda: NOW)
    assert _findings(out) == dict.fromkeys(out, 0)
    blooms = tables["blooms"]
    at = blooms.schema.get_field_index("filter")
    no_filters = blooms.set_column(at, blooms.schema.field(at), pa.nulls(blooms.num_rows, pa.binary()))
    out = audit_tables({**tables, "blooms": no_filters}, probes, now=lambda: NOW)
    checks = set(out["audit_blooms"].to_pandas().query("finding")["check"])
    assert checks == {"no_filter"}
    nodes_only = {"peers": tables["peers"], "links": tables["links"].slice(0, 0)}
    out = audit_tables(nodes_only, probes, now=lambda: NOW)
    assert set(out) == {"audit_lsdb", "audit_routes"}
