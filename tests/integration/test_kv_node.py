"""The key-value map of a running ms_server: restarts keep the data and the deadlines
(after SIGTERM and after SIGKILL), a node without a map refuses writes, `ms_kv init`,
and keyspace notifications made on D reach a redis-py subscriber on A."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from pathlib import Path

import pytest
import redis
import redis.asyncio as aredis
from redis.exceptions import ResponseError

from raims_node.kv.cli import main as ms_kv
from tests.integration.harness import MANUAL_GRAPH, PYTHON, graph_config
from tests.integration.test_bridges_net import start_network

WAIT_S = 10.0


def _fill(r: redis.Redis) -> None:
    r.set("s", "v")
    r.set("forever", "x")
    r.set("long", "y", ex=1000)
    r.set("short", "z", px=300)
    r.incrbyfloat("f", 0.1)
    r.rpush("l", "a", "b", "c")
    r.hset("h", mapping={"f1": "1", "f2": "2"})
    r.sadd("set", "m1", "m2")
    r.zadd("z", {"a": 1.5, "b": -2})
    r.select(3)
    r.set("in3", "three")
    r.select(0)
    r.spop("set")  # logged as its effect
    with r.pipeline(transaction=True) as p:  # redis-py's MULTI ... EXEC
        p.incr("counter").incr("counter").get("counter")
        assert p.execute() == [1, 2, b"2"]

    def bump(pipe: redis.client.Pipeline) -> None:  # WATCH, read, MULTI, write, EXEC
        value = int(pipe.get("counter") or 0)
        pipe.multi()
        pipe.set("counter", value * 10)

    assert r.transaction(bump, "counter") == [True]


def _check(r: redis.Redis, popped_left: int) -> None:
    assert r.get("s") == b"v" and r.get("f") == b"0.1" and r.get("counter") == b"20"
    assert r.exists("short") == 0
    assert 990 <= r.ttl("long") <= 1000 and r.ttl("forever") == -1
    assert r.lrange("l", 0, -1) == [b"a", b"b", b"c"]
    assert r.hgetall("h") == {b"f1": b"1", b"f2": b"2"}
    assert r.scard("set") == popped_left
    assert r.zrange("z", 0, -1, withscores=True) == [(b"b", -2.0), (b"a", 1.5)]
    r.select(3)
    assert r.get("in3") == b"three"
    r.select(0)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["term", "kill"])
def test_restart_keeps_data_and_expiry(tmp_path: Path, sig: int) -> None:
    assert ms_kv(["init", str(tmp_path / "map")]) == 0
    net = start_network(tmp_path, "node A\n", params={"map_file": str(tmp_path / "map")})
    try:
        r = redis.Redis(port=net.port("A", "redis"), socket_timeout=WAIT_S)
        _fill(r)
        members = r.smembers("set")
        r.close()
        deadline = time.time() + 0.4  # "short" expires while the node is down
        net.restart("A", sig)
        time.sleep(max(0.0, deadline - time.time()))
        r = redis.Redis(port=net.port("A", "redis"), socket_timeout=WAIT_S)
        _check(r, 1)
        assert r.smembers("set") == members
        r.close()
    finally:
        net.stop()


def test_without_a_map_writes_fail_and_reads_are_nil(tmp_path: Path) -> None:
    net = start_network(tmp_path, "node A\n")
    try:
        r = redis.Redis(port=net.port("A", "redis"), socket_timeout=WAIT_S)
        with pytest.raises(ResponseError, match="no key-value map is configured"):
            r.set("k", "v")
        with pytest.raises(ResponseError, match="no key-value map is configured"):
            r.lpush("l", "x")
        assert r.get("k") is None and r.lrange("l", 0, -1) == [] and r.dbsize() == 0
        assert r.publish("still.pubsub", "x") == 0
        r.close()
    finally:
        net.stop()


def test_a_map_takes_values_larger_than_a_message(tmp_path: Path) -> None:
    """With a map a bulk may hold a value up to 64 MiB (redis-py's own test stores 5 MB),
    while a PUBLISH message stays within max_payload (1 MiB): a larger one is refused
    with an error, the connection stays usable and nothing is delivered."""
    assert ms_kv(["init", str(tmp_path / "map")]) == 0
    net = start_network(tmp_path, "node A\n", params={"map_file": str(tmp_path / "map")})
    try:
        r = redis.Redis(port=net.port("A", "redis"), socket_timeout=WAIT_S)
        sub = r.pubsub()
        sub.subscribe("big")
        assert sub.get_message(timeout=WAIT_S)["type"] == "subscribe"
        value = bytes(range(256)) * (5 * 1024 * 1024 // 256)
        assert r.set("big", value) and r.get("big") == value and r.strlen("big") == len(value)
        assert r.append("big", b"!") == len(value) + 1
        with pytest.raises(ResponseError, match="message of 1048577 bytes exceeds max_payload 1048576"):
            r.publish("big", bytes(1024 * 1024 + 1))
        assert r.publish("big", bytes(1024 * 1024)) == 1
        pipe = r.pipeline(transaction=False)  # the batch path: fits, too large, fits
        for size in (1, 1024 * 1024 + 1, 2):
            pipe.publish("big", bytes(size))
        replies = pipe.execute(raise_on_error=False)
        assert replies[0] == 1 and isinstance(replies[1], ResponseError) and replies[2] == 1
        sizes = [len(sub.get_message(timeout=WAIT_S)["data"]) for _ in range(3)]
        assert sizes == [1024 * 1024, 1, 2]
        assert sub.get_message(timeout=0.2) is None  # the refused ones were not delivered
        sub.close()
        r.close()
    finally:
        net.stop()


def test_missing_map_file_stops_the_start_with_a_clear_error(tmp_path: Path) -> None:
    assert ms_kv(["init", str(tmp_path / "m")]) == 0
    assert ms_kv(["init", str(tmp_path / "m")]) == 1  # exists: not emptied without --force
    cfg, commands = graph_config(tmp_path, "node A\n", web=False)
    args = commands[0].split()[1:]
    t = args.index("-t") if "-t" in args else len(args)
    args[t:t] = ["-m", f"sysv:{tmp_path / 'nosuch'}"]
    out = subprocess.run([PYTHON, "-m", "raims_node.server", *args], capture_output=True, text=True,
                         timeout=30, cwd=tmp_path)
    assert out.returncode != 0
    assert f"map file {tmp_path / 'nosuch'} does not exist; create it with: ms_kv init" in out.stdout + out.stderr


@pytest.mark.slow
async def test_keyevent_on_d_reaches_a_subscriber_on_a(tmp_path: Path) -> None:
    assert ms_kv(["init", str(tmp_path / "map_d")]) == 0
    net = await asyncio.to_thread(start_network, tmp_path, MANUAL_GRAPH,
                                  node_args={"D": ["-m", str(tmp_path / "map_d")]})
    try:
        sub = aredis.Redis(port=net.port("A", "redis"), protocol=3, socket_timeout=WAIT_S)
        ps = sub.pubsub()
        await ps.subscribe("__keyevent@0__:set")
        await ps.get_message(timeout=WAIT_S)  # the confirmation
        d = aredis.Redis(port=net.port("D", "redis"), socket_timeout=WAIT_S)
        assert await d.config_set("notify-keyspace-events", "E$") is True
        got = None
        deadline = time.monotonic() + 20
        n = 0
        while got is None and time.monotonic() < deadline:  # until A's subscription reached D
            n += 1
            await d.set(f"probe{n}", "x")
            got = await ps.get_message(ignore_subscribe_messages=True, timeout=0.2)
        assert got is not None and got["channel"] == b"__keyevent@0__:set"
        await d.set("the-key", "v")
        while True:
            m = await ps.get_message(ignore_subscribe_messages=True, timeout=WAIT_S)
            assert m is not None
            if m["data"] == b"the-key":
                break
            assert m["data"].startswith(b"probe")
        await ps.aclose()
        await sub.aclose()
        await d.aclose()
    finally:
        net.stop()
