"""bridges/ipc_socket.bind_socket against a live server whose listen backlog is full."""

from __future__ import annotations

import errno
import socket
import threading
from pathlib import Path

import pytest

from raims_node.bridges.ipc_socket import bind_socket


def _fill_backlog(path: Path) -> list[socket.socket]:
    """Connections nobody accepts, until the server's backlog refuses more (bounded)."""
    held = []
    for _ in range(10_000):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.setblocking(False)
        try:
            s.connect(str(path))
        except BlockingIOError:
            s.close()
            return held
        held.append(s)
    raise AssertionError("the backlog never filled")


def test_a_busy_live_bus_is_in_use_not_stale(tmp_path: Path) -> None:
    """A live server with a full backlog was taken for a dead one: the probe's blocking
    connect hung the second daemon's start (here bounded by a thread's join), or, with
    EAGAIN, its socket file was unlinked and a second bus bound in its place."""
    path = tmp_path / "bus.sock"
    live = bind_socket(path, 0o600)
    held = _fill_backlog(path)
    result: list[object] = []

    def second() -> None:
        try:
            result.append(bind_socket(path, 0o600))
        except OSError as exc:
            result.append(exc)

    t = threading.Thread(target=second, daemon=True)
    t.start()
    t.join(5)
    try:
        assert result, "bind_socket hung on a busy live server"
        [got] = result
        assert isinstance(got, OSError) and got.errno == errno.EADDRINUSE, got
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        live.accept()[0].close()  # room again: the live server still owns the path
        probe.connect(str(path))
        probe.close()
    finally:
        for s in held:
            s.close()
        live.close()
        if isinstance(result and result[0], socket.socket):
            result[0].close()  # type: ignore[union-attr]


def test_a_dead_bus_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "bus.sock"
    bind_socket(path, 0o600).close()  # the file stays, nobody listens
    sock = bind_socket(path, 0o600)
    sock.close()
    with pytest.raises(OSError, match="not a socket"):
        (tmp_path / "f").write_text("x")
        bind_socket(tmp_path / "f", 0o600)
