"""Start-up errors of ms_server and rvd reach the person who started them as one line and
a non-zero exit, in the foreground and when detached (-b, rvd's default): a port in use,
a log file, pid_file or working_directory that cannot be used. A detached daemon's
starter exits only once the daemon is listening (server._Starter)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import yaml

from raims_node.config.test_adj import free_port
from tests.integration.harness import PYTHON, graph_config, poll

AB = "node A B\ntcp_link_ab A B : 100\n"


def _config(tmp: Path, **params: str) -> tuple[Path, int]:
    cfg, _ = graph_config(tmp, AB, web=False)
    data = yaml.safe_load(cfg.read_text())
    data["parameters"].update(params)
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))
    return cfg, int(data["transports"][0]["route"]["port"])


def _ms_server(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PYTHON, "-m", "raims_node.server", *args], capture_output=True, text=True,
                          timeout=60, cwd=tmp)


def _one_line_error(run: subprocess.CompletedProcess[str], code: int, *words: str) -> None:
    assert run.returncode == code, (run.returncode, run.stdout, run.stderr)
    assert "Traceback" not in run.stderr, run.stderr
    assert all(w in run.stderr for w in words), run.stderr


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_detached_server_with_its_port_taken_fails_with_the_error(tmp_path: Path) -> None:
    pid_file = tmp_path / "ms.pid"
    cfg, port = _config(tmp_path, pid_file=str(pid_file))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", port))
        busy.listen()
        run = _ms_server(tmp_path, "-d", str(cfg), "-u", "A", "-t", "link_ab.listen", "-b")
    _one_line_error(run, 3, "link_ab", "in use")
    assert not pid_file.exists()  # the daemon is gone and took its pid file with it


def test_detached_server_returns_once_listening(tmp_path: Path) -> None:
    pid_file = tmp_path / "ms.pid"
    cfg, port = _config(tmp_path, pid_file=str(pid_file))
    run = _ms_server(tmp_path, "-d", str(cfg), "-u", "A", "-t", "link_ab.listen", "-b")
    assert run.returncode == 0, run.stderr
    pid = int(pid_file.read_text())
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass  # no wait: the starter returned after the daemon bound its port
    finally:
        os.kill(pid, signal.SIGTERM)
        assert poll(lambda: _gone(pid), 10), "the daemon did not stop"


def test_log_file_pid_file_and_working_directory_errors_are_one_line(tmp_path: Path) -> None:
    cfg, _ = _config(tmp_path)
    start = ("-d", str(cfg), "-u", "A", "-t", "link_ab.listen")
    _one_line_error(_ms_server(tmp_path, *start, "-l", str(tmp_path / "no" / "ms.log")), 2, "log file", "no/ms.log")
    _one_line_error(_ms_server(tmp_path, *start, "-l", str(tmp_path)), 2, "log file")  # a directory
    for background in ((), ("-b",)):
        bad_pid, _ = _config(tmp_path, pid_file=str(tmp_path / "no" / "ms.pid"))
        _one_line_error(_ms_server(tmp_path, "-d", str(bad_pid), *start[2:], *background), 2, "pid_file", "no/ms.pid")
    bad_wd, _ = _config(tmp_path, working_directory=str(tmp_path / "no"))
    _one_line_error(_ms_server(tmp_path, "-d", str(bad_wd), *start[2:], "-b"), 2, "working_directory", "/no")


def test_a_value_past_a_parameters_limit_is_one_line(tmp_path: Path) -> None:
    """A heartbeat or write high-water mark of 1e23 overflowed the hello's u32 or the
    event loop's C long: a traceback, or a node whose links never came up."""
    for name, value in (("heartbeat", "99999999999999999999999"), ("tcp_write_highwater", "99999999999999999999999")):
        cfg, _ = _config(tmp_path, **{name: value})
        _one_line_error(_ms_server(tmp_path, "-d", str(cfg), "-u", "A", "-t", "link_ab.listen"), 2, name, "more than")


def test_detached_rvd_with_its_port_taken_fails_with_the_error(tmp_path: Path) -> None:
    port = free_port()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", port))
        busy.listen()
        run = _ms_server(tmp_path, "-listen", f"127.0.0.1:{port}", "-no-http", "-log", str(tmp_path / "rvd.log"))
    assert "moving to background daemon" not in run.stdout  # said once the daemon serves, as the manual
    _one_line_error(run, 3, "rvd", "in use")
    _one_line_error(_ms_server(tmp_path, "-listen", str(port), "-log", str(tmp_path / "no" / "rvd.log")), 2, "log file")


def test_a_user_name_the_network_cannot_carry_is_refused(tmp_path: Path) -> None:
    cfg, _ = _config(tmp_path)
    _one_line_error(_ms_server(tmp_path, "-d", str(cfg), "-u", "a b", "-t", "link_ab.listen"), 2, "'a b'")
    _one_line_error(_ms_server(tmp_path, "-listen", str(free_port()), "-no-http", "-foreground", "-user", "a b"),
                    2, "-user name 'a b'")


def test_one_stop_delivered_twice_is_still_a_clean_stop(tmp_path: Path) -> None:
    """`timeout` (and a kill of the process group) sends SIGTERM to the child and to its
    group: the same stop twice within a moment is one clean stop, exit 0, not the
    second-signal hard exit 1."""
    cfg, port = _config(tmp_path)
    proc = subprocess.Popen([PYTHON, "-m", "raims_node.server", "-d", str(cfg), "-u", "A", "-t", "link_ab.listen"],
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert poll(lambda: _listening(port), 20)
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.02)  # the scenario: the second copy a moment after the first was handled
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def test_detached_server_with_a_relative_config_dir_and_map_moves_to_its_working_directory(tmp_path: Path) -> None:
    """The README's `ms_gen_key -u A -s test` then `ms_server -d config -b -m kv.map`,
    with `working_directory` set: the key files and the map are the ones named relative
    to where it was started, not to the directory it moved to."""
    subprocess.run([PYTHON, "-m", "raims_node.config.gen_key", "-u", "A", "-s", "test", "-y"], cwd=tmp_path,
                   check=True, capture_output=True, timeout=60)
    subprocess.run([PYTHON, "-m", "raims_node.kv.cli", "init", "kv.map"], cwd=tmp_path, check=True,
                   capture_output=True, timeout=60)
    (tmp_path / "wd").mkdir()
    pid_file = tmp_path / "ms.pid"
    (tmp_path / "config" / "startup.yaml").write_text(
        yaml.safe_dump({"pid_file": str(pid_file), "working_directory": str(tmp_path / "wd")}))
    run = _ms_server(tmp_path, "-d", "config", "-u", "A", "-m", "kv.map", "-b")
    assert run.returncode == 0, (run.stdout, run.stderr)
    pid = int(pid_file.read_text())
    try:
        assert os.readlink(f"/proc/{pid}/cwd") == str(tmp_path / "wd")
        assert not (tmp_path / "wd" / "kv.map").exists()
    finally:
        os.kill(pid, signal.SIGTERM)
        assert poll(lambda: _gone(pid), 10), "the daemon did not stop"
