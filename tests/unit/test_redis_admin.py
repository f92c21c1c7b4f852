"""CLIENT LIST | INFO | KILL | REPLY, COMMAND COUNT | DOCS and INFO on sans-IO Redis
sessions sharing one RedisHost (redis_admin.py)."""

from __future__ import annotations

import re

import pytest

from raims_node.bridges import RedisSession
from raims_node.bridges.redis_admin import RedisHost
from raims_node.bridges.redis_client_mem import buffer_fields
from raims_node.kv.commands import Engine
from raims_node.kv.store import KVStore
from tests.unit.test_nats_redis_bus import MemoryBus

# (request, reply): redis-server 7.0.15's replies to the same bytes on one connection
REPLY_TRANSCRIPTS = [
    (b"CLIENT REPLY OFF\r\nPING\r\nFOO\r\nCLIENT REPLY SKIP\r\nPING\r\nCLIENT REPLY ON\r\nPING\r\n",
     b"+OK\r\n+PONG\r\n"),
    (b"CLIENT REPLY SKIP\r\nPING x\r\nPING y\r\nCLIENT REPLY SKIP\r\nCLIENT REPLY SKIP\r\nPING z\r\n"
     b"PING w\r\nCLIENT REPLY FOO\r\nCLIENT REPLY\r\n",
     b"$1\r\ny\r\n$1\r\nw\r\n-ERR syntax error\r\n"
     b"-ERR wrong number of arguments for 'client|reply' command\r\n"),
    (b"CLIENT REPLY OFF\r\nSUBSCRIBE a\r\nPUBLISH a x\r\nPING\r\nRESET\r\nPING\r\n",
     b"*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n+RESET\r\n+PONG\r\n"),
    (b"HELLO 3\r\nCLIENT REPLY OFF\r\nSUBSCRIBE a\r\nPUBLISH a x\r\nCLIENT REPLY ON\r\nPUBLISH a y\r\n",
     b">3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n>3\r\n$7\r\nmessage\r\n$1\r\na\r\n$1\r\nx\r\n+OK\r\n"
     b">3\r\n$7\r\nmessage\r\n$1\r\na\r\n$1\r\ny\r\n:1\r\n"),
    (b"CLIENT REPLY OFF\r\nQUIT\r\n", b""),
    (b"CLIENT KILL 1.2.3.4:5\r\nCLIENT KILL ID 0\r\nCLIENT KILL ID 999\r\nCLIENT KILL USER bob\r\n"
     b"CLIENT KILL FOO\r\nCLIENT KILL SKIPME x ID 1\r\nCLIENT LIST ID x\r\nCLIENT LIST TYPE foo\r\n"
     b"CLIENT LIST FOO\r\n",
     b"-ERR No such client\r\n-ERR client-id should be greater than 0\r\n:0\r\n"
     b"-ERR No such user 'bob'\r\n-ERR No such client\r\n-ERR syntax error\r\n-ERR Invalid client ID\r\n"
     b"-ERR Unknown client type 'foo'\r\n-ERR syntax error\r\n"),
]


def _strip_hello(out: bytes) -> bytes:
    return out.split(b"$7\r\nmodules\r\n*0\r\n", 1)[-1]


@pytest.mark.parametrize(("request_", "reply"), REPLY_TRANSCRIPTS)
def test_matches_redis_server(request_: bytes, reply: bytes) -> None:
    s = RedisSession(MemoryBus(), 1, addr="127.0.0.1:5000")
    s.data_received(request_)
    assert _strip_hello(s.pending_output()) == reply


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def pair(kv: Engine | None = None) -> tuple[RedisHost, list[RedisSession]]:
    sessions: list[RedisSession] = []
    host = RedisHost(sessions=lambda: sessions, clock=Clock(), port=6379)
    bus = MemoryBus()
    for i in (1, 2):
        sessions.append(RedisSession(bus, i, host=host, kv=kv, addr=f"127.0.0.1:{5000 + i}",
                                     laddr="127.0.0.1:6379", fd=7 + i))
    return host, sessions


def ask(s: RedisSession, data: bytes) -> bytes:
    s.data_received(data)
    return s.pending_output()


def test_client_list_and_info_lines() -> None:
    host, (a, b) = pair()
    ask(a, b"CLIENT SETNAME alpha\r\nCLIENT SETINFO LIB-NAME redis-py\r\nCLIENT SETINFO lib-ver 8.1\r\n")
    ask(b, b"SUBSCRIBE x y\r\nPSUBSCRIBE z*\r\n")
    assert isinstance(host.clock, Clock)
    host.clock.t += 5
    out = ask(a, b"CLIENT LIST\r\n")
    text = out.split(b"\r\n", 1)[1][:-2].decode()
    lines = text.splitlines()
    assert len(lines) == 2 and text.endswith("\n")
    assert lines[0].startswith("id=1 addr=127.0.0.1:5001 laddr=127.0.0.1:6379 fd=8 name=alpha age=5 idle=0 "
                               "flags=N db=0 sub=0 psub=0 ssub=0 multi=-1 watch=0 qbuf=26 qbuf-free=20448 "
                               "argv-mem=10 multi-mem=0 rbs=1024 rbp=0 obl=0 oll=0 omem=0 tot-mem=22298 events=r ")
    assert lines[0].endswith(" cmd=client|list user=default redir=-1 resp=2 lib-name=redis-py lib-ver=8.1")
    assert re.search(r"^id=2 .* name= age=5 idle=5 flags=P db=0 sub=2 psub=1 ssub=0 .* qbuf=0 qbuf-free=0 .* "
                     r"tot-mem=1904 events=r cmd=psubscribe ", lines[1])  # idle: query buffer freed
    assert ask(a, b"CLIENT LIST TYPE pubsub\r\n").count(b"id=") == 1
    assert b"id=2 " in ask(a, b"CLIENT LIST ID 2 7\r\n")
    info = ask(a, b"HELLO 3\r\nCLIENT INFO\r\n")
    assert re.search(rb"=\d+\r\ntxt:id=1 .*cmd=client\|info .*resp=3 lib-name=redis-py lib-ver=8\.1\n\r\n$", info)


def test_client_kill_closes_the_other() -> None:
    _, (a, b) = pair()
    assert ask(a, b"CLIENT KILL ID 2\r\n") == b":1\r\n"
    assert b.closing and not a.closing
    assert ask(a, b"CLIENT LIST\r\n").count(b"id=") == 1
    assert ask(a, b"CLIENT KILL ID 2\r\n") == b":0\r\n"  # gone already


def test_client_kill_filters_and_old_form() -> None:
    _, (a, b) = pair()
    assert ask(a, b"CLIENT KILL ADDR 127.0.0.1:5001\r\n") == b":0\r\n"  # SKIPME yes
    assert ask(a, b"CLIENT KILL LADDR 127.0.0.1:6379 USER default\r\n") == b":1\r\n"
    assert b.closing
    _, (a, b) = pair()
    assert ask(a, b"CLIENT KILL 127.0.0.1:5002\r\n") == b"+OK\r\n" and b.closing
    _, (a, b) = pair()
    assert ask(a, b"CLIENT KILL ADDR 127.0.0.1:5001 SKIPME no\r\nPING\r\n") == b":1\r\n"  # itself, after the reply
    assert a.closing and not b.closing


def test_reply_skip_does_not_eat_pushes() -> None:
    _, (a, b) = pair()
    ask(a, b"SUBSCRIBE ch\r\n")
    ask(a, b"CLIENT REPLY OFF\r\n")
    ask(b, b"PUBLISH ch hello\r\n")
    assert ask(a, b"") == b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$5\r\nhello\r\n"


def test_command_count_and_docs() -> None:
    _, (a, _b) = pair()
    count = int(ask(a, b"COMMAND COUNT\r\n")[1:-2])
    # ping echo select quit reset hello, 6 (un)subscribes, 2 publishes, client pubsub command info, auth time
    # role replicaof slaveof monitor, slowlog latency memory config lolwut (redis_ops.py, redis_ops_mem.py),
    # readonly readwrite asking cluster (redis_cluster.py)
    assert count == 33
    docs = ask(a, b"COMMAND DOCS ping nosuch client\r\n")
    assert docs.startswith(b"*4\r\n$4\r\nping\r\n*10\r\n$7\r\nsummary\r\n$15\r\nPing the server\r\n")
    assert b"$11\r\nsubcommands\r\n" in docs and b"$11\r\nclient|kill\r\n" in docs
    assert ask(a, b"HELLO 3\r\nCOMMAND DOCS echo\r\n").endswith(  # redis-server 7.0.15's bytes
        b"%1\r\n$4\r\necho\r\n%5\r\n$7\r\nsummary\r\n$21\r\nEcho the given string\r\n"
        b"$5\r\nsince\r\n$5\r\n1.0.0\r\n$5\r\ngroup\r\n$10\r\nconnection\r\n$10\r\ncomplexity\r\n"
        b"$4\r\nO(1)\r\n$9\r\narguments\r\n*1\r\n%2\r\n$4\r\nname\r\n$7\r\nmessage\r\n$4\r\ntype\r\n"
        b"$6\r\nstring\r\n")
    _, (k, _b) = pair(Engine(KVStore()))
    assert int(ask(k, b"COMMAND COUNT\r\n")[1:-2]) > 100
    assert b"Get the value of a key" in ask(k, b"COMMAND DOCS get\r\n")


def test_info_sections() -> None:
    host, (a, b) = pair(Engine(KVStore()))
    ask(b, b"SUBSCRIBE x\r\n")
    ask(a, b"HELLO 3\r\nSUBSCRIBE x\r\nSET k v\r\nSET j w\r\n")  # RESP3: no subscribed mode
    out = ask(a, b"INFO\r\n").decode()
    for line in ("# Server", "tcp_port:6379", "# Clients", "connected_clients:2", "pubsub_clients:2",
                 "# Stats", "total_connections_received:2", "total_commands_processed:6",
                 "pubsub_channels:1", "pubsub_patterns:0", "# Keyspace", "db0:keys=2,expires=0,avg_ttl=0"):
        assert line + "\r\n" in out
    only = ask(a, b"INFO clients\r\n").decode()
    assert "# Clients" in only and "# Server" not in only
    _, (p, _q) = pair()
    assert "# Keyspace\r\n" in ask(p, b"INFO keyspace\r\n").decode()
    assert ask(a, b"MULTI\r\nINFO clients\r\nEXEC\r\n").startswith(b"+OK\r\n+QUEUED\r\n*1\r\n=")


def test_reply_skip_and_a_blocked_pop() -> None:
    """As redis-server 7.0.15 (tried on the same bytes): SKIP silences a blocked BLPOP's
    later reply too, and a SKIP that arrived while blocked applies after it."""
    _, (a, b) = pair(Engine(KVStore()))
    assert ask(a, b"CLIENT REPLY SKIP\r\nBLPOP l 0\r\nCLIENT REPLY SKIP\r\nPING x\r\nPING y\r\n") == b""
    ask(b, b"RPUSH l v\r\n")
    assert ask(a, b"") == b"$1\r\ny\r\n"


def test_client_buffer_fields_model() -> None:
    """redis_client_mem's model at its edges (the differential test compares the idle,
    subscribed, blocked, fresh and MULTI cases with redis-server): a new client's 16 KB
    reply buffer, output pending past it (obl, oll in 16 KB blocks, events rw), a
    transaction's queued arguments and WATCHed keys, the channel dict's slots."""
    new = buffer_fields(pending_in=0, running=None, blocked=None, fresh=True, age=0.01, idle=0.01, output=0,
                        subs=(0, 0, 0))
    assert new == ("qbuf=0 qbuf-free=4 argv-mem=0 multi-mem=0 rbs=16384 rbp=16384 obl=0 oll=0 omem=0 "
                   "tot-mem=17160 events=r")
    slow = buffer_fields(pending_in=0, running=None, blocked=None, fresh=False, age=9, idle=1, output=40000,
                         subs=(5, 1, 0))
    assert "obl=1024 oll=3 omem=49152 " in slow and slow.endswith(" events=rw")
    assert f"tot-mem={768 + 20480 + 1024 + 24 + 5 * 24 + 8 * 8 + 49152} " in slow
    tx = buffer_fields(pending_in=0, running=None, blocked=None, fresh=False, age=1, idle=1, output=0,
                       subs=(0, 0, 0), watched=2, queued=[[b"SET", b"k", b"v"], [b"GET", b"k"], [b"GET", b"k"]])
    assert "multi-mem=69 " in tx and "tot-mem=22549 " in tx  # redis-server 7.0.15: 37909 with rbs=16384
