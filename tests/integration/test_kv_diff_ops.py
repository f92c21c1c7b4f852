"""The operator commands of ms_server's Redis transport (SLOWLOG, LATENCY, MEMORY,
CONFIG, CLIENT PAUSE / UNPAUSE, LOLWUT, the idle timeout) against Debian's redis-server:
deterministic replies and every error form compared byte for byte in RESP2 and RESP3
(kv_diff.py), the timed ones by shape; then redis-py clients on the node for what needs
time or several connections."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
import redis

from tests.integration.kv_diff import WAIT_S, Pair, RawClient, cmds, parse


@pytest.fixture
def pair(pair: Pair) -> Iterator[Pair]:
    """conftest's pair; the parameters a test changed are set back on both afterwards."""
    yield pair
    pair.check(cmds("""
    CONFIG SET slowlog-log-slower-than 10000 slowlog-max-len 128 latency-monitor-threshold 0 timeout 0
    CLIENT UNPAUSE
    """))


SLOWLOG = """
SLOWLOG
SLOWLOG HELP
SLOWLOG help x
SLOWLOG GET x
SLOWLOG GET -2
SLOWLOG GET 1 2
SLOWLOG GET 99999999999999999999
SLOWLOG LEN x
SLOWLOG RESET x
SLOWLOG foo
CONFIG SET slowlog-log-slower-than -1
SLOWLOG RESET
SLOWLOG LEN
SLOWLOG GET
SLOWLOG GET -1
SLOWLOG GET 0
CONFIG SET slowlog-log-slower-than x
CONFIG SET slowlog-log-slower-than -2
CONFIG SET slowlog-log-slower-than 99999999999999999999
CONFIG SET slowlog-max-len -1
CONFIG SET slowlog-max-len 1.5
CONFIG SET slowlog-max-len 5 slowlog-log-slower-than 100
CONFIG GET slowlog-max-len
CONFIG GET slowlog-log-slower-than
"""

LATENCY = """
LATENCY
LATENCY LATEST
LATENCY LATEST x
LATENCY HISTORY
LATENCY HISTORY command
LATENCY HISTORY foo
LATENCY HISTORY a b
LATENCY RESET
LATENCY RESET command foo
LATENCY DOCTOR
LATENCY DOCTOR x
LATENCY HELP
LATENCY GRAPH
LATENCY GRAPH command
LATENCY foo
CONFIG GET latency-monitor-threshold
CONFIG SET latency-monitor-threshold -1
CONFIG SET latency-monitor-threshold x
CONFIG SET latency-monitor-threshold 100
CONFIG GET latency-monitor-threshold
LATENCY LATEST
CONFIG SET latency-monitor-threshold 0
"""

MEMORY = """
MEMORY
MEMORY USAGE
MEMORY USAGE nokey
MEMORY USAGE nokey SAMPLES 3
MEMORY USAGE k SAMPLES
MEMORY USAGE k SAMPLES x
MEMORY USAGE k SAMPLES -1
MEMORY USAGE k foo
MEMORY USAGE k SAMPLES 5 x
MEMORY STATS x
MEMORY DOCTOR
MEMORY DOCTOR x
MEMORY PURGE
MEMORY PURGE x
MEMORY MALLOC-STATS x
MEMORY HELP
MEMORY HELP x
MEMORY foo
"""

CONFIG = """
CONFIG
CONFIG GET
CONFIG SET
CONFIG SET timeout
CONFIG SET timeout 1 databases
CONFIG GET timeout
CONFIG SET timeout 70
CONFIG GET timeout
CONFIG SET timeout -1
CONFIG SET timeout x
CONFIG SET timeout 2147483648
CONFIG SET timeout 0 timeout 1
CONFIG SET timeout 1 nosuch 1
CONFIG SET nosuch 1 timeout x
CONFIG SET timeout x databases 1
CONFIG SET timeout 5 notify-keyspace-events xyz
CONFIG GET timeout
CONFIG SET timeout 0 notify-keyspace-events KEA
CONFIG GET timeout
CONFIG GET notify-keyspace-events
CONFIG SET notify-keyspace-events ""
CONFIG SET notify-keyspace-events x
CONFIG GET TIMEOUT
CONFIG GET Slowlog-Max-Len
CONFIG SET maxmemory x
CONFIG SET maxmemory -1
CONFIG SET maxmemory 1.5mb
CONFIG SET maxmemory 10k
CONFIG GET maxmemory
CONFIG SET maxmemory 1GB
CONFIG GET maxmemory
CONFIG SET maxmemory 100
CONFIG GET maxmemory
CONFIG GET tcp-keepalive
CONFIG SET tcp-keepalive -1
CONFIG SET tcp-keepalive x
CONFIG SET tcp-keepalive 2147483648
CONFIG SET tcp-keepalive 60
CONFIG GET tcp-keepalive
CONFIG SET tcp-keepalive 300
CONFIG SET maxmemory 0
CONFIG GET maxmemory
CONFIG RESETSTAT
CONFIG RESETSTAT x
CONFIG foo
"""

PAUSE = """
CLIENT PAUSE
CLIENT PAUSE x
CLIENT PAUSE -1
CLIENT PAUSE 1.5
CLIENT PAUSE 0 foo
CLIENT PAUSE 0 write x
CLIENT PAUSE 99999999999999999999
CLIENT PAUSE 0
CLIENT PAUSE 0 write
CLIENT PAUSE 0 ALL
CLIENT UNPAUSE
CLIENT UNPAUSE x
"""

LOLWUT = """
LOLWUT
LOLWUT foo
LOLWUT VERSION
LOLWUT VERSION x
LOLWUT VERSION 1
LOLWUT VERSION 7
LOLWUT 1 2
LOLWUT VERSION 5 x
LOLWUT VERSION 5 1 x
"""


@pytest.mark.parametrize("block", [SLOWLOG, LATENCY, MEMORY, CONFIG, PAUSE, LOLWUT],
                         ids=["slowlog", "latency", "memory", "config", "pause", "lolwut"])
def test_replies(pair: Pair, block: str) -> None:
    pair.check(cmds(block))


@pytest.mark.parametrize("pattern", [b"slowlog*", b"latency-monitor*", b"slowlog-max-le?", b"timeou[st]",
                                     b"*max-*-entries*"])
def test_config_get_glob(pair: Pair, pattern: bytes) -> None:
    """A pattern's parameters and values as redis-server's (whose order is its dict's)."""
    def pairs(frame: bytes) -> list[tuple[object, object]]:
        kind, items = parse(frame)
        return sorted(zip(items[0::2], items[1::2], strict=True), key=repr)

    ref, us = (c.call([b"CONFIG", b"GET", pattern]) for c in (pair.ref, pair.us))
    assert ref[:1] == us[:1] and pairs(us) == pairs(ref)


def _entries(frame: bytes) -> list[list[object]]:
    value = parse(frame)
    assert isinstance(value, tuple)
    return [e[1] for e in value[1]]


def test_slowlog_shapes(pair: Pair) -> None:
    """Threshold 0: each command is logged with its arguments (cut as redis-server cuts
    them), the client's address and name; ids grow; max-len bounds the log."""
    long = b"x" * 200
    many = [b"MGET"] + [b"k%d" % i for i in range(40)]
    script = [[b"CLIENT", b"SETNAME", b"opsname"], [b"CONFIG", b"SET", b"slowlog-log-slower-than", b"0"],
              [b"SLOWLOG", b"RESET"], [b"SET", b"k", long], many, [b"AUTH", b"default", b"secret"]]
    got = []
    for c in (pair.ref, pair.us):
        for cmd in script:
            c.call(cmd)
        got.append((_entries(c.call([b"SLOWLOG", b"GET", b"-1"])), c.call([b"SLOWLOG", b"LEN"])))
    (ref, ref_len), (us, us_len) = got
    assert us_len == ref_len == b":5\r\n"  # RESET, SET, MGET, AUTH, then the GET
    assert [e[3] for e in us] == [e[3] for e in ref]  # the arguments, cut alike
    assert [e[5] for e in us] == [b"opsname"] * 4
    assert [e[0] for e in us] == sorted((e[0] for e in us), reverse=True)
    assert all(isinstance(e[1], tuple) and isinstance(e[2], tuple) for e in us)  # integers
    assert us[0][4].startswith(b"127.0.0.1:")
    for c in (pair.ref, pair.us):
        c.call([b"CONFIG", b"SET", b"slowlog-max-len", b"2"])
        c.call([b"PING"])
        assert c.call([b"SLOWLOG", b"LEN"]) == b":2\r\n"
        c.call([b"CONFIG", b"SET", b"slowlog-log-slower-than", b"-1"])
        c.call([b"SLOWLOG", b"RESET"])
        c.call([b"PING"])
        assert c.call([b"SLOWLOG", b"LEN"]) == b":0\r\n"
        c.call([b"CLIENT", b"SETNAME", b""])


def test_memory_shapes(pair: Pair) -> None:
    """MEMORY USAGE of each type is an integer, STATS has redis-server's fields in order."""
    setup = cmds("""
    SET s hello
    RPUSH l a b c
    SADD st a b
    HSET h f v
    ZADD z 1 a
    XADD x 1-1 f v
    """)
    for c in (pair.ref, pair.us):
        for cmd in setup:
            c.call(cmd)
    for key in (b"s", b"l", b"st", b"h", b"z", b"x"):
        for args in ([], [b"SAMPLES", b"0"]):
            ref = pair.ref.call([b"MEMORY", b"USAGE", key, *args])
            us = pair.us.call([b"MEMORY", b"USAGE", key, *args])
            assert ref[:1] == us[:1] == b":" and int(us[1:-2]) > 0, key
    ref_stats, us_stats = (parse(c.call([b"MEMORY", b"STATS"])) for c in (pair.ref, pair.us))
    assert ref_stats[0] == us_stats[0]
    assert ref_stats[1][0::2] == us_stats[1][0::2]
    for c in (pair.ref, pair.us):
        assert c.call([b"MEMORY", b"MALLOC-STATS"])[:1] in (b"$", b"=")


def test_lolwut_art(pair: Pair) -> None:
    for c in (pair.ref, pair.us):
        for args in ([b"5"], [b"5", b"1"], [b"5", b"-1", b"1000", b"-5"], [b"5", b"40", b"4", b"3"]):
            text = parse(c.call([b"LOLWUT", b"VERSION", *args]))
            assert isinstance(text, bytes) and text.endswith(
                b"Georg Nees - schotter, plotter on paper, 1968. Redis ver. 7.0.15\n"), args


# ------------------------------------------------------------ with redis-py, on the node


@pytest.fixture()
def node(servers: tuple[int, int]) -> Iterator[redis.Redis]:
    r = redis.Redis(port=servers[1], socket_timeout=WAIT_S)
    yield r
    r.config_set("timeout", 0)
    r.config_set("slowlog-log-slower-than", 10000)
    r.client_unpause()
    r.close()


def test_slowlog_redis_py(node: redis.Redis) -> None:
    node.config_set("slowlog-log-slower-than", 0)
    node.slowlog_reset()
    node.set("slow", "value")
    node.mget("a", "b")
    log = node.slowlog_get()
    commands = [entry["command"] for entry in log]
    assert commands[:3] == [b"MGET a b", b"SET slow value", b"SLOWLOG RESET"]
    assert all(entry["duration"] >= 0 for entry in log)


def test_pipeline_threshold_zero_logs_each(node: redis.Redis) -> None:
    """With threshold 0 a pipeline's data commands are logged one by one."""
    node.config_set("slowlog-log-slower-than", 0)
    node.slowlog_reset()
    with node.pipeline(transaction=False) as p:
        for i in range(5):
            p.set(f"p{i}", i)
        p.execute()
    commands = [entry["command"] for entry in node.slowlog_get(5)]
    assert commands == [b"SET p%d %d" % (i, i) for i in reversed(range(5))]


def test_resetstat(node: redis.Redis) -> None:
    for _ in range(5):
        node.ping()
    before = node.info()
    assert before["total_commands_processed"] > 3
    node.config_resetstat()
    after = node.info()
    assert after["total_commands_processed"] <= 2
    assert after["total_connections_received"] == 0
    assert after["connected_clients"] >= 1


def test_timeout_closes_idle_not_subscriber(servers: tuple[int, int], node: redis.Redis) -> None:
    idle = RawClient(servers[1])
    sub = RawClient(servers[1])
    assert sub.call([b"SUBSCRIBE", b"ch"]).startswith(b"*3")
    node.config_set("timeout", 1)
    deadline = time.monotonic() + WAIT_S
    closed = False
    while not closed and time.monotonic() < deadline:
        time.sleep(0.2)  # the idle client's own silence is what is tested
        node.ping()  # this one stays active
        idle.sock.settimeout(0.01)
        try:
            closed = idle.sock.recv(1) == b""
        except TimeoutError:
            pass
    assert closed, "an idle client was not closed"
    sub.send([b"PING"])
    assert sub.read() == b"*2\r\n$4\r\npong\r\n$0\r\n\r\n"
    idle.close()
    sub.close()


def test_pause_write_holds_writes_until_unpause(servers: tuple[int, int], node: redis.Redis) -> None:
    other = redis.Redis(port=servers[1], socket_timeout=WAIT_S)
    node.client_pause(60_000, all=False)
    assert other.get("nothing") is None  # reads run
    done = threading.Event()

    def write() -> None:
        other.set("paused", "1")
        done.set()

    t = threading.Thread(target=write)
    t.start()
    assert not done.wait(0.3)
    assert node.get("paused") is None  # held, not run
    node.client_unpause()
    assert done.wait(WAIT_S)
    t.join(WAIT_S)
    assert node.get("paused") == b"1"
    other.close()


def test_pause_all_holds_everything_until_end(servers: tuple[int, int], node: redis.Redis) -> None:
    other = redis.Redis(port=servers[1], socket_timeout=WAIT_S)
    other.ping()
    start = time.monotonic()
    node.client_pause(500)
    assert other.get("x") is None  # a read waits too
    assert node.ping()  # so does the pausing client
    assert time.monotonic() - start >= 0.45
    other.close()
