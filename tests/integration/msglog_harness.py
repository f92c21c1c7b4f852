"""A cabal of real `ms_msglog serve` processes on unix sockets, for the ring tests.

Each node is one process (`python -m raims_node.msglog serve`), its stdout/stderr in a
file, its status JSON (state, links, counters) rewritten on every change; the test waits
on the status files with a deadline (never a fixed sleep) and checks the logs
themselves at the end: every origin's messages present once, in id order, with the
payloads sent. Processes are stopped by their own pid.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from raims_node.msglog import config, paths
from raims_node.msglog.reader import LogReader

PYTHON = sys.executable
CABAL = "cab"


class Cluster:
    def __init__(self, tmp: Path, types: list[str], retry: float = 0.3) -> None:
        self.tmp = tmp
        self.root = tmp / "message"
        self.sock = tmp / "s"
        self.sock.mkdir()
        self.names = [f"n{i}" for i in range(1, len(types) + 1)]
        raw: dict[str, dict[str, Any]] = {}
        for i, (name, t) in enumerate(zip(self.names, types, strict=True), 1):
            node: dict[str, Any] = {"id": i if t in ("hub", "source") else 0, "type": t}
            if t in ("hub", "source"):
                node["server"] = f"unix://{self.sock}/{name}.server"
            if t == "hub":
                node["client"] = f"unix://{self.sock}/{name}.client"
            raw[name] = node
        self.cabal = config.build(CABAL, self.names, raw)
        self.config = tmp / "cabal.nb"
        self.config.write_text(config.to_nb(self.cabal))
        self.partition = tmp / "partition.json"
        self.retry = retry
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.sent: dict[str, list[bytes]] = {n: [] for n in self.names}

    def number(self, name: str) -> int:
        return self.cabal.node(name).number

    def out(self, name: str) -> str:
        return (self.tmp / f"{name}.out").read_text(errors="replace")

    def start(self, name: str, timeout: float = 20.0, extra: list[str] | None = None) -> None:
        out = open(self.tmp / f"{name}.out", "ab")  # noqa: SIM115 (the child owns it)
        mark = (self.tmp / f"{name}.out").stat().st_size
        self.procs[name] = subprocess.Popen(
            [
                PYTHON,
                "-m",
                "raims_node.msglog",
                "serve",
                str(self.root),
                CABAL,
                name,
                "--config",
                str(self.config),
                "--create",
                "--partition",
                str(self.partition),
                "--status",
                str(self.tmp / f"{name}.status"),
                "--retry",
                str(self.retry),
                "--trace",
                *(extra or []),
            ],
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        out.close()
        deadline = time.monotonic() + timeout
        while "ready" not in self.out(name)[mark:]:
            if self.procs[name].poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not start:\n{self.out(name)[-2000:]}")
            time.sleep(0.02)

    def start_all(self) -> None:
        for n in self.names:
            self.start(n)

    def send(self, name: str, count: int, tag: str = "") -> None:
        """`count` messages originated at `name`."""
        proc = self.procs[name]
        assert proc.stdin is not None
        lines = [f"{name}{tag}-{len(self.sent[name]) + i}".encode() for i in range(count)]
        self.sent[name].extend(lines)
        proc.stdin.write(b"".join(line + b"\n" for line in lines))
        proc.stdin.flush()

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        proc = self.procs.pop(name)
        proc.send_signal(sig)
        proc.wait(10)

    def stop_all(self) -> None:
        for name in list(self.procs):
            proc = self.procs.pop(name)
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)

    def status(self, name: str) -> dict[str, Any]:
        try:
            return dict(json.loads((self.tmp / f"{name}.status").read_text()))
        except (FileNotFoundError, ValueError):
            return {}

    def expected_state(self, origins: list[str]) -> dict[str, int]:
        return {str(self.number(o)): len(self.sent[o]) for o in origins if self.sent[o]}

    def wait_states(self, nodes: list[str], origins: list[str], timeout: float = 30.0) -> None:
        """Until every one of `nodes` has every message sent from `origins` (and no more
        from them)."""
        want = self.expected_state(origins)
        deadline = time.monotonic() + timeout
        while True:
            behind = {}
            for n in nodes:
                got = self.status(n).get("state", {})
                have = {k: v for k, v in got.items() if k in want}
                if have != want:
                    behind[n] = got
            if not behind:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"not caught up: want {want}, have {behind}")
            time.sleep(0.05)

    def log_messages(self, name: str) -> list[tuple[int, int, bytes]]:
        reader = LogReader(paths.log_dir(self.root, CABAL, name))
        try:
            return [(r.origin, r.mid, r.data) for r in reader.all_records()]
        finally:
            reader.close()

    def check_exactly_once(self, name: str, origins: list[str]) -> None:
        """`name`'s log holds each origin's messages once, in order, as they were sent."""
        by_origin: dict[int, list[tuple[int, bytes]]] = {}
        for origin, mid, data in self.log_messages(name):
            by_origin.setdefault(origin, []).append((mid, data))
        for o in origins:
            got = by_origin.get(self.number(o), [])
            want = [(i + 1, line) for i, line in enumerate(self.sent[o])]
            assert got == want, (
                f"{name}: origin {o}: {len(got)} logged, {len(want)} sent; first diff "
                + str(next(((g, w) for g, w in zip(got, want, strict=False) if g != w), None))
            )

    def feeds(self) -> set[tuple[str, str]]:
        """(server, client) of every link some running node reports."""
        out = set()
        for n in self.procs:
            for link in self.status(n).get("links", []):
                out.add((n, link["peer"]) if link["direction"] == "feed" else (link["peer"], n))
        return out

    def wait_feeds(self, want: set[tuple[str, str]], timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while self.feeds() != want:
            if time.monotonic() > deadline:
                raise AssertionError(f"links {sorted(self.feeds())}, want {sorted(want)}")
            time.sleep(0.05)


def ring(names: list[str]) -> set[tuple[str, str]]:
    return {(names[i], names[(i + 1) % len(names)]) for i in range(len(names))}
