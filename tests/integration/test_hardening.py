"""Security and fault hardening on real ms_server processes (issue 18): replayed
heartbeats, idle sockets, heartbeat changes by SIGHUP, start-up errors a person sees,
and floods of bad handshakes that cost few log lines."""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import socket
import struct
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from raims_node.crypto.handshake import Handshake
from raims_node.wire import FrameReader, MsgType, decode_frame
from raims_node.wire.frame import BRIDGE_DESC
from tests.integration.faultproxy import FaultProxy
from tests.integration.harness import (
    CONVERGED,
    PYTHON,
    NodeProc,
    get_json,
    graph_config,
    poll,
    web_addr,
)
from tests.sim.conftest import creds_factory

AB = "node A B\ntcp_link_ab A B : 100\n"


def _configs(tmp: Path, params: dict[str, Any]) -> tuple[Path, Path, int]:
    """A's and B's config files (the same until a test changes B's, see _dial); the
    link port A listens on."""
    cfg, _ = graph_config(tmp, AB, heartbeat="1 sec", web=True)
    data = yaml.safe_load(cfg.read_text())
    data["parameters"].update(params)
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))
    b_cfg = tmp / "b.yaml"
    b_cfg.write_text(yaml.safe_dump(data, sort_keys=False))
    return cfg, b_cfg, int(data["transports"][0]["route"]["port"])


def _dial(b_cfg: Path, port: int) -> None:
    """B dials `port` (a proxy) instead of A's listener."""
    data = yaml.safe_load(b_cfg.read_text())
    data["transports"][0]["route"]["connect"] = f"127.0.0.1:{port}"
    b_cfg.write_text(yaml.safe_dump(data, sort_keys=False))


def _node(tmp: Path, user: str, cfg: Path, how: str) -> NodeProc:
    node = NodeProc(user, ["-d", str(cfg), "-u", user, "-t", f"link_ab.{how}", "web.listen"], tmp)
    node.listening()
    return node


@pytest.fixture
def procs() -> Iterator[list[Any]]:
    started: list[Any] = []  # NodeProc and FaultProxy, stopped whatever failed
    try:
        yield started
    finally:
        for p in started:
            p.stop()


def _rejects(addr: str) -> dict[str, int]:
    status, rows = get_json(addr, "show counters reject")
    assert status == 200 and isinstance(rows, list)
    return {r["reason"]: r["count"] for r in rows}


def _peers(addr: str) -> set[str]:
    _, rows = get_json(addr, "show peers")
    assert isinstance(rows, list)
    return {str(r.get("user", "")).split(".")[0] for r in rows} - {"", "*"}


def test_replayed_heartbeat_does_not_bring_back_a_killed_peer(tmp_path: Path, procs: list[Any]) -> None:
    cfg, b_cfg, port = _configs(tmp_path, {"tcp_noencrypt": True})
    proxy = FaultProxy(port)
    procs.append(proxy)
    _dial(b_cfg, proxy.start())
    a = _node(tmp_path, "A", cfg, "listen")
    procs.append(a)
    b = _node(tmp_path, "B", b_cfg, "connect")
    procs.append(b)
    a.wait_for(CONVERGED.format(n=1), 20)

    def heartbeats() -> list[bytes]:  # B's, as a recorder on the link saw them
        return [bytes(f) for f in FrameReader().feed(bytes(proxy.recorded["up"]))
                if decode_frame(f).msg_type == MsgType.HEARTBEAT]

    assert poll(lambda: len(heartbeats()) >= 3, 10)
    recorded = heartbeats()
    addr = web_addr(a)
    mark = len(a.lines)
    b.stop(signal.SIGKILL)
    a.wait_for(CONVERGED.format(n=0), 10, after=mark)
    assert "B" not in _peers(addr)
    before = _rejects(addr).get("replayed_hello", 0)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        for hb in recorded:  # all but the newest are below the floor A kept; the newest
            s.sendall(hb)     # gets an auth 1 no one answers (see test_sim_hardening)
        assert poll(lambda: _rejects(addr).get("replayed_hello", 0) >= before + len(recorded) - 1, 5)
        time.sleep(1.0)  # give a wrongly accepted heartbeat the time to make a link
        assert "B" not in _peers(addr)
    assert not any("1 uids authenticated" in line for line in a.lines[mark:])


def _eof_all(socks: list[socket.socket], timeout: float) -> float:
    """Seconds until every socket reads end-of-file (or was reset)."""
    sel = selectors.DefaultSelector()
    for s in socks:
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
    t0 = time.monotonic()
    left = len(socks)
    while left and time.monotonic() - t0 < timeout:
        for key, _ in sel.select(0.2):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            try:
                data = sock.recv(65536)
            except ConnectionResetError:
                data = b""
            except BlockingIOError:
                continue
            if not data:
                sel.unregister(sock)
                left -= 1
    sel.close()
    assert left == 0, f"{left} sockets still open after {timeout} s"
    return time.monotonic() - t0


def test_idle_sockets_are_closed_after_the_auth_timeout(tmp_path: Path, procs: list[Any]) -> None:
    cfg, _, port = _configs(tmp_path, {"tcp_auth_timeout": "2 secs", "tcp_pending_per_host": 256})
    a = _node(tmp_path, "A", cfg, "listen")
    procs.append(a)
    addr = web_addr(a)
    socks = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(200)]
    try:
        took = _eof_all(socks, 2.0 + 1.0 + 1.0)
        assert took <= 2.0 + 1.0
    finally:
        for s in socks:
            s.close()
    assert poll(lambda: _rejects(addr).get("auth_timeout", 0) == 200, 5)


def test_what_a_socket_sends_before_it_authenticates_is_refused_and_counted(tmp_path: Path,
                                                                             procs: list[Any]) -> None:
    """On a `tcp_noencrypt` link port (encrypted ones fail at the first header): bytes
    that are no frame, and a frame announced at 16 MiB and trickled on, are closed and
    counted in `show counters reject`; the second before A holds more than 1 MiB of it
    (it held the whole frame: 60 such sockets took it to 1 GB)."""
    cfg, _, port = _configs(tmp_path, {"tcp_noencrypt": True})
    a = _node(tmp_path, "A", cfg, "listen")
    procs.append(a)
    addr = web_addr(a)
    garbage = socket.create_connection(("127.0.0.1", port), timeout=5)
    garbage.sendall(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
    big = socket.create_connection(("127.0.0.1", port), timeout=5)
    big.sendall(struct.pack(">IIH", (1 << 31) | 0xFFFFF0, 0, BRIDGE_DESC))
    sent = 0
    try:
        with contextlib.suppress(OSError):  # reset once A closes it
            while sent < 0xFFFFF0 - (1 << 16):  # all but the end of the frame
                big.sendall(bytes(1 << 16))
                sent += 1 << 16
        assert sent < 0xFFFFF0 - (1 << 16), "A took the partial frame whole"
        assert _eof_all([garbage, big], 5.0) < 5.0
        assert poll(lambda: _rejects(addr).get("bad_stream", 0) == 1 and _rejects(addr).get("preauth_size", 0) == 1, 5)
    finally:
        garbage.close()
        big.close()


def test_pending_cap_per_host_closes_the_extra_sockets(tmp_path: Path, procs: list[Any]) -> None:
    cfg, _, port = _configs(tmp_path, {"tcp_pending_per_host": 8})
    a = _node(tmp_path, "A", cfg, "listen")
    procs.append(a)
    addr = web_addr(a)
    socks = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(12)]
    try:
        assert poll(lambda: _rejects(addr).get("pending_cap", 0) == 4, 5)
        _eof_all(socks[8:], 3.0)
    finally:
        for s in socks:
            s.close()


@pytest.mark.slow
def test_sighup_heartbeat_change_keeps_the_link(tmp_path: Path, procs: list[Any]) -> None:
    """B goes from 3 s to 1 s heartbeats: it must keep supervising A at A's 3 s (x 1.5),
    and A must watch B at 1 s, for three of A's intervals."""
    cfg, b_cfg, _ = _configs(tmp_path, {"heartbeat": "3 secs"})
    a = _node(tmp_path, "A", cfg, "listen")
    procs.append(a)
    b = _node(tmp_path, "B", b_cfg, "connect")
    procs.append(b)
    a.wait_for(CONVERGED.format(n=1), 20)
    data = yaml.safe_load(b_cfg.read_text())
    data["parameters"]["heartbeat"] = "1 sec"
    b_cfg.write_text(yaml.safe_dump(data, sort_keys=False))
    mark_a, mark_b = len(a.lines), len(b.lines)
    b.proc.send_signal(signal.SIGHUP)
    b.wait_for("parameters reloaded", 5, after=mark_b)
    time.sleep(3 * 3.0 + 0.5)  # three of A's intervals
    for node, mark in ((a, mark_a), (b, mark_b)):
        assert not any("remove auth" in line for line in node.lines[mark:]), node.lines[mark:]
    assert "B" in _peers(web_addr(a)) and "A" in _peers(web_addr(b))


def test_unknown_user_and_start_errors_reach_stderr_with_a_logfile(tmp_path: Path) -> None:
    cfg, _, port = _configs(tmp_path, {})
    log = tmp_path / "ms.log"
    run = subprocess.run([PYTHON, "-m", "raims_node.server", "-d", str(cfg), "-u", "X.test", "-l", str(log),
                          "-t", "link_ab.listen"], capture_output=True, text=True, timeout=30, cwd=tmp_path,
                         env={**os.environ})
    assert run.returncode == 2
    assert "user 'X' is not in the configuration" in run.stderr and str(cfg) in run.stderr
    assert "ms_gen_key -u X -s test" in run.stderr
    assert "user 'X'" in log.read_text()
    with socket.socket() as busy:  # the link port taken: a start error (exit 3)
        busy.bind(("127.0.0.1", port))
        busy.listen()
        run = subprocess.run([PYTHON, "-m", "raims_node.server", "-d", str(cfg), "-u", "A", "-l", str(log),
                              "-t", "link_ab.listen"], capture_output=True, text=True, timeout=30, cwd=tmp_path)
    assert run.returncode == 3 and "link_ab" in run.stderr and str(cfg) in run.stderr


def test_ten_thousand_bad_handshakes_cost_few_log_lines(tmp_path: Path, procs: list[Any]) -> None:
    cfg, _, port = _configs(tmp_path, {"tcp_noencrypt": True})
    a = _node(tmp_path, "A", cfg, "listen")
    procs.append(a)
    addr = web_addr(a)
    other = creds_factory("othersvc", ("X",))("X")  # a HELLO signed for another service
    hello = bytes(Handshake(other, os.urandom(16)).hello(time.time_ns()))
    mark = len(a.lines)
    conns = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(10)]
    try:
        for s in conns:
            s.sendall(hello * 1000)
        assert poll(lambda: _rejects(addr).get("hello_digest", 0) >= 10_000, 30)
        assert _rejects(addr)["hello_digest"] == 10_000
        with urllib.request.urlopen(f"http://{addr}/metrics", timeout=5) as r:
            assert 'raims_rejected_total{user="A",reason="hello_digest"} 10000' in r.read().decode()
    finally:
        for s in conns:
            s.close()
    # the window's summary, when it ends
    summary = a.wait_for(r"\.\.\. and ([\d,]+) more like this in the last 10 s", 12, after=mark)
    assert int(summary.group(1).replace(",", "")) >= 10_000 - 100
    flood = a.lines[mark:]
    assert len(flood) < 100, "\n".join(flood[:120])
