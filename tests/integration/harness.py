"""Real ms_server processes on 127.0.0.1 for integration tests.

Each process's log (stderr) is read by a thread into a list; tests wait for a line
matching a pattern (with a deadline), never sleep for a fixed time. Processes are
stopped by their own pid, SIGTERM first, then SIGKILL. A traceback in a node's log fails
the test during which it was logged (conftest.py's `no_node_tracebacks`): an exception a
node survived, caught by asyncio or uvloop, is still a bug (its client or timer was lost).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml

from raims_node.linkstate import parse_graph

PYTHON = sys.executable
STARTED: list[NodeProc] = []  # every node process not yet checked for a traceback after it ended


class NodeProc:
    def __init__(self, name: str, args: list[str], cwd: Path, stdin: bytes | None = None,
                 prefix: list[str] | None = None) -> None:
        self.name = name
        self.args = args
        self.lines: list[str] = []
        self._checked = 0  # lines already searched for a traceback
        STARTED.append(self)
        self._cond = threading.Condition()
        self.proc = subprocess.Popen(
            [*(prefix or []), PYTHON, "-m", "raims_node.server", *args], cwd=cwd,  # prefix: `ip netns exec NS`
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        if stdin is not None:
            assert self.proc.stdin is not None
            self.proc.stdin.write(stdin)
            self.proc.stdin.close()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            with self._cond:
                self.lines.append(raw.decode(errors="replace").rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait_for(self, pattern: str, timeout: float = 20.0, after: int = 0) -> re.Match[str]:
        """The first log line (from index `after`) matching `pattern`."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        seen = after
        with self._cond:
            while True:
                for i in range(seen, len(self.lines)):
                    m = rx.search(self.lines[i])
                    if m:
                        return m
                seen = len(self.lines)
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and seen == len(self.lines)):
                    tail = "\n".join(self.lines[-15:])
                    raise TimeoutError(f"{self.name}: no line matching {pattern!r}; last lines:\n{tail}")
                self._cond.wait(min(left, 0.2))

    def listening(self, timeout: float = 20.0) -> list[str]:
        self.wait_for(r"listening on", timeout)
        return [m.group(1) for line in self.lines if (m := re.search(r"listening on (\S+)", line))]

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 5.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)
        self._thread.join(2)
        return self.proc.returncode

    def new_traceback(self) -> str | None:
        """The first traceback logged since the last call, with its context; None if none."""
        lines, start = self.lines, self._checked
        self._checked = len(lines)
        first = next((i for i in range(start, len(lines)) if lines[i].startswith("Traceback")), None)
        return None if first is None else "\n".join(lines[max(0, first - 2):first + 24])


def graph_config(tmp: Path, graph: str, heartbeat: str = "1 sec", web: bool = True) -> tuple[Path, list[str]]:
    """Run ms_test_adj on `graph`; add fast heartbeats and a web transport; return
    (config file, the printed ms_server command lines)."""
    gfile = tmp / "graph.txt"
    gfile.write_text(graph)
    out = subprocess.run([PYTHON, "-m", "raims_node.config.test_adj", str(gfile)],
                         check=True, capture_output=True, text=True).stdout
    commands = [line[2:] for line in out.splitlines() if line.startswith("# ms_server ")]
    data = yaml.safe_load(out)
    data.setdefault("parameters", {})["heartbeat"] = heartbeat
    if web:
        data.setdefault("transports", []).append(
            {"tport": "web", "type": "web", "route": {"listen": "127.0.0.1", "port": 0}})
    cfg = tmp / "graph.yaml"
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))
    return cfg, commands


MANUAL_GRAPH = """node A B C D
tcp_link_ab A B : 200
tcp_link_bc B C : 100
tcp_link_ac A C : 200
tcp_link_bd B D : 200
tcp_link_dc D C : 300
"""


def poll(check: Callable[[], bool], timeout: float = 10.0, interval: float = 0.1) -> bool:
    """Re-check `check()` until it holds or `timeout` passes (for state only visible by
    asking, such as a JSON endpoint); returns the last result."""
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return True
        if time.monotonic() >= deadline:
            return False
        threading.Event().wait(interval)


def diag_snapshot(node: NodeProc, path: Path, timeout: float = 30.0) -> dict[str, Any]:
    """The node's leak snapshot (raims_node/diag.py): SIGUSR1, then `path` (the node's
    $RAIMS_DIAG_DUMP) written again."""
    path.unlink(missing_ok=True)
    node.proc.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{node.name}: no diagnostic snapshot in {path}")
        threading.Event().wait(0.02)
    data: dict[str, Any] = json.loads(path.read_text())
    return data


TELNET_TPORT = {"tport": "tel", "type": "telnet", "route": {"listen": "127.0.0.1", "port": 0}}


def add_transports(cfg: Path, *transports: dict[str, object]) -> None:
    """Append transports (a telnet console, ...) to a written configuration file."""
    data = yaml.safe_load(cfg.read_text())
    data["transports"].extend(transports)
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))


def get_json(addr: str, query: str) -> tuple[int, object]:
    """A web transport's answer to `?<query>` (a console command), or to /healthz for ""."""
    url = f"http://{addr}/?{query.replace(' ', '%20')}" if query else f"http://{addr}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def web_addr(node: NodeProc) -> str:
    return node.wait_for(r"web listening on (\S+)", 10).group(1)


CONVERGED = r"network converges [\d.]+ secs, {n} uids authenticated"


def graph_adjacencies(graph: str) -> int:
    """The rows of `show adjacency` once every link of `graph` (ms_test_adj's text) is up:
    each link as seen from each of its ends."""
    return sum(len(link.nodes) * (len(link.nodes) - 1) for link in parse_graph(graph).links)


def wait_whole_graph(addrs: Iterable[str], graph: str, timeout: float = 30.0) -> None:
    """Until every node (its web transport at one of `addrs`) is converged with every link
    of `graph` in its link-state database.

    A node logs CONVERGED for all the other nodes as soon as it knows them, which a graph
    with redundant links (MANUAL_GRAPH) reaches before its last link is up; that link then
    moves routes (A->D from A-C-D to A-B-D) while a test may be streaming. Relays keep
    what is in flight on the old route (router/route_grace.py, test_route_change_net), but
    a test that measures a path should measure the one it means."""
    addrs, want = list(addrs), graph_adjacencies(graph)

    def whole() -> bool:
        for addr in addrs:
            status, rows = get_json(addr, "show adjacency")
            if status != 200 or not isinstance(rows, list) or len(rows) != want or get_json(addr, "")[0] != 200:
                return False
        return True

    assert poll(whole, timeout), f"the network never had all {want} adjacencies converged"


class PeerServer:
    """A peer's server (nats-server, redis-server) for side-by-side tests: started on
    127.0.0.1, ready once `ready` answers True (an OSError: not yet), stopped by its pid."""

    proc: subprocess.Popen[bytes]

    def _start(self, args: list[str], ready: Callable[[], bool], timeout: float = 20.0) -> None:
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while True:
            try:
                if ready():
                    return
            except OSError:
                pass
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.stop()
                raise OSError(f"{args[0]} did not start (exit status {self.proc.poll()})")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
