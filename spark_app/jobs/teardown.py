"""Teardown: stop every daemon of the service by its pid file, on every host.

Issue "The main job", item 8. A barrier stage with a task per host; each stops the
daemons whose node directories are on its machine (shared by rank among the tasks on
one machine, so each is stopped once) and reports what it stopped. It needs no record
of the deployment: the run directory on each host is the record (and the command lines of
daemons whose pid file is gone), so `--teardown` works from a fresh driver and also stops
daemons of runs that failed half-way. The deploy stage stops a host's daemons the same way
before it starts new ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark import BarrierTaskContext

from spark_app.jobs import daemons
from spark_app.jobs.errors import DaemonError
from spark_app.jobs.hosts import TaskHost, run_per_host

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class Stopped:
    machine: str
    node: str
    pid: int | None  # None: its directory had no running daemon
    log: str


def stop_on_host(run_dir: str, service: str, host: TaskHost,
                 barrier: Callable[[], object]) -> tuple[list[Stopped], list[str]]:
    """Stop this task's share of the machine's daemons of `service`, strays first (they
    are told apart from the others by the pid files). `barrier` returns once every task
    of the stage has listed the strays: a daemon removes its pid file when told to stop
    and lives on a moment, so a task listing them later took one another task was
    stopping for a stray and stopped it twice."""
    stopped: list[Stopped] = []
    errors: list[str] = []
    try:
        found = daemons.strays(run_dir, service)
    except OSError as exc:
        found, errors = [], [f"host {host.machine}: {exc}"]
    barrier()
    if errors:
        return stopped, errors
    try:
        for stray, nd in host.share(found):
            stopped.append(Stopped(host.machine, nd.name, daemons.stop_stray(stray, nd), str(nd.log)))
        strays = {s.node for s in stopped}
        for nd in host.share(daemons.node_dirs(run_dir, service)):
            pid = daemons.stop(nd)
            if pid is not None or nd.name not in strays:
                stopped.append(Stopped(host.machine, nd.name, pid, str(nd.log)))
    except (DaemonError, OSError) as exc:
        errors.append(f"host {host.machine}: {exc}")
    return stopped, errors


def teardown(spark: SparkSession, hosts: int, run_dir: str, service: str) -> tuple[list[Stopped], list[str]]:
    """Stop the service's daemons on every host: (what was found, errors)."""

    def task(host: TaskHost, ctx: BarrierTaskContext, _: list[Any]) -> Iterator[tuple[list[Stopped], list[str]]]:
        yield stop_on_host(run_dir, service, host, ctx.barrier)

    results = run_per_host(spark, [[] for _ in range(hosts)], task)
    stopped = sorted((s for r in results for s in r[0]), key=lambda s: (s.machine, s.node))
    return stopped, [e for r in results for e in r[1]]
