"""Client churn on every client edge of one node: leak or allocator? (DESIGN-NOTES
"Client churn: leak or allocator").

One ms_server with nats, redis, rv, web, telnet and ipc (sbus) transports, started with
RAIMS_DIAG_DUMP (raims_node/diag.py). For each edge in turn, ROUNDS rounds of N clients,
CONCURRENT at a time, each: connect, subscribe (shared subjects and, where the protocol
has one, its own inbox), publish a little, read its answers, close. After each round the
node's descriptors are awaited back to where they were, then SIGUSR1 and the snapshot:
RSS, descriptors, live objects, the node's tables, asyncio tasks and timers. A row per
round; the types and tables that grew from the edge's first round to its last are listed
after the table (a leak grows every round by the clients' count; an allocator's RSS rise
leaves the counts flat).

    .venv/bin/python bench/churn_bench.py [--edges nats,redis,...] [--rounds 5] [-n 1000]
        [--concurrent 100] [--header-timeout 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from raims_node.diag import ENV  # noqa: E402
from tests.integration.harness import NodeProc, graph_config  # noqa: E402
from tests.integration.rv_client import RvClient  # noqa: E402

from _report import report  # noqa: E402

EDGES = ("nats", "redis", "rv", "ws", "telnet", "sbus")
SUBJECTS = 10  # shared subjects per edge


class Node:
    def __init__(self, tmp: Path, header_timeout: float, extra_env: dict[str, str]) -> None:
        cfg, _ = graph_config(tmp, "node A\n", web=False)
        data = yaml.safe_load(cfg.read_text())
        self.sock = str(tmp / "bus.sock")
        data["transports"] += [
            {"tport": "nats", "type": "nats", "route": {"port": 0, "http_port": 0}},  # its monitor: the closed ring
            {"tport": "redis", "type": "redis", "route": {"port": 0}},
            {"tport": "rv", "type": "rv", "route": {"port": 0}},
            {"tport": "tel", "type": "telnet", "route": {"listen": "127.0.0.1", "port": 0}},
            {"tport": "web", "type": "web", "route": {"listen": "127.0.0.1", "port": 0,
                                                      "header_timeout": f"{header_timeout:g} secs"}},
            {"tport": "bus", "type": "ipc", "route": {"path": self.sock, "service": "churn"}},
        ]
        cfg.write_text(yaml.safe_dump(data, sort_keys=False))
        self.dump = tmp / "diag.json"
        os.environ[ENV] = str(self.dump)
        os.environ.update(extra_env)
        self.proc = NodeProc("A", ["-d", str(cfg), "-u", "A", "-t", "nats.listen", "redis.listen", "rv.listen",
                                   "bus.listen", "tel.listen", "web.listen"], tmp)
        del os.environ[ENV]
        self.proc.wait_for("network converges")
        self.proc.wait_for("web listening on")
        self.proc.wait_for("telnet listening on")
        lines = list(self.proc.lines)
        plain = [ln.rpartition("listening on ")[2] for ln in lines
                 if "listening on " in ln and "telnet listening" not in ln and "web listening" not in ln]
        tcp = [int(a.rpartition(":")[2]) for a in plain if not a.startswith("/")]
        self.ports = dict(zip(("nats", "redis", "rv"), tcp, strict=False))
        for name, tag in (("tel", "telnet listening on "), ("web", "web listening on ")):
            self.ports[name] = int(next(ln for ln in lines if tag in ln).rpartition(":")[2])

    @property
    def pid(self) -> int:
        return self.proc.proc.pid

    def fds(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def snapshot(self) -> dict[str, Any]:
        self.dump.unlink(missing_ok=True)
        os.kill(self.pid, signal.SIGUSR1)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.dump.exists():
                return json.loads(self.dump.read_text())
            time.sleep(0.05)
        raise TimeoutError("no diagnostic dump")


async def _nats(node: Node, i: int) -> None:
    r, w = await asyncio.open_connection("127.0.0.1", node.ports["nats"])
    await r.readline()  # INFO
    s = f"churn.n.{i % SUBJECTS}"
    w.write(f"CONNECT {{\"verbose\":false}}\r\nSUB {s} 1\r\nSUB _INBOX.{i}.* 2\r\n"
            f"PUB {s} _INBOX.{i}.1 5\r\nhello\r\nPING\r\n".encode())
    while (await r.readline()) not in (b"PONG\r\n", b""):
        pass
    w.close()


async def _redis(node: Node, i: int) -> None:
    r, w = await asyncio.open_connection("127.0.0.1", node.ports["redis"])
    s = f"churn.r.{i % SUBJECTS}"
    w.write(f"SET churn:k{i % 100} v{i}\r\nGET churn:k{i % 100}\r\nINCR churn:ctr\r\n"
            f"HSET churn:h f{i % 100} {i}\r\nDEL churn:k{(i + 50) % 100}\r\nPUBLISH {s} hi\r\n"
            f"SUBSCRIBE {s} churn.own.{i}\r\nPSUBSCRIBE churn.r.* churn.p{i}.*\r\n".encode())
    got = b""
    while got.count(b"subscribe\r\n") < 4:  # the two SUBSCRIBE and two PSUBSCRIBE answers
        chunk = await r.read(65536)
        if not chunk:
            break
        got += chunk
    w.close()


async def _rv(node: Node, i: int) -> None:
    c = await RvClient.connect(node.ports["rv"])
    await c.listen(f"churn.v.{i % SUBJECTS}")
    await c.publish(f"churn.v.{i % SUBJECTS}", b"hello")
    await c.close()


async def _ws(node: Node, i: int, session: aiohttp.ClientSession) -> None:
    async with session.ws_connect(f"http://127.0.0.1:{node.ports['web']}/ws") as ws:
        s = f"churn.w.{i % SUBJECTS}"
        await ws.send_json({"sub": s})
        await ws.receive_json(timeout=10)
        await ws.send_json({"psub": "churn.w.*", "syntax": "glob"})
        await ws.receive_json(timeout=10)
        await ws.send_json({"pub": s, "data": "hi"})


async def _telnet(node: Node, i: int) -> None:
    r, w = await asyncio.open_connection("127.0.0.1", node.ports["tel"])
    s = f"churn.t.{i % SUBJECTS}"
    w.write(f"sub {s}\r\npub {s} hi\r\nshow ports\r\n".encode())
    got = b""
    while b"tel" not in got:  # `show ports`' answer: its lines ran
        chunk = await r.read(65536)
        if not chunk:
            break
        got += chunk
    w.close()


def _sbus_one(node: Node, i: int) -> None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(10)
    s.connect(node.sock)
    subject = b"churn/s/%d" % (i % SUBJECTS)
    s.send(b"SUB " + subject)
    s.send(b"MSG " + subject + b"\x00hi")
    s.send(b"CMSG raims/ping\x00x")
    while (p := s.recv(1 << 16)) and p != b"CMSG raims/ping\x00x":
        pass
    s.close()


async def _sbus(node: Node, i: int) -> None:
    await asyncio.to_thread(_sbus_one, node, i)


async def _round(node: Node, edge: str, n: int, concurrent: int, base: int) -> None:
    sem = asyncio.Semaphore(concurrent)
    async with aiohttp.ClientSession() as session:
        fns: dict[str, Callable[[int], Awaitable[None]]] = {
            "nats": lambda i: _nats(node, i), "redis": lambda i: _redis(node, i),
            "rv": lambda i: _rv(node, i), "ws": lambda i: _ws(node, i, session),
            "telnet": lambda i: _telnet(node, i), "sbus": lambda i: _sbus(node, i)}

        async def one(i: int) -> None:
            async with sem:
                await asyncio.wait_for(fns[edge](i), 30)

        await asyncio.gather(*(one(base + i) for i in range(n)))


def _grown(first: dict[str, int], last: dict[str, int], least: int) -> dict[str, int]:
    return {k: last.get(k, 0) - first.get(k, 0) for k in sorted(last.keys() | first.keys())
            if last.get(k, 0) - first.get(k, 0) >= least}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--edges", default=",".join(EDGES))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("-n", type=int, default=1000)
    ap.add_argument("--concurrent", type=int, default=100)
    ap.add_argument("--header-timeout", type=float, default=20.0)
    ap.add_argument("--settle", type=float, default=0.0, help="seconds to wait after a round")
    ap.add_argument("--tracemalloc", action="store_true")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="raims-churn-"))
    tmp.chmod(0o755)
    node = Node(tmp, args.header_timeout, {"PYTHONTRACEMALLOC": "1"} if args.tracemalloc else {})
    rows: list[dict[str, object]] = []
    grown: dict[str, dict[str, dict[str, int]]] = {}
    try:
        fds0 = node.fds()
        start = node.snapshot()
        rows.append({"edge": "start", "round": 0, "rss_mb": start["rss_kb"] / 1024, "fds": start["fds"],
                     "objects": sum(start["types"].values()), "tasks": start["tasks"],
                     "timers": start["timers"], "traced_mb": start.get("traced_kb", 0) / 1024, "s": 0.0})
        base = 0
        for edge in args.edges.split(","):
            snaps = []
            for rnd in range(1, args.rounds + 1):
                t0 = time.monotonic()
                asyncio.run(_round(node, edge, args.n, args.concurrent, base))
                base += args.n
                took = time.monotonic() - t0
                deadline = time.monotonic() + 30
                while node.fds() > fds0 and time.monotonic() < deadline:
                    time.sleep(0.05)
                if args.settle:
                    time.sleep(args.settle)
                snap = node.snapshot()
                snaps.append(snap)
                rows.append({"edge": edge, "round": rnd, "rss_mb": snap["rss_kb"] / 1024, "fds": snap["fds"],
                             "objects": sum(snap["types"].values()), "tasks": snap["tasks"],
                             "timers": snap["timers"], "traced_mb": snap.get("traced_kb", 0) / 1024,
                             "s": took})
            least = max(args.n // 10, 1)
            grown[edge] = {"types": _grown(snaps[0]["types"], snaps[-1]["types"], least),
                           "tables": _grown(snaps[0]["tables"], snaps[-1]["tables"], least)}
            if args.tracemalloc:
                grown[edge]["tracemalloc_top"] = snaps[-1].get("tracemalloc", [])[:5]
    finally:
        node.proc.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    for edge, g in grown.items():
        print(f"{edge}: grew from round 1 to {args.rounds}: types {g['types']} tables {g['tables']}")
    report("churn", rows, {"n": args.n, "rounds": args.rounds, "grown": grown})


if __name__ == "__main__":
    main()
