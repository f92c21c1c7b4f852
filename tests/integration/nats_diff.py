"""Differential testing of the NATS client protocol: nats-server 2.9.10 and one raims
node's NATS transport side by side, the same raw bytes to both, replies compared byte
for byte (kv_diff.py is the Redis counterpart).

`exchange` sends a script over a raw socket (whole, or cut into given pieces) and
collects what comes back until the server closes, or, after the last PING's PONG, a
short quiet time, or a bounded quiet time without one. `normalize` keeps of the INFO
line only what both servers must agree on (not server_id, ports, version, client id).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from raims_node.config.test_adj import free_port
from tests.integration.test_bridges_net import BridgeNet, start_network

WAIT_S = 10.0
QUIET_S = 0.3  # no reply within this after the script: nothing more is coming
PONG_QUIET_S = 0.05  # after the last expected PONG
MAX_REPLY = 4 << 20  # a reply larger than this is cut: the scripts are small
INFO_KEPT = ("proto", "headers", "max_payload", "auth_required", "ldm")


class NatsServer:
    """nats-server on a free loopback port, stopped by its pid."""

    def __init__(self, workdir: Path, config: str = "") -> None:
        exe = shutil.which("nats-server")
        if exe is None:
            raise FileNotFoundError("nats-server is not installed")
        self.port = free_port()
        conf = workdir / "nats-server.conf"
        conf.write_text(f"listen: 127.0.0.1:{self.port}\n{config}\n")
        self.proc = subprocess.Popen([exe, "-c", str(conf)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + WAIT_S
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    if s.recv(5) == b"INFO ":
                        return
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.stop()
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def normalize(reply: bytes) -> bytes:
    """The reply with its INFO lines reduced to INFO_KEPT."""
    out = []
    for line in reply.split(b"\r\n"):
        if line.startswith(b"INFO {"):
            info = json.loads(line[5:])
            line = b"INFO " + json.dumps({k: info[k] for k in INFO_KEPT if k in info}).encode()
        out.append(line)
    return b"\r\n".join(out)


def exchange(port: int, script: bytes, cuts: list[int] | None = None, *,
             quiet: float = QUIET_S) -> tuple[bytes, bool]:
    """(reply, closed by the server): `script` sent at once, or in the pieces that `cuts`
    (offsets) make, each sent after the server had time to read the one before."""
    pongs = script.upper().count(b"PING")
    sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # each piece its own segment
    buf = bytearray()
    closed = False
    with sock:
        pieces = [script[a:b] for a, b in zip([0, *(cuts or [])], [*(cuts or []), len(script)], strict=True)]
        try:
            for i, piece in enumerate(pieces):
                sock.sendall(piece)
                if i + 1 < len(pieces):
                    time.sleep(0.002)  # its own read on the other side (a read boundary)
                    closed = _drain(sock, buf)  # what came back before a close resets the socket
                    if closed:
                        break
        except OSError:
            closed = True
        deadline = time.monotonic() + WAIT_S
        while not closed and len(buf) < MAX_REPLY and time.monotonic() < deadline:
            done = pongs and buf.count(b"PONG\r\n") >= pongs
            sock.settimeout(PONG_QUIET_S if done else quiet)
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            except OSError:
                closed = True
                break
            if not chunk:
                closed = True
            buf += chunk
    return bytes(buf), closed


def _drain(sock: socket.socket, buf: bytearray) -> bool:
    """Whatever has arrived, without waiting, into `buf`; whether the server closed."""
    sock.settimeout(0)
    try:
        while True:
            try:
                chunk = sock.recv(65536)
            except BlockingIOError:
                return False
            except OSError:
                return True
            if not chunk:
                return True
            buf += chunk
    finally:
        sock.settimeout(WAIT_S)


class Pair:
    """nats-server and a raims node with a nats transport; `run` the same script on both."""

    def __init__(self, ref_port: int, raims_port: int) -> None:
        self.ref_port = ref_port
        self.raims_port = raims_port

    def run(self, script: bytes, cuts: list[int] | None = None) -> tuple[tuple[bytes, bool], tuple[bytes, bool]]:
        a, ca = exchange(self.ref_port, script, cuts)
        b, cb = exchange(self.raims_port, script, cuts)
        return (normalize(a), ca), (normalize(b), cb)


@contextlib.contextmanager
def nats_pair(workdir: Path, user: str | None = None, password: str = "") -> Iterator[tuple[Pair, NatsServer, BridgeNet]]:
    """nats-server and a one-node network; with `user`, both require it (and `password`)."""
    auth = f'authorization {{ user: "{user}", password: "{password}" }}' if user else ""
    ref = NatsServer(workdir, auth)
    try:
        extra = [{"tport": "secure", "type": "nats", "route": {"port": 0, "user": user, "password": password}}]
        net = start_network(workdir, "node A\n", extra if user else None)
        try:
            yield Pair(ref.port, net.port("A", "secure" if user else "nats")), ref, net
        finally:
            net.stop()
    finally:
        ref.stop()
