"""ms_server processes on 127.0.0.1 (issue 7): the manual's A-D graph from ms_test_adj,
node death and restart, BYE, foreign keys, encryption mismatch, garbage clients."""

from __future__ import annotations

import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.integration.harness import CONVERGED, MANUAL_GRAPH, NodeProc, graph_config


def _start(tmp: Path, cfg: Path, command: str, extra: list[str] | None = None) -> NodeProc:
    args = command.split()[1:]
    args[args.index("-d") + 1] = str(cfg)
    node = NodeProc(args[args.index("-u") + 1], args + (extra or []), tmp)
    if ".listen" in command:
        node.listening()
    return node


@pytest.fixture
def abcd(tmp_path: Path) -> Iterator[tuple[dict[str, NodeProc], Path, list[str]]]:
    cfg, commands = graph_config(tmp_path, MANUAL_GRAPH, web=False)
    nodes: dict[str, NodeProc] = {}
    try:
        for command in commands:  # as printed: listeners before their connectors
            node = _start(tmp_path, cfg, command)
            nodes[node.name] = node
        for node in nodes.values():
            node.wait_for(CONVERGED.format(n=3), 30)
        yield nodes, cfg, commands
    finally:
        for node in nodes.values():
            node.stop()


def test_printed_commands_converge(abcd: tuple[dict[str, NodeProc], Path, list[str]]) -> None:
    nodes, _, commands = abcd
    assert len(commands) == 4 and commands[0].endswith("-u A -t link_ab.listen link_ac.listen")
    for node in nodes.values():
        assert node.proc.poll() is None


def test_kill_and_restart_reconverges(abcd: tuple[dict[str, NodeProc], Path, list[str]], tmp_path: Path) -> None:
    nodes, cfg, commands = abcd
    marks = {n: len(p.lines) for n, p in nodes.items()}
    t0 = time.monotonic()
    nodes["B"].stop(signal.SIGKILL)
    for name in "ACD":
        nodes[name].wait_for(CONVERGED.format(n=2), 10, after=marks[name])
    assert time.monotonic() - t0 <= 2 * 1.0 + 1.0  # heartbeat 1 s: within 2 heartbeats (+ slack)
    marks = {n: len(p.lines) for n, p in nodes.items()}
    nodes["B"] = _start(tmp_path, cfg, commands[1])
    for name in "ABCD":
        nodes[name].wait_for(CONVERGED.format(n=3), 20, after=marks.get(name, 0))


def test_sigterm_sends_bye(abcd: tuple[dict[str, NodeProc], Path, list[str]]) -> None:
    nodes, _, _ = abcd
    mark = len(nodes["A"].lines)
    t0 = time.monotonic()
    assert nodes["D"].stop(signal.SIGTERM) == 0
    assert time.monotonic() - t0 < 2.0
    nodes["A"].wait_for(CONVERGED.format(n=2), 0.9, after=mark)  # before any heartbeat timeout


def test_garbage_client_is_dropped_and_node_keeps_serving(abcd: tuple[dict[str, NodeProc], Path, list[str]]) -> None:
    nodes, cfg, _ = abcd
    port = yaml.safe_load(cfg.read_text())["transports"][0]["route"]["port"]  # link_ab, A listens
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" * 4)
        s.settimeout(5)
        try:
            while s.recv(4096):
                pass
        except (ConnectionResetError, TimeoutError):
            pass
    nodes["A"].wait_for(r"closing link .*: .*", 5)
    assert nodes["A"].proc.poll() is None


def test_foreign_keys_and_plaintext_peers_are_refused(tmp_path: Path) -> None:
    cfg, commands = graph_config(tmp_path, "node A B\ntcp_link_ab A B : 100\n", web=False)
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    other_cfg, _ = graph_config(other_dir, "node A B\ntcp_link_ab A B : 100\n", web=False)
    data = yaml.safe_load(other_cfg.read_text())
    data["transports"] = yaml.safe_load(cfg.read_text())["transports"]  # same ports, other keys
    other_cfg.write_text(yaml.safe_dump(data))
    started: list[NodeProc] = []
    try:
        a = _start(tmp_path, cfg, commands[0])
        started.append(a)
        b = _start(tmp_path, other_cfg, commands[1])
        started.append(b)
        a.wait_for(r"closing link .*salt \(service keys\) is not ours", 10)
        assert not any("1 uids authenticated" in line for line in a.lines)
        b.stop()
        plain = yaml.safe_load(cfg.read_text())
        for t in plain["transports"]:
            t["route"]["noencrypt"] = True
        plain_cfg = tmp_path / "plain.yaml"
        plain_cfg.write_text(yaml.safe_dump(plain))
        started.append(_start(tmp_path, plain_cfg, commands[1]))
        a.wait_for(r"closing link .*does not encrypt", 10)
    finally:
        for node in started:  # every process this test started, whatever failed
            node.stop()
