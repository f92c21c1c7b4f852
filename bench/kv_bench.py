"""redis-benchmark (Debian's redis-tools) GET / SET / INCR / LPUSH / ZADD, pipelined
(-P 16), against a raims node's Redis transport with a key-value map and against
redis-server (no persistence), in the same run. Target: raims >= 0.3x redis-server per
command. Each command is measured on raims and redis-server alternately (best of 3,
1 with --quick), so both see the same load of a shared host; each server's CPU time per
command (from /proc) is reported beside its rate.

    /work/main/.venv/bin/python bench/kv_bench.py [--quick]
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from raims_node.kv.cli import main as ms_kv  # noqa: E402
from tests.integration.kv_diff import RedisServer  # noqa: E402
from tests.integration.test_bridges_net import start_network  # noqa: E402

from _report import report  # noqa: E402

TESTS = ("set", "get", "incr", "lpush", "zadd")
TARGET = 0.3
PIPELINE = 16
CLIENTS = 20


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process `pid`, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bench(port: int, requests: int, tests: tuple[str, ...] = TESTS) -> dict[str, float]:
    """Requests per second per test, from redis-benchmark's CSV."""
    out = subprocess.run(["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-t", ",".join(tests),
                          "-P", str(PIPELINE), "-c", str(CLIENTS), "-n", str(requests), "-r", "10000", "--csv"],
                         capture_output=True, text=True, timeout=600, check=True).stdout
    rates: dict[str, float] = {}
    for row in csv.reader(io.StringIO(out)):
        if len(row) >= 2 and row[0] != "test":
            name = row[0].split()[0].lower()
            if name in TESTS:
                rates[name] = float(row[1])
    return rates


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes")
    args = ap.parse_args()
    requests = 20_000 if args.quick else 200_000
    rounds = 1 if args.quick else 3
    with tempfile.TemporaryDirectory(prefix="kv_bench") as d:
        tmp = Path(d)
        ms_kv(["init", str(tmp / "map")])
        ref = RedisServer(tmp)
        net = None
        try:
            net = start_network(tmp, "node A\n", heartbeat="10 sec", params={"map_file": str(tmp / "map")})
            ours: dict[str, tuple[float, float]] = {}
            theirs: dict[str, tuple[float, float]] = {}
            # per command, raims and redis-server alternately, best of `rounds`: the two
            # see the same machine load (the host is shared); with each server's CPU
            # time per command in its best round
            servers = ((ours, net.port("A", "redis"), net.nodes["A"].proc.pid), (theirs, ref.port, ref.proc.pid))
            for _, port, _ in servers:  # warm-up, untimed: the first test paid the node's first
                bench(port, 2_000)  # connections and keys (SET at 9 us per command, then 2.8)
            for t in TESTS:
                for _ in range(rounds):
                    for best, port, pid in servers:
                        cpu = cpu_seconds(pid)
                        rps = bench(port, requests, (t,))[t]
                        us = (cpu_seconds(pid) - cpu) / requests * 1e6
                        if rps > best.get(t, (0.0, 0.0))[0]:
                            best[t] = (rps, us)
        finally:
            if net is not None:
                net.stop()
            ref.stop()
    rows: list[dict[str, object]] = []
    for t in TESTS:
        ratio = ours[t][0] / theirs[t][0]
        rows.append({"command": t.upper(), "requests": requests, "pipeline": PIPELINE, "clients": CLIENTS,
                     "raims_rps": round(ours[t][0]), "redis_rps": round(theirs[t][0]), "ratio": round(ratio, 3),
                     "raims_cpu_us": round(ours[t][1], 2), "redis_cpu_us": round(theirs[t][1], 2),
                     "target": TARGET, "ok": ratio >= TARGET})
    report("kv_bench", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
