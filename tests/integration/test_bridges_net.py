"""The network of the bridge tests, and ms_server starting (or refusing) bridge transports.

`start_network` writes the config as harness.graph_config does, adds a `nats` and a
`redis` transport (port 0) plus any extra bridge transports, starts one ms_server per
node with `-t <links> nats.listen redis.listen ...`, reads each bridge's real port from
its "listening on" line (bridges are listed after the node's links, in order) and waits
for the network to converge: every node's CONVERGED line, then, on a network of more than
one node (which gets a `web` transport for it), every link of the graph up and every node
converged (harness.wait_whole_graph). `restart` brings a node back on the same bridge
ports, as a client reconnecting to its server expects.
"""

from __future__ import annotations

import contextlib
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.harness import CONVERGED, PYTHON, NodeProc, graph_config, wait_whole_graph

Transport = dict[str, Any]
BRIDGES: tuple[Transport, ...] = ({"tport": "nats", "type": "nats", "route": {"port": 0}},
                                  {"tport": "redis", "type": "redis", "route": {"port": 0}})
WEB: Transport = {"tport": "web", "type": "web", "route": {"listen": "127.0.0.1", "port": 0}}


@contextlib.contextmanager
def hot_paths(kind: str) -> Iterator[None]:
    """Nodes started inside run the compiled hot paths ("compiled", the default) or their
    pure-Python fallbacks ("python": RAIMS_PURE_PYTHON=1, bridges/resp.py)."""
    with pytest.MonkeyPatch.context() as mp:
        if kind == "python":
            mp.setenv("RAIMS_PURE_PYTHON", "1")
        else:
            mp.delenv("RAIMS_PURE_PYTHON", raising=False)
        yield


@dataclass
class BridgeNet:
    tmp: Path
    cfg: Path
    graph: str  # ms_test_adj's text
    args: dict[str, list[str]]  # ms_server arguments per node
    bridges: list[str]  # bridge transports started on every node, in order (a web one last)
    nodes: dict[str, NodeProc] = field(default_factory=dict)
    ports: dict[str, dict[str, int]] = field(default_factory=dict)  # node -> tport -> port
    prefix: dict[str, list[str]] = field(default_factory=dict)  # node -> command before it (prlimit ...)

    def port(self, node: str, tport: str = "nats") -> int:
        return self.ports[node][tport]

    def start(self, name: str, cfg: Path | None = None) -> NodeProc:
        args = list(self.args[name])
        args[args.index("-d") + 1] = str(cfg or self.cfg)
        node = self.nodes[name] = NodeProc(name, args, self.tmp, prefix=self.prefix.get(name))
        return node

    def read_ports(self, name: str) -> None:
        args = self.args[name]
        links = sum(1 for a in args if a.endswith(".listen")) - len(self.bridges)
        found = _listen_ports(self.nodes[name], links + len(self.bridges))
        self.ports[name] = dict(zip(self.bridges, found[links:], strict=True))

    def converge(self, names: list[str] | None = None, timeout: float = 30.0) -> None:
        for name in names or list(self.nodes):
            self.nodes[name].wait_for(CONVERGED.format(n=len(self.args) - 1), timeout)
        web = self.bridges[-1]
        if len(self.args) > 1 and web == WEB["tport"]:
            wait_whole_graph([f"127.0.0.1:{ports[web]}" for ports in self.ports.values()], self.graph, timeout)

    def restart(self, name: str, sig: int = signal.SIGTERM) -> NodeProc:
        """Stop `name` and start it again with its bridges on the same ports."""
        self.nodes[name].stop(sig)
        data = yaml.safe_load(self.cfg.read_text())
        for t in data["transports"]:
            if t["tport"] in self.ports[name]:
                t["route"]["port"] = self.ports[name][t["tport"]]
        fixed = self.tmp / f"fixed_{name}.yaml"
        fixed.write_text(yaml.safe_dump(data, sort_keys=False))
        node = self.start(name, fixed)
        self.read_ports(name)
        return node

    def stop(self) -> None:
        for node in self.nodes.values():
            node.stop()


def _listen_ports(node: NodeProc, count: int, timeout: float = 20.0) -> list[int]:
    """The ports of the first `count` "listening on" lines (0 for a unix socket's path),
    waiting for them."""
    ports: list[int] = []
    seen = 0
    while len(ports) < count:
        node.wait_for(r"listening on", timeout, after=seen)
        lines = list(node.lines)
        for line in lines[seen:]:
            if "listening on " in line:
                where = line.rpartition("listening on ")[2]
                ports.append(0 if where.startswith("/") else int(where.rpartition(":")[2]))  # 0: a unix socket
        seen = len(lines)
    return ports[:count]


def start_network(tmp: Path, graph: str, extra: list[Transport] | None = None,
                  heartbeat: str = "1 sec", params: dict[str, str] | None = None,
                  node_args: dict[str, list[str]] | None = None,
                  prefix: dict[str, list[str]] | None = None) -> BridgeNet:
    """Every node of `graph` with the nats, redis and `extra` bridge transports (and
    `params` added to the parameters, `node_args` to a node's command line, `prefix`
    before it); converged."""
    cfg, commands = graph_config(tmp, graph, heartbeat, web=False)
    data = yaml.safe_load(cfg.read_text())
    data.setdefault("parameters", {}).update(params or {})
    bridges = [*BRIDGES, *(extra or [])]
    if len(commands) > 1 and WEB not in bridges:
        bridges.append(WEB)
    data.setdefault("transports", []).extend(bridges)
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))
    net = BridgeNet(tmp, cfg, graph, {}, [str(b["tport"]) for b in bridges], prefix=prefix or {})
    for command in commands:
        args = command.split()[1:]
        if "-t" not in args:
            args.append("-t")
        user = args[args.index("-u") + 1]
        t = args.index("-t")
        args[t:t] = (node_args or {}).get(user, [])
        # -t is the last option: the bridges listen after the node's link listeners
        net.args[user] = args + [f"{b}.listen" for b in net.bridges]
    try:
        for name in net.args:  # all at once: connectors retry until their listener is up
            net.start(name)
        for name in net.args:
            net.read_ports(name)
        net.converge()
    except BaseException:
        net.stop()
        raise
    return net


@pytest.fixture
def one_node(tmp_path: Path) -> Iterator[BridgeNet]:
    net = start_network(tmp_path, "node A\n")
    yield net
    net.stop()


def test_bridges_listen_on_their_own_ports(one_node: BridgeNet) -> None:
    ports = one_node.ports["A"]
    assert set(ports) == {"nats", "redis"} and ports["nats"] != ports["redis"]
    with socket.create_connection(("127.0.0.1", ports["nats"]), timeout=5) as s:
        assert s.recv(4096).startswith(b"INFO {")
    with socket.create_connection(("127.0.0.1", ports["redis"]), timeout=5) as s:
        s.sendall(b"PING\r\n")
        assert s.recv(64) == b"+PONG\r\n"


@pytest.mark.parametrize(("route", "kind", "how", "error"), [
    ({"port": 0}, "nats", "connect", "only listens"),
    ({"port": 0, "service": "a.*"}, "redis", "listen", "must be a dotted name"),
    ({"port": 0, "service": "a..b"}, "nats", "listen", "must be a dotted name"),
])
def test_bad_bridge_transports_stop_the_server(tmp_path: Path, route: dict[str, object], kind: str,
                                               how: str, error: str) -> None:
    cfg, _ = graph_config(tmp_path, "node A\n", web=False)
    data = yaml.safe_load(cfg.read_text())
    data.setdefault("transports", []).append({"tport": "bad", "type": kind, "route": route})
    cfg.write_text(yaml.safe_dump(data))
    out = subprocess.run([PYTHON, "-m", "raims_node.server", "-d", str(cfg), "-u", "A", "-t", f"bad.{how}"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 3
    assert error in out.stderr


def test_a_bridge_port_in_use_stops_the_server(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cfg, _ = graph_config(tmp_path, "node A\n", web=False)
        data = yaml.safe_load(cfg.read_text())
        data.setdefault("transports", []).append({"tport": "n", "type": "nats", "route": {"port": port}})
        cfg.write_text(yaml.safe_dump(data))
        out = subprocess.run([PYTHON, "-m", "raims_node.server", "-d", str(cfg), "-u", "A", "-t", "n.listen"],
                             capture_output=True, text=True, timeout=30)
    assert out.returncode == 3
    assert f"transport 'n' listen 127.0.0.1:{port} failed" in out.stderr


STALL_S = 1.0


def _read_until(sock: socket.socket, token: bytes, buf: bytearray) -> None:
    while token not in buf:
        chunk = sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk


def await_route(pub: socket.socket, sub: socket.socket, subject: bytes, buf: bytearray) -> None:
    """Publish probes on `subject` from `pub` until `sub`, subscribed to it on another
    node, gets one (its subscription is known at the publisher's node), then one last
    message after them: `buf` (what `sub` read) ends with it. Bounded: 20 s."""
    sub.settimeout(0.1)
    deadline = time.monotonic() + 20
    while b"MSG " + subject not in buf:
        assert time.monotonic() < deadline, "the subscription never reached the publisher's node"
        pub.sendall(b"PUB %s 1\r\np\r\n" % subject)
        with contextlib.suppress(TimeoutError):
            _read_until(sub, b"MSG " + subject, buf)
    sub.settimeout(30)
    pub.sendall(b"PUB %s 4\r\nlast\r\n" % subject)
    _read_until(sub, b"last\r\n", buf)


def test_a_publisher_faster_than_its_link_is_held_not_cut(tmp_path: Path) -> None:
    """A pipelined NATS publisher on A floods the A-B link while B is stopped (SIGSTOP for
    STALL_S): the link's write high-water mark holds the reading of A's clients
    (backpressure) instead of the link overfilling (16 x the mark) and being dropped, and
    once B runs again every message reaches its subscriber, in order."""
    count, payload = 100_000, bytes(range(100))
    net = start_network(tmp_path, "node A B\ntcp_link_ab A B : 100\n", heartbeat="10 sec",
                        params={"tcp_write_highwater": "64 KB"})
    try:
        with socket.create_connection(("127.0.0.1", net.port("B")), timeout=30) as sub, \
                socket.create_connection(("127.0.0.1", net.port("A")), timeout=30) as pub:
            buf = bytearray()
            sub.sendall(b'CONNECT {"verbose":false}\r\nSUB flood 1\r\nSUB probe 2\r\nPING\r\n')
            _read_until(sub, b"PONG\r\n", buf)
            pub.sendall(b'CONNECT {"verbose":false}\r\n')
            await_route(pub, sub, b"probe", buf)
            batch = b"PUB flood 100\r\n%s\r\n" % payload * 1000
            sender = threading.Thread(target=lambda: [pub.sendall(batch) for _ in range(count // 1000)])
            sender.start()
            stopped = net.nodes["B"].proc
            stopped.send_signal(signal.SIGSTOP)
            try:
                time.sleep(STALL_S)  # the stall under test: A's link fills meanwhile
            finally:
                stopped.send_signal(signal.SIGCONT)
            expected = b"MSG flood 1 100\r\n%s\r\n" % payload
            got = 0
            tail = b""
            while got < count:
                chunk = tail + sub.recv(1 << 20)
                whole = len(chunk) // len(expected)
                assert chunk[:whole * len(expected)] == expected * whole
                got, tail = got + whole, chunk[whole * len(expected):]
            sender.join(30)
        drops = [line for line in net.nodes["A"].lines if "closing link" in line]
        assert not drops
    finally:
        net.stop()


def test_a_pipelined_run_arrives_whole_and_in_order(tmp_path: Path) -> None:
    """PUBs pipelined on one subject are published as a run (routed once, written to a
    lone subscriber at once): payloads of changing sizes arrive in order, byte for byte;
    with a second subscription limited by UNSUB max, each gets exactly its share."""
    net = start_network(tmp_path, "node A\n")
    try:
        with socket.create_connection(("127.0.0.1", net.port("A")), timeout=30) as sub, \
                socket.create_connection(("127.0.0.1", net.port("A")), timeout=30) as pub:
            buf = bytearray()
            sub.sendall(b'CONNECT {"verbose":false}\r\nSUB run 1\r\nPING\r\n')
            _read_until(sub, b"PONG\r\n", buf)
            payloads = [b"m%d" % i * (1 + i % 3) for i in range(500)]
            pub.sendall(b'CONNECT {"verbose":false}\r\n'
                        + b"".join(b"PUB run %d\r\n%s\r\n" % (len(p), p) for p in payloads) + b"PING\r\n")
            _read_until(pub, b"PONG\r\n", bytearray())
            want = b"".join(b"MSG run 1 %d\r\n%s\r\n" % (len(p), p) for p in payloads)
            buf.clear()
            while len(buf) < len(want):
                buf += sub.recv(1 << 16)
            assert bytes(buf) == want
            sub.sendall(b"SUB run 2\r\nUNSUB 2 3\r\nPING\r\n")
            buf.clear()
            _read_until(sub, b"PONG\r\n", buf)
            pub.sendall(b"".join(b"PUB run 2\r\n%02d\r\n" % i for i in range(10)) + b"PING\r\n")
            _read_until(pub, b"PONG\r\n", bytearray())
            buf.clear()
            while buf.count(b"MSG ") < 13:
                buf += sub.recv(1 << 16)
            got = re.findall(rb"MSG run (\d) 2\r\n(\d\d)\r\n", bytes(buf))
            assert [m for sid, m in got if sid == b"1"] == [b"%02d" % i for i in range(10)]
            assert [m for sid, m in got if sid == b"2"] == [b"00", b"01", b"02"]
    finally:
        net.stop()
