"""rvd compatibility mode (issue 25 point 2; manual "rvd Compatibility").

- `ms_gen_key -s rvd -o rv.yaml` writes the configuration rvd loads.
- `rvd -listen P -no-http -foreground -cfg rv.yaml` (ms_server with rvd arguments)
  serves RV clients on P and listens on nothing else.
- `rvd` with no arguments listens on the fixed ports 7500 (RV) and 7580 (web), which
  other tests running at the same time must not see taken. Decision: the test runs it
  in a network namespace of its own (`unshare -rn`, an unprivileged user and network
  namespace; the probe brings its `lo` up), where the ports are always free. Where
  namespaces are not available it runs on the host only if both ports are free, and
  skips, saying which port is taken, otherwise.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

from raims_node.config.test_adj import free_port
from tests.integration.harness import PYTHON, NodeProc
from tests.integration.rv_client import RvClient

ROOT = Path(__file__).resolve().parents[2]


def _gen_rv_yaml(directory: Path) -> Path:
    out = subprocess.run([PYTHON, "-m", "raims_node.config.gen_key", "-s", "rvd", "-o", "rv.yaml"], cwd=directory,
                         input="y\n", capture_output=True, text=True, timeout=60, check=True)
    assert '- Output config to "rv.yaml"' in out.stdout
    return directory / "rv.yaml"


def test_gen_key_makes_rv_yaml(tmp_path: Path) -> None:
    data = yaml.safe_load(_gen_rv_yaml(tmp_path).read_text())
    assert [s["svc"] for s in data["services"]] == ["rvd"] and data["services"][0]["pri"]
    assert data["parameters"]["salt_data"] and data["parameters"]["pass_data"]


def _listening_ports(pid: int) -> set[int]:
    """The TCP ports process `pid` listens on (its socket inodes in /proc/net/tcp*)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            cols = line.split()
            if cols[3] == "0A" and cols[9] in inodes:  # LISTEN
                ports.add(int(cols[1].rpartition(":")[2], 16))
    return ports


def test_rv_yaml_of_a_directory_with_another_service_says_how_to_choose(tmp_path: Path) -> None:
    """The README in one directory: `ms_gen_key -u A B C -s test`, then `ms_gen_key -y -s
    rvd -o rv.yaml` bundles both services; rvd says how to pick one (was: "expected one
    service, configured: rvd, test")."""
    subprocess.run([PYTHON, "-m", "raims_node.config.gen_key", "-u", "A", "-s", "test", "-y"], cwd=tmp_path,
                   capture_output=True, timeout=60, check=True)
    _gen_rv_yaml(tmp_path)
    run = subprocess.run([PYTHON, "-m", "raims_node.server", "-listen", str(free_port()), "-no-http",
                          "-foreground", "-cfg", "rv.yaml"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and len(run.stderr.splitlines()) == 1, run.stderr
    assert "rvd, test" in run.stderr and "-user NAME.SERVICE" in run.stderr and "-d DIR" in run.stderr


def test_rvd_listen_port_only(tmp_path: Path) -> None:
    _gen_rv_yaml(tmp_path)
    port = free_port()
    node = NodeProc("rvd", ["-listen", str(port), "-no-http", "-foreground", "-cfg", "rv.yaml"], tmp_path)
    try:
        node.wait_for(rf"listening on .*:{port}$", 30)
        node.wait_for(r"network converges", 30)

        async def client() -> bytes:
            c = await RvClient.connect(port)
            await c.listen("rvd.test")
            await c.publish("rvd.test", b"payload")
            m = await c.next(5, "rvd.test")
            await c.close()
            return bytes(m.data)

        assert asyncio.run(client()) == b"payload"
        assert _listening_ports(node.proc.pid) == {port}
        assert any(f"_{port}.rvd[" in line for line in node.lines)  # the user is <host>_<port>
    finally:
        node.stop()


def _launcher(directory: Path) -> None:
    """An `rvd` program beside rv.yaml: ms_server's rvd console script."""
    rvd = directory / "rvd"
    rvd.write_text(f"#!{PYTHON}\nimport sys\nfrom raims_node.server import rvd_main\nsys.exit(rvd_main())\n")
    rvd.chmod(rvd.stat().st_mode | stat.S_IXUSR)


def _namespaces() -> bool:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    return subprocess.run(["unshare", "-rn", "true"], capture_output=True, timeout=10).returncode == 0


def _taken(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def test_rvd_without_arguments(tmp_path: Path) -> None:
    _gen_rv_yaml(tmp_path)
    _launcher(tmp_path)
    probe = [PYTHON, "-m", "tests.integration.rvd_probe", str(tmp_path)]
    if _namespaces():
        cmd = ["unshare", "-rn", *probe, "--lo"]
    else:
        busy = [p for p in (7500, 7580) if _taken(p)]
        if busy:
            pytest.skip(f"no network namespaces here (unshare -rn) and port(s) {busy} are taken on this host")
        cmd = probe
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=90, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    # the manual's lines, in its order: the daemon's listeners, then the detach
    launcher = result["launcher"]
    assert launcher.index("rvd running at ") < launcher.index("web running at ") \
        < launcher.index("moving to background daemon"), launcher
    assert result.get("web_status") is not None, result
    assert result.get("rv_client") is True, result
    assert result["exited_on_hup"], result
    # the console's RV tables (through the web service): the client's session, its listen
    assert '"tester"' in result["show_hosts"] and '"7500"' in result["show_hosts"], result["show_hosts"]
    assert "probe.subject" in result["show_rvsub"], result["show_rvsub"]


def test_rvd_no_permanent_exits_after_the_last_client(tmp_path: Path) -> None:
    _gen_rv_yaml(tmp_path)
    port = free_port()
    node = NodeProc("rvd", ["-listen", f"127.0.0.1:{port}", "-no-http", "-foreground", "-no-permanent",
                            "-cfg", "rv.yaml"], tmp_path)
    try:
        node.wait_for(rf"listening on 127.0.0.1:{port}$", 30)

        async def one_client() -> None:
            c = await RvClient.connect(port)
            await c.close()

        asyncio.run(one_client())
        assert node.proc.wait(15) == 0
    finally:
        node.stop()
