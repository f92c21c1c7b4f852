"""ms_server processes on one host: node directories, detached start, listen addresses
from the log, and stop by pid file.

Issue "The main job", items 3 and 8; manual "Running the MS server" (-d -u -t -l -b and
the `pid_file` / `working_directory` parameters). DESIGN.md "Spark environment": a process
started from a task must leave the task's process session; `ms_server -b` forks twice
and calls setsid, so a daemon is neither in the Python worker's process group (which
spark.stop() signals) nor its child (no zombie when it exits while the worker lives).

A node directory, `<run_dir>/<service>/<node>/` (0700):
    config.yaml      the node's configuration: its sealed key, transports, parameters
    .salt  .pass     its salt and password (0600), as an exported ms_gen_key directory
    ms_server.pid    written by the daemon once detached, removed when it exits
    ms_server.log    its log; the previous start's log is kept as ms_server.log.1

Decisions:
- A daemon is the process of the pid file whose command line runs raims_node.server on
  this node's config.yaml; any other process behind a stale or recycled pid is never
  signalled, and a zombie counts as stopped.
- Listen addresses come from the log's "listening on <addr>" lines, written in start
  order: `-t` listeners in order, then connect-mode mesh transports (they listen on an
  ephemeral port as well), then the web transport, which also logs "web listening on".
- Stop is SIGTERM (the daemon sends BYE on its links and exits), then SIGKILL after
  STOP_TIMEOUT_S. A daemon whose pid file or directory is gone is still found, by its
  command line naming a configuration under the service's run directory (`strays`).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

from spark_app.jobs.errors import DaemonError

CONFIG_FILE: Final = "config.yaml"
PID_FILE: Final = "ms_server.pid"
LOG_FILE: Final = "ms_server.log"
SECRET_FILES: Final = {"salt_data": ("salt", ".salt"), "pass_data": ("pass", ".pass")}
DIR_MODE: Final = 0o700
FILE_MODE: Final = 0o600
SERVER_MODULE: Final = "raims_node.server"
DETACH_TIMEOUT_S: Final = 60.0  # ms_server loads and checks its keys before it detaches
PID_FILE_WAIT_S: Final = 10.0
STOP_TIMEOUT_S: Final = 5.0
POLL_S: Final = 0.05
LOG_TAIL_LINES: Final = 6

_LISTENING = re.compile(r"(?<!web )listening on (\S+)")


@dataclass(frozen=True)
class NodeDir:
    path: Path

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def config(self) -> Path:
        return self.path / CONFIG_FILE

    @property
    def pid_file(self) -> Path:
        return self.path / PID_FILE

    @property
    def log(self) -> Path:
        return self.path / LOG_FILE

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(text[-lines:]) or "(empty log)"


def service_dir(run_dir: str | Path, service: str) -> Path:
    return Path(run_dir) / service


def node_dir(run_dir: str | Path, service: str, node: str) -> NodeDir:
    return NodeDir(service_dir(run_dir, service) / node)


def node_dirs(run_dir: str | Path, service: str) -> list[NodeDir]:
    """Every node directory of `service` on this host, by name."""
    root = service_dir(run_dir, service)
    if not root.is_dir():
        return []
    return [NodeDir(p) for p in sorted(root.iterdir()) if (p / CONFIG_FILE).is_file()]


def _write_private(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".new")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    tmp.replace(path)


def write_config(nd: NodeDir, config: dict[str, Any]) -> None:
    """Write a node's single-file configuration, its salt and password moved out to
    `.salt` / `.pass`, as ms_gen_key lays out an exported directory."""
    nd.path.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    nd.path.chmod(DIR_MODE)
    params = dict(config.get("parameters", {}))
    for data_param, (file_param, file_name) in SECRET_FILES.items():
        if data_param in params:
            _write_private(nd.path / file_name, f"{params.pop(data_param)}\n")
            params[file_param] = file_name
    _write_private(nd.config, yaml.safe_dump({**config, "parameters": params}, sort_keys=False))


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def _read_pid(nd: NodeDir) -> int | None:
    try:
        text = nd.pid_file.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def daemon_pid(nd: NodeDir) -> int | None:
    """The pid of this node's running daemon, or None."""
    pid = _read_pid(nd)
    if pid is None or not _alive(pid):
        return None
    cmd = _cmdline(pid)
    return pid if SERVER_MODULE in cmd and str(nd.config) in cmd else None


def server_command(nd: NodeDir, user: str, service: str, listen: Sequence[str],
                   connect: Sequence[str], python: str = sys.executable) -> list[str]:
    tports = [f"{t}.listen" for t in listen] + [f"{t}.connect" for t in connect]
    return [python, "-m", SERVER_MODULE, "-d", str(nd.config), "-u", f"{user}.{service}",
            "-t", *tports, "-l", str(nd.log), "-b"]


def spawn(nd: NodeDir, command: Sequence[str]) -> subprocess.Popen[str]:
    """Run `command` (an `ms_server ... -b`); the previous log is kept as `.1`. The
    process returns once the daemon has detached: see `detached`."""
    if nd.log.exists():
        nd.log.replace(nd.log.with_name(LOG_FILE + ".1"))
    nd.pid_file.unlink(missing_ok=True)
    return subprocess.Popen(command, cwd=nd.path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def detached(proc: subprocess.Popen[str], nd: NodeDir, host: str) -> None:
    """Wait for a spawned ms_server to detach; DaemonError naming the host and log file
    when it refused to start (bad configuration or keys: exit status 2)."""
    try:
        out, err = proc.communicate(timeout=DETACH_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise DaemonError(f"node {nd.name} on host {host}: ms_server did not detach within "
                          f"{DETACH_TIMEOUT_S:.0f}s; log file {nd.log}") from None
    if proc.returncode != 0:
        raise DaemonError(f"node {nd.name} on host {host}: ms_server exited {proc.returncode}: "
                          f"{(err or out).strip()[-500:]}; log file {nd.log}")


def _listening(nd: NodeDir) -> tuple[list[str], bool]:
    """Listen addresses logged so far, and whether the web transport's line is among them."""
    try:
        text = nd.log.read_text(errors="replace")
    except OSError:
        return [], False
    return _LISTENING.findall(text), "web listening on" in text


def wait_listening(nd: NodeDir, count: int, host: str, timeout: float) -> tuple[int, list[str]]:
    """The daemon's pid and its first `count` listen addresses, once logged; raises
    DaemonError naming the host and the log file when it exits or times out first."""
    started = time.monotonic()
    deadline = started + timeout
    seen_pid: int | None = None
    while True:
        addrs, _ = _listening(nd)
        pid = daemon_pid(nd)
        seen_pid = pid or seen_pid
        if pid is not None and len(addrs) >= count:
            return pid, addrs[:count]
        waited = time.monotonic() - started
        gone = seen_pid is not None and pid is None
        if gone or (seen_pid is None and waited > PID_FILE_WAIT_S):
            raise DaemonError(f"node {nd.name} on host {host} exited while starting; log file "
                              f"{nd.log}:\n{nd.log_tail()}")
        if time.monotonic() > deadline:
            raise DaemonError(f"node {nd.name} on host {host}: {len(addrs)} of {count} listeners up "
                              f"after {timeout:.0f}s; log file {nd.log}:\n{nd.log_tail()}")
        time.sleep(POLL_S)


def _terminate(pid: int, timeout: float) -> bool:
    """SIGTERM, then SIGKILL; whether the process is gone."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not _alive(pid):
                return True
            time.sleep(POLL_S)
    return False


def stop(nd: NodeDir, timeout: float = STOP_TIMEOUT_S) -> int | None:
    """Stop this node's daemon; the pid stopped, or None when none was running."""
    pid = daemon_pid(nd)
    if pid is not None and not _terminate(pid, timeout):
        raise DaemonError(f"node {nd.name}: pid {pid} survived SIGKILL; log file {nd.log}")
    nd.pid_file.unlink(missing_ok=True)
    return pid


def strays(run_dir: str | Path, service: str) -> list[tuple[int, NodeDir]]:
    """ms_server processes running a configuration under the service's run directory
    that no pid file leads to (a pid file lost, a node directory removed): found by
    their command line, so that a teardown leaves no orphans either."""
    root = service_dir(run_dir, service)
    known = {daemon_pid(nd) for nd in node_dirs(run_dir, service)}
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in known:
            continue
        cmd = _cmdline(int(entry.name))
        if SERVER_MODULE not in cmd or "-d" not in cmd[:-1]:
            continue
        config = Path(cmd[cmd.index("-d") + 1])
        if config.parent.parent == root and _alive(int(entry.name)):
            found.append((int(entry.name), NodeDir(config.parent)))
    return sorted(found, key=lambda pn: pn[0])


def stop_stray(pid: int, nd: NodeDir, timeout: float = STOP_TIMEOUT_S) -> int:
    if not _terminate(pid, timeout):
        raise DaemonError(f"node {nd.name}: stray pid {pid} survived SIGKILL")
    return pid
