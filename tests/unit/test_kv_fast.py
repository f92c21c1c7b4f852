"""The fast forms of GET / SET / INCR / LPUSH / RPUSH / ZADD (kv/fast.py) against the
engine's general commands: on random sequences (other types under the same keys,
deadlines, numbers that are not plain, notifications on and off, no map), the same
replies, the same store, the same WATCH marks and the same log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from raims_node.kv import open_kv
from raims_node.kv.commands import COMMANDS, Engine, KVClient
from raims_node.kv.fast import FAST
from raims_node.kv.persist import encode_command, init_map
from raims_node.kv.reply import encode
from raims_node.kv.store import KVStore, ZSet


class Clock:
    ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def _engine(writable: bool) -> tuple[Engine, list[tuple[int, bytes]]]:
    log: list[tuple[int, bytes]] = []
    e = Engine(KVStore(2, Clock()), lambda db, cmds: log.extend((db, encode_command(c)) for c in cmds))
    e.log_encoded = lambda db, data: log.append((db, data))
    e.store.writable = writable
    e.publish = lambda channel, payload: log.append((-1, channel.encode() + b" " + payload))
    return e, log


def _value(v: Any) -> Any:
    return (v.scores, list(v.order)) if isinstance(v, ZSet) else (type(v), v)


def _state(e: Engine) -> Any:
    return ([({k: _value(v) for k, v in d.data.items()}, d.expires) for d in e.store.dbs],
            e.commands_processed, e.store.dirty)


KEYS = st.sampled_from([b"k", b"n", b"l", b"z", b"h"])
COMMAND = st.one_of(
    st.tuples(st.sampled_from([b"GET", b"get", b"INCR"]), KEYS).map(list),
    st.tuples(st.just(b"SET"), KEYS, st.sampled_from([b"1", b"-5", b"09", b"x", b"9223372036854775807", b""])).map(list),
    st.tuples(st.sampled_from([b"LPUSH", b"RPUSH"]), KEYS, st.binary(max_size=3), st.binary(max_size=3)).map(list),
    st.tuples(st.just(b"ZADD"), KEYS, st.sampled_from([b"1", b"2", b"1.5", b"-1", b"nan", b"007"]),
              st.sampled_from([b"a", b"b"])).map(list),
    st.tuples(st.just(b"HSET"), KEYS, st.just(b"f"), st.just(b"v")).map(list),
    st.tuples(st.just(b"PEXPIRE"), KEYS, st.sampled_from([b"5", b"50"])).map(list),
    st.tuples(st.just(b"SELECT"), st.sampled_from([b"0", b"1"])).map(list),
    st.tuples(st.just(b"NOTIFY"), st.sampled_from([0, 0xFFFF])).map(list),
    st.tuples(st.just(b"TICK"), st.integers(0, 30)).map(list),
    st.tuples(st.just(b"GET"), KEYS, st.just(b"extra")).map(list),
)


@settings(max_examples=200, deadline=None)
@given(commands=st.lists(COMMAND, max_size=30), writable=st.booleans(), resp=st.sampled_from([2, 3]))
def test_fast_forms_do_what_the_general_commands_do(commands: list[list[Any]], writable: bool, resp: int) -> None:
    fast_e, fast_log = _engine(writable)
    ref_e, ref_log = _engine(writable)
    clients = (KVClient(), KVClient())
    watched = (KVClient(), KVClient())
    for e, c, w in ((fast_e, clients[0], watched[0]), (ref_e, clients[1], watched[1])):
        c.resp = resp
        e.watch(w, [b"k", b"l"])
    used = 0
    for args in commands:
        name = args[0]
        if name == b"SELECT":
            clients[0].db = clients[1].db = int(args[1])
            continue
        if name == b"NOTIFY":
            fast_e.notify_flags = ref_e.notify_flags = args[1]
            continue
        if name == b"TICK":
            for e in (fast_e, ref_e):
                e.store.now_ms.ms += args[1]  # type: ignore[attr-defined]
            continue
        fast = FAST.get(name.lower())
        out = fast(fast_e, clients[0], args) if fast is not None else None
        if out is None:
            out = encode(fast_e.execute(clients[0], args), resp)
        else:
            used += 1
        assert out == encode(ref_e.execute(clients[1], args), resp), args
        assert _state(fast_e) == _state(ref_e), args
        assert fast_log == ref_log, args
        assert watched[0].watch_dirty == watched[1].watch_dirty
    assert set(FAST) <= set(COMMANDS)


def test_fast_forms_and_the_new_commands_survive_a_restart(tmp_path: Path) -> None:
    """The log holds what the fast forms (append_encoded) and COPY, SWAPDB, LMPOP,
    BZPOPMIN wrote, in order with the general commands: a reopened map is the same."""
    path = tmp_path / "map"
    init_map(path)
    e, mf = open_kv(str(path))
    assert mf is not None
    c = KVClient()
    script = [[b"SET", b"s", b"v"], [b"INCR", b"n"], [b"INCR", b"n"], [b"RPUSH", b"l", b"a", b"b", b"c"],
              [b"LPUSH", b"l", b"z"], [b"ZADD", b"z", b"3", b"m"], [b"ZADD", b"z", b"1", b"k"],
              [b"COPY", b"l", b"l2"], [b"COPY", b"s", b"s1", b"DB", b"1"], [b"LMPOP", b"1", b"l", b"RIGHT", b"COUNT", b"2"],
              [b"BZPOPMIN", b"z", b"0"], [b"SET", b"t", b"x", b"EX", b"1000"], [b"COPY", b"t", b"t2"],
              [b"SWAPDB", b"0", b"2"], [b"SELECT", b"2"], [b"SET", b"after", b"swap"]]
    for args in script:
        if args[0] == b"SELECT":
            c.db = int(args[1])
            continue
        fast = FAST.get(args[0].lower())
        if fast is None or fast(e, c, args) is None:
            e.execute(c, args)
    before = _state(e)
    mf.close()
    e2, mf2 = open_kv(str(path))
    assert mf2 is not None
    assert _state(e2)[0] == before[0]
    assert list(e2.store.dbs[2].data[b"l"]) == [b"z", b"a"] and e2.store.dbs[0].data == {}
    mf2.close()
