"""TCP keepalive on every client port (2026-11-27, branch keepalive; raims_node/keepalive.py).

Before, the NATS, Redis, RV and telnet ports left an accepted socket without keepalive
(a client whose host vanished without a FIN was held for ever) and the web port had
aiohttp's SO_KEEPALIVE with Linux's 7200 s / 75 s / 9. Now each takes the `tcp_keepalive`
parameter as redis-server takes `tcp-keepalive`: idle, idle/3, 3 probes. The node's end
of each connection is read with getsockopt through pidfd_getfd (tests/integration/sockopts.py).
Real ms_server, raw sockets."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from raims_node.bridges.rv_codec import VERSION_REC
from tests.integration.harness import TELNET_TPORT, NodeProc, poll
from tests.integration.sockopts import Keepalive, NoAccess, server_keepalive
from tests.integration.test_bridges_net import WEB, BridgeNet, start_network

RV = {"tport": "rv", "type": "rv", "route": {"port": 0}}
NATS_MONITOR = {"tport": "natsmon", "type": "nats", "route": {"port": 0, "http_port": 0}}
IDLE = 7  # -> interval 2 (a third), 3 probes


def _start(tmp: Path, keepalive: str) -> BridgeNet:
    return start_network(tmp, "node A\n", extra=[RV, NATS_MONITOR, TELNET_TPORT, WEB],
                         params={"tcp_keepalive": keepalive})


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BridgeNet]:
    n = _start(tmp_path_factory.mktemp("keepalive"), f"{IDLE} secs")
    yield n
    n.stop()


def _served(kind: str, sock: socket.socket) -> None:
    """One exchange, so the node has run its side of the accept (connection_made)."""
    sock.settimeout(5)
    if kind in ("nats", "natsmon"):
        assert sock.recv(4096).startswith(b"INFO ")
    elif kind == "redis":
        sock.sendall(b"PING\r\n")
        assert sock.recv(4096) == b"+PONG\r\n"
    elif kind == "tel":
        assert sock.recv(4096).startswith(b"\xff")  # its option offers
    elif kind in ("web", "monitor"):
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n")
        assert sock.recv(4096).startswith(b"HTTP/1.1 ")
    elif kind == "rv":
        sock.sendall(VERSION_REC)  # the client speaks first; the node asks for its info
        assert len(sock.recv(4096)) > 0


def _node_side(node: NodeProc, sock: socket.socket) -> Keepalive:
    try:
        found = server_keepalive(node.proc.pid, sock)
    except NoAccess as exc:
        pytest.skip(f"cannot read the node's sockets: {exc}")
    assert found is not None, "the node has no socket for this connection"
    return found


def _ports(net: BridgeNet) -> dict[str, int]:
    node = net.nodes["A"]
    monitor = int(node.wait_for(r"natsmon monitoring on http://[\d.]+:(\d+)", 10).group(1))
    return {**net.ports["A"], "monitor": monitor}


def _each_port(net: BridgeNet) -> dict[str, Keepalive]:
    node = net.nodes["A"]
    seen: dict[str, Keepalive] = {}
    for kind, port in _ports(net).items():
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            _served(kind, sock)
            seen[kind] = _node_side(node, sock)
    return seen


def test_every_client_port_has_the_configured_keepalive(net: BridgeNet) -> None:
    seen = _each_port(net)
    assert set(seen) == {"nats", "redis", "rv", "natsmon", "tel", "web", "monitor"}
    assert seen == dict.fromkeys(seen, Keepalive(True, IDLE, IDLE // 3, 3)), seen
    assert net.nodes["A"].new_traceback() is None


def test_redis_config_tcp_keepalive_shows_and_sets_the_transports(net: BridgeNet) -> None:
    """As redis-server: CONFIG GET tcp-keepalive; a CONFIG SET applies to the clients
    accepted after it (0 off), not to those connected already."""
    node = net.nodes["A"]
    port = net.port("A", "redis")
    with socket.create_connection(("127.0.0.1", port), timeout=5) as admin:
        admin.sendall(b"CONFIG GET tcp-keepalive\r\n")
        assert admin.recv(4096) == b"*2\r\n$13\r\ntcp-keepalive\r\n$1\r\n7\r\n"
        admin.sendall(b"CONFIG SET tcp-keepalive 0\r\n")
        assert admin.recv(4096) == b"+OK\r\n"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as later:
                _served("redis", later)
                assert _node_side(node, later).on is False
            assert _node_side(node, admin) == Keepalive(True, IDLE, IDLE // 3, 3)  # accepted before
            admin.sendall(b"CONFIG SET tcp-keepalive 40000\r\n")  # over Linux's limit: 32767
            assert admin.recv(4096) == b"+OK\r\n"
            with socket.create_connection(("127.0.0.1", port), timeout=5) as longer:
                _served("redis", longer)
                assert _node_side(node, longer) == Keepalive(True, 32767, 10922, 3)
        finally:
            admin.sendall(b"CONFIG SET tcp-keepalive %d\r\n" % IDLE)
            assert admin.recv(4096) == b"+OK\r\n"


def test_tcp_keepalive_0_turns_it_off_everywhere(tmp_path: Path) -> None:
    n = _start(tmp_path, "0")
    try:
        seen = _each_port(n)
        assert {kind: ka.on for kind, ka in seen.items()} == dict.fromkeys(seen, False), seen
    finally:
        n.stop()


# ------------------------------------------------------------ a client whose host vanished

VANISH_NS = f"raims-ka-{os.getpid()}"
VETH = (f"rka{os.getpid() % 100000}a", f"rka{os.getpid() % 100000}b")  # node's end, client's end
NODE_IP, CLIENT_IP = "10.231.77.1", "10.231.77.2"
SUBSCRIBER = """
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
s.sendall(b"SUBSCRIBE VANISHED\\r\\n")
assert s.recv(4096).startswith(b"*3\\r\\n")
print("subscribed", flush=True)
sys.stdin.read()
"""


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


@pytest.fixture
def veth() -> Iterator[None]:
    """A network namespace joined to this one by a veth pair (root only)."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and iproute2 (a network namespace)")
    try:
        _ip("netns", "add", VANISH_NS)
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"ip netns add: {exc.stderr.decode().strip()}")
    try:
        _ip("link", "add", VETH[0], "type", "veth", "peer", "name", VETH[1])
        _ip("link", "set", VETH[1], "netns", VANISH_NS)
        _ip("addr", "add", f"{NODE_IP}/30", "dev", VETH[0])
        _ip("link", "set", VETH[0], "up")
        _ip("-n", VANISH_NS, "addr", "add", f"{CLIENT_IP}/30", "dev", VETH[1])
        _ip("-n", VANISH_NS, "link", "set", VETH[1], "up")
        yield
    finally:
        subprocess.run(["ip", "link", "del", VETH[0]], capture_output=True, timeout=10)
        subprocess.run(["ip", "netns", "del", VANISH_NS], capture_output=True, timeout=10)


def _clients(port: int) -> list[bytes]:
    with socket.create_connection((NODE_IP, port), timeout=5) as s:
        s.sendall(b"CLIENT LIST\r\n")
        reply = b""
        while not reply.endswith(b"\r\n") or reply.count(b"\r\n") < 2:
            reply += s.recv(65536)
    return [line for line in reply.split(b"\n")[1:] if b"addr=" in line and b"cmd=client" not in line]


def test_a_subscriber_whose_host_vanished_is_closed(veth: None, tmp_path: Path) -> None:
    """A Redis subscriber in another network namespace, its link then pulled down (no FIN,
    no reset): with `tcp_keepalive 1` (1 s idle, 1 s interval, 3 probes) the node closes
    it in ~4 s. Before: held (no keepalive on the socket)."""
    redis = {"tport": "redis_v", "type": "redis", "route": {"listen": NODE_IP, "port": 0}}
    n = start_network(tmp_path, "node A\n", extra=[redis], params={"tcp_keepalive": "1 sec"})
    sub: subprocess.Popen[str] | None = None
    try:
        port = n.port("A", "redis_v")
        sub = subprocess.Popen(["ip", "netns", "exec", VANISH_NS, sys.executable, "-c", SUBSCRIBER, NODE_IP,
                                str(port)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert sub.stdout is not None and sub.stdout.readline().strip() == "subscribed"
        assert [b"sub=1" in c for c in _clients(port)] == [True]
        _ip("-n", VANISH_NS, "link", "set", VETH[1], "down")  # the client's host is gone
        t0 = time.monotonic()
        assert poll(lambda: not _clients(port), 15, 0.2), "the vanished subscriber is still held"
        took = time.monotonic() - t0
        assert 2.5 < took < 10, took  # idle 1 + 3 probes 1 s apart
        assert n.nodes["A"].new_traceback() is None
    finally:
        if sub is not None:
            sub.kill()
            sub.wait(5)
        n.stop()
