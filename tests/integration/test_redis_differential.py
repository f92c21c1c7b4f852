"""The Redis pub/sub protocol byte for byte: the same raw scripts to redis-server 7.0.15
and one raims node (redis_diff.py), replies and closes compared, in RESP2 and, for the
cases in RESP3, after `HELLO 3`.

A script ends with QUIT (the server's close ends the reply) unless a protocol error or
an incomplete request ends it. The kept differences are their own tests below; the
node has no key-value map (a write is refused), except for KV_CASES.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator

import pytest

from tests.integration.redis_diff import redis_pair
from tests.integration.wire_diff import Pair, exchange

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server not installed")

Q = b"QUIT\r\n"
NOT_HERE = b"only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
MANY = b" ".join(b"c%d" % i for i in range(2000))


def mb(*args: bytes) -> bytes:
    """A multibulk request."""
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


CASES: dict[str, bytes] = {
    # (un)subscribe confirmations
    "unsubscribe nothing": b"UNSUBSCRIBE\r\nPUNSUBSCRIBE\r\nSUNSUBSCRIBE\r\n" + Q,
    "duplicates": b"SUBSCRIBE a a b a\r\nPSUBSCRIBE p* p*\r\nSSUBSCRIBE s s\r\nUNSUBSCRIBE a a\r\n"
                  b"PUNSUBSCRIBE x\r\nSUNSUBSCRIBE s s\r\nUNSUBSCRIBE\r\nPUNSUBSCRIBE\r\n" + Q,
    "empty channel names": mb(b"SUBSCRIBE", b"") + mb(b"PUBLISH", b"", b"x") + mb(b"PSUBSCRIBE", b"")
                           + mb(b"SSUBSCRIBE", b"") + mb(b"SPUBLISH", b"", b"y") + mb(b"UNSUBSCRIBE", b"") + Q,
    "no arguments": b"SUBSCRIBE\r\nPSUBSCRIBE\r\nSSUBSCRIBE\r\n" + Q,
    "one name in three spaces": b"SUBSCRIBE a\r\nSUBSCRIBE a\r\nPSUBSCRIBE a\r\nSSUBSCRIBE a\r\nPUBLISH a x\r\n"
                                b"UNSUBSCRIBE b\r\nSUNSUBSCRIBE\r\nPUNSUBSCRIBE\r\nUNSUBSCRIBE\r\nPING\r\n" + Q,
    "2000 channels": b"SUBSCRIBE " + MANY + b"\r\nPUBSUB NUMSUB c0 c1999\r\nUNSUBSCRIBE " + MANY + b"\r\n" + Q,
    "2000 channels and patterns, all dropped": b"SUBSCRIBE " + MANY + b"\r\nPSUBSCRIBE " + MANY
                                               + b"\r\nUNSUBSCRIBE\r\nPUNSUBSCRIBE\r\n" + Q,
    "2000 shard channels": b"SSUBSCRIBE " + MANY + b"\r\nSUNSUBSCRIBE\r\n" + Q,
    "2000 duplicates": b"SUBSCRIBE " + b"x " * 2000 + b"\r\nUNSUBSCRIBE " + b"x " * 2000 + b"\r\n" + Q,
    # subscribed state
    "disallowed commands": b"SUBSCRIBE a\r\nECHO x\r\nGET k\r\nSELECT 0\r\nFOO bar\r\nAUTH x\r\nHELLO\r\n"
                           b"PUBLISH a x\r\nHELLO 2\r\nECHO y\r\nMULTI\r\nECHO z\r\n" + Q,
    "disallowed introspection": b"SUBSCRIBE a\r\nCLIENT ID\r\nCOMMAND COUNT\r\nINFO\r\nMONITOR\r\n" + Q,
    "exec refused with execabort": b"SUBSCRIBE a\r\nEXEC\r\nEXEC x\r\nDISCARD\r\nWATCH k\r\nWATCH\r\n" + Q,
    "ping with and without argument": b"SUBSCRIBE a\r\nPING\r\nPING hi\r\nPING a b\r\nUNSUBSCRIBE\r\nPING\r\n"
                                      b"PING hi\r\n" + Q,
    "quit while subscribed": b"SUBSCRIBE a\r\nQUIT x y\r\n",
    "reset while subscribed": b"SUBSCRIBE a\r\nPSUBSCRIBE a*\r\nCLIENT SETNAME n\r\nRESET\r\nPING\r\n"
                              b"PUBLISH a x\r\nPUBSUB NUMSUB a\r\nCLIENT GETNAME\r\n" + Q,
    "pipelined burst with a disallowed command": mb(b"SUBSCRIBE", b"a", b"b") + mb(b"PING") + mb(b"ECHO", b"x")
                                                 + mb(b"PING", b"y") + mb(b"UNSUBSCRIBE") + mb(b"PING") + Q,
    "hello while subscribed": b"SUBSCRIBE a\r\nHELLO 3\r\nSUBSCRIBE b\r\nPUBLISH a x\r\nHELLO 2\r\nPING\r\n" + Q,
    # HELLO
    "hello versions": b"HELLO 4\r\nHELLO 1\r\nHELLO 0\r\nHELLO -1\r\nHELLO x\r\nHELLO 3.0\r\n"
                      b"HELLO 99999999999999999999\r\nHELLO 2 foo\r\n" + Q,
    "hello auth and setname": b"HELLO 3 AUTH default x\r\nHELLO 3 AUTH bob x\r\nHELLO 3 SETNAME n1\r\n"
                              b"CLIENT GETNAME\r\nHELLO 2 SETNAME \"a b\"\r\nHELLO 3 AUTH default\r\n"
                              b"HELLO 3 SETNAME\r\nHELLO 3 FOO\r\nHELLO 2 SETNAME a SETNAME b\r\nCLIENT GETNAME\r\n"
                              b"HELLO 2 SETNAME x AUTH default p\r\n" + Q,
    "resp3 hello 2 while subscribed": b"HELLO 3\r\nSUBSCRIBE a\r\nHELLO 2\r\nPING\r\nECHO x\r\nRESET\r\n" + Q,
    # PUBLISH counts and deliveries to oneself
    "pattern and channel both match": b"SUBSCRIBE q\r\nPSUBSCRIBE q q* *\r\nPUBLISH q m\r\nPUNSUBSCRIBE q\r\n"
                                      b"PUBLISH q n\r\nPUBLISH z o\r\n" + Q,
    "spublish and publish apart": b"SSUBSCRIBE a\r\nSPUBLISH a x\r\nSUBSCRIBE a\r\nPUBLISH a y\r\nSPUBLISH a z\r\n" + Q,
    "glob patterns": b"PSUBSCRIBE a* a[bc] a\\* a?\r\nPUBLISH a* x\r\nPUBLISH ab y\r\nPUBLISH a z\r\n" + Q,
    "keyspace pattern": b"PSUBSCRIBE __keyspace@0__:* __keyevent@0__:*\r\nPUBLISH __keyspace@0__:k set\r\n"
                        b"PUBSUB NUMPAT\r\n" + Q,
    # PUBSUB
    "pubsub errors": b"PUBSUB\r\nPUBSUB FOO\r\nPUBSUB CHANNELS a b\r\nPUBSUB NUMSUB\r\nPUBSUB NUMPAT x\r\n"
                     b"PUBSUB SHARDNUMSUB\r\nPUBSUB SHARDCHANNELS a b\r\n" + Q,
    "pubsub counts": b"SUBSCRIBE uq1 uq2\r\nPSUBSCRIBE uq*\r\nSSUBSCRIBE uqs\r\nPUBSUB CHANNELS uq1*\r\n"
                     b"PUBSUB NUMSUB uq1 uq3 uq1\r\nPUBSUB NUMPAT\r\nPUBSUB SHARDCHANNELS\r\nPUBSUB SHARDCHANNELS x*\r\n"
                     b"PUBSUB SHARDNUMSUB uqs uq1\r\nPUBSUB CHANNELS u?1\r\n" + Q,
    # inline commands
    "inline quoting": b'ECHO "a b" \'c d\' "\\x41\\n" "\\xzz" "\\x4"\r\nECHO \'a\\\'b\'\r\nECHO "a\\"b"\r\n'
                      b"ECHO ''\r\nECHO \"\"\r\n" + Q,
    "unbalanced double quote": b'ECHO "abc\r\n' + Q,
    "unbalanced single quote": b"ECHO 'abc\r\n" + Q,
    "closing quote inside an argument": b'ECHO "a"b\r\n' + Q,
    "empty lines and requests": b"\r\n\r\n  \t \r\n*0\r\n*-1\r\n*-2\r\n*-0\r\nPING\r\n" + Q,
    "lf only": b"PING\nQUIT\n",
    "cr only": b"PING\rQUIT\r\n",
    "nul hides the line end": b"PING\x00junk\r\n" + Q,
    "nul alone": b"\x00\r\n" + Q,
    "nul after a complete line": b"PING\r\nPING\x00\r\n",
    "nul and a long line": b"PING\x00" + b"x" * 70000 + b"\r\n",
    "inline over 64k": b"PING " + b"x" * 70000 + b"\r\n" + Q,
    "binary inline": b"\xff\xfe\r\n" + Q,
    # framing
    "lf in multibulk": b"*1\n$4\nPING\nQUIT\r\n",
    "no crlf after a bulk": b"*1\r\n$4\r\nPINGxx*1\r\n$4\r\nQUIT\r\n",
    "cr in a bulk": mb(b"\r") + Q,
    "negative bulk": b"*1\r\n$-1\r\nPING\r\n",
    "negative bulk -5": b"*1\r\n$-5\r\nPING\r\n",
    "huge bulk": b"*1\r\n$99999999999999999999\r\n",
    "bulk over max": b"*1\r\n$2147483648\r\n",
    "bulk with a plus": b"*1\r\n$+4\r\nPING\r\n",
    "bulk with a zero": b"*1\r\n$04\r\nPING\r\n",
    "bulk with a blank": b"*1\r\n$ 4\r\nPING\r\n",
    "bulk with a trailing blank": b"*1\r\n$4 \r\nPING\r\n",
    "bulk non-digits": b"*1\r\n$x\r\n",
    "bulk empty length": b"*1\r\n$\r\nPING\r\n",
    "not a bulk": b"*1\r\n:4\r\nPING\r\n",
    "bare word in multibulk": b"*1\r\nPING\r\n",
    "multibulk non-digits": b"*x\r\n",
    "multibulk empty count": b"*\r\nPING\r\n",
    "multibulk with a plus": b"*+1\r\n$4\r\nPING\r\n",
    "multibulk with a zero": b"*01\r\n$4\r\nPING\r\n",
    "multibulk over int": b"*2147483648\r\n",
    "long count line": b"*" + b"9" * 70000,
    "long bulk line": b"*1\r\n$" + b"9" * 70000,
    "split across requests": mb(b"PING") + b"*2\r\n$4\r\nECHO\r\n$3\r\nab",
    # commands
    "unknown commands": b"FOO a b\r\nfoo\r\nfoo " + b"x" * 200 + b" y\r\nFOO " + b"a " * 100 + b"\r\n"
                        + mb(b"FOO", b"a\r\nb") + mb(b"u" * 130) + mb(b"", b"x") + Q,
    "wrong arity": b"PING a b\r\nECHO\r\nECHO a b\r\nSUBSCRIBE\r\nPUBLISH\r\nPUBLISH a\r\nSPUBLISH a\r\n"
                   b"SPUBLISH a b c\r\nPUBLISH a b c d e\r\nSELECT\r\nCLIENT\r\nCLIENT SETNAME\r\nRESET a\r\n"
                   b"PUBSUB NUMPAT x\r\n" + Q,
    "mixed case": b"pInG\r\nsubscribe a\r\nSuBsCrIbE b\r\nUnSuBsCrIbE a\r\n" + Q,
    "exec refused outside subscribed mode": b"MULTI\r\nEXEC x\r\nEXEC\r\nEXEC x\r\nMULTI x\r\nDISCARD\r\n" + Q,
    "client basics": b"CLIENT SETNAME n1\r\nCLIENT GETNAME\r\nCLIENT SETNAME \"a b\"\r\nCLIENT SETNAME \"\"\r\n"
                     b"CLIENT GETNAME\r\nCLIENT ID x\r\nCLIENT GETNAME x\r\nCLIENT SETNAME a b\r\nCLIENT INFO x\r\n"
                     b"CLIENT NO-EVICT on\r\nCLIENT NO-EVICT x\r\nCLIENT NO-TOUCH on\r\nCLIENT FOO\r\n" + Q,
    "quit first": b"QUIT\r\nPING\r\n",
    # Redis's own suite (tests/unit/introspection.tcl, 7.0.15): ON right after SKIP is answered
    "client reply on after skip": b"CLIENT REPLY SKIP\r\nCLIENT REPLY ON\r\nPING\r\nCLIENT REPLY SKIP\r\n"
                                  b"PING\r\nPING a\r\nCLIENT REPLY OFF\r\nCLIENT REPLY SKIP\r\nPING\r\n"
                                  b"CLIENT REPLY ON\r\nPING b\r\n" + Q,
}

RESP3 = ["unsubscribe nothing", "duplicates", "empty channel names", "2000 channels and patterns, all dropped",
         "disallowed commands", "exec refused with execabort", "ping with and without argument",
         "reset while subscribed", "pipelined burst with a disallowed command", "hello auth and setname",
         "pattern and channel both match", "spublish and publish apart", "keyspace pattern", "pubsub counts",
         "client basics", "wrong arity", "client reply on after skip"]

CASES.update({
    # redis-server 7.0.15 without cluster support or replicas (redis_cluster.py)
    "cluster support disabled": b"READONLY\r\nREADONLY x\r\nREADWRITE\r\nREADWRITE x\r\nASKING\r\nASKING x\r\n"
                                b"CLUSTER\r\nCLUSTER INFO\r\ncluster info x\r\nCLUSTER HELP\r\nCLUSTER HELP x\r\n"
                                b"CLUSTER NoSuch\r\nCLUSTER KEYSLOT foo\r\nCLUSTER KEYSLOT\r\nCLUSTER SLOTS\r\n"
                                b"CLUSTER SHARDS\r\nCLUSTER NODES\r\nCLUSTER MYID\r\nCLUSTER SETSLOT 1\r\n"
                                b"CLUSTER GETKEYSINSLOT 1 2\r\nCLUSTER RESET HARD\r\nSUBSCRIBE a\r\nCLUSTER INFO\r\n"
                                b"READONLY\r\nWAIT 0 0\r\n" + Q,
    "wait without replicas": b"WAIT 0 0\r\nWAIT -1 0\r\nWAIT 0 100\r\nWAIT\r\nWAIT 1\r\nWAIT 0 0 0\r\nWAIT x 0\r\n"
                             b"WAIT x -1\r\nWAIT 0 x\r\nWAIT 0 -1\r\nWAIT 0 1.5\r\nWAIT 99999999999999999999 0\r\n"
                             b"WAIT 1 20\r\nPING\r\n" + Q,
})

KV_CASES: dict[str, bytes] = {
    "wait and cluster with a map": b"WAIT 0 0\r\nWAIT 1 20\r\nPING\r\nWAIT x 0\r\nWAIT 0 -1\r\nMULTI\r\nWAIT 1 0\r\n"
                                   b"WAIT -1 x\r\nCLUSTER INFO\r\nREADONLY\r\nEXEC\r\nMULTI\r\nWAIT 1\r\nEXEC\r\n"
                                   b"MULTI\r\nCLUSTER NoSuch\r\nEXEC\r\nMULTI\r\nCLUSTER INFO x\r\nEXEC\r\n" + Q,
    "wait and cluster in scripts": b"EVAL \"return redis.pcall('wait',0,0)\" 0\r\n"
                                   b"EVAL \"return redis.pcall('wait',0)\" 0\r\n"
                                   b"EVAL \"return redis.pcall('readonly')\" 0\r\n"
                                   b"EVAL \"return redis.pcall('readwrite')\" 0\r\n"
                                   b"EVAL \"return redis.pcall('asking')\" 0\r\n"
                                   b"EVAL \"return redis.pcall('readonly', 'x')\" 0\r\n"
                                   b"EVAL \"return redis.pcall('cluster','info')\" 0\r\n"
                                   b"EVAL \"return redis.pcall('cluster','INFO','x')\" 0\r\n"
                                   b"EVAL \"return redis.pcall('cluster','nosuch')\" 0\r\n"
                                   b"EVAL \"return redis.pcall('cluster')\" 0\r\n"
                                   b"EVAL \"return redis.call('cluster','slots')\" 0\r\n"
                                   b"EVAL \"return redis.call('wait',0,0)\" 0\r\n" + Q,
    "exec refused unwatches": b"WATCH k\r\nEXEC x\r\nSET k v\r\nMULTI\r\nEXEC\r\n" + Q,
    "exec refused while subscribed unwatches": b"WATCH k\r\nSET k v\r\nSUBSCRIBE a\r\nEXEC\r\nUNSUBSCRIBE\r\n"
                                               b"MULTI\r\nEXEC\r\n" + Q,
    "data commands while subscribed": b"SUBSCRIBE a\r\nGET k\r\nSET k v\r\nPING\r\n" + Q,
    "keyspace notifications": b'HELLO 3\r\nCONFIG SET notify-keyspace-events KEA\r\n'
                              b"PSUBSCRIBE __keyspace@0__:* __keyevent@0__:del\r\nSET k v\r\nDEL k\r\n"
                              b'CONFIG SET notify-keyspace-events ""\r\nSET k v\r\n' + Q,
    "keyspace channel": b"CONFIG SET notify-keyspace-events K$\r\nSUBSCRIBE __keyspace@0__:k\r\nHELLO 3\r\n"
                        b'SET k v\r\nSET kk v\r\nCONFIG SET notify-keyspace-events ""\r\n' + Q,
    # Redis's own suite (tests/unit/multi.tcl, 7.0.15): a flush dirties only the watched keys it removes
    "flush leaves absent watched keys alone": b"FLUSHALL\r\nWATCH x\r\nFLUSHALL\r\nMULTI\r\nPING\r\nEXEC\r\n"
                                              b"SET y 1\r\nWATCH x\r\nFLUSHDB\r\nMULTI\r\nPING\r\nEXEC\r\n"
                                              b"SET x 1\r\nWATCH x\r\nFLUSHDB\r\nMULTI\r\nPING\r\nEXEC\r\n"
                                              b"SELECT 1\r\nSET x 1\r\nSELECT 0\r\nWATCH x\r\nFLUSHALL\r\n"
                                              b"MULTI\r\nPING\r\nEXEC\r\n" + Q,
    "save refused inside multi": b"MULTI\r\nSAVE\r\nEXEC\r\nMULTI\r\nSAVE x\r\nPING\r\nEXEC\r\nMULTI\r\n"
                                 b"SAVE\r\nDISCARD\r\nPING\r\n" + Q,
}


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    with redis_pair(tmp_path_factory.mktemp("redis_diff")) as (p, _, _):
        yield p


@pytest.mark.parametrize("name", list(CASES))
def test_replies_match_redis_server(pair: Pair, name: str) -> None:
    ref, us = pair.run(CASES[name])
    assert us == ref


@pytest.mark.parametrize("name", RESP3)
def test_resp3_replies_match_redis_server(pair: Pair, name: str) -> None:
    ref, us = pair.run(b"HELLO 3\r\n" + CASES[name])
    assert us == ref


@pytest.fixture(scope="module")
def kv_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    with redis_pair(tmp_path_factory.mktemp("redis_diff_kv"), kv=True) as (p, _, _):
        yield p


@pytest.mark.parametrize("name", list(KV_CASES))
def test_with_a_map_replies_match_redis_server(kv_pair: Pair, name: str) -> None:
    ref, us = kv_pair.run(KV_CASES[name])
    assert us == ref


SPLIT = ["duplicates", "reset while subscribed", "inline quoting", "empty lines and requests", "no crlf after a bulk",
         "pipelined burst with a disallowed command", "nul hides the line end", "unbalanced double quote"]


@pytest.mark.parametrize("name", SPLIT)
def test_a_script_read_byte_by_byte_gets_the_same_replies(pair: Pair, name: str) -> None:
    """Every offset of the script a read boundary, on both servers: nothing depends on
    TCP segmentation."""
    script = CASES[name]
    ref, us = pair.run(script, list(range(1, len(script))))
    assert ref == pair.run(script)[0]
    assert us == ref


def test_client_id_is_the_hello_id(pair: Pair) -> None:
    """CLIENT ID and HELLO's `id` are the same number (normalize masks HELLO's)."""
    for port in (pair.ref_port, pair.raims_port):
        reply, closed = exchange(port, b"CLIENT ID\r\nHELLO 3\r\n" + Q)
        cid = reply.split(b"\r\n", 1)[0]
        assert cid.startswith(b":") and int(cid[1:]) > 0 and b"$2\r\nid\r\n%s\r\n" % cid in reply and closed


def test_kept_help_subcommands_are_not_provided(pair: Pair) -> None:
    """redis-server lists a command's subcommands for HELP; raims answers it as an
    unknown subcommand (redis_session.py)."""
    (ref, _), (us, _) = pair.run(b"PUBSUB HELP\r\nCLIENT HELP x\r\n" + Q)
    assert ref.startswith(b"*14\r\n+PUBSUB <subcommand>")
    assert us == (b"-ERR unknown subcommand 'HELP'. Try PUBSUB HELP.\r\n"
                  b"-ERR unknown subcommand 'HELP'. Try CLIENT HELP.\r\n+OK\r\n")


def test_kept_client_info_has_the_7_2_fields(pair: Pair) -> None:
    """raims' CLIENT INFO / LIST line adds redis-server 7.2's `watch`, `lib-name` and
    `lib-ver` (set by CLIENT SETINFO, which redis-py sends) to 7.0.15's fields."""
    (ref, _), (us, _) = pair.run(b"CLIENT INFO\r\n" + Q)
    line = ref.replace(b" qbuf=", b" watch=0 qbuf=").replace(b" resp=2\n", b" resp=2 lib-name= lib-ver=\n")
    assert us == line


def test_kept_publish_takes_a_reply_subject(pair: Pair) -> None:
    """PUBLISH channel message reply: raims' optional third argument (acks.py); a wrong
    arity on redis-server."""
    (ref, _), (us, _) = pair.run(b"PUBLISH a b c\r\n" + Q)
    assert ref.startswith(b"-ERR wrong number of arguments for 'publish' command\r\n")
    assert us == b":0\r\n+OK\r\n"


def test_kept_a_multibulk_is_held_to_max_args(pair: Pair) -> None:
    """redis-server waits for up to 2^31-1 arguments; raims refuses more than 1,048,576
    (resp.py's max_args) at the count line and closes."""
    (ref, ref_closed), (us, us_closed) = pair.run(b"*1048577\r\n")
    assert (ref, ref_closed) == (b"", False)
    assert (us, us_closed) == (b"-ERR Protocol error: invalid multibulk length\r\n", True)


def _info_fields(reply: bytes) -> dict[bytes, list[bytes]]:
    """INFO's reply as {section: [field names]}."""
    body = reply.split(b"\r\n", 1)[1]
    sections: dict[bytes, list[bytes]] = {}
    names: list[bytes] = []
    for line in body.split(b"\r\n"):
        if line.startswith(b"# "):
            names = sections.setdefault(line[2:].lower(), [])
        elif b":" in line:
            names.append(line.split(b":", 1)[0])
    return sections


def test_info_has_redis_server_fields(pair: Pair) -> None:
    """Redis's own suite (tests/unit/info-command.tcl) and monitoring tools read INFO's
    replication offsets, the CPU of children and main thread, used_memory(_human): the
    replication and cpu sections have redis-server 7.0.15's fields, in its order; memory
    and server the ones tools read."""
    (ref, _), (us, _) = pair.run(b"INFO everything\r\n" + Q)
    theirs, ours = _info_fields(ref), _info_fields(us)
    assert ours[b"replication"] == theirs[b"replication"] and ours[b"cpu"] == theirs[b"cpu"]
    for section, names in ((b"memory", [b"used_memory", b"used_memory_human", b"used_memory_rss",
                                        b"used_memory_rss_human", b"used_memory_peak", b"used_memory_peak_human",
                                        b"maxmemory", b"maxmemory_human", b"maxmemory_policy"]),
                           (b"server", [b"redis_version", b"run_id", b"tcp_port", b"server_time_usec",
                                        b"uptime_in_seconds", b"hz", b"configured_hz"])):
        assert set(names) <= set(theirs[section]) and set(names) <= set(ours[section]), section
    (_, _), (us, _) = pair.run(b"INFO cpu all\r\n" + Q)
    assert b"\r\nmaster_repl_offset:0\r\n" in us and us.count(b"used_cpu_user_children:") == 1
    assert b"\r\nused_memory_human:" in us and b"\r\nmaxmemory_human:0B\r\n" in us


# INFO commandstats / errorstats (redis_stats.py): after the same script on one connection, the
# same commands with the same calls, rejected_calls and failed_calls, the same error prefixes
# and counts, the same total_error_replies (usec excluded). Sent whole, so pipelined runs take
# the batch path; subscribed mode, MULTI and CLIENT REPLY take the general dispatch.
STATS_CASES: dict[str, bytes] = {
    "refusals and failures": b"PING\r\nPING a b\r\nFOO a\r\nCLIENT FOO\r\nCLIENT SETNAME\r\nCLIENT\r\nCLIENT LIST\r\n"
                             b"CLIENT LIST x\r\nECHO\r\nSELECT 99\r\nHELLO 4\r\nAUTH x\r\nAUTH a b\r\nPUBLISH c x\r\n"
                             b"PUBLISH c y\r\nPUBLISH d z\r\nSPUBLISH s x\r\nSUBSCRIBE c\r\nPUBLISH c x\r\nGET k\r\n"
                             b"PING\r\nHELLO 3\r\nINFO x\r\nUNSUBSCRIBE\r\nPUBSUB NUMSUB c\r\nPUBSUB FOO\r\n"
                             b"CONFIG GET timeout\r\nCONFIG SET foo 1\r\nCLIENT REPLY OFF\r\nGET\r\nFOO\r\n"
                             b"CLIENT REPLY ON\r\n",
    "transactions": b"MULTI\r\nPING\r\nECHO\r\nGET\r\nEXEC\r\nEXEC\r\nDISCARD\r\nMULTI\r\nMULTI\r\nWATCH x\r\n"
                    b"PING a\r\nUNWATCH\r\nPUBLISH c m\r\nEXEC\r\nEXEC x\r\nMULTI\r\nEXEC x\r\nSUBSCRIBE c\r\nEXEC\r\n"
                    b"MULTI\r\nWATCH k\r\nRESET\r\nMULTI\r\nSELECT 99\r\nEXEC\r\n",
    "protocol error": b"PING\r\n*1\r\n$x\r\n",
}
KV_STATS_CASES: dict[str, bytes] = {
    "pipelined data commands": b"SET k v\r\nSET k2 v\r\nGET k\r\nGET k\r\nget k\r\nINCR k\r\nLPUSH k a\r\nGET\r\n"
                               b"HSET h a 1\r\nHSET h b 2\r\nHGET h a\r\nOBJECT ENCODING k\r\nOBJECT FOO\r\n"
                               b"OBJECT ENCODING\r\nOBJECT\r\nPUBLISH c x\r\nPUBLISH c x\r\npublish c y\r\nMSET a\r\n"
                               b"MSET a b c\r\nBLPOP l 0.01\r\nRPUSH l2 x\r\nBLPOP l2 0\r\nINCR n\r\nINCR n\r\n"
                               b"SET k v EX -1\r\nPING\r\nGET k\r\n",
    "data commands in transactions": b"MULTI\r\nINCR k\r\nSET k v\r\nINCR k\r\nGET\r\nEXEC\r\nSET k 1\r\nMULTI\r\n"
                                     b"INCR k\r\nLPUSH k x\r\nGET k\r\nEXEC\r\nWATCH k\r\nSET k 2\r\nMULTI\r\nGET k\r\n"
                                     b"EXEC\r\nMULTI\r\nSAVE\r\nEXEC\r\n",
    "data commands while subscribed": b"HELLO 3\r\nSUBSCRIBE c\r\nSET k v\r\nGET\r\nINCR k\r\nGET k\r\nPUBLISH c x\r\n"
                                      b"UNSUBSCRIBE\r\nHELLO 2\r\nSUBSCRIBE c\r\nSET k v\r\nMULTI\r\nRESET\r\nSET k v\r\n",
    "replies off": b"CLIENT REPLY OFF\r\nSET k v\r\nINCR k\r\nGET\r\nCLIENT REPLY ON\r\nSET k v\r\n"
                   b"CLIENT REPLY SKIP\r\nINCR k\r\nGET k\r\n",
    "subcommands of the map": b"SET k v\r\nXADD s * a 1\r\nXINFO STREAM s\r\nXINFO FOO\r\nXGROUP CREATE s g $\r\n"
                              b"XGROUP CREATE s g $\r\nSCRIPT FLUSH\r\nSCRIPT LOAD\r\nTYPE k\r\nDEL k\r\nEXPIRE k x\r\n",
}
_CMDSTAT = re.compile(rb"cmdstat_(\S+?):calls=(\d+),usec=\d+,usec_per_call=\d+\.\d\d,rejected_calls=(\d+),"
                      rb"failed_calls=(\d+)\r\n")
_ERRSTAT = re.compile(rb"errorstat_(\S+?):count=(\d+)\r\n")
_LATENCY = re.compile(rb"latency_percentiles_usec_(\S+?):p50=\d+\.\d{3},p99=\d+\.\d{3},p99\.9=\d+\.\d{3}\r\n")

Counts = tuple[dict[bytes, tuple[int, ...]], dict[bytes, int], bytes, set[bytes]]


def _stats(port: int, script: bytes) -> Counts:
    """(commandstats {name: (calls, rejected, failed)}, errorstats, total_error_replies, the
    latencystats names) after CONFIG RESETSTAT, then `script` on a connection of its own."""
    assert exchange(port, b"CONFIG RESETSTAT\r\n" + Q) == (b"+OK\r\n+OK\r\n", True)
    exchange(port, script + Q)
    reply, _ = exchange(port, b"INFO commandstats errorstats latencystats stats\r\n" + Q)
    total = re.search(rb"\r\ntotal_error_replies:(\d+)\r\n", reply)
    assert total is not None
    return ({m[1]: tuple(map(int, m.groups()[1:])) for m in _CMDSTAT.finditer(reply)},
            {m[1]: int(m[2]) for m in _ERRSTAT.finditer(reply)}, total[1], set(_LATENCY.findall(reply)))


@pytest.mark.parametrize("name", list(STATS_CASES))
def test_commandstats_and_errorstats_match_redis_server(pair: Pair, name: str) -> None:
    ref = _stats(pair.ref_port, STATS_CASES[name])
    assert ref[0] and _stats(pair.raims_port, STATS_CASES[name]) == ref


@pytest.mark.parametrize("name", list(KV_STATS_CASES))
def test_with_a_map_commandstats_and_errorstats_match_redis_server(kv_pair: Pair, name: str) -> None:
    ref = _stats(kv_pair.ref_port, KV_STATS_CASES[name])
    assert ref[0] and _stats(kv_pair.raims_port, KV_STATS_CASES[name]) == ref


def test_info_default_and_everything_have_redis_servers_stats_sections(pair: Pair) -> None:
    """INFO (default) has errorstats but not commandstats nor latencystats; INFO everything
    has the three after cpu, as redis-server 7.0.15 (whose modules section raims has not)."""
    for section in (b"", b" everything"):
        (ref, _), (us, _) = pair.run(b"INFO%s\r\n" % section + Q)
        theirs = [h for h in re.findall(rb"# (\w+)\r\n", ref) if h != b"Modules"]
        assert re.findall(rb"# (\w+)\r\n", us) == theirs


def test_kept_commands_a_script_runs_are_not_counted_apart(kv_pair: Pair) -> None:
    """redis-server counts the commands a script runs (redis.call) as calls of their own;
    raims counts the script command only (redis_stats.py)."""
    script = b"SET k v\r\nEVAL \"return redis.call('incr','k')\" 0\r\n"
    ref, us = _stats(kv_pair.ref_port, script), _stats(kv_pair.raims_port, script)
    assert ref[0].pop(b"incr") == (1, 0, 1) and b"incr" not in us[0]
    assert us[:3] == ref[:3]
