"""Message log throughput (issue 22): appends per fsync policy beside SQLite, and catch-up.

Appends: one 100-byte message per call, as a producer logs them, under each fsync policy
(`every`: fdatasync per record; `batch`: per 10,000 records or 50 ms; `none`), and the
peer measured in the same run: SQLite in WAL mode with synchronous=NORMAL doing the same
appends (one INSERT committed per message into a table with the record's columns).
Target: batched fsync at or above SQLite.

Catch-up: a `ms_msglog serve` source process holding N messages (1,000,000 at full
size) and a sink client in this process with an empty state: messages per second from
connecting until the sink's log holds all N (checked, deduplicated and logged with batch
fsync). Target >= 200,000 msgs/s.

    python bench/msglog_bench.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Coroutine
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from raims_node.msglog import config, record  # noqa: E402
from raims_node.msglog.cli import run_loop  # noqa: E402
from raims_node.msglog.log import FsyncPolicy, MessageLog, create_log  # noqa: E402
from raims_node.msglog.node import CabalNode  # noqa: E402

PAYLOAD = bytes(range(100))


def append_rate(tmp: Path, policy: FsyncPolicy, n: int) -> float:
    root = tmp / f"append-{policy}"
    create_log(root, "bench", "a", 1)
    with MessageLog.open(root, "bench", "a", fsync=policy) as log:
        t0 = time.perf_counter()
        for _ in range(n):
            log.originate(PAYLOAD)
        log.sync()
        return n / (time.perf_counter() - t0)


def sqlite_rate(tmp: Path, n: int) -> float:
    db = sqlite3.connect(tmp / "peer.db", isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute(
        "CREATE TABLE msg (origin INTEGER, id INTEGER, time INTEGER, data BLOB, PRIMARY KEY (origin, id))"
    )
    ins = "INSERT INTO msg VALUES (?, ?, ?, ?)"
    t0 = time.perf_counter()
    for i in range(1, n + 1):
        db.execute("BEGIN")
        db.execute(ins, (1, i, time.time_ns(), PAYLOAD))
        db.execute("COMMIT")
    rate = n / (time.perf_counter() - t0)
    db.close()
    return rate


def fill(root: Path, n: int) -> None:
    create_log(root, "bench", "src", 1)
    with MessageLog.open(root, "bench", "src", fsync=FsyncPolicy.NONE) as log:
        now = time.time_ns()
        step = 10_000
        for base in range(1, n + 1, step):
            top = min(base + step, n + 1)
            raw = b"".join(record.encode_message(1, i, now, PAYLOAD) for i in range(base, top))
            log.append_records(raw, [(1, i) for i in range(base, top)])


async def catch_up(tmp: Path, n: int, policy: FsyncPolicy = FsyncPolicy.BATCH) -> float:
    root = tmp / "catchup"
    fill(root, n)
    cab = config.build(
        "bench",
        ["src", "sink"],
        {
            "src": {"id": 1, "type": "source", "server": f"unix://{tmp}/src.sock"},
            "sink": {"id": 0, "type": "sink"},
        },
    )
    cfg = tmp / "cabal.nb"
    cfg.write_text(config.to_nb(cab))
    out = open(tmp / "src.out", "wb")  # noqa: SIM115
    server = subprocess.Popen(
        [
            sys.executable,
            *os.environ.get("BENCH_SERVER_PREFIX", "").split(),
            "-m",
            "raims_node.msglog",
            "serve",
            str(root),
            "bench",
            "src",
            "--config",
            str(cfg),
        ],
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
    )
    try:
        deadline = time.monotonic() + 60
        while b"ready" not in (tmp / "src.out").read_bytes():
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError((tmp / "src.out").read_text())
            await asyncio.sleep(0.02)
        create_log(root, "bench", "sink", 0)
        log = MessageLog.open(root, "bench", "sink", fsync=policy)
        node = CabalNode(cab, "sink", log, retry=0.1)
        t0 = time.perf_counter()
        await node.start()
        while log.state[1] < n:
            if time.perf_counter() - t0 > 600:
                raise RuntimeError(f"catch-up stalled at {log.state[1]} of {n}")
            await asyncio.sleep(0.005)
        elapsed = time.perf_counter() - t0
        await node.stop()
        log.close()
        assert node.counters["duplicates"] == 0 and node.counters["received"] == n
        return n / elapsed
    finally:
        server.terminate()
        server.wait(10)
        out.close()


def _run(coro: Coroutine[object, object, float]) -> float:
    """The node's own loop (uvloop when installed), as `ms_msglog serve` runs."""
    out: list[float] = []

    async def keep() -> None:
        out.append(await coro)

    run_loop(keep())
    return out[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="small sizes")
    args = ap.parse_args()
    n_append = 20_000 if args.quick else 200_000
    n_every = 500 if args.quick else 3_000  # each one waits for the disk
    n_catchup = 100_000 if args.quick else 1_000_000
    with tempfile.TemporaryDirectory(prefix="msglog-bench-") as d:
        tmp = Path(d)
        res = {
            "append_per_s_every": append_rate(tmp, FsyncPolicy.EVERY, n_every),
            "append_per_s_batch": append_rate(tmp, FsyncPolicy.BATCH, n_append),
            "append_per_s_none": append_rate(tmp, FsyncPolicy.NONE, n_append),
            "sqlite_wal_per_s": sqlite_rate(tmp, n_append),
            "catchup_per_s": _run(catch_up(tmp, n_catchup)),
        }
    rows = [
        ("append, fsync every record", n_every, res["append_per_s_every"], ""),
        ("append, fsync batched", n_append, res["append_per_s_batch"], "target >= sqlite"),
        ("append, no fsync", n_append, res["append_per_s_none"], ""),
        ("sqlite WAL synchronous=NORMAL (peer)", n_append, res["sqlite_wal_per_s"], ""),
        ("catch-up, source -> sink", n_catchup, res["catchup_per_s"], "target >= 200,000"),
    ]
    print(f"{'measure':40} {'messages':>10} {'per second':>12}  note")
    for name, n, r, note in rows:
        print(f"{name:40} {n:>10,} {r:>12,.0f}  {note}")
    ratio = res["append_per_s_batch"] / res["sqlite_wal_per_s"]
    print(f"batched / sqlite = {ratio:.2f}")
    print(
        json.dumps(
            {
                "bench": "msglog",
                **{k: round(v) for k, v in res.items()},
                "batch_over_sqlite": round(ratio, 2),
                "quick": args.quick,
            }
        )
    )


if __name__ == "__main__":
    main()
