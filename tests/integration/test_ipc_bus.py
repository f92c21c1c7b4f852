"""The sbus bus (`type: ipc`) against seed 001, clause by clause, with raw SOCK_SEQPACKET
sockets on one ms_server process (with a NATS and a Redis transport of the same service),
then across the manual's A-D graph.

Barrier used instead of sleeps: `CMSG raims/ping` is answered after every packet the
client sent before it, and a delivery to another client is in that client's socket (or
outbox) before the publisher's ping is answered, so `drain()` (the receiver's own ping)
returns exactly what it was sent.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from raims_node.config.test_adj import free_port
from tests.integration.harness import (
    CONVERGED,
    MANUAL_GRAPH,
    PYTHON,
    NodeProc,
    get_json,
    graph_config,
    wait_whole_graph,
    web_addr,
)

SERVICE = "svc"
QUEUE_PACKETS = 200
TIMEOUT = 10.0


class Raw:
    """A raw sbus client."""

    def __init__(self, path: str | Path) -> None:
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.s.settimeout(TIMEOUT)
        self.s.connect(str(path))
        self._pings = 0

    def send(self, packet: bytes) -> None:
        self.s.send(packet)

    def sub(self, pattern: bytes) -> None:
        self.send(b"SUB " + pattern)

    def pub(self, key: bytes, payload: bytes = b"") -> None:
        self.send(b"MSG " + key + b"\x00" + payload)

    def recv(self) -> bytes:
        return self.s.recv(1 << 18)

    def drain(self) -> list[bytes]:
        """Every packet the server sent before answering a ping (the ping excluded)."""
        self._pings += 1
        token = b"%d" % self._pings
        self.send(b"CMSG raims/ping\x00" + token)
        out = []
        while True:
            packet = self.recv()
            if packet == b"CMSG raims/ping\x00" + token:
                return out
            assert packet, "connection closed"
            out.append(packet)

    def sync(self) -> None:
        """The server has handled everything this client sent."""
        assert self.drain() == [] or True

    def close(self) -> None:
        self.s.close()


def msgs(packets: list[bytes]) -> list[tuple[bytes, bytes]]:
    out = []
    for p in packets:
        assert p.startswith(b"MSG "), p
        key, _, payload = p[4:].partition(b"\x00")
        out.append((key, payload))
    return out


class OneNode:
    def __init__(self, tmp: Path, node: NodeProc, path: str, nats: int, redis: int) -> None:
        self.tmp, self.node, self.path, self.nats, self.redis = tmp, node, path, nats, redis
        self.web = web_addr(node)

    def client(self) -> Raw:
        return Raw(self.path)


@pytest.fixture(scope="module")
def bus() -> Iterator[OneNode]:
    tmp = Path(tempfile.mkdtemp(prefix="raims-ipc-test-"))
    tmp.chmod(0o755)  # the `nobody` child reaches the socket through it
    try:
        cfg, _ = graph_config(tmp, "node A\n")
        data = yaml.safe_load(cfg.read_text())
        nats, redis = free_port(), free_port()
        path = str(tmp / "bus.sock")
        data["transports"] += [
            {"tport": "bus", "type": "ipc", "route": {"path": path, "service": SERVICE,
                                                      "max_queue_packets": QUEUE_PACKETS,
                                                      "sndbuf": 0}},  # the kernel's: ~280 packets in flight
            {"tport": "nats", "type": "nats", "route": {"port": nats, "service": SERVICE}},
            {"tport": "redis", "type": "redis", "route": {"port": redis, "service": SERVICE}},
        ]
        cfg.write_text(yaml.safe_dump(data, sort_keys=False))
        node = NodeProc("A", ["-d", str(cfg), "-u", "A", "-t", "bus.listen", "nats.listen", "redis.listen",
                              "web.listen"], tmp)
        try:
            node.wait_for(re.escape(f"listening on {path}"))
            node.wait_for(rf"listening on 127.0.0.1:{redis}")
            yield OneNode(tmp, node, path, nats, redis)
        finally:
            node.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------- routing keys and grammar

@pytest.mark.parametrize(("pattern", "hits", "misses"), [
    (b"a/*/c/", [b"a/b/c/", b"a/b/c/d/e"], [b"a/b/c", b"a/c/d"]),  # the seed's example
    (b"", [b"x", b"a/b/c", b"a/b/c/"], []),  # the empty pattern matches everything
    (b"a/*", [b"a/b", b"a/"], [b"a/b/c", b"b/a"]),  # '*' stops at the next '/'
    (b"a/b*", [b"a/b", b"a/bcd"], [b"a/c", b"a/bc/d"]),
    (b"k", [b"k"], [b"kk", b"k/"]),
])
def test_pattern_examples(bus: OneNode, pattern: bytes, hits: list[bytes], misses: list[bytes]) -> None:
    sub, pub = bus.client(), bus.client()
    sub.sub(pattern)
    sub.sync()
    for key in hits + misses:
        pub.pub(key, b"p")
    pub.sync()
    assert [k for k, _ in msgs(sub.drain())] == hits
    sub.close()
    pub.close()


def test_sender_gets_its_own_message_only_with_a_matching_pattern(bus: OneNode) -> None:
    a, b = bus.client(), bus.client()
    a.sub(b"self/a")
    a.sync()
    a.pub(b"self/a", b"1")
    b.pub(b"self/a", b"2")
    b.pub(b"self/b", b"3")
    b.sync()
    assert msgs(a.drain()) == [(b"self/a", b"1"), (b"self/a", b"2")]
    assert b.drain() == []


def test_one_copy_per_client_and_identical_patterns_stored_twice(bus: OneNode) -> None:
    a, p = bus.client(), bus.client()
    a.sub(b"dup/x")
    a.sub(b"dup/x")
    a.sub(b"dup/*")
    a.send(b"UNSUB dup/*")
    a.send(b"UNSUB dup/x")  # one of the two identical patterns remains
    a.sync()
    p.pub(b"dup/x", b"1")
    p.sync()
    assert msgs(a.drain()) == [(b"dup/x", b"1")]
    a.send(b"UNSUB dup/x")
    a.sync()
    p.pub(b"dup/x", b"2")
    p.sync()
    assert a.drain() == []


def test_unsub_of_an_unknown_pattern_is_ignored(bus: OneNode) -> None:
    a, p = bus.client(), bus.client()
    a.sub(b"known")
    a.send(b"UNSUB never/subscribed")
    a.send(b"UNSUB known/")
    a.sync()  # still connected
    p.pub(b"known", b"1")
    p.sync()
    assert msgs(a.drain()) == [(b"known", b"1")]


def test_grammars_to_the_letter(bus: OneNode) -> None:
    a, p = bus.client(), bus.client()
    a.send(b"SUB gr/a\x00ignored")  # \2 of SUB is ignored
    a.send(b"SUB gr/b\x00")
    a.sync()
    p.send(b"MSG gr/a")  # no NUL: not a MSG
    p.send(b"MSG gr/a\x00")  # empty payload
    p.send(b"MSG gr/b\x00with\x00nul\nand newline")
    p.send(b"PUB gr/a\x00x")  # no such verb
    p.send(b"msg gr/a\x00x")  # verbs are upper case
    p.send(b"CMSG gr/a\x00never forwarded")  # control messages are never forwarded
    p.sync()
    packets = a.drain()
    assert packets == [b"MSG gr/a\x00", b"MSG gr/b\x00with\x00nul\nand newline"]  # a copy of the packet


def test_binary_keys(bus: OneNode) -> None:
    a, p = bus.client(), bus.client()
    key = bytes(range(1, 256)).replace(b"*", b"").replace(b"/", b"").replace(b"!", b"")
    a.sub(b"bin/" + key)
    a.sync()
    p.pub(b"bin/" + key, b"\x00\xff")
    p.sync()
    assert msgs(a.drain()) == [(b"bin/" + key, b"\x00\xff")]


def test_reserved_bang(bus: OneNode) -> None:
    a, p = bus.client(), bus.client()
    a.sub(b"")
    a.send(b"SUB !/x")  # refused pattern
    a.sync()
    p.pub(b"!/x", b"1")  # misused '!': ignored
    p.pub(b"x/!/y", b"2")
    p.pub(b"x/!y", b"3")  # '!' with another byte next to it is an ordinary byte
    p.pub(b"y!", b"4")
    p.sync()
    assert msgs(a.drain()) == [(b"x/!y", b"3"), (b"y!", b"4")]


def test_garbage_packets_leave_the_bus_working(bus: OneNode) -> None:
    import random

    rng = random.Random(20)
    a, bad = bus.client(), bus.client()
    a.sub(b"g/*")
    a.sync()
    verbs = [b"SUB ", b"UNSUB ", b"MSG ", b"CMSG ", b"", b"MSG", b"SUB !", b"CMSG !/cred/", b"MSG !/cred/"]
    for _ in range(2000):
        body = bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
        bad.send(rng.choice(verbs) + body.replace(b"g/", b"h/") or b"x")
    bad.s.setsockopt(socket.SOL_SOCKET, 32, 1 << 20)  # SO_SNDBUFFORCE (root)
    a.sub(b"big")
    a.sync()
    bad.send(b"MSG big\x00" + b"k" * 200_000)  # over max_packet (192 KiB): dropped and counted
    bad.sync()
    bad.pub(b"g/ok", b"1")
    bad.sync()
    assert msgs(a.drain()) == [(b"g/ok", b"1")]
    _, rows = get_json(bus.web, "show ports")  # what was refused is counted where an operator looks
    [row] = [r for r in rows if r["type"] == "ipc"]  # type: ignore[index, union-attr]
    assert row["bad"] > 0, row  # type: ignore[index, operator]


def test_a_packet_over_max_packet_is_reported_to_its_sender(bus: OneNode) -> None:
    """A packet between max_packet and the socket's limit was dropped and counted, and its
    sender was not told; now `CMSG raims/error` says so (nats-server's -ERR 'Maximum
    Payload Violation'), in order with its other answers, and the connection stays."""
    a, bad = bus.client(), bus.client()
    bad.s.setsockopt(socket.SOL_SOCKET, 32, 1 << 20)  # SO_SNDBUFFORCE (root): the kernel takes it
    a.sub(b"mp/x")
    a.sync()
    bad.pub(b"mp/x", b"before")
    bad.send(b"MSG mp/x\x00" + b"k" * 200_000)  # over max_packet (192 KiB)
    bad.pub(b"mp/x", b"after")
    assert bad.drain() == [b"CMSG raims/error\x00Maximum Payload Violation\x00%d" % (192 * 1024)]
    assert msgs(a.drain()) == [(b"mp/x", b"before"), (b"mp/x", b"after")]
    bad.send(b"CMSG raims/info")
    assert bad.drain() == [b'CMSG raims/info\x00{"max_packet": %d}' % (192 * 1024)]


# ---------------------------------------------------------------- credentials

def _own_creds() -> bytes:
    return b"%d/%d/%d" % (os.getgid(), os.getuid(), os.getpid())


def test_whoami(bus: OneNode) -> None:
    a = bus.client()
    a.send(b"CMSG !/cred/whoami")  # \2 omitted by the client
    assert a.recv() == b"CMSG !/cred/whoami\x00!/cred/" + _own_creds()
    a.send(b"CMSG !/cred/whoami\x00")
    assert a.recv() == b"CMSG !/cred/whoami\x00!/cred/" + _own_creds()


def test_cred_subscriptions(bus: OneNode) -> None:
    a, p = bus.client(), bus.client()
    own = _own_creds()
    a.sub(b"!/cred////mine")  # empty fields: the client's own credentials
    a.sub(b"!/cred/" + own + b"/full")
    a.sub(b"!/cred/1/2/3/other")  # someone else's: refused
    a.sub(b"!/cred/*/0/1/star")  # '*' in a field: refused
    a.sub(b"!/cred/")  # truncated: refused
    a.sync()
    for tail in (b"mine", b"full", b"other", b"star"):
        p.pub(b"!/cred/" + own + b"/" + tail, tail)
    p.pub(b"!/cred/1/2/3/other", b"x")
    p.pub(b"!/cred/x/y", b"malformed")
    p.sync()
    assert [v for _, v in msgs(a.drain())] == [b"mine", b"full"]


NOBODY_CLIENT = r"""
import os, socket, sys
os.setgid(65534); os.setuid(65534)
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.settimeout(10)
s.connect(sys.argv[1])
root = sys.argv[2].encode()
s.send(b"CMSG !/cred/whoami")
print("whoami", s.recv(4096).decode(), flush=True)
s.send(b"SUB !/cred/" + root + b"/secret")  # root's key: refused
s.send(b"SUB ")  # everything, which still excludes other credentials' secrets
s.send(b"CMSG raims/ping\x00ready")
assert s.recv(4096) == b"CMSG raims/ping\x00ready"
print("ready", flush=True)
while True:
    p = s.recv(4096)
    print("got", p[4:].split(b"\x00")[0].decode(errors="replace"), flush=True)
    if p.endswith(b"\x00end"):
        break
"""


def test_cred_refused_for_another_uid(bus: OneNode) -> None:
    owner, p = bus.client(), bus.client()
    own = _own_creds()
    owner.sub(b"!/cred/" + own + b"/secret")
    owner.sync()
    child = subprocess.Popen([PYTHON, "-c", NOBODY_CLIENT, bus.path, own.decode()],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert child.stdout is not None
        whoami = child.stdout.readline()
        assert whoami.startswith("whoami CMSG !/cred/whoami\x00!/cred/65534/65534/"), whoami
        assert child.stdout.readline() == "ready\n"
        p.pub(b"!/cred/" + own + b"/secret", b"s")
        p.pub(b"public", b"end")
        p.sync()
        out, _ = child.communicate(timeout=TIMEOUT)
        assert out == "got public\n"
        assert child.returncode == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert msgs(owner.drain()) == [(b"!/cred/" + own + b"/secret", b"s")]


# ---------------------------------------------------------------- flood control

def _publish_until_held(p: Raw, key: bytes, n: int) -> int:
    """Publish numbered packets without blocking; how many went before EAGAIN (n when
    all did)."""
    p.s.setblocking(False)
    try:
        for i in range(n):
            try:
                p.pub(key, b"%08d" % i)
            except BlockingIOError:
                return i
        return n
    finally:
        p.s.settimeout(TIMEOUT)


def _publish_all(p: Raw, key: bytes, n: int) -> None:
    """Publish numbered packets; a held publisher would time out."""
    for i in range(n):
        p.pub(key, b"%08d" % i)


def _numbers(packets: list[bytes]) -> list[int]:
    return [int(v[:8]) for _, v in msgs(packets)]


def _read_until_closed(r: Raw) -> list[bytes]:
    out = []
    while True:
        try:
            packet = r.recv()
        except ConnectionResetError:
            return out
        if not packet:
            return out
        out.append(packet)


@pytest.mark.parametrize("modes", [[b"blocking/soft/discard"], [b"blocking/hard/discard"]])
def test_flood_discard(bus: OneNode, modes: list[bytes]) -> None:
    r, p = bus.client(), bus.client()
    for m in modes:
        r.send(b"CMSG " + m)
    r.sub(b"fl/d")
    r.sync()  # then stops reading
    n = 3000
    _publish_all(p, b"fl/d", n)  # never held
    p.sync()
    got = _numbers(r.drain())
    assert 0 < len(got) < n and got == sorted(got)
    if modes == [b"blocking/hard/discard"]:  # the queue filled to its limit first
        assert len(got) > QUEUE_PACKETS
    p.pub(b"fl/d", b"%08d" % n)  # still connected, delivering again
    p.sync()
    assert _numbers(r.drain()) == [n]


@pytest.mark.parametrize("modes", [[b"blocking/soft/error"], [b"blocking/hard/error"]])
def test_flood_error_disconnects(bus: OneNode, modes: list[bytes]) -> None:
    r, p = bus.client(), bus.client()
    for m in modes:
        r.send(b"CMSG " + m)
    r.sub(b"fl/e")
    r.sync()
    n = 3000
    _publish_all(p, b"fl/e", n)
    p.sync()
    packets = _read_until_closed(r)
    *data, notice = packets  # the node says why it closes, behind what the socket held
    assert notice.startswith(b"CMSG raims/error\x00Slow Consumer\x00"), notice
    got = _numbers(data)
    assert got == list(range(len(got))) and len(got) < n
    assert len(got) + int(notice.rsplit(b"\x00", 1)[1]) <= n  # what it received, what it dropped


@pytest.mark.parametrize("modes", [[], [b"blocking/soft/block"], [b"blocking/soft/queue", b"blocking/hard/block"]])
def test_flood_block_holds_the_publisher(bus: OneNode, modes: list[bytes]) -> None:
    r, p = bus.client(), bus.client()
    for m in modes:
        r.send(b"CMSG " + m)
    r.sub(b"fl/b")
    r.sync()
    n = 20_000
    sent = _publish_until_held(p, b"fl/b", n)  # unless held, the queue overflows and the reader is cut
    rest = threading.Thread(target=lambda: [p.pub(b"fl/b", b"%08d" % i) for i in range(sent, n)])
    rest.start()
    got: list[int] = []
    while len(got) < n:
        got += _numbers([r.recv()])
    rest.join(TIMEOUT)
    assert got == list(range(n))  # nothing lost, in order


def _client_buffered(bus: OneNode) -> int:
    status, rows = get_json(bus.web, "show counters")
    assert status == 200 and isinstance(rows, list)
    return int(rows[0]["client_buffered"])  # the node's own row


def test_counters_count_what_sbus_clients_hold(bus: OneNode) -> None:
    """`show counters` (and /metrics) with sbus clients connected: the bytes queued for a
    reader that does not read are counted among the clients' (the hub's once-a-second
    soft-limit check reads every client too: NodeProc.stop fails on its traceback)."""
    r, p = bus.client(), bus.client()
    r.sub(b"fl/c")
    r.sync()  # then stops reading
    n = QUEUE_PACKETS + 100  # over what the socket takes, under the queue limit
    _publish_all(p, b"fl/c", n)
    p.sync()
    assert _client_buffered(bus) > 0  # the packets the socket did not take
    with urllib.request.urlopen(f"http://{bus.web}/metrics", timeout=5) as m:
        assert m.status == 200 and b"client_buffered" in m.read()
    assert sorted(_numbers(r.drain())) == list(range(n))
    assert _client_buffered(bus) == 0
    r.close()
    p.close()


def test_flood_order_stack_and_random(bus: OneNode) -> None:
    r, p = bus.client(), bus.client()
    r.send(b"CMSG order/stack")
    r.sub(b"fl/o")
    r.sync()
    n = QUEUE_PACKETS + 100  # over what the socket takes, under the queue limit
    _publish_all(p, b"fl/o", n)
    p.sync()
    got = _numbers(r.drain())
    assert sorted(got) == list(range(n))
    k = got.index(n - 1)  # the socket's share in order, then the queue newest first
    assert got[:k] == list(range(k)) and got[k:] == list(range(n - 1, k - 1, -1))

    r.send(b"CMSG order/random")
    r.sync()
    sizes = [(i * 37) % 101 for i in range(n)]
    for i, size in enumerate(sizes):
        p.pub(b"fl/o", b"%08d" % i + b"x" * size)
    p.sync()
    packets = r.drain()
    assert sorted(_numbers(packets)) == list(range(n))
    numbers = _numbers(packets)
    k = next((i for i in range(1, n) if numbers[i] < numbers[i - 1]), None)
    assert k is not None, f"nothing was queued: {numbers[:3]}...{numbers[-3:]}"
    tail = [len(x) for x in packets[k:]]
    assert tail == sorted(tail, reverse=True)  # largest first frees memory fastest


# ---------------------------------------------------------------- the bridge on one node

def test_sbus_to_nats_and_redis_to_sbus(bus: OneNode) -> None:
    import redis

    n = socket.create_connection(("127.0.0.1", bus.nats), timeout=TIMEOUT)
    n.recv(4096)
    n.sendall(b"CONNECT {\"verbose\":false}\r\nSUB a.b.c 1\r\nPING\r\n")
    assert n.recv(4096).endswith(b"PONG\r\n")
    a, s = bus.client(), bus.client()
    s.sub(b"x/*")
    s.sub(b"x/y")  # two patterns, two bus subscriptions, one copy
    s.sync()
    a.pub(b"a/b/c", b"hello")
    a.pub(b"a/b.c", b"stays on the sbus")
    a.sync()
    buf = b""
    while b"hello" not in buf:
        buf += n.recv(4096)
    assert buf.startswith(b"MSG a.b.c 1 5\r\nhello\r\n")
    r = redis.Redis(port=bus.redis, socket_timeout=TIMEOUT)
    assert r.publish("x.y", b"from redis") >= 1
    assert r.publish("x/y", b"cannot map") == 0
    assert msgs(s.drain()) == [(b"x/y", b"from redis")]
    n.close()


def test_a_delivery_larger_than_the_receivers_socket_is_reported_in_its_place(bus: OneNode) -> None:
    """A NATS client may publish 1 MiB; an sbus receiver's socket (the kernel's default
    buffer here) takes ~208 KiB: the node dropped and counted the message, and the
    receiver never heard of it. Now `raims/error` takes its place, in order."""
    r = bus.client()
    r.sub(b"tl/x")
    r.sync()
    n = socket.create_connection(("127.0.0.1", bus.nats), timeout=TIMEOUT)
    n.recv(4096)
    n.sendall(b"CONNECT {\"verbose\":false}\r\n")
    for size in (10, 300_000, 20):
        n.sendall(b"PUB tl.x %d\r\n%s\r\n" % (size, b"z" * size))
    n.sendall(b"PING\r\n")
    assert n.recv(4096).endswith(b"PONG\r\n")
    got = [r.recv() for _ in range(3)]
    n.close()
    assert got == [b"MSG tl/x\x00" + b"z" * 10,
                   b"CMSG raims/error\x00Message Too Large\x00tl/x\x00%d" % (300_000 + len(b"MSG tl/x\x00")),
                   b"MSG tl/x\x00" + b"z" * 20]


# ---------------------------------------------------------------- across the A-D graph

@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict[str, object]]]:
    tmp = tmp_path_factory.mktemp("ipcgraph")
    cfg, commands = graph_config(tmp, MANUAL_GRAPH)
    data = yaml.safe_load(cfg.read_text())
    data["transports"] += [
        {"tport": "bus", "type": "ipc", "route": {"service": SERVICE}},
        {"tport": "nats", "type": "nats", "route": {"port": 0, "service": SERVICE}},
        {"tport": "redis", "type": "redis", "route": {"port": 0, "service": SERVICE}},
    ]
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))
    env_tmp = tmp / "run"
    env_tmp.mkdir()
    old = {k: os.environ.get(k) for k in ("TMPDIR", "XDG_RUNTIME_DIR")}
    os.environ["TMPDIR"] = str(env_tmp)  # the nodes' sockets: $TMPDIR/raims-<uid>/<user>.sock
    os.environ.pop("XDG_RUNTIME_DIR", None)
    nodes: dict[str, NodeProc] = {}
    try:
        for command in commands:
            args = command.split()[1:]
            if "-t" not in args:
                args.append("-t")
            name = args[args.index("-u") + 1]
            nodes[name] = NodeProc(name, args + ["bus.listen", "nats.listen", "redis.listen", "web.listen"], tmp)
        out: dict[str, dict[str, object]] = {}
        for name, node in nodes.items():
            node.wait_for(CONVERGED.format(n=3), 30)
            web = web_addr(node)
            lines = [m.group(1) for line in node.lines if (m := re.search(r"listening on (\S+)", line))]
            ports = [int(x.rpartition(":")[2]) for x in lines if ":" in x and x != web]
            path = next(x for x in lines if x.endswith(".sock"))
            out[name] = {"path": path, "nats": ports[-2], "redis": ports[-1], "web": web}
        wait_whole_graph([str(o["web"]) for o in out.values()], MANUAL_GRAPH)
        yield out
    finally:
        for node in nodes.values():
            node.stop()
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _wait_visible(c: Raw, key: bytes) -> None:
    """Until the network knows a subscriber for `key` (CMSG raims/visible)."""
    for _ in range(200):
        c.send(b"CMSG raims/visible\x00" + key)
        if c.recv() == b"CMSG raims/visible\x00" + key + b"\x001":
            return
        threading.Event().wait(0.05)
    raise AssertionError(f"{key!r} never visible")


def test_graph_sbus_on_a_to_nats_on_d(graph: dict[str, dict[str, object]]) -> None:
    n = socket.create_connection(("127.0.0.1", int(str(graph["D"]["nats"]))), timeout=TIMEOUT)
    n.recv(4096)
    n.sendall(b"CONNECT {\"verbose\":false}\r\nSUB ad.> 1\r\nPING\r\n")
    assert n.recv(4096).endswith(b"PONG\r\n")
    a = Raw(str(graph["A"]["path"]))
    _wait_visible(a, b"ad/x")
    for i in range(100):
        a.pub(b"ad/x", b"%03d" % i)
    buf = b""
    while buf.count(b"MSG ad.x 1 3\r\n") < 100:
        chunk = n.recv(65536)
        assert chunk
        buf += chunk
    assert [int(x[:3]) for x in buf.split(b"MSG ad.x 1 3\r\n")[1:]] == list(range(100))
    n.close()


def test_graph_redis_on_d_to_sbus_on_a(graph: dict[str, dict[str, object]]) -> None:
    import redis

    a = Raw(str(graph["A"]["path"]))
    a.sub(b"da/")
    a.sync()
    r = redis.Redis(port=int(str(graph["D"]["redis"])), socket_timeout=TIMEOUT)
    for _ in range(200):  # until D's bloom filter for A carries the pattern
        if r.publish("da.probe", b"p") >= 1:
            break
        threading.Event().wait(0.05)
    for i in range(100):
        r.publish("da.x.y", b"%03d" % i)
    got = []
    while len(got) < 100:
        key, payload = msgs([a.recv()])[0]
        if key != b"da/probe":
            assert key == b"da/x/y"
            got.append(int(payload))
    assert got == list(range(100))


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-x"]))


def test_an_sbus_clients_names_are_withdrawn_when_it_goes(bus: OneNode) -> None:
    """Seed 002 2.2.10: a binder's names go with it. An sbus client's `_NAMES` requests
    were owned by the ipc server, so its names outlived it (lookups kept answering with
    its dead port)."""
    import asyncio
    import json

    import nats

    from raims_node.names.client import NamesClient, NamesRequestError

    s = bus.client()
    s.sub(b"r/1")
    s.sub(b"srv/in")
    s.drain()
    s.pub(b"_NAMES/BIND", json.dumps({"type": 4200, "instance": 7, "inbox": "srv.in", "reply": "r.1"}).encode())
    assert b'"port"' in s.recv()

    async def lookups() -> tuple[dict[str, object], str]:
        nc = await nats.connect(f"nats://127.0.0.1:{bus.nats}", connect_timeout=5, max_reconnect_attempts=0)
        try:
            names = NamesClient(nc, timeout=3)
            bound = await names.lookup(4200, 7)
            s.close()
            for _ in range(50):  # until the node has seen the client go
                try:
                    await names.lookup(4200, 7)
                except NamesRequestError as exc:
                    return bound, str(exc)
                await asyncio.sleep(0.05)
            return bound, "still bound"
        finally:
            await nc.close()

    bound, after = asyncio.run(asyncio.wait_for(lookups(), 30))
    assert bound and "no publication" in after


def test_a_client_cut_mid_stream_costs_the_others_nothing(graph: dict[str, dict[str, object]]) -> None:
    """D's bus holds a wildcard for a client that never reads and a literal for one that
    does; A streams. The first is cut as a slow consumer in the middle of a run the
    network hands over, its wildcard the bus subscription delivering it: the rest of the
    run still reaches the reader (a few messages were lost there)."""
    dead, live = Raw(str(graph["D"]["path"])), Raw(str(graph["D"]["path"]))
    dead.send(b"CMSG blocking/hard/error")
    dead.sub(b"cut/*")
    live.sub(b"cut/x")
    live.sync()
    a = Raw(str(graph["A"]["path"]))
    _wait_visible(a, b"cut/x")
    n = 20_000
    got: list[int] = []

    def read() -> None:
        while len(got) < n:
            got.extend(_numbers([live.recv()]))  # a lost message: recv times out, the thread ends

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    _publish_all(a, b"cut/x", n)
    a.sync()
    reader.join(TIMEOUT * 4)
    assert got == list(range(n)), f"{n - len(got)} lost: {sorted(set(range(n)) - set(got))[:20]}"
    _read_until_closed(dead)  # it was cut


def test_routes_follow_subscriptions_that_come_and_go(bus: OneNode) -> None:
    """The cached route of a key is forgotten when a pattern matching it comes or goes,
    and only then (ipc.py `_forget`)."""
    x, y, z, p = bus.client(), bus.client(), bus.client(), bus.client()
    x.sub(b"rt/*")
    x.sync()
    p.pub(b"rt/a", b"1")  # cached: x
    p.sync()
    y.sub(b"rt/a")
    z.sub(b"other/*")  # changes no route of rt/a
    y.sync()
    z.sync()
    p.pub(b"rt/a", b"2")
    p.sync()  # delivered to the others before p's ping is answered
    assert [v for _, v in msgs(y.drain())] == [b"2"]
    y.send(b"UNSUB rt/a")
    y.sync()
    p.pub(b"rt/a", b"3")
    p.sync()
    assert [v for _, v in msgs(x.drain())] == [b"1", b"2", b"3"]
    assert msgs(y.drain()) == []
    assert msgs(z.drain()) == []
