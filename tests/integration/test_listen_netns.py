"""`listen` defaults to `*` (manual, TCP transport table): a link listener without a
`listen` host is reachable on a non-loopback address (issue 28).

As root: two network namespaces on a Linux bridge (tests/integration/netns.py `Lan`),
node A in the first listening on transport link_ab with no `listen` host, node B in the
second connecting to A's 10.99.x.1: they must link and converge across the LAN; the
contrast, a listener with `listen: 127.0.0.1` in A's namespace, refuses a connection
from B's. Without root, the same in one namespace of our own (`unshare -rn`, a user and
network namespace): loopback up, a dummy interface (else a veth pair, both ends inside)
with 10.200.0.1/24, B connecting to 10.200.0.1. Nothing touches the host's own network.
Skipped, with the reason, where neither can be made.

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

from tests.integration.harness import CONVERGED, PYTHON, NodeProc, graph_config
from tests.integration.netns import Lan, skip_reason

ADDR = "10.200.0.1"
ONE_PEER = CONVERGED.format(n=1)
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
        a.wait_for(ONE_PEER, 20)
        b.wait_for(ONE_PEER, 20)
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


def _across_a_lan(tmp: Path) -> None:
    """A in namespace 0 listening on `*`, B in namespace 1 dialing A's LAN address."""
    lan = Lan(2, "lsn")
    nodes: list[NodeProc] = []
    try:
        port = int(lan.in_ns(0, PYTHON, "-c", _FREE_PORT).strip())
        cfg = _config(tmp / "any", {"connect": lan.ip(0), "port": port})  # no `listen`: `*`
        a = NodeProc("A", ["-d", str(cfg), "-u", "A", "-t", "link_ab.listen"], cfg.parent,
                     prefix=lan.exec_prefix(0))
        nodes.append(a)
        bound = a.listening()
        assert any(x.startswith(("0.0.0.0:", "[::]:")) for x in bound), bound
        b = NodeProc("B", ["-d", str(cfg), "-u", "B", "-t", "link_ab.connect"], cfg.parent,
                     prefix=lan.exec_prefix(1))
        nodes.append(b)
        a.wait_for(ONE_PEER, 20)
        b.wait_for(ONE_PEER, 20)
        cfg2 = _config(tmp / "lo", {"listen": "127.0.0.1", "port": port + 1 if port < 65535 else port - 1})
        a2 = NodeProc("A", ["-d", str(cfg2), "-u", "A", "-t", "link_ab.listen"], cfg2.parent,
                      prefix=lan.exec_prefix(0))
        nodes.append(a2)
        bound2 = a2.listening()
        assert bound2 and all(x.startswith("127.0.0.1:") for x in bound2), bound2
        port2 = int(bound2[0].rpartition(":")[2])
        probe = f"import socket; socket.create_connection(({lan.ip(0)!r}, {port2}), timeout=5)"
        with pytest.raises(RuntimeError, match="ConnectionRefusedError"):
            lan.in_ns(1, PYTHON, "-c", probe)
    finally:
        for node in nodes:
            node.stop()
        lan.close()


_FREE_PORT = "import socket; s = socket.socket(); s.bind(('0.0.0.0', 0)); print(s.getsockname()[1])"


def test_listen_star_is_reachable_on_a_non_loopback_address(tmp_path: Path) -> None:
    for sub in ("any", "lo"):
        (tmp_path / sub).mkdir()
    if skip_reason() is None:
        _across_a_lan(tmp_path)
        return
    unshare = shutil.which("unshare")
    if unshare is None or shutil.which("ip") is None:
        pytest.skip(f"{skip_reason()}; and no unshare(1) or ip(8) for a namespace of our own")
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
