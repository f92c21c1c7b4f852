"""The executor hosts of a rollout: how many there are, whether a barrier stage fits, and
on which host each task of a per-host job runs.

Issue "The main job", item 3; DESIGN.md "Daemons on executors". Every per-host job of a
rollout (deploy, converge, traffic, collect, teardown) is a barrier stage with one task
per host slot, so that its tasks run at once and can exchange data with allGather.

Decisions:
- A host slot is an executor: local-cluster[W,C,M] has W, local[N] one (the driver), a
  cluster the executors registered (spark.executor.instances of them when set). The
  rollout waits up to EXECUTOR_WAIT_S for them, then fails naming how many came.
- The barrier stage needs a slot per host at once; fewer slots than hosts, or dynamic
  allocation on, fails before anything starts (Spark itself would retry for minutes).
- On a cluster, two tasks of one barrier stage on one executor fail the stage with a
  message: one host would run two hosts' daemons and another none (executors with
  several cores; the fix is spark.task.cpus = spark.executor.cores). A local master
  has one machine, where placement does not matter.
- A task's machine is the host part of its executor's address. Executors may share a
  machine (local-cluster puts all on 127.0.0.1), and a daemon's admin port listens on
  loopback, so work on a machine's daemons is split by rank among the tasks on that
  machine: each node is served exactly once, whichever executor the task landed on.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeVar

from pyspark import BarrierTaskContext

from spark_app.jobs.errors import ClusterError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

EXECUTOR_WAIT_S: Final = 60.0
EXECUTORS_STABLE_S: Final = 3.0
POLL_S: Final = 0.25
_LOCAL_CLUSTER = re.compile(r"^local-cluster\[\s*(\d+)\s*,")

T = TypeVar("T")


def expected_executors(master: str, configured: str | None) -> int | None:
    """Executors a master will have, when known in advance."""
    from spark_app.session import is_local_master

    m = _LOCAL_CLUSTER.match(master)
    if m:
        return int(m.group(1))
    if is_local_master(master):
        return 1
    return int(configured) if configured else None


def _registered(spark: SparkSession) -> int:
    return int(spark.sparkContext._jsc.sc().getExecutorIds().size())


def task_slots(spark: SparkSession) -> int:
    """Tasks the cluster runs at once (what Spark checks a barrier stage against)."""
    jsc = spark.sparkContext._jsc.sc()
    return int(jsc.maxNumConcurrentTasks(jsc.resourceProfileManager().defaultResourceProfile()))


def check_capacity(hosts: int, slots: int) -> None:
    if slots < hosts:
        raise ClusterError(f"the rollout's barrier stage runs {hosts} tasks at once (one per executor host) "
                           f"but the cluster has {slots} task slot(s): give each executor at least "
                           "spark.task.cpus cores, or use fewer executors")


def executor_hosts(spark: SparkSession, timeout: float = EXECUTOR_WAIT_S) -> int:
    """The number of host slots, once the executors have registered; raises ClusterError
    (or SessionError for dynamic allocation) when a barrier stage cannot run on them."""
    from spark_app.session import is_local_master, require_static_allocation

    require_static_allocation(spark)
    sc = spark.sparkContext
    master = str(sc.master)
    want = expected_executors(master, sc.getConf().get("spark.executor.instances"))
    if is_local_master(master) and want == 1:
        hosts = 1
    else:
        hosts = _wait_executors(spark, want, timeout)
    check_capacity(hosts, task_slots(spark))
    return hosts


def _wait_executors(spark: SparkSession, want: int | None, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    last, since = -1, time.monotonic()
    while True:
        got = _registered(spark)
        if got != last:
            last, since = got, time.monotonic()
        if want is not None and got >= want:
            return want
        if want is None and got > 0 and time.monotonic() - since >= EXECUTORS_STABLE_S:
            return got
        if time.monotonic() > deadline:
            if want is None and got > 0:
                return got
            raise ClusterError(f"{got} of {want if want is not None else 'at least 1'} executor(s) "
                               f"registered after {timeout:.0f}s")
        time.sleep(POLL_S)


@dataclass(frozen=True, slots=True)
class TaskHost:
    """Where one task of a per-host job runs, among the job's tasks."""

    partition: int
    address: str  # the executor's host:port
    machine: str  # its host part
    rank: int  # among the tasks on the same machine, by partition
    on_machine: int  # tasks on the same machine

    def share(self, items: Sequence[T]) -> list[T]:
        """This task's part of a machine-wide list: every item goes to one task."""
        return list(items[self.rank :: self.on_machine])


def task_host(ctx: BarrierTaskContext, one_per_executor: bool = True) -> TaskHost:
    addresses = [info.address for info in ctx.getTaskInfos()]
    me = ctx.partitionId()
    if one_per_executor and len(set(addresses)) != len(addresses):
        raise ClusterError(f"two tasks of the per-host stage run on one executor ({', '.join(addresses)}): "
                           "set spark.task.cpus to spark.executor.cores so each executor takes one")
    machines = [a.rpartition(":")[0] or a for a in addresses]
    same = [i for i, m in enumerate(machines) if m == machines[me]]
    return TaskHost(me, addresses[me], machines[me], same.index(me), len(same))


def gather(ctx: BarrierTaskContext, value: Any) -> list[Any]:
    """Every task's `value` (JSON data), in partition order: a barrier for all tasks."""
    return [json.loads(v) for v in ctx.allGather(json.dumps(value, sort_keys=True))]


def run_per_host(spark: SparkSession, parts: Sequence[Sequence[T]],
                 task: Callable[[TaskHost, BarrierTaskContext, list[T]], Iterable[Any]]) -> list[Any]:
    """Run `task` once per host slot, at once (a barrier stage), with `parts[slot]` as its
    data; the results of every task, in slot order. Each part is serialized into its own
    partition: a task receives its part and nothing else.

    A misplaced stage (see task_host) raises ClusterError here rather than as a failed
    task, whose message would drown in Spark's trace: every task sees it alike and returns it."""
    from spark_app.session import is_local_master

    spread = not is_local_master(str(spark.sparkContext.master))

    def run(it: Iterable[list[T]]) -> Iterator[tuple[int, Any]]:
        ctx = BarrierTaskContext.get()
        items = [x for part in it for x in part]
        try:
            host = task_host(ctx, spread)
        except ClusterError as exc:
            yield ctx.partitionId(), _Misplaced(str(exc))
            return
        for result in task(host, ctx, items):
            yield ctx.partitionId(), result

    rdd = spark.sparkContext.parallelize([list(p) for p in parts], len(parts))
    out = [r for _, r in sorted(rdd.barrier().mapPartitions(run).collect(), key=lambda pr: pr[0])]
    for r in out:
        if isinstance(r, _Misplaced):
            raise ClusterError(r.message)
    return out


@dataclass(frozen=True, slots=True)
class _Misplaced:
    message: str
