"""The convergence check: every node healthy and every node's link-state database the same
consistent graph.

Issue "The main job", item 4. One barrier stage with a task per host polls, round after
round, the `/healthz` and `show adjacency` of the nodes on its machine, and the tasks
exchange what they saw with allGather; every task then judges the same views the same
way, so all stop in the same round: converged, or out of time, with the list of what
disagrees.

Decisions:
- A node's adjacency is compared as (user, adj, tport, type, cost) with the console's
  per-observer uid stripped from the names (`node1.2` -> `node1`): the uid is local to
  each observer, the rest is the advertising node's record.
- Converged means: every node answers /healthz with 200 (the router's own converged
  flag); every node's database holds exactly the nodes of the rollout; every link has
  its reverse; and all nodes hold the same links. A node that differs from the view most
  nodes share is named as disagreeing, with the links it lacks or adds.
- The timeout is seconds, not rounds (a round's admin calls and allGather take time of
  their own): each task keeps its deadline on its own monotonic clock, from the seconds
  the driver has left when it submits the stage (hosts' wall clocks need not agree), and
  says with its views whether the deadline passed; all stop in the round any task's has.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from pyspark import BarrierTaskContext

from spark_app.jobs import admin
from spark_app.jobs.deploy import NodeRecord
from spark_app.jobs.errors import CollectError, ConvergeError
from spark_app.jobs.hosts import TaskHost, gather, run_per_host

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

POLL_INTERVAL_S: Final = 0.5
MAX_LISTED: Final = 5  # links named per disagreeing node

Link = tuple[str, str, str, str, int]


def _name(label: str) -> str:
    return label.rpartition(".")[0] or label


def adjacency_links(rows: Sequence[Mapping[str, Any]]) -> list[Link]:
    """The links of `show adjacency` rows, observer-independent and sorted."""
    return sorted((_name(r["user"]), _name(r["adj"]), str(r["tport"]), str(r["type"]), int(r["cost"]))
                  for r in rows if r.get("adj") is not None)


def node_view(addr: str) -> dict[str, Any]:
    """What one node says about itself: health and its links (JSON-able)."""
    healthy, body = admin.health(addr)
    try:
        links = adjacency_links(admin.show(addr, "show adjacency"))
    except CollectError as exc:
        return {"healthy": False, "error": str(exc), "links": []}
    return {"healthy": healthy, "error": body.get("error"), "peers": body.get("peers"), "links": links}


def _fmt(link: Sequence[Any]) -> str:
    return f"{link[0]} -> {link[1]} ({link[2]})"


def disagreements(views: Mapping[str, Mapping[str, Any]], nodes: Sequence[str]) -> list[str]:
    """What keeps the network from having converged, one line per node; [] when none."""
    problems = []
    expected = set(nodes)
    for node in nodes:
        view = views.get(node)
        if view is None:
            problems.append(f"{node}: no answer from its host")
            continue
        if not view["healthy"]:
            problems.append(f"{node}: not converged" + (f" ({view['error']})" if view.get("error") else ""))
        links = {tuple(link) for link in view["links"]}
        users = {link[0] for link in links} | {link[1] for link in links}
        if users != expected:
            missing, extra = sorted(expected - users), sorted(users - expected)
            problems.append(f"{node}: its database has {len(users)} of {len(expected)} nodes"
                            + (f", missing {missing}" if missing else "") + (f", unknown {extra}" if extra else ""))
        one_way = sorted(link for link in links if not any(b[0] == link[1] and b[1] == link[0] for b in links))
        if one_way:
            problems.append(f"{node}: links without reverse: {', '.join(map(_fmt, one_way[:MAX_LISTED]))}")
    seen = {n: frozenset(tuple(link) for link in v["links"]) for n, v in views.items() if n in expected}
    if seen:
        common, _ = Counter(seen.values()).most_common(1)[0]
        for node, held in sorted(seen.items()):
            if held != common:
                lacks, adds = sorted(common - held), sorted(held - common)
                problems.append(f"{node} disagrees with the other nodes' database:"
                                + (f" lacks {', '.join(map(_fmt, lacks[:MAX_LISTED]))}" if lacks else "")
                                + (f" has {', '.join(map(_fmt, adds[:MAX_LISTED]))}" if adds else ""))
    return problems


@dataclass(frozen=True)
class ConvergeResult:
    seconds: float
    rounds: int
    links: int  # links in the agreed database
    peers: Mapping[str, int]  # node -> peers it sees


def _on_machine(nodes: Sequence[NodeRecord], host: TaskHost) -> list[NodeRecord]:
    return host.share([n for n in nodes if n.machine == host.machine])


def max_rounds(timeout_s: float) -> int:
    """A bound on the rounds in `timeout_s`: every round but the last sleeps the poll
    interval (the deadline stops the loop first; this bounds it should a clock stall)."""
    return max(1, math.ceil(timeout_s / POLL_INTERVAL_S)) + 1


def converge_task(nodes: Sequence[NodeRecord], timeout_s: float) -> Any:
    names = [n.node for n in nodes]

    def task(host: TaskHost, ctx: BarrierTaskContext, _: list[Any]) -> Iterator[dict[str, Any]]:
        deadline = time.monotonic() + timeout_s
        mine = _on_machine(nodes, host)
        problems: list[str] = []
        views: dict[str, Any] = {}
        done, most = 0, max_rounds(timeout_s)
        while done < most:
            done += 1
            views, expired = {}, False
            seen = {n.node: node_view(n.admin) for n in mine}
            for part in gather(ctx, {"views": seen, "expired": time.monotonic() >= deadline}):
                views.update(part["views"])
                expired = expired or part["expired"]
            problems = disagreements(views, names)
            if not problems or expired:
                break
            time.sleep(min(POLL_INTERVAL_S, max(0.0, deadline - time.monotonic())))
        yield {"rounds": done, "problems": problems, "views": views}

    return task


def converge(spark: SparkSession, nodes: Sequence[NodeRecord], hosts: int, timeout_s: float) -> ConvergeResult:
    """Wait until the network has converged, for about `timeout_s` seconds; ConvergeError
    naming what disagrees."""
    started = time.monotonic()
    result = run_per_host(spark, [[] for _ in range(hosts)], converge_task(nodes, timeout_s))[0]
    seconds = time.monotonic() - started
    if result["problems"]:
        raise ConvergeError(f"the network did not converge in {seconds:.0f}s "
                            f"({result['rounds']} rounds):\n  " + "\n  ".join(result["problems"]))
    views = result["views"]
    agreed = next(iter(views.values()))["links"] if views else []
    return ConvergeResult(seconds, result["rounds"], len(agreed),
                          {n: int(v.get("peers") or 0) for n, v in sorted(views.items())})
