"""`listen` defaults to `*` (manual, TCP transport table): a link listener without a
`listen` host is reachable on a non-loopback address (issue 28).

The scenario runs inside a fresh network namespace (`unshare -rn`: a user and network
namespace, so no privilege is needed where user namespaces are allowed, and nothing on
the host's network is touched): loopback up, a dummy interface (else a veth pair, both
ends inside) with 10.200.0.1/24, node A listening on transport link_ab with no `listen`
host, node B connecting to 10.200.0.1: they must link and converge. The contrast: a
listener with `listen: 127.0.0.1` refuses a connection to 10.200.0.1. Skipped, with the
reason, where the namespace or the interface cannot be made.

    python -m tests.integration.test_listen_netns --inside DIR   (what the test runs in the namespace)
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.integration.harness import PYTHON, NodeProc, graph_config

ADDR = "10.200.0.1"
CONVERGED = r"network converges [\d.]+ secs, 1 uids authenticated"
CANNOT = 77  # exit status of the scenario when the namespace cannot be set up
RESULT = "NETNS-RESULT "


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


def _interfaces() -> str:
    """Loopback and a non-loopback interface holding ADDR; how it was made."""
    _ip("link", "set", "lo", "up")
    try:
        _ip("link", "add", "d0", "type", "dummy")
        dev, how = "d0", "dummy"
    except subprocess.CalledProcessError:  # no dummy driver: a veth pair, both ends here
        _ip("link", "add", "v0", "type", "veth", "peer", "name", "v1")
        _ip("link", "set", "v1", "up")
        dev, how = "v0", "veth"
    _ip("addr", "add", f"{ADDR}/24", "dev", dev)
    _ip("link", "set", dev, "up")
    return how


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return int(s.getsockname()[1])


def _config(tmp: Path, route: dict[str, object]) -> Path:
    cfg, _ = graph_config(tmp, "node A B\ntcp_link_ab A B : 100\n", web=False)
    data = yaml.safe_load(cfg.read_text())
    link = next(t for t in data["transports"] if t["tport"] == "link_ab")
    link["route"] = route
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))
    return cfg


def _inside(tmp: Path) -> int:
    """The scenario, run inside the namespace; prints RESULT + JSON."""
    try:
        how = _interfaces()
    except (OSError, subprocess.SubprocessError) as exc:
        print(f"cannot set up {ADDR} in the namespace: {exc}", file=sys.stderr)
        return CANNOT
    out: dict[str, object] = {"interface": how}
    port = _free_port()
    cfg = _config(tmp / "any", {"connect": ADDR, "port": port})  # no `listen`: `*`
    nodes = []
    try:
        a = NodeProc("A", ["-d", str(cfg), "-u", "A", "-t", "link_ab.listen"], cfg.parent)
        nodes.append(a)
        out["bound"] = a.listening()
        b = NodeProc("B", ["-d", str(cfg), "-u", "B", "-t", "link_ab.connect"], cfg.parent)
        nodes.append(b)
        a.wait_for(CONVERGED, 20)
        b.wait_for(CONVERGED, 20)
        out["converged"] = True
        port2 = _free_port()
        cfg2 = _config(tmp / "lo", {"listen": "127.0.0.1", "port": port2})
        a2 = NodeProc("A", ["-d", str(cfg2), "-u", "A", "-t", "link_ab.listen"], cfg2.parent)
        nodes.append(a2)
        out["bound_loopback"] = a2.listening()
        try:
            socket.create_connection((ADDR, port2), timeout=5).close()
            out["loopback_only_refused"] = False
        except ConnectionRefusedError:
            out["loopback_only_refused"] = True
    finally:
        for node in nodes:
            node.stop()
    print(RESULT + json.dumps(out), flush=True)
    return 0


def test_listen_star_is_reachable_on_a_non_loopback_address(tmp_path: Path) -> None:
    unshare = shutil.which("unshare")
    if unshare is None or shutil.which("ip") is None:
        pytest.skip("needs unshare(1) and ip(8) (util-linux, iproute2)")
    for sub in ("any", "lo"):
        (tmp_path / sub).mkdir()
    proc = subprocess.run([unshare, "-rn", PYTHON, "-m", "tests.integration.test_listen_netns", "--inside",
                           str(tmp_path)], capture_output=True, text=True, timeout=90)
    found = [line[len(RESULT):] for line in proc.stdout.splitlines() if line.startswith(RESULT)]
    if proc.returncode == CANNOT or (proc.returncode != 0 and "unshare" in proc.stderr and not found):
        pytest.skip(f"no network namespace here: {proc.stderr.strip()[-300:]}")
    assert proc.returncode == 0 and found, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    result = json.loads(found[0])
    bound = [str(x) for x in result["bound"]]
    assert any(x.startswith(("0.0.0.0:", "[::]:")) for x in bound), bound
    assert result["converged"] is True
    assert result["bound_loopback"] and all(str(x).startswith("127.0.0.1:") for x in result["bound_loopback"])
    assert result["loopback_only_refused"] is True, result


if __name__ == "__main__":
    if sys.argv[1:2] == ["--inside"]:
        sys.exit(_inside(Path(sys.argv[2])))
    sys.exit(pytest.main([__file__, "-x"]))
