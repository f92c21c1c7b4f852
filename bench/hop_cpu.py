"""CPU per lone message on each node: one node and the A->D path (A->B->D).

The native client (bench/natsbench.c, `lat` mode) sends 16-byte NATS messages one at a
time, each after the previous one was delivered; each node's on-CPU time
(/proc/<pid>/task/*/schedstat, nanoseconds) is read before and after. Wall-clock p50
is noisy on a shared machine; CPU per message per node is not, so this is the progress
metric of the latency work (issue 24, lane 24f); bridge_bench.py --native-only is the
confirmation.

    .venv/bin/python bench/hop_cpu.py [--quick] [--count N] [--rounds R]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
import native  # noqa: E402

from tests.integration.harness import MANUAL_GRAPH  # noqa: E402
from tests.integration.test_bridges_net import BridgeNet, start_network  # noqa: E402

from _report import report  # noqa: E402


def cpu_ns(pid: int) -> dict[str, int]:
    """On-CPU nanoseconds of each live thread of `pid`, by thread id."""
    times: dict[str, int] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            times[task.name] = int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return times


def cpu_delta_ns(before: dict[str, int], after: dict[str, int]) -> int:
    """CPU spent between two readings by the threads alive at both: a thread that ended
    in between (the route module's import thread) would otherwise take its whole time
    out of the sum; one born in between counts from zero."""
    return sum(t - before.get(tid, 0) for tid, t in after.items())


def measure(exe: Path, net: BridgeNet, names: list[str], pub: str, sub: str, count: int) -> dict[str, object]:
    pids = {n: net.nodes[n].proc.pid for n in names}
    before = {n: cpu_ns(p) for n, p in pids.items()}
    p50, p99 = native.latency(exe, net.port(pub), net.port(sub), count, 16)
    after = {n: cpu_ns(p) for n, p in pids.items()}
    row: dict[str, object] = {"path": f"{pub}->{sub}", "p50_us": round(p50, 1), "p99_us": round(p99, 1)}
    for n in names:
        row[f"{n}_us_per_msg"] = round(cpu_delta_ns(before[n], after[n]) / count / 1e3, 2)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="500 messages, one round")
    args = ap.parse_args()
    if args.quick:
        args.count, args.rounds = 500, 1
    exe = native.build()
    if exe is None:
        raise SystemExit("no C compiler for bench/natsbench.c")
    tmp = Path(tempfile.mkdtemp(prefix="hop_cpu_"))
    (tmp / "one").mkdir()
    (tmp / "abcd").mkdir()
    nets: list[BridgeNet] = []
    rows: list[dict[str, object]] = []
    try:
        single = start_network(tmp / "one", "node A\n", heartbeat="10 sec")
        nets.append(single)
        four = start_network(tmp / "abcd", MANUAL_GRAPH, heartbeat="10 sec")
        nets.append(four)
        for _ in range(args.rounds):
            r = measure(exe, single, ["A"], "A", "A", args.count)
            rows.append({"path": "one node", **{k: v for k, v in r.items() if k != "path"}})
            rows.append(measure(exe, four, ["A", "B", "C", "D"], "A", "D", args.count))
    finally:
        for net in reversed(nets):
            net.stop()
    cols = {c: "" for r in rows for c in r}
    report("hop_cpu", [{**cols, **r} for r in rows])


if __name__ == "__main__":
    main()
