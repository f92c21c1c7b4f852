"""Deploy-stage guarantees on the shared local[2] session (two barrier tasks on one host):
a task receives its own nodes' keys only; a node that cannot start fails the rollout
naming its host and log file; a second rollout reuses the keys and replaces the daemons.
Real ms_server processes, stopped at the end of every test."""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import socket
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from pyspark import cloudpickle
from pyspark.sql import SparkSession

from spark_app.controller import Rollout, RolloutFailed
from spark_app.jobs import deploy, keys, topology
from spark_app.jobs.hosts import run_per_host
from spark_app.lake import Lake
from spark_app.settings import Settings

SERVER = b"raims_node.server"


def raims_processes(under: Path) -> list[int]:
    """Pids of ms_server processes whose command line names a path under `under`."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes()
            state = (proc / "stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if SERVER in cmd and str(under).encode() in cmd and state != "Z":
            found.append(int(proc.name))
    return sorted(found)


@pytest.fixture
def settings(tmp_path: Path) -> Iterator[Settings]:
    s = Settings(service="rtest", lake=str(tmp_path / "lake"), run_dir=str(tmp_path / "run"), nodes_per_host=2,
                 bridges=("nats",), traffic_messages=5, converge_timeout_s=40, queries=False)
    yield s
    for pid in raims_processes(tmp_path):  # a failed assertion must not leave daemons behind
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _secrets(export: dict[str, Any]) -> list[str]:
    return [u["pri"] for u in export["users"] if "pri" in u] + [s["pri"] for s in export["services"] if "pri" in s]


def test_a_task_receives_only_the_keys_of_the_nodes_it_starts(spark: SparkSession, tmp_path: Path) -> None:
    plan = topology.mesh_plan(hosts=2, nodes_per_host=2)
    master = keys.ensure_master_keys(tmp_path / "keys", "rtest", plan.names)
    parts = deploy.node_specs(plan, master, {}, {}, ["nats"])
    own = {spec.node.name: _secrets(spec.export) for part in parts for spec in part}
    assert all(len(v) == 1 for v in own.values())
    master_secrets = _secrets(master.tree)  # the service's key and every user's

    def probe(host: Any, ctx: Any, specs: list[deploy.NodeSpec]) -> Iterator[tuple[int, bytes]]:
        yield host.partition, pickle.dumps(specs)  # everything the task was given

    received = dict(run_per_host(spark, parts, probe))
    for slot in range(plan.hosts):
        data = received[slot].decode("latin-1")
        mine = {n.name for n in plan.on_slot(slot)}
        holds = {node for node, secret in own.items() if secret[0] in data}
        assert holds == mine
        assert not any(s in data for s in master_secrets)  # the master's sealed keys never travel
    task = cloudpickle.dumps(deploy.deploy_task(deploy.DeploySettings(str(tmp_path), "rtest", 2, 5, True)))
    assert not any(s.encode() in task for secrets in own.values() for s in secrets)


def test_a_node_that_cannot_start_fails_the_rollout_naming_host_and_log(
        spark: SparkSession, settings: Settings, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        rollout = Rollout(replace(settings, ports={"mesh": port}), spark, say=lambda _: None)
        with pytest.raises(RolloutFailed) as failed:
            rollout.run()
    message = str(failed.value)
    log = tmp_path / "run" / "rtest" / "node0" / "ms_server.log"
    assert "node node0 on host 127.0.0.1" in message and f"log file {log}" in message
    assert f"127.0.0.1:{port} failed" in message  # the daemon's own words, from its log
    lake = Lake(settings.lake, spark)
    (row,) = lake.read("rollouts").collect()
    assert row.status == "failed" and "node0" in row.message and row.stage_seconds["start"] > 0
    assert raims_processes(tmp_path) == []  # nothing was left running


def test_a_second_rollout_reuses_the_keys_and_replaces_the_daemons(
        spark: SparkSession, settings: Settings, tmp_path: Path) -> None:
    quiet = replace(settings, keep_running=True)
    first = Rollout(quiet, spark, say=lambda _: None)
    plan, master, parts = first.plan()
    first.start(plan, parts)
    first.converge()
    old = {n.node: n.pid for n in first.outcome.nodes}
    assert sorted(old.values()) == raims_processes(tmp_path)

    second = Rollout(quiet, spark, say=lambda _: None)
    plan2, master2, parts2 = second.plan()
    assert not master2.created and master2.added == ()
    assert master2.tree["services"][0]["pub"] == master.tree["services"][0]["pub"]
    second.start(plan2, parts2)
    assert dict(second.outcome.replaced) == old  # every old daemon stopped first
    new = {n.node: n.pid for n in second.outcome.nodes}
    assert set(new) == set(old) and not set(new.values()) & set(old.values())
    assert sorted(new.values()) == raims_processes(tmp_path)  # no duplicates, no orphans
    second.converge()

    lost = Path(second.outcome.nodes[0].directory) / "ms_server.pid"
    lost.unlink()  # a daemon whose pid file is gone is still found, by its command line
    stopped = Rollout(quiet, spark, say=lambda _: None).stop_all().stopped
    assert {(s.node, s.pid) for s in stopped} == set(new.items())
    assert raims_processes(tmp_path) == []


def test_an_interrupt_is_a_failed_run_torn_down_even_when_the_lake_cannot_take_its_row(
        spark: SparkSession, settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Spark probe: a Ctrl-C (or SIGTERM) mid-run was recorded `ok`, and a rollouts
    row the lake refused raised past the teardown, leaving every daemon running."""

    def interrupted(self: Rollout) -> None:
        raise KeyboardInterrupt("SIGTERM")

    monkeypatch.setattr(Rollout, "traffic", interrupted)
    said: list[str] = []
    with pytest.raises(RolloutFailed, match=r"interrupted \(SIGTERM\) after stage converge"):
        Rollout(settings, spark, say=said.append).run()
    (row,) = Lake(settings.lake, spark).read("rollouts").collect()
    assert row.status == "failed" and "interrupted" in row.message
    assert raims_processes(tmp_path) == []

    def refused(self: Lake, table: str, rows: object) -> int:
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(Lake, "write", refused)
    with pytest.raises(RolloutFailed, match="interrupted"):
        Rollout(settings, spark, say=said.append).run()
    assert any("rollouts row could not be written" in line and "Read-only" in line for line in said)
    assert raims_processes(tmp_path) == []  # torn down all the same


def test_daemons_are_stopped_from_the_driver_when_spark_is_gone(
        spark: SparkSession, settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A SIGTERM to the rollout's process group (timeout(1), systemd, a scheduler) kills
    the JVM with the driver: the teardown's Spark job died in py4j's ConnectionRefusedError,
    raised past the run as a traceback, and left every daemon running (4 orphans)."""
    from py4j.protocol import Py4JNetworkError

    import spark_app.controller as controller

    def interrupted(self: Rollout) -> None:
        raise KeyboardInterrupt("SIGTERM")

    def jvm_gone(*_: object) -> None:
        raise Py4JNetworkError("Answer from Java side is empty")

    monkeypatch.setattr(Rollout, "traffic", interrupted)
    monkeypatch.setattr(controller, "teardown", jvm_gone)
    said: list[str] = []
    with pytest.raises(RolloutFailed, match=r"interrupted \(SIGTERM\)") as failed:
        Rollout(settings, spark, say=said.append).run()
    assert "teardown" not in str(failed.value)
    assert any("from the driver (Spark is gone)" in line and "node0 (pid" in line for line in said), said
    assert raims_processes(tmp_path) == []

    cluster = Rollout(settings, spark, say=said.append)
    cluster.outcome.master = "spark://elsewhere:7077"  # a cluster's daemons are out of the driver's reach
    with pytest.raises(controller.DaemonError, match=r"teardown through Spark failed .*--teardown --run-dir"):
        cluster.teardown()


def test_a_run_whose_rollouts_row_cannot_be_written_fails(
        spark: SparkSession, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """A lake on a full disk took the snapshot but not the run's rollouts row: the run
    printed status ok and exited 0, leaving no record of itself where the notebooks look."""
    for stage in ("plan", "start", "converge", "traffic", "collect", "write", "validate", "audit", "pipeline"):
        monkeypatch.setattr(Rollout, stage, lambda self, *_: (None, None, None))

    def full(self: Lake, table: str, rows: object) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Lake, "write", full)
    with pytest.raises(RolloutFailed, match="rollouts row could not be written .*No space left") as failed:
        Rollout(settings, spark, say=lambda _: None).run()
    assert failed.value.outcome.status == "failed"


def test_a_lake_that_cannot_be_written_fails_the_run_before_anything_starts(
        spark: SparkSession, settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read-only or misplaced lake failed only at the first write, after the daemons had
    started and converged (~20 s). (A file in the way: root ignores read-only modes.)"""
    (tmp_path / "in_the_way").write_text("")
    misplaced = replace(settings, lake=str(tmp_path / "in_the_way" / "lake"))

    def planned(self: Rollout) -> None:
        raise AssertionError("the rollout went on to plan")

    monkeypatch.setattr(Rollout, "plan", planned)
    with pytest.raises(RolloutFailed, match=r"lake .*in_the_way/lake cannot be written: Not a directory"):
        Rollout(misplaced, spark, say=lambda _: None).run()


def test_a_failed_traffic_check_leaves_no_files_of_its_snapshot_in_the_lake(
        spark: SparkSession, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """The traffic check's tasks write the snapshot's files before the check is judged;
    when one host failed (ENOSPC on a 120k lake, a node killed mid-collection) the others'
    files stayed in the table folders, uncommitted: 15 files that kept a full disk full.
    A table that committed a snapshot keeps its files."""
    from datetime import UTC, datetime, timedelta

    from spark_app.jobs.collect import SOURCES
    from spark_app.jobs.errors import TrafficError
    from spark_app.parts import write_parts
    from tests.spark.synthetic import snapshot_rows

    lake = Lake(settings.lake, spark)
    kept = snapshot_rows("earlier", datetime.now(UTC))["peers"]
    lake.write("peers", kept)
    for stage in ("plan", "start", "converge"):
        monkeypatch.setattr(Rollout, stage, lambda self, *_: (None, None, None))

    def traffic(self: Rollout) -> None:
        with self.stage("traffic"):
            sid = self.outcome.snapshot_id
            for slot, clock in enumerate((datetime.now(UTC), datetime.now(UTC) + timedelta(days=1))):
                for table, rows in snapshot_rows(sid, clock).items():  # a host whose clock is a day ahead
                    if table in SOURCES:  # what the executors write
                        write_parts(self.lake.target(sid), table, rows, f"{slot}-0")
            raise TrafficError("traffic check failed: host 127.0.0.2: OSError: [Errno 28] No space left")

    monkeypatch.setattr(Rollout, "traffic", traffic)
    said: list[str] = []
    with pytest.raises(RolloutFailed, match="No space left") as failed:
        Rollout(settings, spark, say=said.append).run()
    sid = failed.value.outcome.snapshot_id
    assert [str(p) for p in Path(settings.lake).rglob(f"part-{sid}-*")] == [] and any(line.startswith("removed ") and "uncommitted file(s)" in line for line in said)
    assert DeltaTable(lake.table_path("peers")).to_pyarrow_table().num_rows == len(kept)


def test_a_second_rollout_of_the_service_and_run_dir_at_once_is_refused_before_anything(
        spark: SparkSession, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two `make run`s at once: each replaced the other's daemons and each teardown
    stopped the other's; both failed ("another server is listening", "exited before it
    was serving", one teardown listing 7 daemons of 4 nodes)."""
    from spark_app.controller import run_lock
    from spark_app.jobs.errors import DeployError

    def planned(self: Rollout) -> None:
        raise AssertionError("planned")

    monkeypatch.setattr(Rollout, "plan", planned)
    monkeypatch.setattr(Rollout, "_record", lambda self: pytest.fail("the refused run wrote a row"))
    refused = pytest.raises(DeployError, match=rf"another rollout of service rtest .* is running \(pid {os.getpid()}")
    with run_lock(settings.run_dir, settings.service), refused:  # while the first rollout runs
        Rollout(settings, spark, say=lambda _: None).run()
    monkeypatch.setattr(Rollout, "_record", lambda self: None)
    with pytest.raises(RolloutFailed, match="planned"):  # once it ended, the next one runs
        Rollout(settings, spark, say=lambda _: None).run()
