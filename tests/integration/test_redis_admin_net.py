"""CLIENT REPLY | LIST | INFO | KILL, COMMAND COUNT | DOCS and INFO with redis-py 8.1
against one ms_server's Redis transport, and CLIENT REPLY transcripts replayed against
Debian's redis-server and ms_server on raw sockets (the same bytes must come back)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from raims_node.bridges.redis_session import session_command_tree
from tests.integration.kv_diff import RedisServer
from tests.integration.test_bridges_net import BridgeNet, start_network
from tests.unit.test_kv_cmdinfo import command_tree
from tests.unit.test_redis_admin import REPLY_TRANSCRIPTS

WAIT_S = 10.0
MARKER = b"CLIENT REPLY ON\r\nECHO end-of-transcript\r\n"


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BridgeNet]:
    bridge_net = start_network(tmp_path_factory.mktemp("admin"), "node A\n")
    yield bridge_net
    bridge_net.stop()


@pytest.fixture
def clients(net: BridgeNet) -> Iterator[list[redis.Redis]]:
    opened: list[redis.Redis] = []
    yield opened
    for r in opened:
        r.close()


def connect(net: BridgeNet, opened: list[redis.Redis], name: str | None = None, resp: int = 2) -> redis.Redis:
    r = redis.Redis(port=net.port("A", "redis"), client_name=name, protocol=resp, socket_timeout=WAIT_S)
    opened.append(r)
    return r


@pytest.mark.parametrize("resp", [2, 3])
def test_client_reply_off_skip_on(net: BridgeNet, clients: list[redis.Redis], resp: int) -> None:
    r = connect(net, clients, resp=resp)
    conn = r.connection_pool.get_connection()
    try:
        conn.send_command("CLIENT", "REPLY", "OFF")
        conn.send_command("PING")
        conn.send_command("ECHO", "silent")
        conn.send_command("NOSUCHCOMMAND")
        conn.send_command("CLIENT", "REPLY", "ON")
        assert conn.read_response() == b"OK"  # nothing came before ON's +OK
        conn.send_command("CLIENT", "REPLY", "SKIP")
        conn.send_command("ECHO", "skipped")
        conn.send_command("ECHO", "seen")
        assert conn.read_response() == b"seen"
        assert not conn.can_read(timeout=0.05)
    finally:
        r.connection_pool.release(conn)
    assert r.ping()


def test_client_list_info_and_kill(net: BridgeNet, clients: list[redis.Redis]) -> None:
    first = connect(net, clients, "first")
    second = connect(net, clients, "second")
    second_id = second.client_id()
    listed = {c["name"]: c for c in first.client_list()}
    assert {"first", "second"} <= set(listed)
    assert int(listed["second"]["id"]) == second_id
    assert listed["first"]["lib-name"] == "redis-py" and listed["first"]["user"] == "default"
    me = first.client_info()
    assert me["name"] == "first" and me["cmd"] == "client|info" and me["laddr"].endswith(
        f":{net.port('A', 'redis')}")
    conn = second.connection_pool.get_connection()
    try:
        assert first.client_kill_filter(_id=second_id) == 1
        deadline = time.monotonic() + WAIT_S
        while any(int(c["id"]) == second_id for c in first.client_list()):
            assert time.monotonic() < deadline, "the killed client is still listed"
            time.sleep(0.02)
        with pytest.raises(redis.ConnectionError):  # EOF: from can_read, or the read after it
            conn.can_read(timeout=WAIT_S)
            conn.read_response()
    finally:
        conn.disconnect()
        second.connection_pool.release(conn)
    assert first.ping()


def test_command_count_docs_and_info(net: BridgeNet, clients: list[redis.Redis]) -> None:
    r = connect(net, clients, "docs")
    assert r.command_count() == len(command_tree()) > len(session_command_tree()) >= 27
    docs = r.execute_command("COMMAND DOCS", "publish", "nosuch")
    assert docs[0] == b"publish" and b"Post a message to a channel" in docs[1]
    r3 = connect(net, clients, resp=3)
    docs3 = r3.execute_command("COMMAND DOCS", "client")
    assert b"client|kill" in docs3[b"client"][b"subcommands"]
    info = r.info()
    assert info["tcp_port"] == net.port("A", "redis") and info["connected_clients"] >= 2
    assert info["cluster_enabled"] == 0 and info["role"] == "master" and info["used_memory_rss"] > 1 << 20
    assert info["used_cpu_user"] > 0 and set(r.info("cluster")) == {"cluster_enabled"}
    assert info["redis_version"] == r3.execute_command("HELLO")[b"version"].decode() == "7.0.15"
    sec, usec = r.time()
    assert abs(sec + usec / 1e6 - time.time()) < 5 and 0 <= usec < 1_000_000
    assert r.execute_command("ROLE") == [b"master", 0, []] == r3.execute_command("ROLE")
    assert r.replicaof("NO", "ONE") == b"OK" and r.execute_command("SLAVEOF", "no", "one") is True
    for args in (("NO ONE",), ("127.0.0.1", "6379")):  # redis-py's test_replicaof; no replication
        with pytest.raises(redis.ResponseError):
            r.execute_command("REPLICAOF", *args)
    assert r.info("clients")["connected_clients"] >= 2 and "tcp_port" not in r.info("clients")


def _replay(port: int, data: bytes) -> bytes:
    """Send `data` then MARKER; what comes back before the marker's echo (or the close)."""
    end = b"$17\r\nend-of-transcript\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as sock:
        sock.sendall(data + MARKER)
        out = b""
        deadline = time.monotonic() + WAIT_S
        while not out.endswith(end) and time.monotonic() < deadline:
            chunk = sock.recv(65536)
            if not chunk:
                break
            out += chunk
    out = out.removesuffix(end).removesuffix(b"+OK\r\n")
    return out.split(b"$7\r\nmodules\r\n*0\r\n", 1)[-1]  # HELLO's map names the version


def test_client_reply_matches_redis_server(net: BridgeNet, tmp_path: Path) -> None:
    try:
        ref = RedisServer(tmp_path)
    except FileNotFoundError:
        pytest.skip("redis-server is not installed")
    try:
        for data, _ in REPLY_TRANSCRIPTS:
            if b"QUIT" in data:  # redis-server 7.0 leaves a silenced QUIT's connection open; raims closes
                continue
            assert _replay(net.port("A", "redis"), data) == _replay(ref.port, data), data
    finally:
        ref.stop()


def test_monitor_with_redis_py(net: BridgeNet, clients: list[redis.Redis]) -> None:
    """redis-py's Monitor parses what MONITOR shows of another client's commands (this
    node has no map: pub/sub and connection commands); a client authenticating as
    `default` (redis-py's username and password) works, another user is refused."""
    watcher = connect(net, clients, "watcher")
    other = redis.Redis(port=net.port("A", "redis"), username="default", password="any", socket_timeout=WAIT_S)
    clients.append(other)
    assert other.ping()  # connected (HELLO with AUTH, CLIENT SETINFO) before the monitor starts
    with watcher.monitor() as m:
        other.publish("news", "hello world")
        other.echo('say "hi"')
        seen = [m.next_command() for _ in range(2)]
    assert [(c["db"], c["command"]) for c in seen] == [(0, "PUBLISH news hello world"), (0, 'ECHO say "hi"')]
    assert seen[0]["client_address"] == "127.0.0.1" and int(seen[0]["client_port"]) > 0
    assert other.execute_command("AUTH", "default", "x") is True
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(port=net.port("A", "redis"), username="someone", password="x").ping()
