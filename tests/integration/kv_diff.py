"""Differential testing of the Redis data commands: Debian's redis-server and a raims
node side by side, the same commands to both, replies compared byte for byte.

`RawClient` is a blocking socket client that sends a command and returns the raw reply
(one complete RESP2/RESP3 frame), so differences in reply types show up. Replies whose
order Redis does not define (SMEMBERS of a hash-table set, KEYS, SCAN...) are compared
after sorting their parsed elements.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from raims_node.config.test_adj import free_port
from raims_node.kv.cli import main as ms_kv
from tests.integration.harness import PeerServer
from tests.integration.test_bridges_net import start_network

WAIT_S = 10.0
UNORDERED = {b"smembers", b"sinter", b"sunion", b"sdiff", b"keys", b"spop", b"srandmember", b"hrandfield",
             b"zrandmember"}


def encode_command(args: list[bytes]) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def _frame_end(buf: bytes, pos: int) -> int | None:
    """The offset just after the RESP frame starting at `pos`, None if incomplete."""
    nl = buf.find(b"\r\n", pos)
    if nl < 0:
        return None
    kind = buf[pos:pos + 1]
    head = buf[pos + 1:nl]
    after = nl + 2
    if kind in (b"+", b"-", b":", b",", b"_", b"#", b"("):
        return after
    if kind in (b"$", b"=", b"!"):
        n = int(head)
        if n < 0:
            return after
        end = after + n + 2
        return end if len(buf) >= end else None
    if kind in (b"*", b"~", b">", b"%", b"|"):
        n = int(head)
        if n < 0:
            return after
        if kind in (b"%", b"|"):
            n *= 2
        p: int | None = after
        for _ in range(n):
            assert p is not None
            p = _frame_end(buf, p)
            if p is None:
                return None
        return p
    raise ValueError(f"bad RESP frame {buf[pos:pos + 32]!r}")


def parse(frame: bytes) -> Any:
    """A frame as nested Python values (tagged by kind), for unordered comparisons."""
    value, _ = _parse(frame, 0)
    return value


def _parse(buf: bytes, pos: int) -> tuple[Any, int]:
    nl = buf.find(b"\r\n", pos)
    kind, head, after = buf[pos:pos + 1], buf[pos + 1:nl], nl + 2
    if kind in (b"$", b"="):
        n = int(head)
        if n < 0:
            return None, after
        return buf[after:after + n], after + n + 2
    if kind in (b"*", b"~", b">", b"%"):
        n = int(head)
        if n < 0:
            return None, after
        if kind == b"%":
            n *= 2
        items = []
        p = after
        for _ in range(n):
            v, p = _parse(buf, p)
            items.append(v)
        return (kind, items), p
    return (kind, head), after


def _sortable(v: Any) -> Any:
    return repr(v)


def normalize(cmd: list[bytes], frame: bytes) -> Any:
    name = cmd[0].lower()
    if name == b"info":  # avg_ttl is redis-server's running estimate from expiry sampling
        return re.sub(rb"avg_ttl=\d+", b"avg_ttl=?", frame.split(b"\r\n", 1)[1])
    if name in UNORDERED:
        v = parse(frame)
        if isinstance(v, tuple) and isinstance(v[1], list):
            return (v[0], sorted(v[1], key=_sortable))
        return v
    if name == b"scan" or name in (b"sscan", b"hscan"):
        v = parse(frame)
        if isinstance(v, tuple) and isinstance(v[1], list) and len(v[1]) == 2:
            cursor, items = v[1]
            if name == b"hscan" and isinstance(items, tuple):
                pairs = [tuple(items[1][i:i + 2]) for i in range(0, len(items[1]), 2)]
                return (cursor, sorted(pairs, key=_sortable))
            return (cursor, sorted(items[1], key=_sortable) if isinstance(items, tuple) else items)
        return v
    return frame


class RawClient:
    def __init__(self, port: int, resp: int = 2) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
        self.buf = b""
        self.resp = resp
        if resp == 3:
            self.call([b"HELLO", b"3"])

    def send(self, args: list[bytes]) -> None:
        self.sock.sendall(encode_command(args))

    def read(self) -> bytes:
        while True:
            if self.buf:
                end = _frame_end(self.buf, 0)
                if end is not None:
                    frame, self.buf = self.buf[:end], self.buf[end:]
                    return frame
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed")
            self.buf += chunk

    def call(self, args: list[bytes]) -> bytes:
        self.send(args)
        return self.read()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


class RedisServer(PeerServer):
    """Debian's redis-server on a free port, no persistence; stopped by its pid."""

    def __init__(self, workdir: Path) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            raise FileNotFoundError("redis-server is not installed (apt-get install redis-server)")
        self.port = free_port()
        self._start([exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                     "--dir", str(workdir)], self._ready, WAIT_S)

    def _ready(self) -> bool:
        c = RawClient(self.port)
        try:
            return c.call([b"PING"]) == b"+PONG\r\n"
        finally:
            c.close()


class Pair:
    """One client on each server, the same RESP version."""

    def __init__(self, redis_port: int, raims_port: int, resp: int) -> None:
        self.ref = RawClient(redis_port, resp)
        self.us = RawClient(raims_port, resp)

    def run(self, cmd: list[bytes]) -> tuple[Any, Any]:
        a = self.ref.call(cmd)
        b = self.us.call(cmd)
        return normalize(cmd, a), normalize(cmd, b)

    def check(self, commands: Iterator[list[bytes]] | list[list[bytes]]) -> None:
        for cmd in commands:
            ref, us = self.run(cmd)
            assert us == ref, f"{b' '.join(cmd)!r}: redis-server {ref!r}, raims {us!r}"

    def wait_blocked(self, n: int) -> None:
        """Until both servers report `n` clients parked in a blocking command (INFO
        clients): what another client sends next is then served after they parked."""
        want = b"blocked_clients:%d\r\n" % n
        deadline = time.monotonic() + WAIT_S
        for c in (self.ref, self.us):
            while want not in c.call([b"INFO", b"clients"]):
                assert time.monotonic() < deadline, f"not {n} blocked clients after {WAIT_S} s"
                time.sleep(0.01)

    def reset(self) -> None:
        for c in (self.ref, self.us):
            assert c.call([b"FLUSHALL"]) == b"+OK\r\n"
            c.call([b"SELECT", b"0"])

    def close(self) -> None:
        self.ref.close()
        self.us.close()


def cmds(text: str) -> list[list[bytes]]:
    """One command per line, arguments split on blanks (no quoting needed in the tables)."""
    return [line.split() for line in (ln.strip().encode() for ln in text.splitlines()) if line]


@contextlib.contextmanager
def kv_servers(tmp: Path) -> Iterator[tuple[int, int]]:
    """redis-server and a one-node network whose Redis transport has a map in `tmp`:
    their ports (redis-server's, the node's)."""
    ref = RedisServer(tmp)
    net = None
    try:
        assert ms_kv(["init", str(tmp / "map")]) == 0
        net = start_network(tmp, "node A\n", params={"map_file": str(tmp / "map")})
        yield ref.port, net.port("A", "redis")
    finally:
        if net is not None:
            net.stop()
        ref.stop()
