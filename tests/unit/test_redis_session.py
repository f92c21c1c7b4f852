"""Redis sessions on an in-memory bus: transcripts checked against redis-server, pub/sub
routing, RESP2/RESP3, introspection, errors, slow consumers."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raims_node.bridges import FlowLimits, RedisConfig, RedisSession, SlowConsumer
from raims_node.bridges.redis_config import redis_limits
from raims_node.bridges.resp import MalformedRequest, encode_command
from tests.unit.test_nats_redis_bus import MemoryBus, nats, redis


def run(data: bytes, setup: bytes = b"") -> bytes:
    s = RedisSession(MemoryBus(), 1)
    s.data_received(setup)
    s.pending_output()
    s.data_received(data)
    return s.pending_output()


# (setup, request, reply): redis-server 7.0.15's replies to the same bytes on one connection
REDIS_SERVER_TRANSCRIPTS = [
    (b'',
     b'PING\r\n*1\r\n$4\r\nPING\r\nPING a\r\nPING a b\r\n',
     b"+PONG\r\n+PONG\r\n$1\r\na\r\n-ERR wrong number of arguments for 'ping' command\r\n"),
    (b'',
     b'ECHO\r\nECHO x y\r\nECHO x\r\n',
     b"-ERR wrong number of arguments for 'echo' command\r\n-ERR wrong number of arguments for 'echo' command\r\n$1\r\nx\r\n"),
    (b'',
     b'FOOBAR "a\\r\\nb"\r\n',
     b"-ERR unknown command 'FOOBAR', with args beginning with: 'a  b' \r\n"),
    (b'',
     b'CLIENT FOO\r\nCLIENT\r\nCLIENT SETNAME\r\nCLIENT SETNAME a b\r\nCLIENT SETNAME "a b"\r\nCLIENT GETNAME\r\nCLIENT SETNAME x\r\nCLIENT GETNAME\r\nCLIENT SETNAME ""\r\nCLIENT GETNAME\r\nclient id x\r\n',
     b"-ERR unknown subcommand 'FOO'. Try CLIENT HELP.\r\n-ERR wrong number of arguments for 'client' command\r\n-ERR wrong number of arguments for 'client|setname' command\r\n-ERR wrong number of arguments for 'client|setname' command\r\n-ERR Client names cannot contain spaces, newlines or special characters.\r\n$-1\r\n+OK\r\n$1\r\nx\r\n+OK\r\n$-1\r\n-ERR wrong number of arguments for 'client|id' command\r\n"),
    (b'',
     b'SUBSCRIBE a b a\r\nPING\r\nPING x\r\nECHO x\r\nPUBLISH a x\r\nPUBLISH a\r\nCLIENT SETNAME x\r\nHELLO 3\r\nSELECT 1\r\nPUBSUB NUMPAT\r\nUNSUBSCRIBE\r\nUNSUBSCRIBE\r\nPING\r\n',
     b"*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n*3\r\n$9\r\nsubscribe\r\n$1\r\nb\r\n:2\r\n*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:2\r\n*2\r\n$4\r\npong\r\n$0\r\n\r\n*2\r\n$4\r\npong\r\n$1\r\nx\r\n-ERR Can't execute 'echo': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n-ERR Can't execute 'publish': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n-ERR wrong number of arguments for 'publish' command\r\n-ERR Can't execute 'client|setname': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n-ERR Can't execute 'hello': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n-ERR Can't execute 'select': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n-ERR Can't execute 'pubsub|numpat': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n*3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:1\r\n*3\r\n$11\r\nunsubscribe\r\n$1\r\nb\r\n:0\r\n*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n+PONG\r\n"),
    (b'',
     b'PUNSUBSCRIBE\r\nPSUBSCRIBE a* b?\r\nPUNSUBSCRIBE b? zz\r\nPUNSUBSCRIBE\r\nSUNSUBSCRIBE\r\n',
     b'*3\r\n$12\r\npunsubscribe\r\n$-1\r\n:0\r\n*3\r\n$10\r\npsubscribe\r\n$2\r\na*\r\n:1\r\n*3\r\n$10\r\npsubscribe\r\n$2\r\nb?\r\n:2\r\n*3\r\n$12\r\npunsubscribe\r\n$2\r\nb?\r\n:1\r\n*3\r\n$12\r\npunsubscribe\r\n$2\r\nzz\r\n:1\r\n*3\r\n$12\r\npunsubscribe\r\n$2\r\na*\r\n:0\r\n*3\r\n$12\r\nsunsubscribe\r\n$-1\r\n:0\r\n'),
    (b'HELLO 3\r\n',
     b'SUBSCRIBE a\r\nPING\r\nPING x\r\nECHO y\r\nPUBLISH a hi\r\nUNSUBSCRIBE x\r\nUNSUBSCRIBE\r\nUNSUBSCRIBE\r\nCLIENT GETNAME\r\nSPUBLISH s 1\r\n',
     b'>3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n+PONG\r\n$1\r\nx\r\n$1\r\ny\r\n>3\r\n$7\r\nmessage\r\n$1\r\na\r\n$2\r\nhi\r\n:1\r\n>3\r\n$11\r\nunsubscribe\r\n$1\r\nx\r\n:1\r\n>3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:0\r\n>3\r\n$11\r\nunsubscribe\r\n_\r\n:0\r\n_\r\n:0\r\n'),
    (b'',
     b'HELLO 4\r\nHELLO x\r\nHELLO 3 FOO\r\nHELLO 3 AUTH a\r\nHELLO 3 SETNAME "a b"\r\nHELLO 3 AUTH bob pw\r\nHELLO 1\r\nHELLO -1\r\nHELLO 03\r\n',
     b"-NOPROTO unsupported protocol version\r\n-ERR Protocol version is not an integer or out of range\r\n-ERR Syntax error in HELLO option 'FOO'\r\n-ERR Syntax error in HELLO option 'AUTH'\r\n-ERR Client names cannot contain spaces, newlines or special characters.\r\n-WRONGPASS invalid username-password pair or user is disabled.\r\n-NOPROTO unsupported protocol version\r\n-NOPROTO unsupported protocol version\r\n-ERR Protocol version is not an integer or out of range\r\n"),
    (b'',
     b'SELECT 1\r\nSELECT 16\r\nSELECT x\r\nSELECT -1\r\nSELECT 01\r\nSELECT 15\r\nSELECT 99999999999\r\nSELECT\r\n',
     b"+OK\r\n-ERR DB index is out of range\r\n-ERR value is not an integer or out of range\r\n-ERR DB index is out of range\r\n-ERR value is not an integer or out of range\r\n+OK\r\n-ERR value is out of range, value must between -2147483648 and 2147483647\r\n-ERR wrong number of arguments for 'select' command\r\n"),
    (b'',
     b'SUBSCRIBE a\r\nPSUBSCRIBE b\r\nRESET\r\nPING\r\nPUBSUB NUMPAT\r\n',
     b'*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n*3\r\n$10\r\npsubscribe\r\n$1\r\nb\r\n:2\r\n+RESET\r\n+PONG\r\n:0\r\n'),
    (b'',
     b'PING\r\nQUIT\r\nPING\r\n',
     b'+PONG\r\n+OK\r\n'),
    (b'',
     b'PUBSUB CHANNELS\r\nPUBSUB NUMSUB a\r\nPUBSUB NUMSUB\r\nPUBSUB NUMPAT\r\nPUBSUB CHANNELS a b\r\nPUBSUB FOO\r\nPUBSUB\r\nPUBSUB NUMPAT x\r\nPUBSUB SHARDCHANNELS\r\nPUBSUB SHARDNUMSUB x\r\nPUBSUB SHARDCHANNELS a b\r\npubsub channels *\r\n',
     b"*0\r\n*2\r\n$1\r\na\r\n:0\r\n*0\r\n:0\r\n-ERR unknown subcommand or wrong number of arguments for 'CHANNELS'. Try PUBSUB HELP.\r\n-ERR unknown subcommand 'FOO'. Try PUBSUB HELP.\r\n-ERR wrong number of arguments for 'pubsub' command\r\n-ERR wrong number of arguments for 'pubsub|numpat' command\r\n*0\r\n*2\r\n$1\r\nx\r\n:0\r\n-ERR unknown subcommand or wrong number of arguments for 'SHARDCHANNELS'. Try PUBSUB HELP.\r\n*0\r\n"),
    (b'',
     b'SUBSCRIBE a b\r\nSSUBSCRIBE s\r\nPSUBSCRIBE x*\r\nHELLO 3\r\nPUBSUB CHANNELS\r\nPUBSUB CHANNELS a\r\nPUBSUB NUMSUB a b c\r\nPUBSUB SHARDCHANNELS\r\nPUBSUB SHARDNUMSUB s t\r\nPUBSUB NUMPAT\r\nPUBLISH a 1\r\nPUBLISH xy 2\r\nSPUBLISH s 3\r\n',
     b"*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n*3\r\n$9\r\nsubscribe\r\n$1\r\nb\r\n:2\r\n*3\r\n$10\r\nssubscribe\r\n$1\r\ns\r\n:1\r\n*3\r\n$10\r\npsubscribe\r\n$2\r\nx*\r\n:3\r\n-ERR Can't execute 'hello': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n-ERR Can't execute 'pubsub|channels': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n-ERR Can't execute 'pubsub|channels': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n-ERR Can't execute 'pubsub|numsub': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n-ERR Can't execute 'pubsub|shardchannels': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n-ERR Can't execute 'pubsub|shardnumsub': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n-ERR Can't execute 'pubsub|numpat': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n-ERR Can't execute 'publish': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n-ERR Can't execute 'publish': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n-ERR Can't execute 'spublish': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n"),
    (b'',
     b'PING\r\n*a\r\nPING\r\n',
     b'+PONG\r\n-ERR Protocol error: invalid multibulk length\r\n'),
    (b'',
     b'*2\r\n+x\r\n',
     b"-ERR Protocol error: expected '$', got '+'\r\n"),
    (b'',
     b'*1\r\n$-5\r\n',
     b'-ERR Protocol error: invalid bulk length\r\n'),
    (b'',
     b'*1\r\n$01\r\n',
     b'-ERR Protocol error: invalid bulk length\r\n'),
    (b'',
     b'*+1\r\n$4\r\nPING\r\n',
     b'-ERR Protocol error: invalid multibulk length\r\n'),
    (b'',
     b'PING\r\n"unbalanced\r\n',
     b'+PONG\r\n-ERR Protocol error: unbalanced quotes in request\r\n'),
    (b'',
     b'*1\r\n$999999999999\r\n',
     b'-ERR Protocol error: invalid bulk length\r\n'),
    (b'',
     b'ECHO "a\\x41\\n\\q"\r\nECHO \'it\\\'s\'\r\nECHO a"b c"d\r\nECHO \'x\'\r\n',
     b"$4\r\naA\nq\r\n$4\r\nit's\r\n-ERR Protocol error: unbalanced quotes in request\r\n"),
    (b'',
     b'ECHO "a"b\r\n',
     b'-ERR Protocol error: unbalanced quotes in request\r\n'),
    (b'',
     b'\r\n\r\n\nPING\r\n*0\r\n*-1\r\nPING\r\n',
     b'+PONG\r\n+PONG\r\n'),
    (b'',
     b'*3\r\n$4\r\nECHO\r\n$1\r\na\r\n$1\r\nb\r\n*2\r\n$4\r\nEcHo\r\n$3\r\nabcXY*1\r\n$4\r\nPING\r\n',
     b"-ERR wrong number of arguments for 'echo' command\r\n$3\r\nabc\r\n+PONG\r\n"),
    (b'',
     b'subscribe a\r\nsubscribe\r\nfoo\r\nquit x\r\n',
     b"*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n-ERR wrong number of arguments for 'subscribe' command\r\n-ERR unknown command 'foo', with args beginning with: \r\n+OK\r\n"),
]


@pytest.mark.parametrize(("setup", "data", "reply"), REDIS_SERVER_TRANSCRIPTS)
def test_replies_match_redis_server(setup: bytes, data: bytes, reply: bytes) -> None:
    assert run(data, setup) == reply


@settings(max_examples=60, deadline=None)
@given(case=st.sampled_from(REDIS_SERVER_TRANSCRIPTS), split=st.integers(1, 7))
def test_replies_do_not_depend_on_read_boundaries(case: tuple[bytes, bytes, bytes], split: int) -> None:
    setup, data, reply = case
    s = RedisSession(MemoryBus(), 1)
    s.data_received(setup)
    s.pending_output()
    out = b""
    for i in range(0, len(data), split):
        s.data_received(data[i:i + split])
        out += s.pending_output()
    assert out == reply


def test_unknown_command_quotes_at_most_128_bytes_of_arguments() -> None:
    out = run(b"FOO " + b"x" * 200 + b" y\r\nPING\r\n")
    assert out == b"-ERR unknown command 'FOO', with args beginning with: '" + b"x" * 128 + b"' \r\n+PONG\r\n"
    out = run(b"BAR " + b"ab " * 100 + b"\r\n")
    # as redis-server: arguments are added while the quoted text is under 128 bytes
    assert out == b"-ERR unknown command 'BAR', with args beginning with: " + b"'ab' " * 26 + b"\r\n"


# ---------------------------------------------------------------- HELLO and connection state

@pytest.mark.parametrize("resp", [2, 3])
def test_hello_switches_protocol_and_describes_the_server(resp: int) -> None:
    s = RedisSession(MemoryBus(), 77, RedisConfig(version="7.4.0"))
    s.data_received(b"HELLO %d SETNAME app AUTH default secret\r\n" % resp)
    body = (b"$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$5\r\n7.4.0\r\n$5\r\nproto\r\n:%d\r\n"
            b"$2\r\nid\r\n:77\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n"
            b"$7\r\nmodules\r\n*0\r\n" % resp)
    assert s.pending_output() == (b"%7\r\n" if resp == 3 else b"*14\r\n") + body
    assert s.resp == resp and s.name == b"app"
    s.data_received(b"CLIENT GETNAME\r\nCLIENT ID\r\nHELLO\r\n")
    assert s.pending_output().startswith(b"$3\r\napp\r\n:77\r\n" + (b"%7\r\n" if resp == 3 else b"*14\r\n"))


def test_client_setinfo_and_reset() -> None:
    s = RedisSession(MemoryBus(), 1)
    s.data_received(b"CLIENT SETINFO LIB-NAME redis-py\r\nCLIENT SETINFO lib-ver 5.0\r\n"
                    b"CLIENT SETINFO foo x\r\nCLIENT SETINFO LIB-VER \"a b\"\r\nCLIENT MAINT_NOTIFICATIONS ON\r\n")
    assert s.pending_output() == (b"+OK\r\n+OK\r\n-ERR Unrecognized option 'foo'\r\n"
                                  b"-ERR LIB-VER cannot contain spaces, newlines or special characters.\r\n"
                                  b"-ERR unknown subcommand 'MAINT_NOTIFICATIONS'. Try CLIENT HELP.\r\n")
    assert (s.lib_name, s.lib_ver) == (b"redis-py", b"5.0")
    s.data_received(b"HELLO 3 SETNAME n\r\nSELECT 5\r\nRESET\r\n")
    assert s.pending_output().endswith(b"+OK\r\n+RESET\r\n")
    assert (s.resp, s.db, s.name) == (2, 0, None)


# ---------------------------------------------------------------- pub/sub through the bus

def test_subscriptions_reach_the_bus_with_their_kind() -> None:
    bus = MemoryBus()
    s = redis(bus, 1)
    s.data_received(b"SUBSCRIBE a b\r\nPSUBSCRIBE n*\r\nSSUBSCRIBE s\r\n")
    got = sorted((e.sid, e.subject, e.syntax) for e in bus.entries.values())
    assert got == [("c:a", "a", None), ("c:b", "b", None), ("p:n*", "n*", "glob"),
                   ("s:s", "_SHARD.s", None)]
    s.data_received(b"UNSUBSCRIBE\r\nPUNSUBSCRIBE\r\nSUNSUBSCRIBE\r\n")
    assert not bus.entries and not s.subscribed


@pytest.mark.parametrize("resp", [2, 3])
def test_messages_patterns_and_shards(resp: int) -> None:
    bus = MemoryBus()
    sub = redis(bus, 1, resp)
    sub.data_received(b"SUBSCRIBE news\r\nPSUBSCRIBE n*\r\nSSUBSCRIBE news\r\n")
    sub.pending_output()
    pub = redis(bus, 2)
    pub.data_received(b"PUBLISH news hello\r\nSPUBLISH news shard\r\nPUBLISH nope x\r\nPUBLISH zz y\r\n")
    assert pub.pending_output() == b":2\r\n:1\r\n:1\r\n:0\r\n"
    p = b">" if resp == 3 else b"*"
    assert sub.pending_output() == (
        p + b"3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$5\r\nhello\r\n"
        + p + b"4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$5\r\nhello\r\n"
        + p + b"3\r\n$8\r\nsmessage\r\n$4\r\nnews\r\n$5\r\nshard\r\n"
        + p + b"4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnope\r\n$1\r\nx\r\n")
    assert sub.msgs_out == 4 and pub.msgs_in == 4


def test_binary_channel_names_round_trip() -> None:
    bus = MemoryBus()
    sub, pub = redis(bus, 1), redis(bus, 2)
    chan = b"\xff\x00 \xe9t\xc3\xa9"
    sub.data_received(encode_command(b"SUBSCRIBE", chan))
    assert sub.pending_output() == b"*3\r\n$9\r\nsubscribe\r\n$7\r\n" + chan + b"\r\n:1\r\n"
    pub.data_received(encode_command(b"PUBLISH", chan, b"v"))
    assert sub.pending_output() == b"*3\r\n$7\r\nmessage\r\n$7\r\n" + chan + b"\r\n$1\r\nv\r\n"
    pub.data_received(encode_command(b"PUBSUB", b"CHANNELS"))
    assert pub.pending_output() == b":1\r\n*1\r\n$7\r\n" + chan + b"\r\n"


def test_resp3_clients_publish_while_subscribed_and_hear_themselves() -> None:
    bus = MemoryBus()
    s = redis(bus, 1, resp=3)
    s.data_received(b"SUBSCRIBE me\r\nPUBLISH me hi\r\nECHO x\r\n")
    assert s.pending_output() == (b">3\r\n$9\r\nsubscribe\r\n$2\r\nme\r\n:1\r\n"
                                  b">3\r\n$7\r\nmessage\r\n$2\r\nme\r\n$2\r\nhi\r\n:1\r\n$1\r\nx\r\n")


def test_introspection_counts_every_client_on_the_bus() -> None:
    bus = MemoryBus()
    a, b, c = redis(bus, 1), redis(bus, 2), nats(bus, 3)
    a.data_received(b"SUBSCRIBE x y\r\nPSUBSCRIBE p* q?\r\nSSUBSCRIBE s\r\n")
    b.data_received(b"SUBSCRIBE x\r\nPSUBSCRIBE p*\r\nSSUBSCRIBE s t\r\n")
    c.data_received(b"SUB y 1\r\nSUB w.* 2\r\n")
    q = redis(bus, 4)
    q.data_received(b"PUBSUB CHANNELS\r\nPUBSUB CHANNELS x*\r\nPUBSUB NUMSUB x y z\r\nPUBSUB NUMPAT\r\n"
                    b"PUBSUB SHARDCHANNELS\r\nPUBSUB SHARDNUMSUB s t u\r\n")
    assert q.pending_output() == (
        b"*2\r\n$1\r\nx\r\n$1\r\ny\r\n" b"*1\r\n$1\r\nx\r\n"
        b"*6\r\n$1\r\nx\r\n:2\r\n$1\r\ny\r\n:2\r\n$1\r\nz\r\n:0\r\n" b":3\r\n"
        b"*2\r\n$1\r\ns\r\n$1\r\nt\r\n" b"*6\r\n$1\r\ns\r\n:2\r\n$1\r\nt\r\n:1\r\n$1\r\nu\r\n:0\r\n")


# ---------------------------------------------------------------- errors and closing

def test_a_protocol_error_runs_earlier_commands_then_closes() -> None:
    bus = MemoryBus()
    s = redis(bus, 1)
    s.data_received(b"SUBSCRIBE a\r\n*2\r\n+x\r\nPING\r\n")
    assert s.pending_output() == (b"*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n"
                                  b"-ERR Protocol error: expected '$', got '+'\r\n")
    assert s.closing and isinstance(s.close_error, MalformedRequest) and not bus.entries
    s.data_received(b"PING\r\n")
    assert s.pending_output() == b""


def test_quit_closes_cleanly() -> None:
    bus = MemoryBus()
    s = redis(bus, 1)
    s.data_received(b"SUBSCRIBE a\r\nQUIT\r\nPING\r\n")
    assert s.pending_output().endswith(b":1\r\n+OK\r\n")
    assert s.closing and s.close_error is None and not bus.entries


def test_deliveries_for_dropped_subscriptions_are_ignored() -> None:
    s = redis(MemoryBus(), 1)
    for sid in ("c:a", "p:a*", "s:a"):
        s.deliver(sid, "a", None, None, b"x")
    assert s.pending_output() == b"" and s.msgs_out == 0


def test_slow_consumer_is_closed_without_a_reply() -> None:
    bus = MemoryBus()
    s = RedisSession(bus, 1, RedisConfig(limits=FlowLimits(100, 50, 300)))
    s.data_received(b"SUBSCRIBE a\r\n")
    s.pending_output()
    for _ in range(10):
        bus.publish(None, "a", None, None, b"z" * 50)
    # 3 messages of 81 bytes fit, a fourth would pass 300: the unread output is dropped
    assert s.pending_output() == b""
    assert s.closing and isinstance(s.close_error, SlowConsumer) and not bus.entries


def test_commands_are_counted_against_the_output_limit_too() -> None:
    s = RedisSession(MemoryBus(), 1, RedisConfig(limits=FlowLimits(10, 5, 70)))
    s.data_received(b"PING\r\n" * 20)
    assert s.pending_output() == b"" and isinstance(s.close_error, SlowConsumer)


def test_output_above_the_soft_limit_for_too_long_cuts_the_consumer() -> None:
    """redis-server's `client-output-buffer-limit pubsub ... soft seconds`: above the soft
    limit for the whole period (not just once) closes the session; draining below it
    restarts the period."""
    bus = MemoryBus()
    s = RedisSession(bus, 1, RedisConfig(limits=FlowLimits(100, 50, 10_000, soft_limit=500, soft_seconds=60)))
    s.data_received(b"SUBSCRIBE a\r\n")
    s.pending_output()
    for _ in range(10):
        bus.publish(None, "a", None, None, b"z" * 50)  # 810 bytes queued
    s.check_soft_limit(0.0)
    s.check_soft_limit(59.0)
    assert not s.closing
    s.pending_output()  # drained: the period restarts
    s.check_soft_limit(61.0)
    for _ in range(10):
        bus.publish(None, "a", None, None, b"z" * 50)
    s.check_soft_limit(62.0)
    s.check_soft_limit(121.0)
    assert not s.closing
    s.check_soft_limit(122.0)
    assert s.closing and isinstance(s.close_error, SlowConsumer) and s.pending_output() == b""


def test_a_request_past_the_query_limit_is_refused_before_its_argument_is_read() -> None:
    s = RedisSession(MemoryBus(), 1, RedisConfig(max_bulk=100, max_query=250))
    s.data_received(b"*9\r\n$9\r\nSUBSCRIBE\r\n" + b"$100\r\n" + b"x" * 100 + b"\r\n" + b"$100\r\n" + b"x" * 100
                    + b"\r\n")
    assert not s.closing and s.input_buffered == 209
    s.data_received(b"$100\r\n")
    assert s.closing and s.pending_output() == b"-ERR Protocol error: query buffer limit reached\r\n"


def test_a_publish_over_max_payload_is_refused_where_a_map_allows_larger_bulks() -> None:
    """With a map a bulk may be larger than a message: PUBLISH (plain, with a reply
    subject, in a run) and SPUBLISH of a message over max_payload get an error, are
    counted and never reach the bus; the commands around them run in order."""
    assert redis_limits(4).max_bulk == 4 and redis_limits(4, data=True).max_bulk > 4
    bus = MemoryBus()
    s = RedisSession(bus, 1, redis_limits(4, data=True))
    s.data_received(b"".join(encode_command(*c) for c in (
        [b"PUBLISH", b"c", b"abcd"], [b"PUBLISH", b"c", b"abcde"], [b"PUBLISH", b"c", b"ab"],
        [b"PUBLISH", b"c", b"abcde", b"_INBOX.x"], [b"SPUBLISH", b"c", b"abcdef"], [b"PUBLISH", b"c", b"a"])))
    error = b"-ERR message of %d bytes exceeds max_payload 4\r\n"
    assert s.pending_output() == b":0\r\n" + error % 5 + b":0\r\n" + error % 5 + error % 6 + b":0\r\n"
    assert s.oversized == 3 and [p[3] for p in bus.published] == [b"abcd", b"ab", b"a"]
