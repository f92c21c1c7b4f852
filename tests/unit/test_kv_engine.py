"""The key-value engine without sockets: glob matching, lazy and active expiry on an
injected clock, blocking pops woken by pushes and deadlines, keyspace notifications,
and the map file (replay, torn tail, compaction, deadlines across a restart)."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raims_node.kv import open_kv
from raims_node.kv.commands import BLOCKED, Engine, KVClient
from raims_node.kv.errors import MapFileError
from raims_node.kv.glob import glob_match
from raims_node.kv.persist import MapFile, init_map, log_path
from raims_node.kv.reply import NULL_ARRAY, encode
from raims_node.kv.store import KVStore


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def engine(clock: Clock | None = None) -> Engine:
    return Engine(KVStore(16, clock))


def run(e: Engine, c: KVClient, line: str) -> Any:
    return e.execute(c, line.encode().split())


# ------------------------------------------------------------------ glob

def _glob_regex(pattern: bytes) -> re.Pattern[bytes]:
    """A reference translation of Redis glob patterns (no backslashes in the generated ones)."""
    out = b""
    i = 0
    while i < len(pattern):
        ch = pattern[i:i + 1]
        if ch == b"*":
            out += b".*"
        elif ch == b"?":
            out += b"."
        elif ch == b"[":
            j = pattern.find(b"]", i + 1)
            body = pattern[i + 1:j]
            neg = body.startswith(b"^")
            out += b"[" + (b"^" if neg else b"") + re.escape(body[1:] if neg else body) + b"]"
            i = j
        else:
            out += re.escape(ch)
        i += 1
    return re.compile(out, re.DOTALL)


_ATOMS = st.sampled_from([b"a", b"b", b"*", b"?", b"[ab]", b"[^a]", b"c"])


@settings(max_examples=300, deadline=None)
@given(st.lists(_ATOMS, max_size=6).map(b"".join), st.binary(max_size=8).map(
    lambda b: bytes(b"abc"[x % 3] for x in b)))
def test_glob_matches_like_a_regex(pattern: bytes, key: bytes) -> None:
    assert glob_match(pattern, key) == bool(_glob_regex(pattern).fullmatch(key))


def test_glob_escapes_ranges_and_hostile_patterns() -> None:
    assert glob_match(rb"a\*", b"a*") and not glob_match(rb"a\*", b"ab")
    assert glob_match(b"[a-c]x", b"bx") and not glob_match(b"[a-c]x", b"dx")
    assert glob_match(b"", b"") and not glob_match(b"", b"a")
    t0 = time.process_time()
    assert not glob_match(b"a*" * 30 + b"b", b"a" * 3000)
    assert time.process_time() - t0 < 2.0  # no backtracking blow-up (CPU time: load does not fail it)


# ------------------------------------------------------------------ expiry

def test_lazy_and_active_expiry_log_a_del_and_notify() -> None:
    clock = Clock()
    e = engine(clock)
    logged: list[tuple[int, list[list[bytes]]]] = []
    events: list[tuple[str, bytes]] = []
    e.log = lambda db, cmds: logged.append((db, cmds))
    e.publish = lambda ch, payload: events.append((ch, payload))
    c = KVClient()
    run(e, c, "CONFIG SET notify-keyspace-events Ex")
    run(e, c, "SET a 1 PX 100")
    run(e, c, "SET b 2 PX 100")
    assert logged[0][1] == [[b"SET", b"a", b"1", b"PXAT", b"%d" % (clock.ms + 100)]]
    clock.ms += 100
    assert run(e, c, "GET a") is None  # lazy
    assert e.store.sweep() == 1  # active: b
    assert e.store.dbs[0].data == {}
    assert [cmds for _db, cmds in logged[2:]] == [[[b"DEL", b"a"]], [[b"DEL", b"b"]]]
    assert events == [("__keyevent@0__:expired", b"a"), ("__keyevent@0__:expired", b"b")]


def test_sweep_is_bounded_and_skips_changed_deadlines() -> None:
    clock = Clock()
    e = engine(clock)
    c = KVClient()
    for i in range(2500):
        run(e, c, f"SET k{i} v PX 10")
    run(e, c, "PEXPIRE k0 100000")
    clock.ms += 10
    assert e.store.sweep() == 1000 and e.store.sweep() == 1000 and e.store.sweep() == 499
    assert list(e.store.dbs[0].data) == [b"k0"]


# ------------------------------------------------------------------ blocking

def test_blocked_clients_are_served_in_order_and_time_out() -> None:
    clock = Clock()
    e = engine(clock)
    woken: dict[str, list[Any]] = {"x": [], "y": [], "z": []}
    x, y, z = (KVClient(lambda r, n=n: woken[n].append(r)) for n in "xyz")
    pusher = KVClient()
    assert run(e, x, "BLPOP q 1") is BLOCKED
    assert run(e, y, "BLPOP q other 0") is BLOCKED
    assert run(e, z, "BRPOP none 0.5") is BLOCKED
    assert run(e, pusher, "RPUSH q a b c") == 3
    assert woken["x"] == [[b"q", b"a"]] and woken["y"] == [[b"q", b"b"]]
    assert run(e, pusher, "LRANGE q 0 -1") == [b"c"]
    clock.ms += 499
    e.tick()
    assert woken["z"] == []
    clock.ms += 1
    e.tick()
    assert woken["z"] == [NULL_ARRAY] and not e.blocked_clients and not e.store.blocked


def test_blocking_pop_in_multi_does_not_block() -> None:
    e = engine()
    c = KVClient()
    c.in_multi = True
    assert run(e, c, "BLPOP q 0") is NULL_ARRAY


# ------------------------------------------------------------------ notifications

def test_keyspace_and_keyevent_channels() -> None:
    e = engine()
    events: list[tuple[str, bytes]] = []
    e.publish = lambda ch, payload: events.append((ch, payload))
    c = KVClient()
    c.db = 2
    run(e, c, "CONFIG SET notify-keyspace-events KEA")
    assert encode(run(e, c, "CONFIG GET notify-keyspace-events"), 2) == \
        b"*2\r\n$22\r\nnotify-keyspace-events\r\n$3\r\nAKE\r\n"
    run(e, c, "SET k v")
    run(e, c, "LPUSH l x")
    assert events == [("__keyspace@2__:k", b"set"), ("__keyevent@2__:set", b"k"),
                      ("__keyspace@2__:l", b"lpush"), ("__keyevent@2__:lpush", b"l")]


# ------------------------------------------------------------------ the map file

def test_map_replays_compacts_and_keeps_deadlines(tmp_path: Path) -> None:
    path = tmp_path / "map"
    init_map(path)
    e, mf = open_kv(str(path))
    assert mf is not None
    c = KVClient()
    now = e.store.now_ms()
    for line in ("SET s v", "RPUSH l a b", "HSET h f v", "SADD st m", "ZADD z 0.1 m",
                 "INCRBYFLOAT f 0.1", f"SET gone v PXAT {now + 50}", "SET keep v EX 1000"):
        run(e, c, line)
    run(e, c, "SPOP st")
    mf.close()
    assert log_path(path).stat().st_size > 0
    time.sleep(0.06)
    e2, mf2 = open_kv(f"sysv:{path}")
    assert mf2 is not None and mf2.rewrites == 1 and log_path(path).stat().st_size == 0
    d = e2.store.dbs[0]
    assert set(d.data) == {b"s", b"l", b"h", b"z", b"f", b"keep"}  # st emptied by SPOP, gone expired
    assert list(d.data[b"l"]) == [b"a", b"b"] and d.data[b"z"].scores == {b"m": 0.1}
    assert d.data[b"f"] == b"0.1" and d.expires[b"keep"] == e.store.dbs[0].expires[b"keep"]
    mf2.close()


def test_a_torn_log_tail_is_dropped_and_garbage_refused(tmp_path: Path) -> None:
    path = tmp_path / "map"
    init_map(path)
    log_path(path).write_bytes(b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n*3\r\n$3\r\nSET\r\n$1\r\nb")
    e, mf = open_kv(str(path))
    assert mf is not None and list(e.store.dbs[0].data) == [b"a"]
    mf.close()
    log_path(path).write_bytes(b"garbage")
    with pytest.raises(MapFileError, match="corrupt map data"):
        open_kv(str(path))
    path.write_bytes(b"not a map")
    with pytest.raises(MapFileError, match="is not a raims map file"):
        MapFile(str(path))
    with pytest.raises(MapFileError, match="does not exist; create it with: ms_kv init"):
        MapFile(str(tmp_path / "nosuch"))


def test_save_and_bgsave_write_the_snapshot_and_report_it(tmp_path: Path) -> None:
    """SAVE / BGSAVE compact the map (snapshot written, log emptied), LASTSAVE and INFO
    report it; a save that cannot write answers an error and INFO shows err until the
    next one succeeds; without a map they are refused and LASTSAVE is the start."""
    path = tmp_path / "map"
    init_map(path)
    e, mf = open_kv(str(path))
    assert mf is not None
    c = KVClient()
    before = int(time.time())
    for line in ("SET a 1", "RPUSH l x y", "INCR a"):
        run(e, c, line)
    mf.flush()
    assert log_path(path).stat().st_size > 0 and b"rdb_changes_since_last_save:3\r\n" in encode(run(e, c, "INFO"), 2)
    assert encode(run(e, c, "BGSAVE"), 2) == b"+Background saving started\r\n"
    assert log_path(path).stat().st_size == 0 and b"$1\r\na\r\n$1\r\n2\r\n" in path.read_bytes()
    assert int(time.time()) >= run(e, c, "LASTSAVE") >= before
    assert b"rdb_changes_since_last_save:0\r\n" in encode(run(e, c, "INFO persistence"), 2)
    for bad in ("BGSAVE NOW", "BGSAVE SCHEDULE x", "SAVE x"):
        assert encode(run(e, c, bad), 2).startswith(b"-ERR ")
    (tmp_path / "map.tmp").mkdir()  # the snapshot's temporary file cannot be created
    run(e, c, "SET b 1")
    assert encode(run(e, c, "SAVE"), 2).startswith(b"-ERR saving the map failed: map file")
    assert b"rdb_last_bgsave_status:err\r\n" in encode(run(e, c, "INFO persistence"), 2)
    (tmp_path / "map.tmp").rmdir()
    assert encode(run(e, c, "BGSAVE SCHEDULE"), 2) == b"+Background saving started\r\n"
    assert b"rdb_last_bgsave_status:ok\r\n" in encode(run(e, c, "INFO persistence"), 2)
    files = run(e, c, "CONFIG GET *file* dir appendonly")
    assert dict(files.pairs) == {b"dbfilename": b"map", b"appendfilename": b"map.log",
                                 b"dir": str(tmp_path).encode(), b"appendonly": b"yes"}
    mf.close()
    e2, mf2 = open_kv(str(path))
    assert mf2 is not None and set(e2.store.dbs[0].data) == {b"a", b"l", b"b"}
    mf2.close()
    e3, _ = open_kv(None)
    assert encode(run(e3, c, "CONFIG GET appendonly"), 2) == b"*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n"
    assert encode(run(e3, c, "SAVE"), 2).startswith(b"-ERR no key-value map is configured")
    assert encode(run(e3, c, "BGSAVE"), 2).startswith(b"-ERR no key-value map is configured")
    assert run(e3, c, "LASTSAVE") == int(e3.started)


def test_without_a_map_writes_are_refused_reads_answer_nil() -> None:
    e, mf = open_kv(None)
    c = KVClient()
    assert mf is None
    assert encode(run(e, c, "GET x"), 3) == b"_\r\n"
    assert encode(run(e, c, "SET x 1"), 2).startswith(b"-ERR no key-value map is configured")
    assert encode(run(e, c, "SMEMBERS x"), 3) == b"~0\r\n"


def test_db_num_selects_the_default_database(tmp_path: Path) -> None:
    init_map(tmp_path / "m")
    e, mf = open_kv(str(tmp_path / "m"), "3")
    assert e.store.default_db == 3
    assert mf is not None
    mf.close()
    with pytest.raises(Exception, match="db_num"):
        open_kv(str(tmp_path / "m"), "16")


def test_a_failing_handler_costs_only_its_command(monkeypatch: pytest.MonkeyPatch) -> None:
    from raims_node.kv import commands

    e = engine()
    c = KVClient()

    def broken(_e: Engine, _c: KVClient, _a: list[bytes]) -> Any:
        raise ZeroDivisionError

    monkeypatch.setitem(commands.COMMANDS, b"get", commands.Cmd("get", 2, broken, False))
    assert encode(run(e, c, "GET x"), 2) == b"-ERR internal error in 'get', see the node's log\r\n"
    assert e.internal_errors == 1 and run(e, c, "SET x 1") is not None
