"""Lua scripting on a running ms_server: redis-py's Lock (EVALSHA / SCRIPT LOAD for
release and extend) between two clients, sync and asyncio; a script's writes survive a
restart (logged as the commands it ran); a node without a map runs scripts that read."""

from __future__ import annotations

import asyncio
import signal
import threading
from pathlib import Path

import pytest
import redis
import redis.asyncio as aredis
from redis.exceptions import LockError, LockNotOwnedError, ResponseError

from raims_node.kv.cli import main as ms_kv
from tests.integration.test_bridges_net import start_network

WAIT_S = 10.0


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> object:
    tmp = tmp_path_factory.mktemp("scripting-node")
    assert ms_kv(["init", str(tmp / "map")]) == 0
    net = start_network(tmp, "node A\n", params={"map_file": str(tmp / "map")})
    try:
        yield net.port("A", "redis")
    finally:
        net.stop()


def test_redis_py_lock(port: int) -> None:
    a = redis.Redis(port=port, socket_timeout=WAIT_S)
    b = redis.Redis(port=port, socket_timeout=WAIT_S)
    try:
        a.script_flush()
        lock_a = a.lock("res", timeout=5)
        lock_b = b.lock("res", timeout=5, sleep=0.02, thread_local=False)  # acquired in a thread
        assert lock_a.acquire(blocking=False)
        assert lock_a.locked() and lock_a.owned() and not lock_b.owned()
        assert not lock_b.acquire(blocking_timeout=0.1)  # held by a: b waits, then gives up
        assert lock_a.extend(20)  # EVALSHA after a NOSCRIPT and SCRIPT LOAD
        assert 20_000 < a.pttl("res") <= 25_000
        assert lock_a.extend(3, replace_ttl=True) and a.pttl("res") <= 3000
        assert lock_a.reacquire() and 4000 < a.pttl("res") <= 5000
        with pytest.raises(LockError):
            lock_b.release()  # b holds no token
        with pytest.raises(LockNotOwnedError):
            lock_b.do_release(b"not-the-token")  # the release script answers 0
        lock_b.local.token = b"not-the-token"
        with pytest.raises(LockNotOwnedError):
            lock_b.extend(10)  # the extend script answers 0
        lock_b.local.token = None
        got: list[bool] = []
        waiter = threading.Thread(target=lambda: got.append(lock_b.acquire(blocking_timeout=WAIT_S)))
        waiter.start()
        lock_a.release()
        waiter.join(WAIT_S)
        assert got == [True] and lock_b.owned() and not lock_a.owned()
        lock_b.release()
        assert not a.exists("res")
        with lock_a:  # the context manager form
            assert lock_a.owned()
        assert a.script_exists(lock_a.lua_release.sha, lock_a.lua_extend.sha) == [True, True]
    finally:
        a.close()
        b.close()


def test_redis_py_asyncio_lock(port: int) -> None:
    async def run() -> None:
        a = aredis.Redis(port=port, socket_timeout=WAIT_S)
        b = aredis.Redis(port=port, socket_timeout=WAIT_S)
        try:
            await a.script_flush()
            lock_a = a.lock("ares", timeout=5)
            lock_b = b.lock("ares", timeout=5, sleep=0.02)
            assert await lock_a.acquire(blocking=False)
            assert not await lock_b.acquire(blocking_timeout=0.1)
            assert await lock_a.extend(10)
            waiter = asyncio.create_task(lock_b.acquire(blocking_timeout=WAIT_S))
            await lock_a.release()
            assert await asyncio.wait_for(waiter, WAIT_S)
            assert await lock_b.owned()
            await lock_b.release()
        finally:
            await a.aclose()
            await b.aclose()

    asyncio.run(run())


SCRIPT = """
redis.call('set', 'plain', ARGV[1])
redis.call('set', 'ttl', 'v', 'EX', 1000)
redis.call('incrbyfloat', 'f', '0.5')
redis.call('sadd', 'pool', 'a', 'b', 'c')
local popped = redis.call('spop', 'pool')
redis.call('select', 4)
redis.call('rpush', 'in4', 'x', 'y')
return popped
"""


def test_script_writes_survive_a_restart(tmp_path: Path) -> None:
    """Logged as the commands the script ran (SPOP as its effect, SELECT as the db
    change), so a restart after SIGKILL rebuilds the same data."""
    assert ms_kv(["init", str(tmp_path / "map")]) == 0
    net = start_network(tmp_path, "node A\n", params={"map_file": str(tmp_path / "map")})
    try:
        r = redis.Redis(port=net.port("A", "redis"), socket_timeout=WAIT_S)
        popped = r.eval(SCRIPT, 0, "value")
        left = r.smembers("pool")
        assert popped not in left and len(left) == 2
        assert r.get("in4") is None  # SELECT in the script changed its db only
        r.close()
        net.restart("A", signal.SIGKILL)
        r = redis.Redis(port=net.port("A", "redis"), socket_timeout=WAIT_S)
        assert r.get("plain") == b"value" and r.get("f") == b"0.5"
        assert 990 <= r.ttl("ttl") <= 1000
        assert r.smembers("pool") == left
        r.select(4)
        assert r.lrange("in4", 0, -1) == [b"x", b"y"]
        r.close()
    finally:
        net.stop()


def test_without_a_map_scripts_read_and_writes_fail(tmp_path: Path) -> None:
    net = start_network(tmp_path, "node A\n")
    try:
        r = redis.Redis(port=net.port("A", "redis"), socket_timeout=WAIT_S)
        assert r.eval("return redis.call('get', 'k')", 0) is None
        with pytest.raises(ResponseError, match="no key-value map is configured"):
            r.eval("return redis.call('set', 'k', 'v')", 0)
        assert r.eval("return redis.pcall('set', 'k', 'v')['err'] ~= nil", 0) == 1
        r.close()
    finally:
        net.stop()
