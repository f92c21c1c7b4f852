"""Network namespaces joined by a Linux bridge, for tests that need a real multicast LAN.

`Lan(n)` makes one namespace per node (interface eth0, 10.99.<k>.<i+1>/24, lo up) and one
namespace holding the bridge, so nothing is added to the host's own namespace; `close()`
deletes them all (their interfaces go with them). `skip_reason()` says why a test cannot
run here (not root, no `ip`, namespaces refused), for pytest.skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess

TIMEOUT_S = 10


def run(*args: str, stdin: str | None = None) -> str:
    done = subprocess.run(list(args), input=stdin, capture_output=True, text=True, timeout=TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done.stdout


def skip_reason(*tools: str) -> str | None:
    """None when namespaces can be made here; otherwise why not."""
    if os.geteuid() != 0:
        return "network namespaces need root (euid is not 0)"
    for tool in ("ip", *tools):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed (make debs installs it)"
    probe = f"r{os.getpid()}probe"
    try:
        run("ip", "netns", "add", probe)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot make a network namespace here: {exc}"
    run("ip", "netns", "del", probe)
    return None


class Lan:
    def __init__(self, n: int, tag: str = "lan") -> None:
        uid = f"{tag}{os.getpid() % 100000}"
        self.subnet = 10 + os.getpid() % 200  # 10.99.<subnet>.0/24: concurrent runs differ
        self.bridge_ns = f"{uid}-br"
        self.nodes = [f"{uid}-{i}" for i in range(n)]
        self.made: list[str] = []
        try:
            self._make()
        except BaseException:
            self.close()
            raise

    def ip(self, i: int) -> str:
        return f"10.99.{self.subnet}.{i + 1}"

    @property
    def network(self) -> str:
        return f"10.99.{self.subnet}.0"

    def _make(self) -> None:
        br = self.bridge_ns
        run("ip", "netns", "add", br)
        self.made.append(br)
        run("ip", "-n", br, "link", "add", "br0", "type", "bridge")
        run("ip", "-n", br, "link", "set", "br0", "type", "bridge", "mcast_snooping", "0")
        run("ip", "-n", br, "link", "set", "br0", "up")
        for i, ns in enumerate(self.nodes):
            run("ip", "netns", "add", ns)
            self.made.append(ns)
            run("ip", "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", f"p{i}", "netns", br)
            run("ip", "-n", br, "link", "set", f"p{i}", "master", "br0", "up")
            run("ip", "-n", ns, "addr", "add", f"{self.ip(i)}/24", "dev", "eth0")
            run("ip", "-n", ns, "link", "set", "eth0", "up")
            run("ip", "-n", ns, "link", "set", "lo", "up")

    def exec_prefix(self, i: int) -> list[str]:
        return ["ip", "netns", "exec", self.nodes[i]]

    def in_ns(self, i: int, *args: str, stdin: str | None = None) -> str:
        return run(*self.exec_prefix(i), *args, stdin=stdin)

    def close(self) -> None:
        for ns in reversed(self.made):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=TIMEOUT_S, check=False)
        self.made.clear()
