"""A Redis session with a key-value engine, on an in-memory bus: data commands beside
pub/sub, EXEC capturing session commands' replies, RESP2 subscribed mode, a blocked
client holding its pipelined commands, and the map-less refusal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from raims_node.bridges import RedisSession
from raims_node.kv import open_kv
from raims_node.kv.commands import Engine
from raims_node.kv.persist import init_map, log_path
from raims_node.kv.store import KVStore
from tests.unit.test_nats_redis_bus import MemoryBus


class Clock:
    ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def session(engine: Engine, bus: MemoryBus | None = None, client_id: int = 1) -> RedisSession:
    return RedisSession(bus or MemoryBus(), client_id, kv=engine)


def talk(s: RedisSession, data: bytes) -> bytes:
    s.data_received(data)
    return s.pending_output()


def test_exec_runs_session_and_data_commands_in_order() -> None:
    s = session(Engine(KVStore()))
    out = talk(s, b"MULTI\r\nSET a 1\r\nPING\r\nECHO hi\r\nINCR a\r\nSELECT 1\r\nGET a\r\nEXEC\r\nGET a\r\n")
    assert out == (b"+OK\r\n" + b"+QUEUED\r\n" * 6 +
                   b"*6\r\n+OK\r\n+PONG\r\n$2\r\nhi\r\n:2\r\n+OK\r\n$-1\r\n" + b"$-1\r\n")


def test_resp2_subscribed_mode_refuses_data_commands() -> None:
    s = session(Engine(KVStore()))
    talk(s, b"SUBSCRIBE ch\r\n")
    assert talk(s, b"GET a\r\n") == (b"-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING "
                                     b"/ QUIT / RESET are allowed in this context\r\n")
    r3 = session(Engine(KVStore()))
    talk(r3, b"HELLO 3\r\nSUBSCRIBE ch\r\n")
    assert talk(r3, b"GET a\r\n") == b"_\r\n"  # RESP3 has no subscribed mode


def test_resp2_subscribed_mode_refuses_transactions_and_exec_runs_a_subscribe_and_publish() -> None:
    """redis-server 7.0.15: MULTI is refused in subscribed mode (EXEC and the rest with it,
    EXEC's refusal as an EXECABORT);
    a SUBSCRIBE queued in a transaction subscribes inside EXEC, and the commands after it
    in the same EXEC still run."""
    s = session(Engine(KVStore()))
    talk(s, b"SUBSCRIBE ch\r\n")
    refused = b"-ERR Can't execute '%s': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n"
    aborted = b"-EXECABORT Transaction discarded because of: " + refused[5:] % b"exec"
    assert talk(s, b"MULTI\r\nEXEC\r\nWATCH a\r\n") == refused % b"multi" + aborted + refused % b"watch"
    t = session(Engine(KVStore()))
    assert talk(t, b"MULTI\r\nSUBSCRIBE x\r\nPUBLISH x hi\r\nSET k v\r\nEXEC\r\nGET k\r\n") == (
        b"+OK\r\n" + b"+QUEUED\r\n" * 3
        + b"*3\r\n*3\r\n$9\r\nsubscribe\r\n$1\r\nx\r\n:1\r\n*3\r\n$7\r\nmessage\r\n$1\r\nx\r\n$2\r\nhi\r\n:1\r\n+OK\r\n"
        + refused % b"get")  # the same bytes as redis-server 7.0.15


def test_a_blocked_client_holds_its_next_commands_until_served_or_timed_out() -> None:
    clock = Clock()
    e = Engine(KVStore(16, clock))
    waiter, pusher = session(e, client_id=1), session(e, client_id=2)
    assert talk(waiter, b"BLPOP q 1\r\nPING\r\nLLEN q\r\n") == b""
    assert talk(pusher, b"RPUSH q a b\r\n") == b":2\r\n"
    assert waiter.pending_output() == b"*2\r\n$1\r\nq\r\n$1\r\na\r\n+PONG\r\n:1\r\n"
    assert talk(waiter, b"BRPOP none 0.5\r\nECHO after\r\n") == b""
    clock.ms += 500
    e.tick()
    assert waiter.pending_output() == b"*-1\r\n$5\r\nafter\r\n"


def test_closing_a_blocked_client_unblocks_it() -> None:
    e = Engine(KVStore())
    s = session(e)
    talk(s, b"BLPOP q 0\r\n")
    assert e.blocked_clients
    s.connection_lost()
    assert not e.blocked_clients and not e.store.blocked


def test_keyspace_notifications_reach_bus_subscribers() -> None:
    bus = MemoryBus()
    e = Engine(KVStore())
    e.publish = lambda channel, payload: bus.publish(None, channel, None, None, payload)
    sub, writer = session(e, bus, 1), session(e, bus, 2)
    talk(sub, b"SUBSCRIBE __keyevent@0__:set\r\n")
    talk(writer, b"CONFIG SET notify-keyspace-events E$\r\nSET k v\r\n")
    assert sub.pending_output() == b"*3\r\n$7\r\nmessage\r\n$18\r\n__keyevent@0__:set\r\n$1\r\nk\r\n"


def test_without_a_map_the_session_refuses_writes_and_reads_nil() -> None:
    store = KVStore()
    store.writable = False
    s = session(Engine(store))
    out = talk(s, b"SET a 1\r\nGET a\r\nPING\r\n")
    assert out.startswith(b"-ERR no key-value map is configured") and out.endswith(b"\r\n$-1\r\n+PONG\r\n")


def test_without_an_engine_data_commands_stay_unknown() -> None:
    s = RedisSession(MemoryBus(), 1)
    assert talk(s, b"GET a\r\n").startswith(b"-ERR unknown command 'GET'")


def test_the_log_reaches_the_file_before_the_reply_leaves(tmp_path: Path) -> None:
    init_map(tmp_path / "map")
    engine, mf = open_kv(str(tmp_path / "map"), schedule=lambda fn: None)  # no loop turn ends here
    assert mf is not None
    s = session(engine)
    s.data_received(b"SET k v\r\n")
    assert log_path(tmp_path / "map").read_bytes() == b""
    assert s.pending_output() == b"+OK\r\n"
    assert log_path(tmp_path / "map").read_bytes().endswith(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n")
    mf.close()


def test_a_renamed_string_does_not_serve_list_waiters() -> None:
    e = Engine(KVStore())
    waiter, other = session(e, client_id=1), session(e, client_id=2)
    assert talk(waiter, b"BLPOP q 0\r\n") == b""
    assert talk(other, b"SET s v\r\nRENAME s q\r\n") == b"+OK\r\n+OK\r\n"
    assert waiter.pending_output() == b"" and e.blocked_clients


class RunBus(MemoryBus):
    """A run to a channel of one subscriber goes to its deliver_run, as RouterBus does."""

    def publish_run(self, client: Any, subject: str, payloads: list[bytes]) -> int:
        matched = [e for e in self.entries.values() if e.matches(subject)]
        if len(matched) == 1 and matched[0].queue is None:
            matched[0].client.deliver_run(matched[0].sid, subject, payloads)
            return len(payloads)
        return super().publish_run(client, subject, payloads)


def test_pipelined_publishes_answer_and_deliver_as_one_by_one() -> None:
    """Runs of PUBLISH (one channel, mixed channels, spellings and payload sizes) in one
    read: the publisher's replies and the subscribers' messages are those of the same
    commands sent one per read."""
    import random

    rnd = random.Random(7)
    for _ in range(30):
        script = []
        for _ in range(rnd.randint(1, 60)):
            name = rnd.choice([b"PUBLISH", b"PUBLISH", b"publish", b"Publish"])
            channel = rnd.choice([b"a", b"a", b"b", b"none"])
            script.append(b"*3\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (
                len(name), name, len(channel), channel, *((3, b"xyz") if rnd.random() < 0.7 else (1, b"q"))))
        outputs = []
        for whole in (True, False):
            bus = RunBus()
            e = Engine(KVStore())
            subs = [session(e, bus, 2), session(e, bus, 3)]
            talk(subs[0], b"SUBSCRIBE a b\r\n")
            talk(subs[1], b"HELLO 3\r\nSUBSCRIBE a\r\n")
            pub = session(e, bus, 1)
            if whole:
                out = talk(pub, b"".join(script))
            else:
                out = b"".join(talk(pub, cmd) for cmd in script)
            outputs.append((out, [s.pending_output() for s in subs], pub.msgs_in, [s.msgs_out for s in subs]))
        assert outputs[0] == outputs[1]
