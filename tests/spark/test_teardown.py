"""Two teardown tasks on one machine stop each daemon once (the CI run of 1c646fe
reported 5 daemons stopped of 4).

The daemons here are stand-ins with the server's command line that behave as it does
when told to stop: the pid file goes first, the process a moment later. The second task
starts once a daemon the first is stopping has removed its pid file, or once the first
waits at the barrier: without
the barrier it lists that daemon as a stray and stops it a second time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from spark_app.jobs import daemons
from spark_app.jobs.hosts import TaskHost
from spark_app.jobs.teardown import Stopped, stop_on_host

SERVICE = "svc"
NODES = 4
WAIT_S = 10.0

STAND_IN = """
import os, signal, sys, time
pid_file = sys.argv[sys.argv.index("-d") + 1].replace("config.yaml", "ms_server.pid")
def on_term(*_):
    if os.path.exists(pid_file):
        os.unlink(pid_file)
        signal.setitimer(signal.ITIMER_REAL, 0.5)  # lives on after its pid file is gone
signal.signal(signal.SIGTERM, on_term)
signal.signal(signal.SIGALRM, lambda *_: sys.exit(0))
open(pid_file, "w").write(f"{os.getpid()}\\n")
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    signal.pause()
"""


@pytest.fixture
def run_dir(tmp_path: Path) -> object:
    procs = []
    for i in range(NODES):
        nd = daemons.NodeDir(tmp_path / SERVICE / f"node{i}")
        nd.path.mkdir(parents=True)
        nd.config.write_text("{}\n")
        procs.append(subprocess.Popen([sys.executable, "-c", STAND_IN, daemons.SERVER_MODULE,
                                       "-d", str(nd.config)]))
    deadline = time.monotonic() + WAIT_S
    while not all(daemons.daemon_pid(nd) for nd in daemons.node_dirs(tmp_path, SERVICE)):
        assert time.monotonic() < deadline, "the stand-in daemons did not start"
        time.sleep(0.01)
    yield tmp_path
    for p in procs:
        p.kill()
        p.wait()


def test_two_tasks_on_one_machine_stop_each_daemon_once(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first_busy = threading.Event()  # the first task stops a daemon, or waits for the second
    barrier = threading.Barrier(2, timeout=WAIT_S)
    terminate = daemons._terminate

    def observed_terminate(pid: int, timeout: float) -> bool:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + WAIT_S
        while pid in {daemons._read_pid(nd) for nd in daemons.node_dirs(run_dir, SERVICE)}:
            assert time.monotonic() < deadline, f"pid {pid} kept its pid file"
            time.sleep(0.01)
        first_busy.set()
        return terminate(pid, timeout)

    def observed_barrier() -> None:
        first_busy.set()
        barrier.wait()

    monkeypatch.setattr(daemons, "_terminate", observed_terminate)
    results: list[tuple[list[Stopped], list[str]]] = [([], []), ([], [])]

    def task(rank: int) -> None:
        host = TaskHost(rank, f"127.0.0.1:{40000 + rank}", "127.0.0.1", rank, 2)
        results[rank] = stop_on_host(str(run_dir), SERVICE, host, observed_barrier)

    first = threading.Thread(target=task, args=(1,))  # a lone stray falls to rank 0's share
    first.start()
    assert first_busy.wait(WAIT_S)
    task(0)
    first.join(WAIT_S)
    stopped = [s.pid for r in results for s in r[0] if s.pid is not None]
    assert [e for r in results for e in r[1]] == []
    assert len(stopped) == NODES and len(set(stopped)) == NODES
    assert daemons.strays(run_dir, SERVICE) == []
