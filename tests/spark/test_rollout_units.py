"""The rollout's parts that need no Spark: plan and waves, settings, keys, node configs,
the collector's mapping of real console rows onto the lake schemas, the convergence and
traffic verdicts, and the daemon files."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from raims_node.config.gen_key import new_network_config
from raims_node.config.keyset import credentials
from raims_node.config.tree import from_dict, load
from raims_node.console import ConsoleContext, execute
from raims_node.linkstate import Graph, GraphLink
from raims_node.router.node import NS
from raims_node.router.sim import SimNetwork
from spark_app.controller import default_nodes_per_host, format_table
from spark_app.errors import SessionError
from spark_app.jobs import converge as converge_job
from spark_app.jobs import daemons
from spark_app.jobs.collect import PER_PATH, SOURCES, table_rows
from spark_app.jobs.converge import adjacency_links, disagreements
from spark_app.jobs.deploy import NodeRecord, launch_for, node_specs
from spark_app.jobs.errors import ClusterError, CollectError, ConvergeError, PlanError
from spark_app.jobs.hosts import TaskHost, check_capacity, executor_hosts, expected_executors
from spark_app.jobs.keys import ensure_master_keys, keys_dir
from spark_app.jobs.topology import graph_plan, make_plan, mesh_plan
from spark_app.jobs.traffic import senders_of, tally
from spark_app.schemas import load_schemas
from spark_app.settings import load_settings
from tests.spark.test_rollout_failures import raims_processes

REPO = Path(__file__).resolve().parents[2]
MANUAL_GRAPH = "node A B C D\ntcp_link_ab A B : 200\ntcp_link_bc B C : 100\ntcp_link_ac A C : 200\n" \
               "tcp_link_bd B D : 200\ntcp_link_dc D C : 300\n"


# ---------------------------------------------------------------- plan


def test_mesh_plan_places_nodes_in_blocks_and_starts_the_hub_first() -> None:
    plan = mesh_plan(hosts=2, nodes_per_host=2)
    assert [(n.name, n.slot, n.wave) for n in plan.nodes] == [
        ("node0", 0, 0), ("node1", 0, 1), ("node2", 1, 1), ("node3", 1, 1)]
    hub, *members = plan.nodes
    assert hub.links[0].listen and hub.links[0].partners == ()
    assert all(not m.links[0].listen and m.links[0].partners == ("node0",) for m in members)
    assert plan.waves == 2 and plan.nodes_per_host() == 2


def test_manual_graph_takes_three_waves_with_every_listener_started_first(tmp_path: Path) -> None:
    graph = tmp_path / "graph.txt"
    graph.write_text(MANUAL_GRAPH)
    plan = graph_plan(graph, hosts=2)
    wave = {n.name: n.wave for n in plan.nodes}
    assert wave == {"A": 0, "B": 1, "C": 2, "D": 0}
    assert {n.name: n.slot for n in plan.nodes} == {"A": 0, "B": 0, "C": 1, "D": 1}
    ends = {(n.name, e.tport): e for n in plan.nodes for e in n.links}
    assert ends[("D", "link_dc")].listen and ends[("C", "link_dc")].partners == ("D",)
    assert ends[("C", "link_bc")].cost == (100,) * 4


@st.composite
def graphs(draw: st.DrawFn) -> Graph:
    n = draw(st.integers(2, 9))
    names = tuple(f"n{i}" for i in range(n))
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]
    # a random spanning tree keeps the graph connected (make_plan refuses one that is not)
    tree = [(names[draw(st.integers(0, i - 1))], names[i]) for i in range(1, n)]
    tcp = tree + [p for p in draw(st.lists(st.sampled_from(pairs), unique=True, max_size=12)) if p not in tree]
    links = [GraphLink("tcp", f"t{i}", pair) for i, pair in enumerate(tcp)]
    for i, members in enumerate(draw(st.lists(st.sets(st.sampled_from(names), min_size=2), max_size=2))):
        links.append(GraphLink("mesh", f"m{i}", tuple(sorted(members, key=names.index))))
    return Graph(names, tuple(links))


@settings(max_examples=80, deadline=None)
@given(graphs(), st.integers(1, 4))
def test_every_connector_starts_after_its_listener(graph: Graph, hosts: int) -> None:
    plan = make_plan(graph, hosts)
    by_name = {n.name: n for n in plan.nodes}
    for node in plan.nodes:
        for end in node.links:
            assert end.listen == (end.partners == ())
            assert all(by_name[p].wave < node.wave for p in end.partners)
            assert all(any(e.tport == end.tport and e.listen for e in by_name[p].links) for p in end.partners)
    for link in graph.links:
        listeners = [n for n in link.nodes if any(e.tport == link.name and e.listen for e in by_name[n].links)]
        assert len(listeners) == 1
    assert {n.slot for n in plan.nodes} <= set(range(hosts))


def test_unrunnable_plans_are_plan_errors(tmp_path: Path) -> None:
    pgm = tmp_path / "pgm.txt"
    pgm.write_text("node A B\npgm_x A B\n")
    with pytest.raises(PlanError, match="not pgm"):
        graph_plan(pgm, hosts=1)
    with pytest.raises(PlanError, match=r"nothere\.txt"):
        graph_plan(tmp_path / "nothere.txt", hosts=1)
    with pytest.raises(PlanError, match="needs 2 to"):
        mesh_plan(hosts=1, nodes_per_host=1)
    with pytest.raises(PlanError, match="do not fit"):
        make_plan(Graph(("a", "b", "c"), ()), hosts=1, nodes_per_host=2)


def test_a_disconnected_graph_is_a_plan_error_naming_the_cut_off_nodes(tmp_path: Path) -> None:
    two = tmp_path / "two.txt"
    two.write_text("node A B C D\ntcp_ab A B\ntcp_cd C D\n")
    with pytest.raises(PlanError, match=rf"graph file '{two}': nodes C, D are not connected to A, B$"):
        graph_plan(two, hosts=2)
    isolated = tmp_path / "isolated.txt"
    isolated.write_text("node A B C\nmesh_m A B\n")
    with pytest.raises(PlanError, match=r"node C is not connected to A, B$"):
        graph_plan(isolated, hosts=1)
    with pytest.raises(PlanError, match=r"topology mesh: nodes b, c are not connected to a$"):
        make_plan(Graph(("a", "b", "c"), (GraphLink("tcp", "bc", ("b", "c")),)), hosts=1)
    assert make_plan(Graph(("a",), ()), hosts=1).names == ["a"]  # a single node is connected


def test_nodes_per_host_defaults() -> None:
    assert default_nodes_per_host("local-cluster[2,1,1024]", 2) == 2
    assert default_nodes_per_host("local[2]", 1) == 4
    assert default_nodes_per_host("yarn", 5) == 1
    assert default_nodes_per_host("yarn", 1) == 2


# ---------------------------------------------------------------- settings


def test_the_shipped_config_loads_and_options_override_it(tmp_path: Path) -> None:
    s = load_settings(REPO / "conf" / "rollout.yaml", lake=str(tmp_path / "l"), nodes_per_host=3)
    assert s.lake == str(tmp_path / "l") and s.nodes_per_host == 3
    assert s.bridges == ("nats", "redis", "ipc")
    assert s.ports == {"mesh": 0, "web": 0, "nats": 0, "redis": 0, "ipc": 0}
    assert Path(s.run_dir).is_absolute() and s.parameters["heartbeat"] == "1 sec"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"service": "x", "transport": {}}))
    with pytest.raises(PlanError, match=r"unknown key\(s\) \['transport'\]"):
        load_settings(bad)


@pytest.mark.parametrize(("argv", "says"), [
    (["--snapshot", "x"], "--snapshot ID goes with --audit-only"),
    (["--teardown", "--audit-only", "--snapshot", "x"], "--teardown and --audit-only"),
    (["--topology", "graph", "nope.txt"], "graph file '{tmp}/nope.txt': No such file or directory"),
    (["--topology", "graph", "cut.txt"], "node C is not connected to A, B"),
])
def test_bad_flags_are_one_line_before_any_session(argv: list[str], says: str, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """`--snapshot x` without --audit-only ran a whole rollout (into ./lake, ./run); a
    graph file that is missing or cut off was found after the session started, with a
    failed rollouts row written into ./lake: now exit 2, one line, nothing created."""
    import spark_app.session
    from spark_app import raims_rollout

    def no_session(*_: object, **__: object) -> None:
        raise AssertionError("a Spark session was started")

    monkeypatch.setattr(spark_app.session, "build_session", no_session)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cut.txt").write_text("node A B C\ntcp_ab A B\n")
    try:
        status = raims_rollout.main(argv)
    except SystemExit as exc:
        status = exc.code
    err = capsys.readouterr().err.strip().splitlines()
    assert status == raims_rollout.EXIT_USAGE
    assert says.format(tmp=tmp_path) in err[-1] and "Traceback" not in "".join(err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.txt"]  # no lake, no run directory


@pytest.mark.parametrize(("conf", "says"), [
    ({"lake": ""}, "lake: must be a path, got ''"),
    ({"run_dir": " "}, "run_dir: must be a path"),
    ({"transports": {"web": {"port": 8000}, "nats": {"port": 8000}}}, "transports: nats and web (8000) share a base port"),
])
def test_config_values_that_cannot_work_are_refused(conf: dict[str, Any], says: str, tmp_path: Path) -> None:
    """`lake: ''` was the current directory (tables written into the repository); two
    transports on one base port collided in every node's start."""
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(conf))
    with pytest.raises(PlanError, match=re.escape(says)):
        load_settings(path)


def test_format_table() -> None:
    assert format_table(["a", "bb"], [(1, None), ("xyz", 2)]).splitlines() == [
        "a    bb", "---  --", "1", "xyz  2"]


# ---------------------------------------------------------------- keys and node configs


def test_master_keys_are_created_once_then_extended(tmp_path: Path) -> None:
    d = keys_dir(str(tmp_path / "lake"), "svc")
    first = ensure_master_keys(d, "svc", ["a", "b"])
    again = ensure_master_keys(d, "svc", ["a", "b", "c"])
    assert first.created and not again.created and again.added == ("c",)
    assert again.tree["services"][0]["pub"] == first.tree["services"][0]["pub"]
    assert (d / ".pass").stat().st_mode & 0o777 == 0o600 and d.stat().st_mode & 0o777 == 0o700
    assert "pass_data" not in (d / "config.yaml").read_text()
    export = again.export("b")
    assert [u["user"] for u in export["users"] if "pri" in u] == ["b"] and "pri" not in export["services"][0]
    with pytest.raises(PlanError, match="keys_dir"):
        keys_dir("s3://bucket/lake", "svc")


def test_a_keys_dir_that_cannot_be_made_is_a_plan_error_naming_it(tmp_path: Path) -> None:
    """`--keys-dir` under a file (or /proc) failed the rollout, after its session, with
    "FileNotFoundError: [Errno 2] No such file or directory: '/proc/x'"."""
    (tmp_path / "file").write_text("")
    with pytest.raises(PlanError, match=r"keys directory .*/file/keys/svc: cannot create .*/file/keys: Not a "
                                        r"directory \(set keys_dir / --keys-dir\)"):
        ensure_master_keys(tmp_path / "file" / "keys" / "svc", "svc", ["a"])


def test_node_config_is_complete_and_loads_with_its_own_key_only(tmp_path: Path) -> None:
    plan = mesh_plan(hosts=1, nodes_per_host=2)
    master = ensure_master_keys(tmp_path / "keys", "svc", plan.names)
    parts = node_specs(plan, master, {"heartbeat": "1 sec"}, {"web": 9000}, ["nats"])
    member = parts[0][1]
    nd = daemons.node_dir(tmp_path / "run", "svc", "node1")
    launch = launch_for(member, nd, "127.0.0.1", {"node0": {"mesh": "127.0.0.1:4000"}})
    assert launch.listen == ["nats", "web"] and launch.connect == ["mesh"]
    assert launch.listeners == ["nats", "mesh", "web"]  # the order of their "listening on" lines
    daemons.write_config(nd, launch.config)
    for name in (".salt", ".pass", "config.yaml"):
        assert (nd.path / name).stat().st_mode & 0o777 == 0o600
    tree = load(nd.config)
    mesh = tree.transport("mesh")
    assert mesh.connect == ["127.0.0.1:4000"] and mesh.listen == ["127.0.0.1"]
    assert tree.transport("web").port == 9001  # base port + the node's index
    assert tree.parameters.text("pid_file") == str(nd.pid_file)
    assert credentials(tree, "node1", "svc").user == "node1"
    with pytest.raises(Exception, match="no private key"):
        credentials(tree, "node0", "svc")


# ---------------------------------------------------------------- daemon files


def test_a_pid_file_of_another_process_is_never_signalled(tmp_path: Path) -> None:
    nd = daemons.node_dir(tmp_path, "svc", "n")
    nd.path.mkdir(parents=True)
    nd.config.write_text("{}")
    nd.pid_file.write_text(f"{os.getpid()}\n")  # this test's own process: not an ms_server
    assert daemons.daemon_pid(nd) is None
    assert daemons.stop(nd) is None and not nd.pid_file.exists()
    assert [d.name for d in daemons.node_dirs(tmp_path, "svc")] == ["n"]
    assert raims_processes(tmp_path) == []


# ---------------------------------------------------------------- the collector


def _console_rows(ctx: ConsoleContext, command: str) -> list[dict[str, Any]]:
    result = execute(ctx, command)
    assert result.error is None, result.error
    return json.loads(json.dumps(result.rows, default=str))  # what the web transport serves


@pytest.fixture(scope="module")
def sim() -> SimNetwork:
    tree = from_dict(new_network_config("svc", ["A", "B", "C"]))
    net = SimNetwork(lambda user: credentials(tree, user, "svc"))
    for name in "ABC":
        net.add_node(name)
    net.add_link("ab", "A", "B", tport_type="mesh")
    net.add_link("bc", "B", "C", (100, 100, 100, 100))
    net.subscribe("A", "RSF.IBM.N")
    net.psubscribe("C", "RSF.>")
    net.run_until(net.converged, timeout_ns=10 * NS)
    net.run_until(lambda: net.interest_known("C", "RSF.X"), timeout_ns=10 * NS)
    return net


PORT_ROW = {"tport": "ab.1", "type": "mesh", "cost": 1000, "fd": 1, "bs": 10, "br": 20, "ms": 1, "mr": 2,
            "lat": "", "idle": "", "fl": "LC", "address": "127.0.0.1:4000"}


def test_real_console_rows_fit_every_snapshot_table(sim: SimNetwork) -> None:
    schemas = load_schemas()
    head = {"snapshot_id": "s", "collected_at": 1_700_000_000 * NS, "node": "B"}
    ctx = ConsoleContext(node=sim.nodes["B"].node, ports=lambda: [dict(PORT_ROW)])
    got = {}
    for table, (command, _) in SOURCES.items():
        raw = ([{**r, "path": p} for p in range(4) for r in _console_rows(ctx, f"{command} {p}")]
               if table in PER_PATH else _console_rows(ctx, command))
        rows = table_rows(table, raw, head)
        conformed = schemas[table].conform(rows)  # raises SchemaViolation on any mismatch
        assert conformed.num_rows == len(rows)
        got[table] = rows
    assert len(got["peers"]) == 3 and all(r["node"] == "B" for r in got["peers"])
    assert len(got["links"]) == 4 and None not in {r["cost2"] for r in got["links"]}  # every path's cost
    assert all(r["adj"] for r in got["routes"]) and all(r["adj"] for r in got["forward"] if r["tport"])
    subs = {(r["user"].split(".")[0], r["subject"], r["pattern"], r["syntax"]) for r in got["subs"]}
    assert {("A", "RSF.IBM.N", False, None), ("C", "RSF.>", True, "rv")} <= subs
    own = [r for r in got["blooms"] if r["dest"] == "ipc"]
    assert own[0]["tport"] is None and all(r["prefix"] == "0" or r["prefix"].startswith("0x") for r in got["blooms"])
    assert got["ports"][0]["lat"] is None and got["ports"][0]["address"] == "127.0.0.1:4000"
    assert {r["event"] for r in got["events"]} >= {"converge"}
    assert {r["path"] for r in got["forward"]} == {0, 1, 2, 3}


def test_durations_become_seconds_and_masks_hex() -> None:
    head = {"snapshot_id": "s", "collected_at": 0, "node": "n"}
    peer = {"user": "b.1", "bridge": "x" * 22, "sub": 2, "seq": 1, "link": 1, "lat": 250_000, "max": None,
            "avg": "", "time": 5, "tport": "mesh.0", "cost": 1000}
    (row,) = table_rows("peers", [peer], head)
    assert row["lat"] == 0.00025 and row["avg"] is None and row["time"] == 5
    bloom = {"fd": None, "dest": "ipc", "tport": None, "bloom": ["n"], "prefix": 0x4000108, "detail": 0,
             "subs": 1, "total": 3, "filter": "AQID", "seed": 7}
    (row,) = table_rows("blooms", [bloom], head)
    assert (row["prefix"], row["detail"], row["filter"], row["seed"], row["size_bits"]) == (
        "0x04000108", "0", b"\x01\x02\x03", 7, None)


def test_a_console_column_gone_missing_is_named() -> None:
    row = dict.fromkeys(SOURCES["peers"][1]) | {"user": "a.1"}
    del row["bridge"]
    with pytest.raises(CollectError, match=r"node n: `show peers` rows lack column\(s\) \['bridge'\] of table peers"):
        table_rows("peers", [row], {"node": "n"})


# ---------------------------------------------------------------- convergence and traffic verdicts


def _view(links: list[tuple[str, str]], healthy: bool = True) -> dict[str, Any]:
    rows = [{"user": f"{u}.1", "adj": f"{a}.2", "tport": "mesh.0", "type": "mesh", "cost": 1000} for u, a in links]
    rows.append({"user": "z.*", "adj": None, "tport": None, "type": None, "cost": None})
    return {"healthy": healthy, "links": adjacency_links(rows)}


FULL = [("a", "b"), ("b", "a"), ("a", "c"), ("c", "a"), ("b", "c"), ("c", "b")]


def test_agreeing_healthy_views_have_converged() -> None:
    assert disagreements({n: _view(FULL) for n in "abc"}, list("abc")) == []


def test_what_disagrees_is_named() -> None:
    views = {"a": _view(FULL), "b": _view(FULL, healthy=False), "c": _view(FULL[:-1])}
    problems = disagreements(views, list("abcd"))
    assert any(p.startswith("b: not converged") for p in problems)
    assert any(p.startswith("c: links without reverse: b -> c (mesh.0)") for p in problems)
    assert any(p.startswith("c disagrees") and "lacks c -> b" in p for p in problems)
    assert any(p == "d: no answer from its host" for p in problems)
    assert any("missing ['d']" in p for p in problems)

class _Clock:
    """time for converge.py: a fake clock that sleeping and admin calls advance."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_the_converge_timeout_is_seconds_however_long_a_round_takes(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock()

    def slow_view(addr: str) -> dict[str, Any]:
        clock.sleep(2.0)  # a round's admin calls: four times the poll interval
        return _view(FULL[:-1], healthy=False)

    class OneTask:
        def allGather(self, message: str) -> list[str]:  # noqa: N802 (BarrierTaskContext's name)
            return [message]

    def run_here(spark: Any, parts: Any, task: Any) -> list[Any]:
        return list(task(TaskHost(0, "127.0.0.1:1", "127.0.0.1", 0, 1), OneTask(), []))

    monkeypatch.setattr(converge_job, "time", clock)
    monkeypatch.setattr(converge_job, "node_view", slow_view)
    monkeypatch.setattr(converge_job, "run_per_host", run_here)
    node = NodeRecord("a", 0, "127.0.0.1", "127.0.0.1:1", 1, "/d", "/d/log", {"web": "127.0.0.1:2"})
    with pytest.raises(ConvergeError, match=r"did not converge in \d+s") as err:
        converge_job.converge(None, [node], hosts=1, timeout_s=10.0)  # type: ignore[arg-type]
    took = int(str(err.value).split(" in ")[1].split("s ")[0])
    assert 10 <= took <= 10 + 2.0 + converge_job.POLL_INTERVAL_S  # the deadline, then one round at most


def _record(node: str, slot: int) -> NodeRecord:
    return NodeRecord(node, slot, "127.0.0.1", f"127.0.0.1:{slot}", 1, "/d", "/d/log", {})


def test_receivers_are_the_nodes_of_other_hosts() -> None:
    plan = mesh_plan(hosts=2, nodes_per_host=2)
    assert senders_of([_record(n.name, n.slot) for n in plan.nodes]) == {
        "node0": ["node2", "node3"], "node1": ["node2", "node3"],
        "node2": ["node0", "node1"], "node3": ["node0", "node1"]}
    assert senders_of([_record("a", 0), _record("b", 0)]) == {"a": ["b"], "b": ["a"]}


def test_tally_finds_lost_repeated_and_stray_messages() -> None:
    senders = {"a": ["b"], "b": ["a"]}
    assert tally({"a": ["b:0", "b:1"], "b": ["a:1", "a:0"]}, senders, 2) == []
    problems = tally({"a": ["b:0", "b:0", "x:9"], "b": ["a:0", "a:1"]}, senders, 2)
    assert problems == ["a: 1 missing (b:1)", "a: 1 repeated (b:0)", "a: 1 unexpected (x:9)"]


# ---------------------------------------------------------------- hosts


def test_executors_and_capacity() -> None:
    assert expected_executors("local-cluster[3, 1, 1024]", None) == 3
    assert expected_executors("local[*]", None) == 1
    assert expected_executors("yarn", "5") == 5 and expected_executors("yarn", None) is None
    check_capacity(2, 2)
    with pytest.raises(ClusterError, match="runs 3 tasks at once .* has 2 task slot"):
        check_capacity(3, 2)


def _session(master: str, executors: int, slots: int, dynamic: str = "false") -> Any:
    """Just what executor_hosts asks of a session and its JVM context."""
    jvm = SimpleNamespace(getExecutorIds=lambda: SimpleNamespace(size=lambda: executors),
                          maxNumConcurrentTasks=lambda profile: slots,
                          resourceProfileManager=lambda: SimpleNamespace(defaultResourceProfile=lambda: None))
    context = SimpleNamespace(master=master, _jsc=SimpleNamespace(sc=lambda: jvm),
                              getConf=lambda: SimpleNamespace(get=lambda key, default=None: default))
    return SimpleNamespace(conf=SimpleNamespace(get=lambda key, default=None: dynamic), sparkContext=context)


def test_a_cluster_the_barrier_stage_cannot_run_on_fails_before_anything_starts() -> None:
    assert executor_hosts(_session("local-cluster[2,1,1024]", 2, 2)) == 2
    with pytest.raises(ClusterError, match="runs 2 tasks at once .* has 1 task slot"):
        executor_hosts(_session("local-cluster[2,1,1024]", 2, 1))
    with pytest.raises(SessionError, match="dynamicAllocation.enabled is true"):
        executor_hosts(_session("yarn", 3, 3, dynamic="true"))
    with pytest.raises(ClusterError, match="1 of 2 executor"):
        executor_hosts(_session("local-cluster[2,1,1024]", 1, 1), timeout=0.3)


def test_tasks_on_one_machine_share_its_nodes_exactly_once() -> None:
    items = list(range(7))
    shares = [TaskHost(p, f"h:{p}", "h", rank, 3).share(items) for p, rank in ((0, 0), (1, 1), (2, 2))]
    assert sorted(x for s in shares for x in s) == items


def test_observer_sampling_is_a_fixed_subset() -> None:
    from spark_app.jobs.collect import observers_of

    names = [f"node{i}" for i in range(40)]
    assert observers_of(names, None) == frozenset(names) == observers_of(names, 40)
    sample = observers_of(names, 5)
    assert len(sample) == 5 and sample <= set(names)
    assert observers_of(list(reversed(names)), 5) == sample  # the same whatever the order


def test_the_traffic_checks_nats_client_gives_up_on_a_dead_node() -> None:
    """nats-py's first connect retried for ever with max_reconnect_attempts=0: a node
    killed after converging held the traffic stage past its timeout (the Spark probe)."""
    import asyncio
    import socket

    from spark_app.jobs.errors import TrafficError
    from spark_app.jobs.traffic import CONNECT_TIMEOUT_S, _NatsClient

    with socket.socket() as s:  # a port nobody listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    async def attempt() -> None:
        await asyncio.wait_for(_NatsClient(f"nats://127.0.0.1:{port}").open(), 4 * CONNECT_TIMEOUT_S)

    with pytest.raises(TrafficError, match=f"cannot connect to NATS at nats://127.0.0.1:{port}"):
        asyncio.run(attempt())
    # the stage's message names the node (a SIGSTOPped daemon: "cannot connect ... TimeoutError" only)
    from spark_app.jobs.traffic import _connect

    dead = NodeRecord("node2", 1, "127.0.0.1", "127.0.0.1:1", 4242, "", "", {"nats": f"127.0.0.1:{port}",
                                                                           "web": f"127.0.0.1:{port}"})
    import gc
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for via in ("nats", "websocket"):
            with pytest.raises(TrafficError, match=r"^node node2 \(pid 4242\): "):
                asyncio.run(_connect(dead, via))
        gc.collect()
    assert not [w for w in caught if "Unclosed client session" in str(w.message)]  # the failed open closed it
