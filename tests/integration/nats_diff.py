"""Differential testing of the NATS client protocol: nats-server 2.9.10 and one raims
node's NATS transport side by side, the same raw bytes to both, replies compared byte
for byte (kv_diff.py is the Redis counterpart).

wire_diff.exchange sends a script over a raw socket (whole, or cut into given pieces)
and collects what comes back until the server closes, or, after the last PING's PONG, a
short quiet time, or a bounded quiet time without one. `normalize` keeps of the INFO
line only what both servers must agree on (the version raims follows and claims, not
server_id, ports, client id).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

from raims_node.config.test_adj import free_port
from tests.integration.harness import PeerServer
from tests.integration.test_bridges_net import BridgeNet, start_network
from tests.integration.wire_diff import WAIT_S, Done, Pair

__all__ = ["WAIT_S", "NatsServer", "Pair", "nats_pair", "normalize", "pongs_done"]

INFO_KEPT = ("version", "proto", "headers", "max_payload", "auth_required", "ldm")


class NatsServer(PeerServer):
    """nats-server on a free loopback port, stopped by its pid."""

    def __init__(self, workdir: Path, config: str = "") -> None:
        exe = shutil.which("nats-server")
        if exe is None:
            raise FileNotFoundError("nats-server is not installed")
        self.port = free_port()
        conf = workdir / "nats-server.conf"
        conf.write_text(f"listen: 127.0.0.1:{self.port}\n{config}\n")
        self._start([exe, "-c", str(conf)], self._ready, WAIT_S)

    def _ready(self) -> bool:
        with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
            return s.recv(5) == b"INFO "


def normalize(reply: bytes) -> bytes:
    """The reply with its INFO lines reduced to INFO_KEPT."""
    out = []
    for line in reply.split(b"\r\n"):
        if line.startswith(b"INFO {"):
            info = json.loads(line[5:])
            line = b"INFO " + json.dumps({k: info[k] for k in INFO_KEPT if k in info}).encode()
        out.append(line)
    return b"\r\n".join(out)


def pongs_done(script: bytes) -> Done:
    """The reply is complete once it holds a PONG per PING of the script."""
    pongs = script.upper().count(b"PING")
    return lambda reply: bool(pongs) and reply.count(b"PONG\r\n") >= pongs


@contextlib.contextmanager
def nats_pair(workdir: Path, user: str | None = None, password: str = "") -> Iterator[tuple[Pair, NatsServer, BridgeNet]]:
    """nats-server and a one-node network; with `user`, both require it (and `password`)."""
    auth = f'authorization {{ user: "{user}", password: "{password}" }}' if user else ""
    ref = NatsServer(workdir, auth)
    try:
        extra = [{"tport": "secure", "type": "nats", "route": {"port": 0, "user": user, "password": password}}]
        net = start_network(workdir, "node A\n", extra if user else None)
        try:
            yield Pair(ref.port, net.port("A", "secure" if user else "nats"), normalize, pongs_done), ref, net
        finally:
            net.stop()
    finally:
        ref.stop()
