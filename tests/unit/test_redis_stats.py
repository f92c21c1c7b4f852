"""INFO commandstats / errorstats / latencystats of the Redis bridge (redis_stats.py):
the histogram's buckets, error prefixes, the counts of the general dispatch and of the
batch path (a pipelined run counted with one addition), CONFIG RESETSTAT, INFO's sections."""

from __future__ import annotations

import re

import pytest

from raims_node.bridges import RedisSession, redis_batch
from raims_node.bridges.redis_stats import (
    MAX_ERROR_PREFIXES,
    Stats,
    bucket,
    bucket_top,
    percentiles,
)
from raims_node.kv.commands import Engine
from raims_node.kv.store import KVStore
from tests.unit.test_nats_redis_bus import MemoryBus


def talk(s: RedisSession, data: bytes) -> bytes:
    s.data_received(data)
    return s.pending_output()


def counts(s: RedisSession) -> dict[str, tuple[int, int, int]]:
    """commandstats as {name: (calls, rejected, failed)}, read from INFO's reply."""
    out = talk(RedisSession(MemoryBus(), 99, host=s.host), b"INFO commandstats\r\n").decode()
    return {m[1]: (int(m[2]), int(m[3]), int(m[4])) for m in re.finditer(
        r"cmdstat_(\S+?):calls=(\d+),usec=\d+,usec_per_call=[\d.]+,rejected_calls=(\d+),failed_calls=(\d+)", out)}


def test_buckets_are_contiguous_monotonic_and_within_an_eighth() -> None:
    last = 0
    for v in range(1, 1 << 16):
        b = bucket(v)
        assert b in (last, last + 1)
        assert v <= bucket_top(b) <= v * 1.125 + 1
        last = b
    assert bucket(0) == bucket(1) == 1  # redis-server's 0.001 us for a call under a microsecond


def test_percentiles_as_hdr_counts() -> None:
    hist = {bucket(1000): 98, bucket(50_000): 1, bucket(2_000_000): 1}
    p50, p99, p999 = percentiles(hist)
    assert p50 == bucket_top(bucket(1000)) and p99 == bucket_top(bucket(50_000))
    assert p999 == bucket_top(bucket(2_000_000))


def test_error_prefixes_are_the_first_word_and_bounded() -> None:
    st = Stats()
    for reply in (b"-ERR x\r\n", b"-WRONGTYPE Operation\r\n", b"-NOSPACE\r\n", b"-" + b"A" * 40 + b" x\r\n",
                  b"-EXECABORT Transaction\r\n"):
        st.error(reply)
    assert st.errors == {b"ERR": 3, b"WRONGTYPE": 1, b"EXECABORT": 1} and st.total_errors == 5
    for i in range(2 * MAX_ERROR_PREFIXES):
        st.error(b"-E%d x\r\n" % i)
    assert len(st.errors) == MAX_ERROR_PREFIXES and st.total_errors == 5 + 2 * MAX_ERROR_PREFIXES


def test_general_dispatch_counts_calls_rejections_and_failures() -> None:
    s = RedisSession(MemoryBus(), 1)
    talk(s, b"PING\r\nPING a b\r\nFOO\r\nCLIENT FOO\r\nCLIENT SETNAME\r\nCLIENT LIST x\r\nSUBSCRIBE c\r\n"
            b"PUBLISH c x\r\nUNSUBSCRIBE\r\n")
    assert counts(s) == {"ping": (2, 0, 1), "client|setname": (0, 1, 0), "client|list": (1, 0, 1),
                         "subscribe": (1, 0, 0), "publish": (0, 1, 0), "unsubscribe": (1, 0, 0)}
    assert s.host.stats.errors == {b"ERR": 6} and s.host.stats.total_errors == 6


def test_transactions_count_what_exec_runs_and_refusals_when_queued() -> None:
    s = RedisSession(MemoryBus(), 1, kv=Engine(KVStore()))
    talk(s, b"SET k v\r\nMULTI\r\nINCR k\r\nPING\r\nEXEC\r\nMULTI\r\nGET\r\nEXEC\r\nEXEC\r\n")
    assert counts(s) == {"set": (1, 0, 0), "multi": (2, 0, 0), "incr": (1, 0, 1), "ping": (1, 0, 0),
                         "exec": (3, 0, 2), "get": (0, 1, 0)}
    assert s.host.stats.errors == {b"ERR": 3, b"EXECABORT": 1}


def test_a_pipelined_run_is_counted_with_one_addition(monkeypatch: pytest.MonkeyPatch) -> None:
    s = RedisSession(MemoryBus(), 1, kv=Engine(KVStore()))
    batches: list[list[tuple[str, int]]] = []
    real = redis_batch._count
    monkeypatch.setattr(redis_batch, "_count", lambda stats, counted, run, elapsed: (
        batches.append(list(counted)), real(stats, counted, run, elapsed))[1])
    talk(s, b"PUBLISH c x\r\n" * 100)
    assert batches == [[("publish", 100)]]
    batches.clear()
    talk(s, b"SET a 1\r\n" * 50 + b"GET a\r\n" * 30 + b"LPUSH a x\r\nGET\r\n" + b"INCR a\r\n" * 5)
    # LPUSH failed (alone), GET refused (not a call)
    assert batches == [[("set", 50), ("get", 30), ("lpush", 1), ("incr", 5)]]
    assert counts(s) == {"publish": (100, 0, 0), "set": (50, 0, 0), "get": (30, 1, 0), "lpush": (1, 0, 1),
                         "incr": (5, 0, 0)}
    assert s.host.stats.errors == {b"ERR": 1, b"WRONGTYPE": 1}


def test_a_blocked_pop_counts_when_it_answers() -> None:
    engine = Engine(KVStore())
    s = RedisSession(MemoryBus(), 1, kv=engine)
    other = RedisSession(MemoryBus(), 2, kv=engine, host=s.host)
    talk(s, b"BLPOP l 0\r\n")
    assert "blpop" not in counts(s)
    talk(other, b"RPUSH l x\r\n")
    assert counts(s)["blpop"] == (1, 0, 0) and s.pending_output().startswith(b"*2\r\n")


def test_config_resetstat_and_info_sections() -> None:
    s = RedisSession(MemoryBus(), 1)
    talk(s, b"FOO\r\nPING\r\n")
    default = talk(s, b"INFO\r\n")
    assert b"# Errorstats\r\nerrorstat_ERR:count=1\r\n" in default and b"total_error_replies:1\r\n" in default
    assert b"# Commandstats" not in default and b"# Latencystats" not in default
    everything = talk(s, b"INFO everything\r\n")
    heads = re.findall(rb"# (\w+)\r\n", everything)
    assert heads[heads.index(b"CPU") + 1:heads.index(b"Cluster")] == [b"Commandstats", b"Errorstats", b"Latencystats"]
    assert re.search(rb"\r\nlatency_percentiles_usec_ping:p50=\d+\.\d{3},p99=\d+\.\d{3},p99\.9=\d+\.\d{3}\r\n",
                     everything)
    assert talk(s, b"CONFIG RESETSTAT\r\n") == b"+OK\r\n"
    assert counts(s) == {"config|resetstat": (1, 0, 0)}
    assert talk(s, b"INFO errorstats stats\r\n").count(b"errorstat_") == 0
