"""The whole rollout at scale on a local cluster: wall time and the driver's peak memory.

Issue 26, "Done when": a 64-daemon local run completes with the driver under 2 GB RSS.
For each size N, `python spark_app/raims_rollout.py` runs on local-cluster[2,1,1024]
with N/2 daemons per executor, in a temporary lake and run directory; a sampler reads
/proc every SAMPLE_S for the driver's resident memory: its Python process plus the JVM
it starts (py4j's gateway, its child). The executors' JVMs, their Python workers and the
daemons are not the driver and are not counted. The first size (4, the `make run`
network) is the peer the others are compared with, measured in the same run.

Large networks use the settings the collection documents for them: `observers`
(a fixed sample of nodes reports the network views; every node its own subscriptions
and filters), fewer traffic messages, and longer timeouts; and a sparse graph (a ring
with chords: every node has 3 links) instead of the full mesh: on this 2-core machine a
64-node full mesh (2,016 links, each heartbeating) does not converge, its daemons time
out each other's heartbeats (measured: still re-authenticating after 10 minutes).

    .venv/bin/python bench/rollout_scale_bench.py                 # 4 and 64 daemons
    .venv/bin/python bench/rollout_scale_bench.py --quick         # 4 and 8
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import report  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
MASTER = "local-cluster[2,1,1024]"
HOSTS = 2
SAMPLE_S = 0.2
LIMIT_BYTES = 2 * 1024**3
PAGE = os.sysconf("SC_PAGE_SIZE")


def rss(pid: int) -> int:
    """Resident bytes of one process (0 once it is gone)."""
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


def children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]


def driver_jvm(pid: int) -> int | None:
    """The driver's JVM: the java child of the driver's Python process."""
    for child in children(pid):
        try:
            if b"java" in Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")[0]:
                return child
        except OSError:
            continue
    return None


class Sampler(threading.Thread):
    """Peak RSS of the driver (Python + its JVM) while `pid` runs."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak = self.peak_python = self.peak_jvm = 0
        self.done = threading.Event()

    def run(self) -> None:
        jvm: int | None = None
        while not self.done.is_set():
            jvm = jvm or driver_jvm(self.pid)
            py, j = rss(self.pid), rss(jvm) if jvm else 0
            self.peak_python, self.peak_jvm = max(self.peak_python, py), max(self.peak_jvm, j)
            self.peak = max(self.peak, py + j)
            self.done.wait(SAMPLE_S)


def ring_graph(nodes: int) -> str:
    """A ring with a chord from every other node a quarter round: 3 links a node, in the
    manual's graph text format."""
    lines = ["node " + " ".join(f"n{i}" for i in range(nodes))]
    lines += [f"tcp_r{i} n{i} n{(i + 1) % nodes} : 100" for i in range(nodes)]
    lines += [f"tcp_c{i} n{i} n{(i + nodes // 4) % nodes} : 100" for i in range(0, nodes, 2)]
    return "\n".join(lines) + "\n"


def run_once(nodes: int, observers: int | None, messages: int, timeout_s: float, graph: bool) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="raims-scale-bench-") as tmp:
        conf = yaml.safe_load((REPO / "conf" / "rollout.yaml").read_text())
        if graph:
            Path(tmp, "graph.txt").write_text(ring_graph(nodes))
            conf["topology"] = f"{tmp}/graph.txt"
        conf.update(service="scale", lake=f"{tmp}/lake", run_dir=f"{tmp}/run", traffic={"messages": messages},
                    observers=observers, queries=False,
                    timeouts={"start": 120, "converge": 300, "traffic": 300})
        config = Path(tmp) / "rollout.yaml"
        config.write_text(yaml.safe_dump(conf))
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "spark_app/raims_rollout.py", "--config", str(config),
                                 "--master", MASTER, "--nodes-per-host", str(nodes // HOSTS)],
                                cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "TMPDIR": tmp, "PYTHONPATH": str(REPO)})
        sampler = Sampler(proc.pid)
        sampler.start()
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        sampler.done.set()
        sampler.join()
        seconds = time.perf_counter() - t0
    stages = dict(re.findall(r"^\[\s*(\w+)\s*\]\s+(\d+\.\d)s", out, re.MULTILINE))
    collect = re.search(r"(\d+) rows of \d+ tables from (\d+) nodes", out)
    if proc.returncode != 0:
        sys.stderr.write(out[-3000:] + err[-3000:])
    return {"daemons": nodes, "topology": "ring+chords" if graph else "mesh", "observers": observers or nodes, "status": "ok" if proc.returncode == 0 else "failed",
            "rows": int(collect.group(1)) if collect else 0, "seconds": round(seconds, 1),
            "driver_peak_mib": round(sampler.peak / 2**20), "python_mib": round(sampler.peak_python / 2**20),
            "jvm_mib": round(sampler.peak_jvm / 2**20),
            "slowest": max(stages.items(), key=lambda kv: float(kv[1]), default=("", "0"))[0]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=None, help="daemons in all (default 4 64)")
    ap.add_argument("--quick", action="store_true", help="4 and 8 daemons")
    ap.add_argument("--observers", type=int, default=8, help="observers of networks over 16 nodes")
    ap.add_argument("--messages", type=int, default=2, help="traffic check messages of networks over 16 nodes")
    ap.add_argument("--timeout", type=float, default=1500.0, help="seconds per rollout")
    args = ap.parse_args(argv)
    sizes = args.sizes or ([4, 8] if args.quick else [4, 64])
    rows = []
    for n in sizes:
        big = n > 16
        rows.append(run_once(n, args.observers if big else None, args.messages if big else 20, args.timeout, big))
    peer = rows[0]
    largest = rows[-1]
    report("rollout_scale", rows, {
        "peer_daemons": peer["daemons"],
        "driver_ratio_vs_peer": round(int(str(largest["driver_peak_mib"])) / max(int(str(peer["driver_peak_mib"])), 1), 2),
        "under_2_gib": all(int(str(r["driver_peak_mib"])) * 2**20 < LIMIT_BYTES for r in rows if r["status"] == "ok"),
    })
    return 0 if all(r["status"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
