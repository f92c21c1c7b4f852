"""Driver-side orchestration of a rollout: its settings, the stages in order with their
timings, the lake writes, the summary, and the teardown.

Issue "The main job", items 1-9; DESIGN.md "Daemons on executors", "Delta without Maven".
Stages: keys (plan, master keys, one export per node), start (deploy), converge,
traffic (which reads the snapshot and has the executors write it), collect (the files'
metadata), write (one commit per table of the snapshot), validate (the quality suites and the
`validations` table); then one `rollouts` row for the run, whether it succeeded or not.

Decisions where the issue is silent:
- Settings come from a YAML file (conf/rollout.yaml); command-line options override it
  (spark_app/settings.py checks them).
- Nodes per host: given, else on a local master LOCAL_NODES in all (2 per executor on
  local-cluster[2,...], 4 on local[N]), else 1 per host but at least MIN_NODES in all.
- Bridges: those of the settings that this ms_server runs (raims_node.daemon); the traffic
  check goes through NATS when the nodes have a NATS bridge and nats-py is installed,
  else through the admin websocket.
- On failure, once the start stage ran, every daemon of the service is stopped (by the
  run directories, so also one that started but never listened) unless --keep-running; on success
  they keep running on a cluster (the network is the product) and are stopped on a local
  master (a demonstration) unless --keep-running.
- The rollouts row is validated with the snapshot (its suite checks status and nodes)
  as it stands before validation, then written with the validation count.
- Before anything is planned (and before --teardown), one barrier task per host slot
  imports PROBE_MODULE (issue 11): an executor without raims fails there with a
  DeployError naming its host, its interpreter and the ways to get raims there, rather
  than in the deploy stage with pages of Java trace. The probe's task is a closure that
  refers to nothing of raims, so cloudpickle ships it by value and it runs where raims
  is missing.
"""

from __future__ import annotations

import importlib.util
import math
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from pyspark.sql import SparkSession

from raims_node import __version__ as raims_version
from spark_app.errors import SparkAppError, first_lines
from spark_app.jobs import deploy, keys, topology
from spark_app.jobs.collect import SOURCES, Snapshot, collect, observers_of, staged_snapshot
from spark_app.jobs.converge import converge
from spark_app.jobs.errors import DaemonError, DeployError, ValidationFailed
from spark_app.jobs.hosts import TaskHost, executor_hosts
from spark_app.jobs.teardown import Stopped, stop_on_host, teardown
from spark_app.jobs.traffic import VIA_NATS, VIA_WEBSOCKET, TrafficResult, TrafficSettings, traffic
from spark_app.lake import Lake
from spark_app.runlock import run_lock
from spark_app.session import is_local_master
from spark_app.settings import Settings

LOCAL_NODES: Final = 4
MIN_NODES: Final = 2
PROBE_MODULE: Final = "raims_node.server"
NOT_IMPORTABLE_HELP: Final = (
    "run `make dist` and pass --archive dist/raims-env.tar.gz (or spark-submit --archives "
    "dist/raims-env.tar.gz#environment --conf spark.pyspark.python=./environment/bin/python), "
    "or install the wheel with deploy/databricks-init.sh"
)


def runnable_bridges(wanted: Sequence[str]) -> tuple[str, ...]:
    """The bridges of `wanted` that this ms_server can run."""
    try:
        from raims_node.daemon import BRIDGE_TYPES
    except ImportError:
        return ()
    return tuple(b for b in wanted if b in BRIDGE_TYPES)


def traffic_via(bridges: Sequence[str]) -> str:
    nats_client = importlib.util.find_spec("nats") is not None
    return VIA_NATS if VIA_NATS in bridges and nats_client else VIA_WEBSOCKET


def import_probe(module: str) -> Callable[[Iterable[int]], Iterator[dict[str, str]]]:
    """The probe's task: a closure, so cloudpickle ships it by value, and it imports
    nothing of raims until it runs (the host may not have raims)."""

    def probe(_: Iterable[int]) -> Iterator[dict[str, str]]:
        import importlib
        import sys

        from pyspark import BarrierTaskContext

        ctx = BarrierTaskContext.get()
        address = ctx.getTaskInfos()[ctx.partitionId()].address
        try:
            importlib.import_module(module)
            error = ""
        except Exception as exc:  # anything the import raises is the host's report
            error = f"{type(exc).__name__}: {exc}"
        yield {"host": address.rpartition(":")[0] or address, "python": sys.executable, "error": error}

    return probe


def probe_imports(spark: SparkSession, hosts: int, module: str = PROBE_MODULE) -> list[dict[str, str]]:
    """Import `module` in one barrier task per host slot; every task's report (host,
    python, error: "" when the import worked), or DeployError naming each host where it
    failed."""
    rdd = spark.sparkContext.parallelize(range(hosts), hosts)
    reports = rdd.barrier().mapPartitions(import_probe(module)).collect()
    failed = {r["host"]: f"{r['error']} in {r['python']}" for r in reports if r["error"]}
    if failed:
        where = "; ".join(f"{host} ({why})" for host, why in sorted(failed.items()))
        raise DeployError(f"raims is not importable on executor host(s) {where}: {NOT_IMPORTABLE_HELP}")
    return reports


def default_nodes_per_host(master: str, hosts: int) -> int:
    total = LOCAL_NODES if is_local_master(master) else MIN_NODES
    return max(1, math.ceil(total / hosts)) if is_local_master(master) or hosts < total else 1


def progress_line(stage: str, seconds: float, text: str) -> str:
    return f"[{stage:^10}] {seconds:6.1f}s  {text}"


def format_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain text table: a header, a rule, and left-aligned cells."""
    cells = [[str(c) for c in columns]] + [["" if v is None else str(v) for v in r] for r in rows]
    width = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, width, strict=True)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in width))
    return "\n".join(lines)


@dataclass
class Outcome:
    """What a rollout did: filled in stage by stage."""

    snapshot_id: str
    started_at: datetime
    master: str = ""
    hosts: int = 0
    plan: topology.Plan | None = None
    nodes: list[deploy.NodeRecord] = field(default_factory=list)
    replaced: list[tuple[str, int]] = field(default_factory=list)
    converged: bool | None = None
    traffic: TrafficResult | None = None
    written: dict[str, int] = field(default_factory=dict)
    validations: int = 0
    validations_failed: int | None = None
    audit_findings: dict[str, int] = field(default_factory=dict)
    pipeline: str | None = None  # the pipeline stage's result
    stages: dict[str, float] = field(default_factory=dict)
    stopped: list[Stopped] = field(default_factory=list)
    lake_backend: str = ""
    error: str | None = None

    @property
    def status(self) -> str:
        return "failed" if self.error else "ok"


class Rollout:
    """One run of the rollout on a session; `run()` does every stage."""

    def __init__(self, settings: Settings, spark: SparkSession, say: Callable[[str], None] = print) -> None:
        self.settings = settings
        self.spark = spark
        self.say = say
        now = datetime.now(UTC)
        self.outcome = Outcome(f"{now:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}", now, str(spark.sparkContext.master))
        self._lake: Lake | None = None
        ship_source(spark)

    @contextmanager
    def stage(self, name: str) -> Iterator[list[str]]:
        """Time a stage and print one progress line; the stage appends its message."""
        note: list[str] = []
        t0 = time.perf_counter()
        try:
            yield note
        finally:
            seconds = time.perf_counter() - t0
            self.outcome.stages[name] = round(seconds, 3)
            self.say(progress_line(name, seconds, " ".join(note) or "failed"))

    @property
    def lake(self) -> Lake:
        if self._lake is None:
            self._lake = Lake(self.settings.lake, self.spark)
            self.outcome.lake_backend = str(self._lake.backend)
        return self._lake

    # ------------------------------------------------------------------ stages

    def plan(self) -> tuple[topology.Plan, keys.MasterKeys, list[list[deploy.NodeSpec]]]:
        s, o = self.settings, self.outcome
        with self.stage("keys") as note:
            o.hosts = executor_hosts(self.spark)
            probe_imports(self.spark, o.hosts)
            if s.topology == topology.MESH_TOPOLOGY:
                plan = topology.mesh_plan(o.hosts, s.nodes_per_host or default_nodes_per_host(o.master, o.hosts),
                                          s.mesh_cost)
            else:
                plan = topology.graph_plan(s.topology, o.hosts, s.nodes_per_host)
            o.plan = plan
            master = keys.ensure_master_keys(keys.keys_dir(s.lake, s.service, s.keys_dir), s.service, plan.names)
            parts = deploy.node_specs(plan, master, s.parameters, s.ports, runnable_bridges(s.bridges))
            how = "created" if master.created else "loaded"
            added = f", added {len(master.added)}" if master.added and not master.created else ""
            note.append(f"{how} {master.directory} ({len(master.users)} users{added}); "
                        f"{len(plan.nodes)} node configs for {o.hosts} host(s), {plan.waves} start wave(s)")
        return plan, master, parts

    def start(self, plan: topology.Plan, parts: Sequence[Sequence[deploy.NodeSpec]]) -> None:
        s, o = self.settings, self.outcome
        with self.stage("start") as note:
            settings = deploy.DeploySettings(s.run_dir, s.service, plan.waves, s.start_timeout_s,
                                             is_local_master(o.master))
            try:
                result = deploy.deploy(self.spark, parts, settings)
            except DeployError as exc:
                o.nodes = list(exc.started)
                raise
            o.nodes, o.replaced = result.nodes, result.stopped
            note.append(f"{len(o.nodes)} daemons on {o.hosts} host(s) in {plan.waves} wave(s), "
                        f"{len(o.replaced)} earlier daemon(s) stopped first")

    def converge(self) -> None:
        o = self.outcome
        with self.stage("converge") as note:
            o.converged = False
            result = converge(self.spark, o.nodes, o.hosts, self.settings.converge_timeout_s)
            o.converged = True
            note.append(f"{len(o.nodes)} nodes agree on {result.links} links ({result.rounds} round(s))")

    def traffic(self) -> None:
        s, o = self.settings, self.outcome
        with self.stage("traffic") as note:
            via = traffic_via(runnable_bridges(s.bridges))
            o.traffic = traffic(self.spark, o.nodes, o.hosts, TrafficSettings(
                o.snapshot_id.replace("-", "_"), via, s.traffic_messages, s.traffic_timeout_s,
                target=self.lake.target(o.snapshot_id), observers=observers_of([n.node for n in o.nodes], s.observers)))
            t = o.traffic
            note.append(f"sent {t.sent}, received {t.received} of {t.expected} via {t.via}, each exactly once")

    def collect(self) -> Snapshot:
        o = self.outcome
        with self.stage("collect") as note:
            if o.traffic is not None and o.traffic.staged:  # read during the check, its subscriptions live
                snap = staged_snapshot(o.traffic.staged, o.nodes, o.snapshot_id)
                when = "during the traffic check"
            else:
                snap = collect(self.spark, o.nodes, o.hosts, self.lake.target(o.snapshot_id), self.settings.observers)
                when = "after the traffic check"
            total = sum(snap.rows(t) for t in snap.parts)
            files = sum(len(p) for p in snap.parts.values())
            note.append(f"snapshot {o.snapshot_id}: {total} rows of {len(snap.parts)} tables "
                        f"from {len(snap.nodes)} nodes, read {when}, written by the executors in {files} files")
        return snap

    def write(self, snap: Snapshot) -> None:
        o = self.outcome
        with self.stage("write") as note:
            try:
                for table, parts in snap.parts.items():  # the executors' files, one commit per table
                    o.written[table] = self.lake.commit_parts(table, parts, snap.snapshot_id)
            except Exception:
                note.append(f"failed; {self._discard(snap)}")
                raise
            note.append(f"{len(o.written)} tables, {sum(o.written.values())} rows committed into {self.settings.lake} "
                        f"({self.lake.backend})")

    def _discard(self, snap: Snapshot) -> str:
        """Delete the snapshot's files that no table committed (a failed write stage);
        what was deleted. Never raises: the commit's error is the one to report."""
        deleted, errors = 0, []
        for table, parts in snap.parts.items():
            if table in self.outcome.written:
                continue
            try:
                deleted += self.lake.discard_parts(table, parts, snap.snapshot_id)
            except Exception as exc:  # OSError, delta-rs: reported beside the commit's error
                errors.append(f"{table}: {exc if isinstance(exc, SparkAppError) else first_lines(exc, 1)}")
        return f"removed {deleted} uncommitted file(s) of the snapshot" + (
            f" (could not remove those of {'; '.join(errors)})" if errors else "")

    def _discard_unwritten(self) -> None:
        """After a failed traffic, collect or write stage: delete the snapshot's files the
        executors wrote that no table committed (see Lake.discard_snapshot). Never raises."""
        o = self.outcome
        # the executors' clocks date their rows: a day either side of the run's
        first, last = o.started_at.date() - timedelta(days=1), datetime.now(UTC).date() + timedelta(days=1)
        dates = [f"{first + timedelta(days=d):%Y-%m-%d}" for d in range((last - first).days + 1)]
        deleted, errors = 0, []
        for table in SOURCES:
            try:
                deleted += self.lake.discard_snapshot(table, o.snapshot_id, dates)
            except Exception as exc:  # OSError, delta-rs: reported, the stage's error stands
                errors.append(f"{table}: {exc if isinstance(exc, SparkAppError) else first_lines(exc, 1)}")
        if deleted or errors:
            self.say(f"removed {deleted} uncommitted file(s) of snapshot {o.snapshot_id}"
                     + (f" (could not for {'; '.join(errors)})" if errors else ""))

    def validate(self) -> None:
        from spark_app.quality import missing_library, validate_snapshot

        o = self.outcome
        with self.stage("validate") as note:
            reason = missing_library()
            if reason is not None:  # an optional stage degrades, saying why
                note.append(f"skipped: {reason}")
                return
            frames: dict[str, Any] = dict(self.lake.snapshot(o.snapshot_id, list(o.written)))
            frames["rollouts"] = self.lake.schema("rollouts").conform([self.rollout_row()])
            report = validate_snapshot(frames, snapshot_id=o.snapshot_id, collected_at=o.started_at)
            o.written["validations"] = self.lake.write("validations", report.rows)
            o.validations, o.validations_failed = len(report.rows), len(report.failed)
            note.append(f"{o.validations} expectations on {len(frames)} tables: "
                        f"{o.validations - o.validations_failed} passed, {o.validations_failed} failed"
                        + (f" ({', '.join(report.failed)})" if report.failed else ""))
            if report.failed:
                raise ValidationFailed(report.summary())

    def audit(self) -> None:
        """The routing, bloom and link-state audits of this snapshot (issue 10)."""
        from spark_app.jobs.audit import run_audits

        o = self.outcome
        with self.stage("audit") as note:
            result = run_audits(self.spark, self.lake, o.snapshot_id)
            o.audit_findings = result.findings()
            note.append(result.summary() or "audited")

    def pipeline(self) -> None:
        """Two Spark stages passing 100,000 rows through the network's sbus buses
        (spark_app/jobs/pipeline.py), when the nodes run an ipc transport: stage two
        reads on a node of the driver's host, stage one publishes on another node (on a
        local master, where every node shares the host) or on its executor's node."""
        from raims_node.client import endpoints
        from spark_app.jobs.pipeline import run_pipeline

        s, o = self.settings, self.outcome
        if "ipc" not in runnable_bridges(s.bridges):
            return
        with self.stage("pipeline") as note:
            mine = sorted(e.node for e in endpoints.nodes() if e.service == s.service and e.sbus)
            if not mine:
                note.append("skipped: no node with an sbus on the driver's host")
                return
            sub = f"{mine[-1]}.{s.service}"
            others = [f"{n.node}.{s.service}" for n in o.nodes if f"{n.node}.{s.service}" != sub]
            pub = others[0] if is_local_master(o.master) and others else None
            o.pipeline = run_pipeline(self.spark, sub, pub).summary()
            note.append(f"{pub or 'executor node'} -> {sub}: {o.pipeline}, exactly once")

    def teardown(self) -> None:
        """Stop the service's daemons on every host through Spark. When Spark itself is
        gone (a SIGTERM to the process group kills the JVM with the driver, an executor
        lost past its retries), a local master's daemons, all on this machine, are stopped
        from the driver; on a cluster the error says how to stop them later."""
        o, s = self.outcome, self.settings
        with self.stage("teardown") as note:
            where = ""
            try:
                o.stopped, errors = teardown(self.spark, max(o.hosts, 1), s.run_dir, s.service)
            except SparkAppError:
                raise
            except Exception as exc:  # py4j: the JVM is gone or the job cannot run
                if not is_local_master(o.master):
                    raise DaemonError(f"teardown through Spark failed ({' '.join(first_lines(exc, 1).split())}); "
                                      f"stop the daemons with `raims_rollout.py --teardown --run-dir {s.run_dir}` "
                                      f"(service {s.service})") from exc
                driver = TaskHost(0, "driver", socket.gethostname(), 0, 1)
                o.stopped, errors = stop_on_host(s.run_dir, s.service, driver, lambda: None)
                where = " from the driver (Spark is gone)"
            running = [x for x in o.stopped if x.pid is not None]
            note.append(f"stopped {len(running)} daemon(s){where}: "
                        + (", ".join(f"{x.node} (pid {x.pid})" for x in running) or "none running"))
            if errors:
                raise DaemonError("; ".join(errors))

    # ------------------------------------------------------------------ the run

    def run(self, *, locked: bool = False) -> Outcome:
        """Every stage; on failure the outcome says why and the error is raised after the
        rollouts row is written and the daemons are stopped (unless kept). A rollout of
        the same service and run directory already running from this machine is a
        DeployError before anything (see `run_lock`); `locked`: the caller holds that
        lock already (raims_rollout.py takes it before the Spark session starts)."""
        if locked:
            return self._run()
        with run_lock(self.settings.run_dir, self.settings.service):
            return self._run()

    def _run(self) -> Outcome:
        s, o = self.settings, self.outcome
        local = is_local_master(o.master)
        try:
            self.lake.check_writable()
            plan, _, parts = self.plan()
            self.start(plan, parts)
            self.converge()
            self.traffic()
            self.write(self.collect())
            self.validate()
            self.audit()
            self.pipeline()
        except Exception as exc:  # recorded in the rollouts row, then raised as RolloutFailed
            o.error = str(exc) if isinstance(exc, SparkAppError) else first_lines(exc)
            cause: BaseException | None = exc
        except KeyboardInterrupt as exc:  # SIGINT, or SIGTERM (raims_rollout.py): a failed run, torn down
            done = list(o.stages)
            o.error = f"interrupted ({exc or 'SIGINT'})" + (f" after stage {done[-1]}" if done else "")
            cause = exc
        else:
            cause = None
        finally:
            if o.error and "traffic" in o.stages:
                self._discard_unwritten()
            unrecorded = self._record()
            if "start" in o.stages and not s.keep_running and (local or o.error):
                try:
                    self.teardown()
                except Exception as exc:  # SparkAppError, or a KeyboardInterrupt's py4j wreckage
                    why = exc if isinstance(exc, SparkAppError) else first_lines(exc, 1)
                    o.error = f"{o.error}; teardown: {why}" if o.error else f"teardown: {why}"
        if unrecorded and not o.error:  # a run that left no record is not a success
            o.error = unrecorded
        if o.error:
            raise RolloutFailed(o.error, o) from cause
        return o

    def stop_all(self) -> Outcome:
        """`--teardown`: stop every daemon of the service on every host."""
        self.outcome.hosts = executor_hosts(self.spark)
        probe_imports(self.spark, self.outcome.hosts)
        self.teardown()
        return self.outcome

    def rollout_row(self) -> dict[str, Any]:
        o, s = self.outcome, self.settings
        plan = o.plan
        return {
            "snapshot_id": o.snapshot_id, "collected_at": o.started_at, "node": socket.gethostname(),
            "service": s.service, "master": o.master, "topology": s.topology, "hosts": o.hosts,
            "nodes": len(plan.nodes) if plan else 0, "nodes_per_host": plan.nodes_per_host() if plan else 0,
            "lake_backend": o.lake_backend or "none", "raims_version": raims_version,
            "spark_version": self.spark.version, "converged": o.converged,
            "traffic_sent": o.traffic.sent if o.traffic else None,
            "traffic_received": o.traffic.received if o.traffic else None,
            "validations_failed": o.validations_failed, "status": o.status, "message": o.error,
            "stage_seconds": dict(o.stages), "started_at": o.started_at, "finished_at": datetime.now(UTC),
        }

    def _record(self) -> str | None:
        """Write the run's `rollouts` row; a lake that cannot be written (full, read-only)
        is reported and returned, and does not hide the rollout's own error. A run whose
        stages all passed fails on it (it exited 0 with no record of itself in the lake,
        where the notebooks look), after the teardown decision that its stages made."""
        try:
            self.outcome.written["rollouts"] = self.lake.write("rollouts", [self.rollout_row()])
        except Exception as exc:  # delta-rs's and the OS's errors too: the teardown must still run
            why = (f"the rollouts row could not be written to {self.settings.lake}: "
                   f"{exc if isinstance(exc, SparkAppError) else first_lines(exc)}")
            self.say(why)
            return why
        return None

    # ------------------------------------------------------------------ reporting

    def summary(self) -> str:
        o = self.outcome
        parts = [format_table(["stage", "seconds"], [*((k, f"{v:.1f}") for k, v in o.stages.items()),
                                                      ("total", f"{sum(o.stages.values()):.1f}")])]
        if o.nodes:
            kinds = list(dict.fromkeys(t for n in o.nodes for t in n.listeners))
            parts.append(format_table(["node", "executor", "pid", *kinds],
                                      [(n.node, n.executor, n.pid, *(n.listeners.get(k) for k in kinds))
                                       for n in o.nodes]))
        if o.written:
            parts.append(format_table(["table", "rows written"], sorted(o.written.items())))
        t = o.traffic
        parts.append(format_table(["snapshot", "status", "converged", "traffic", "validations failed"], [(
            o.snapshot_id, o.status, o.converged, f"{t.received}/{t.expected} via {t.via}" if t else None,
            f"{o.validations_failed} of {o.validations}" if o.validations_failed is not None else None)]))
        return "\n\n".join(parts)

    def queries(self) -> list[tuple[str, str]]:
        """A few SQL queries over the lake's views, with their results as text."""
        views = set(self.lake.register_views())
        sid = self.outcome.snapshot_id
        sqls = [
            ("peers", f"SELECT node, count(*) AS peers_seen FROM peers WHERE snapshot_id = '{sid}' "
                      "GROUP BY node ORDER BY node"),
            ("links", f"SELECT node, count(*) AS links, min(cost) AS min_cost, max(cost) AS max_cost FROM links "
                      f"WHERE snapshot_id = '{sid}' GROUP BY node ORDER BY node"),
            ("validations", f"SELECT suite, count(*) AS expectations, sum(CASE WHEN success THEN 0 ELSE 1 END) "
                            f"AS failed FROM validations WHERE snapshot_id = '{sid}' GROUP BY suite ORDER BY suite"),
            ("rollouts", "SELECT snapshot_id, status, nodes, traffic_received, validations_failed FROM rollouts "
                         "ORDER BY started_at DESC LIMIT 3"),
        ]
        out = []
        for table, sql in sqls:
            if table not in views:  # validations: a cluster without great_expectations skipped them
                continue
            df = self.spark.sql(sql)
            out.append((sql, format_table(df.columns, [tuple(r) for r in df.collect()])))
        return out


def ship_source(spark: SparkSession) -> None:
    """Make spark_app importable in the Python workers when it runs from a source tree
    (a cluster installs the raims package on its executors instead; the extra path is
    then harmless): the workers' PYTHONPATH comes from the context's environment."""
    root = str(Path(__file__).resolve().parent.parent)
    env = spark.sparkContext.environment
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in paths:
        env["PYTHONPATH"] = os.pathsep.join([root, *paths])


class RolloutFailed(SparkAppError):
    """A rollout stage failed; `outcome` holds what was done."""

    def __init__(self, message: str, outcome: Outcome) -> None:
        super().__init__(message)
        self.outcome = outcome
