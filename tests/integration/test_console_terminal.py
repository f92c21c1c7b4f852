"""`ms_server -c` on a real terminal (tmux), and Debian's telnet client on the telnet
transport (issue 23): completion, history, show peers, ping, shutdown and connect of a
transport, as a person at the keyboard does them."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.integration.harness import (
    CONVERGED,
    TELNET_TPORT,
    NodeProc,
    add_transports,
    graph_config,
)

TMUX = shutil.which("tmux")
TELNET = shutil.which("telnet")
PROMPT = re.compile(r"A\.\S+\[\S+\]@\S+\[\d+\]> ?$")  # a prompt with nothing typed yet
pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed (make debs installs it)")


class Pane:
    """One tmux session running a command; keys in, screen text out."""

    def __init__(self, name: str, command: list[str], cwd: Path) -> None:
        self.name = name
        env = " ".join(f"{k}={v}" for k, v in (("PYTHONPATH", os.environ.get("PYTHONPATH", "")),) if v)
        shell = f"cd {cwd} && {env} exec " + " ".join(command)
        subprocess.run([TMUX, "new-session", "-d", "-s", name, "-x", "220", "-y", "60", shell], check=True)
        out = subprocess.run([TMUX, "list-panes", "-t", name, "-F", "#{pane_pid}"], check=True,
                             capture_output=True, text=True).stdout
        self.pid = int(out.split()[0])

    def keys(self, *keys: str) -> None:
        subprocess.run([TMUX, "send-keys", "-t", self.name, *keys], check=True)

    def screen(self) -> str:
        return subprocess.run([TMUX, "capture-pane", "-p", "-t", self.name, "-S", "-200"], check=True,
                              capture_output=True, text=True).stdout

    def wait(self, pred: Callable[[str], bool], timeout: float = 15.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            text = self.screen()
            if pred(text):
                return text
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name}: screen:\n{text}")
            time.sleep(0.1)

    def close(self) -> None:
        try:
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        subprocess.run([TMUX, "kill-session", "-t", self.name], capture_output=True)


@pytest.fixture
def a_b(tmp_path: Path) -> Iterator[tuple[Path, list[list[str]]]]:
    cfg, commands = graph_config(tmp_path, "node B A\ntcp_link_ab A B : 100\n", web=False)
    add_transports(cfg, TELNET_TPORT)
    argv = []
    for command in commands:
        args = command.split()[1:]
        args[args.index("-d") + 1] = str(cfg)
        argv.append(args)
    yield cfg, argv


def test_terminal_console_completes_remembers_pings_and_controls_transports(
        a_b: tuple[Path, list[list[str]]], tmp_path: Path) -> None:
    cfg, argv = a_b
    a_args = next(a for a in argv if a[a.index("-u") + 1] == "A")
    b_args = next(a for a in argv if a[a.index("-u") + 1] == "B")
    log = tmp_path / "a.log"
    b = NodeProc("B", b_args, tmp_path)
    b.listening()
    pane = Pane(f"raims{os.getpid()}", [sys.executable, "-m", "raims_node.server", *a_args, "-c", "-l", str(log)],
                tmp_path)
    try:
        pane.wait(lambda s: re.search(r"A\.\S+\[\S+\]@\S+\[0\]>", s) is not None)
        b.wait_for(CONVERGED.format(n=1), 30)
        pane.keys("sh", "Space", "pe", "Tab")  # completes to "sh peers" (show peers)
        pane.wait(lambda s: s.rstrip().splitlines()[-1].endswith("> sh peers"))
        pane.keys("Enter")
        pane.wait(lambda s: re.search(r"^\s*B\.\d+\s", s, re.M) is not None)
        pane.keys("ping B", "Enter")
        pane.wait(lambda s: re.search(r"^\s*B(\.\d+)?\s.*\d(us|ms|s)\b", s, re.M) is not None)
        pane.wait(lambda s: PROMPT.search(s.rstrip().splitlines()[-1]) is not None)  # the next prompt is up
        pane.keys("Up")  # history, one key at a time (keys typed ahead of the prompt may split)
        pane.wait(lambda s: s.rstrip().splitlines()[-1].endswith("> ping B"))
        pane.keys("Up")  # back to "sh peers"
        pane.wait(lambda s: s.rstrip().splitlines()[-1].endswith("> sh peers"))
        pane.keys("C-u", "shutdown link_ab", "Enter")
        b.wait_for(r"remove auth A", 15)
        mark = len(b.lines)
        pane.keys("connect link_ab", "Enter")
        try:
            b.wait_for(CONVERGED.format(n=1), 20, after=mark)
        except TimeoutError:
            raise AssertionError(pane.screen() + log.read_text()) from None
        pane.keys("quit", "Enter")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(pane.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            pytest.fail("quit did not end ms_server -c")
    finally:
        pane.close()
        b.stop()


@pytest.mark.skipif(TELNET is None, reason="Debian's telnet is not installed (make debs installs it)")
def test_debian_telnet_client_gets_an_editing_console(a_b: tuple[Path, list[list[str]]], tmp_path: Path) -> None:
    _, argv = a_b
    nodes = []
    pane = None
    try:
        for args in sorted(argv, key=lambda a: "connect" in " ".join(a)):  # listeners first
            if args[args.index("-u") + 1] == "A":
                args = [*args, "tel.listen"]
            node = NodeProc(args[args.index("-u") + 1], args, tmp_path)
            if ".listen" in " ".join(args):
                node.listening()
            nodes.append(node)
        for node in nodes:
            node.wait_for(CONVERGED.format(n=1), 30)
        port = int(next(n for n in nodes if n.name == "A").wait_for(r"telnet listening on [\d.]+:(\d+)").group(1))
        pane = Pane(f"rtel{os.getpid()}", [str(TELNET), "127.0.0.1", str(port)], tmp_path)
        pane.wait(lambda s: re.search(r"A\.\S+\[\S+\]@\S+\[0\]>", s) is not None)
        pane.keys("pi", "Space", "B", "Enter")  # "pi" is ping
        pane.wait(lambda s: re.search(r"^\s*B(\.\d+)?\s.*\d(us|ms|s)\b", s, re.M) is not None)
        pane.keys("sh", "Space", "ad", "Tab")  # server-side completion: "adjacency"
        pane.wait(lambda s: "sh adjacency" in s)
        pane.keys("Enter")
        pane.wait(lambda s: "link_ab" in s)
    finally:
        if pane is not None:
            pane.close()
        for node in nodes:
            node.stop()
