"""The deploy stage: one barrier task per executor host starts that host's ms_server daemons.

Issue "The main job", items 2 and 3; DESIGN.md "Daemons on executors". The driver turns
the plan and the master keys into one `NodeSpec` per node; the specs of host slot h are
the data of partition h only, so a task receives the configurations (and private keys)
of the nodes it starts and nothing else: no broadcast, no closure holds a key.

A task, on its host:
1. stops every daemon of the service on its host (teardown.stop_on_host: by the pid
   files of the run directory, and by command line for one whose pid file is gone), a
   node of an earlier run or this node left running, so that a second rollout replaces
   its daemons: no duplicates, no orphans; all tasks wait for each other (allGather);
2. then, wave by wave (topology.py), writes each node's configuration (its transports
   completed with this host's listen address and the connect addresses of the listeners
   of earlier waves), starts the wave's daemons detached, reads their real listen ports
   from their logs, and exchanges them with allGather before the next wave starts.
A failure (a daemon that exits, a port taken) is exchanged in the same allGather, so
every task stops at the same wave and the driver gets every message, each naming the
host and the log file.

Decisions:
- Every node gets the admin web transport `web` on 127.0.0.1 (port 0 unless a base port
  is set: base + the node's index) and the client bridges of the settings (`nats`,
  `redis`) on 127.0.0.1 likewise. Links listen on the host's address: 127.0.0.1 for a
  local master, else the executor's address as Spark knows it.
- The node directory, pid file and log are daemons.py's; `pid_file` and
  `working_directory` are set in the node's parameters, as the manual's -b needs.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from pyspark import BarrierTaskContext

from spark_app.jobs import daemons
from spark_app.jobs.errors import DaemonError, DeployError, PlanError
from spark_app.jobs.hosts import TaskHost, gather, run_per_host
from spark_app.jobs.teardown import stop_on_host
from spark_app.jobs.topology import LinkEnd, NodePlan, Plan

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from spark_app.jobs.keys import MasterKeys

LOOPBACK: Final = "127.0.0.1"
WEB_TPORT: Final = "web"


@dataclass(frozen=True)
class NodeSpec:
    """What the task starting one node receives."""

    node: NodePlan
    service: str
    export: dict[str, Any] = field(repr=False)  # ms_gen_key export: this node's private key only
    parameters: Mapping[str, Any]
    web_port: int
    bridges: tuple[tuple[str, int], ...]  # (type, port), in start order
    link_port: int  # the port a listening link binds (0: ephemeral)


@dataclass(frozen=True)
class DeploySettings:
    run_dir: str  # absolute: the same path on every host
    service: str
    waves: int
    start_timeout_s: float
    loopback: bool  # links listen on 127.0.0.1 (local master), else on the executor's address


@dataclass(frozen=True)
class NodeRecord:
    """A started node, as the driver and the later stages know it (no secrets)."""

    node: str
    slot: int
    machine: str
    executor: str
    pid: int
    directory: str
    log: str
    listeners: Mapping[str, str]  # transport -> host:port

    @property
    def admin(self) -> str:
        return self.listeners[WEB_TPORT]

    def bridge(self, kind: str) -> str | None:
        return self.listeners.get(kind)


@dataclass
class HostReport:
    slot: int
    nodes: list[NodeRecord]
    stopped: list[tuple[str, int]]  # (node, pid) of daemons found running and stopped
    errors: list[str]


@dataclass(frozen=True)
class DeployResult:
    hosts: list[HostReport]

    @property
    def nodes(self) -> list[NodeRecord]:
        return sorted((n for h in self.hosts for n in h.nodes), key=lambda n: n.node)

    @property
    def stopped(self) -> list[tuple[str, int]]:
        return sorted(s for h in self.hosts for s in h.stopped)

    @property
    def errors(self) -> list[str]:
        return [e for h in self.hosts for e in h.errors]


def _port(base: int, node: NodePlan) -> int:
    return base + node.index if base else 0


def node_specs(plan: Plan, keys: MasterKeys, parameters: Mapping[str, Any],
               ports: Mapping[str, int], bridges: Sequence[str]) -> list[list[NodeSpec]]:
    """The specs of each host slot; `ports` holds base ports (0: ephemeral) by transport
    kind: `mesh` (a node's listening link), `web`, `nats`, `redis`."""
    parts: list[list[NodeSpec]] = [[] for _ in range(plan.hosts)]
    for node in plan.nodes:
        if ports.get("mesh") and sum(e.listen for e in node.links) > 1:
            raise PlanError(f"node {node.name} listens on {sum(e.listen for e in node.links)} links: "
                            "a fixed link port (transports.mesh.port) needs one per node; use 0")
        parts[node.slot].append(NodeSpec(
            node, keys.service, keys.export(node.name), dict(parameters),
            _port(ports.get(WEB_TPORT, 0), node),
            tuple((b, _port(ports.get(b, 0), node)) for b in bridges),
            _port(ports.get("mesh", 0), node)))
    return parts


def _link_transport(end: LinkEnd, host: str, port: int, partners: Sequence[str]) -> dict[str, Any]:
    route: dict[str, Any] = {"listen": host, "port": port if end.listen else 0}
    if not end.listen:
        route["connect"] = list(partners)
        route["timeout"] = 0  # a rollout's nodes start in waves: keep dialing (manual: 0 = for ever)
    route["cost"] = end.cost[0] if len(set(end.cost)) == 1 else list(end.cost)
    return {"tport": end.tport, "type": end.type, "route": route}


@dataclass(frozen=True)
class Launch:
    """A node's complete configuration, how to start it, and the transports whose
    "listening on" lines its log will show, in order."""

    config: dict[str, Any]
    listen: list[str]
    connect: list[str]
    listeners: list[str]


def launch_for(spec: NodeSpec, nd: daemons.NodeDir, host: str,
               known: Mapping[str, Mapping[str, str]]) -> Launch:
    """Complete `spec` for its start on `host`; `known` holds the listen addresses of the
    nodes started in earlier waves (node -> transport -> host:port)."""
    transports = []
    for end in spec.node.links:
        partners = [known[p][end.tport] for p in end.partners]
        transports.append(_link_transport(end, host, spec.link_port, partners))
    for kind, port in spec.bridges:
        transports.append({"tport": kind, "type": kind, "route": {"listen": LOOPBACK, "port": port}})
    transports.append({"tport": WEB_TPORT, "type": "web", "route": {"listen": LOOPBACK, "port": spec.web_port}})
    params = {**spec.export.get("parameters", {}), **spec.parameters,
              "pid_file": str(nd.pid_file), "working_directory": str(nd.path)}
    config = {**spec.export, "transports": transports, "parameters": params}
    links_listen = [e.tport for e in spec.node.links if e.listen]
    links_connect = [e.tport for e in spec.node.links if not e.listen]
    bridges = [kind for kind, _ in spec.bridges]
    mesh_connect = [e.tport for e in spec.node.links if not e.listen and e.type == "mesh"]
    return Launch(config, [*links_listen, *bridges, WEB_TPORT], links_connect,
                  [*links_listen, *bridges, *mesh_connect, WEB_TPORT])


def _start_wave(specs: Sequence[NodeSpec], settings: DeploySettings, host: TaskHost, listen_host: str,
                known: Mapping[str, Mapping[str, str]], report: HostReport) -> None:
    """Start a wave's nodes on this host at once, then wait until each listens; started
    nodes go to `report.nodes`, failures to `report.errors`."""
    started = []
    for spec in specs:
        nd = daemons.node_dir(settings.run_dir, settings.service, spec.node.name)
        launch = launch_for(spec, nd, listen_host, known)
        cmd = daemons.server_command(nd, spec.node.name, settings.service, launch.listen, launch.connect,
                                     sys.executable)
        try:
            daemons.write_config(nd, launch.config)
            started.append((spec, nd, launch, daemons.spawn(nd, cmd)))
        except OSError as exc:
            report.errors.append(f"node {spec.node.name} on host {host.machine}: cannot start in {nd.path}: {exc}")
    for spec, nd, launch, proc in started:
        try:
            daemons.detached(proc, nd, host.machine)
            pid, addrs = daemons.wait_listening(nd, len(launch.listeners), host.machine,
                                                settings.start_timeout_s)
        except DaemonError as exc:
            report.errors.append(str(exc))
            continue
        report.nodes.append(NodeRecord(spec.node.name, spec.node.slot, host.machine, host.address, pid,
                                       str(nd.path), str(nd.log),
                                       dict(zip(launch.listeners, addrs, strict=True))))


def deploy_task(settings: DeploySettings) -> Any:
    """The barrier task of the deploy stage (see the module docstring)."""

    def task(host: TaskHost, ctx: BarrierTaskContext, specs: list[NodeSpec]) -> Iterator[HostReport]:
        report = HostReport(host.partition, [], [], [])
        listen_host = LOOPBACK if settings.loopback else host.machine
        wrong = [s.node.name for s in specs if s.node.slot != host.partition]
        if wrong:
            report.errors.append(f"task of slot {host.partition} received nodes {wrong} of other slots")
        stopped, errors = stop_on_host(settings.run_dir, settings.service, host, ctx.barrier)
        report.stopped += [(s.node, s.pid) for s in stopped if s.pid is not None]
        report.errors += errors
        failed = any(r["errors"] for r in gather(ctx, {"errors": report.errors}))
        known: dict[str, dict[str, str]] = {}
        for wave in range(settings.waves):
            if failed:
                break
            _start_wave([s for s in specs if s.node.wave == wave], settings, host, listen_host, known, report)
            shared = {"errors": report.errors, "listeners": {r.node: dict(r.listeners) for r in report.nodes}}
            for other in gather(ctx, shared):
                known.update(other["listeners"])
                failed = failed or bool(other["errors"])
        yield report

    return task


def deploy(spark: SparkSession, parts: Sequence[Sequence[NodeSpec]], settings: DeploySettings) -> DeployResult:
    """Run the deploy stage; raises DeployError with every host's failures."""
    result = DeployResult(run_per_host(spark, parts, deploy_task(settings)))
    if result.errors:
        raise DeployError("deploy failed:\n  " + "\n  ".join(result.errors), result.nodes)
    return result
