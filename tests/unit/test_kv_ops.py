"""The operator commands' pure logic (redis_ops.py, redis_ops_mem.py) and their session
behaviour on sans-IO Redis sessions with a fake clock: the slow log's argument forms and
bounds, the latency samples, memory values and estimates, CLIENT PAUSE holding and
releasing commands in order, the idle timeout's rules."""

from __future__ import annotations

from collections import deque

import pytest

from raims_node.bridges.redis_ops import OpsState, _log_args
from raims_node.bridges.redis_ops_mem import key_bytes, schotter, value_bytes
from raims_node.kv.commands import Engine
from raims_node.kv.server import parse_memory
from raims_node.kv.store import KVStore, ZSet
from tests.unit.test_redis_admin import Clock, ask, pair


def test_log_args_cut_as_redis_server() -> None:
    assert _log_args([b"GET", b"k"]) == [b"GET", b"k"]
    assert _log_args([b"SET", b"k", b"x" * 128]) == [b"SET", b"k", b"x" * 128]
    assert _log_args([b"SET", b"k", b"x" * 130]) == [b"SET", b"k", b"x" * 128 + b"... (2 more bytes)"]
    args = [b"MGET"] + [b"%d" % i for i in range(32)]  # 33 arguments
    out = _log_args(args)
    assert len(out) == 32 and out[:31] == args[:31] and out[31] == b"... (2 more arguments)"
    assert _log_args(args[:32]) == args[:32]
    assert _log_args([b"auth", b"u", b"p"]) == [b"auth", b"(redacted)", b"(redacted)"]
    assert _log_args([b"HELLO", b"3", b"AUTH", b"u", b"p", b"SETNAME", b"n"]) == [
        b"HELLO", b"3", b"AUTH", b"(redacted)", b"(redacted)", b"SETNAME", b"n"]


class FakeSession:
    addr = "127.0.0.1:1"
    name: bytes | None = None


def test_record_bounds_and_thresholds() -> None:
    clock = Clock()
    ops = OpsState(clock=clock, slower_than=100, max_len=3)
    s = FakeSession()
    ops.record(s, [b"GET", b"a"], 99_999)  # 99 us: under the threshold
    assert not ops.slowlog
    for i in range(5):
        ops.record(s, [b"GET", b"%d" % i], 100_000)
    assert [e.id for e in ops.slowlog] == [4, 3, 2]
    assert ops.slowlog[0].args == [b"GET", b"4"] and ops.slowlog[0].duration_us == 100
    ops.record(s, [b"EXEC"], 10**9)  # EXEC's commands are logged, not EXEC
    assert ops.slowlog[0].id == 4
    ops.slower_than = -1
    ops.record(s, [b"GET", b"x"], 10**9)
    assert ops.slowlog[0].id == 4
    ops.max_len = 0
    ops.slower_than = 0
    ops.record(s, [b"GET", b"x"], 0)
    assert not ops.slowlog


def test_latency_one_sample_per_second_the_largest() -> None:
    clock = Clock()
    ops = OpsState(clock=clock, latency_ms=5)
    s = FakeSession()
    ops.record(s, [b"GET", b"a"], 4_000_000)  # 4 ms: under
    assert not ops.latency
    ops.record(s, [b"GET", b"a"], 7_000_000)
    ops.record(s, [b"GET", b"a"], 6_000_000)
    clock.t += 1
    ops.record(s, [b"GET", b"a"], 5_000_000)
    assert list(ops.latency[b"command"]) == [(1000, 7), (1001, 5)]
    assert ops.latency_max[b"command"] == 7
    for _ in range(200):
        clock.t += 1
        ops.latency_sample(b"command", 9)
    assert len(ops.latency[b"command"]) == 160


@pytest.mark.parametrize(("raw", "value"), [(b"0", 0), (b"100", 100), (b"10k", 10_000), (b"10kb", 10_240),
                                            (b"1mb", 1 << 20), (b"1GB", 1 << 30), (b"2g", 2 * 10**9)])
def test_parse_memory(raw: bytes, value: int) -> None:
    assert parse_memory(raw) == value


@pytest.mark.parametrize("raw", [b"", b"x", b"-1", b"1.5mb", b" 5", b"5tb", b"99999999999gb"])
def test_parse_memory_refuses(raw: bytes) -> None:
    with pytest.raises(ValueError, match="argument must be a memory value"):
        parse_memory(raw)


def test_value_estimates_sample_and_scale() -> None:
    assert key_bytes(b"k", b"v", 5) == 40 + 1 + 1 + 16
    big = {b"f%d" % i: b"v" for i in range(100)}
    assert value_bytes(big, 0) == 32 + sum(16 + len(f) + 1 for f in big)
    sampled = value_bytes(big, 5)
    assert 32 + 100 * 19 <= sampled <= 32 + 100 * 20  # five of "fN"/"fNN" sizes, scaled to 100
    z = ZSet()
    z.add(b"a", 1.0)
    assert value_bytes(z, 5) == 32 + 16 + 8 + 1
    assert value_bytes(deque([b"ab", b"c"]), 0) == 32 + 2 * 16 + 3
    assert value_bytes(set(), 5) == 32


def test_schotter_is_bounded_braille() -> None:
    art = schotter(66, 8, 12, 1).decode()
    lines = art.split("\n")
    assert len(lines) == -(-(8 * 12 * 16 // 8) // 4) or len(lines) > 1
    assert all(0x2800 <= ord(ch) <= 0x28FF for ch in art.replace("\n", ""))
    assert len(schotter(1000, 1, 1, 7).split(b"\n")[0].decode()) == 1000


# ------------------------------------------------------------ on sessions


def _kv() -> Engine:
    return Engine(KVStore())


def test_pause_write_holds_writes_in_order_until_unpause() -> None:
    host, (a, b) = pair(_kv())
    assert ask(a, b"CLIENT PAUSE 10000 WRITE\r\n") == b"+OK\r\n"
    assert ask(b, b"GET k\r\n") == b"$-1\r\n"  # a read runs
    assert ask(b, b"SET k 1\r\nGET k\r\nAPPEND k 2\r\n") == b""  # held, with what follows
    assert ask(a, b"GET k\r\n") == b"$-1\r\n"
    assert ask(a, b"CLIENT UNPAUSE\r\n") == b"+OK\r\n"
    assert b.pending_output() == b"+OK\r\n$1\r\n1\r\n:2\r\n"


def test_pause_all_holds_the_pausing_client_until_the_end() -> None:
    host, (a, b) = pair(_kv())
    assert isinstance(host.clock, Clock)
    assert ask(a, b"CLIENT PAUSE 500\r\n") == b"+OK\r\n"
    assert ask(a, b"CLIENT UNPAUSE\r\nPING\r\n") == b""  # as redis-server 7.0.15: held too
    assert ask(b, b"GET k\r\n") == b""
    host.clock.t += 0.5
    host.ops.tick(host.sessions(), host.monitors)
    assert a.pending_output() == b"+OK\r\n+PONG\r\n"
    assert b.pending_output() == b"$-1\r\n"
    assert not host.ops.pause_end and not host.ops.waiting


def test_pause_keeps_later_end_and_stricter_mode() -> None:
    host, (a, b) = pair(_kv())
    assert isinstance(host.clock, Clock)
    ask(a, b"CLIENT PAUSE 1000 WRITE\r\nCLIENT PAUSE 10 ALL\r\n")
    assert host.ops.pause_all and host.ops.pause_end == host.clock.t + 1.0
    assert ask(b, b"PING\r\n") == b""
    host.clock.t += 1.0
    assert ask(a, b"PING\r\n") == b"+PONG\r\n"  # the end is seen at the next command too
    assert b.pending_output() == b"+PONG\r\n"


def test_paused_input_is_bounded() -> None:
    host, (a, b) = pair(_kv())
    ask(a, b"CLIENT PAUSE 10000\r\n")
    limit = b.config.max_query
    value = b"x" * (1 << 20)
    for _ in range(limit // len(value) + 2):
        if b.closing:
            break
        b.data_received(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n%s\r\n" % (len(value), value))
    assert b.closing and b not in host.ops.waiting


def test_timeout_spares_subscribers_blocked_and_paused() -> None:
    host, sessions = pair(_kv())
    assert isinstance(host.clock, Clock)
    idle, sub = sessions
    ask(sub, b"SUBSCRIBE ch\r\n")
    ask(idle, b"CONFIG SET timeout 10\r\n")
    host.clock.t += 10
    host.ops.tick(host.sessions(), host.monitors)
    assert not idle.closing  # not longer than the timeout yet
    host.clock.t += 0.5
    host.ops.tick(host.sessions(), host.monitors)
    assert idle.closing and not sub.closing


def test_timeout_spares_a_blocked_pop() -> None:
    host, (a, b) = pair(_kv())
    assert isinstance(host.clock, Clock)
    ask(a, b"CONFIG SET timeout 1\r\n")
    ask(b, b"BLPOP q 0\r\n")
    host.clock.t += 5
    host.ops.tick(host.sessions(), host.monitors)
    assert a.closing and not b.closing


def test_resetstat_reaches_host_and_engine() -> None:
    kv = _kv()
    host, (a, b) = pair(kv)
    ask(a, b"SET k v\r\nGET k\r\nPING\r\n")
    assert host.commands >= 3 and kv.commands_processed >= 2 and host.connections == 2
    assert ask(a, b"CONFIG RESETSTAT\r\n") == b"+OK\r\n"
    # the transport counts a command before running it: INFO's own makes 1, as redis-server shows
    assert host.commands == 0 and kv.commands_processed == 0 and host.connections == 0


def test_slowlog_through_the_session_and_batch() -> None:
    host, (a, b) = pair(_kv())
    ask(a, b"CONFIG SET slowlog-log-slower-than 0\r\nSLOWLOG RESET\r\n")
    ask(b, b"SET k v\r\nLPUSH l a\r\nMULTI\r\nINCR n\r\nEXEC\r\n")
    logged = [e.args for e in host.ops.slowlog]
    assert logged == [[b"INCR", b"n"], [b"MULTI"], [b"LPUSH", b"l", b"a"], [b"SET", b"k", b"v"],
                      [b"SLOWLOG", b"RESET"]]
    assert all(e.addr == b"127.0.0.1:5002" for e in list(host.ops.slowlog)[:4])


def test_session_without_a_map_has_config() -> None:
    host, (a, _b) = pair(None)
    assert ask(a, b"CONFIG GET timeout\r\n") == b"*2\r\n$7\r\ntimeout\r\n$1\r\n0\r\n"
    assert ask(a, b"CONFIG SET databases 2\r\n") == \
        b"-ERR Unknown option or number of arguments for CONFIG SET - 'databases'\r\n"


def test_a_pipelined_run_is_timed_once_and_attributed() -> None:
    """Threshold 1 us: the run of SET (a fast form) and HSET is one entry, HSET's."""
    host, (a, b) = pair(_kv())
    ask(a, b"CONFIG SET slowlog-log-slower-than 1\r\nSLOWLOG RESET\r\n")
    host.ops.slowlog.clear()
    ask(b, b"SET k v\r\nHSET h f v\r\nSET k2 v\r\n")
    assert [e.args for e in host.ops.slowlog] == [[b"HSET", b"h", b"f", b"v"]]
    host.ops.slowlog.clear()
    ask(b, b"SET k v\r\nGET k\r\n")
    assert [e.args for e in host.ops.slowlog] == [[b"SET", b"k", b"v"]]


def test_lolwut_canvas_is_bounded() -> None:
    """1000 columns, 1 square per row, 200 per column: redis-server's 800M dots, cut."""
    art = schotter(1000, 1, 200, 3)
    assert len(art) < 4_000_000


def test_a_pause_past_its_end_releases_before_the_next_command() -> None:
    """No timer (sans-IO): the next command sees the end and runs after what was held."""
    host, (a, b) = pair(_kv())
    assert isinstance(host.clock, Clock)
    ask(a, b"CLIENT PAUSE 100 WRITE\r\n")
    assert ask(b, b"SET k 1\r\n") == b""
    assert ask(b, b"GET k\r\n") == b""  # behind the held SET
    host.clock.t += 0.1
    assert ask(b, b"GET k\r\n") == b"+OK\r\n$1\r\n1\r\n$1\r\n1\r\n"
