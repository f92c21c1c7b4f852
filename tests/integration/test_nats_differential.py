"""The NATS client protocol byte for byte: the same raw scripts to nats-server 2.9.10 and
one raims node (nats_diff.py), replies and closes compared.

Each case is `(script, kept)`: kept None means the replies must be equal; SAYS_ERR
means nats-server closes silently where raims sends `-ERR 'Unknown Protocol
Operation'` first (nats_proto's decision: an error line is more useful, the client is
gone either way); the other kept differences are their own tests below.
"""

from __future__ import annotations

import shutil
import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from raims_node.bridges.nats_session import AUTH_TIMEOUT_S
from tests.integration.nats_diff import WAIT_S, Pair, nats_pair, normalize
from tests.integration.wire_diff import exchange

pytestmark = pytest.mark.skipif(shutil.which("nats-server") is None, reason="nats-server not installed")

SAYS_ERR = "-ERR"
NV = b'CONNECT {"verbose":false}\r\n'
NH = b'CONNECT {"verbose":false,"headers":true}\r\n'
MP = 1024 * 1024

CASES: dict[str, tuple[bytes, str | None]] = {
    # CONNECT
    "verbose": (b'CONNECT {"verbose":true}\r\nSUB a 1\r\nPUB a 1\r\nx\r\nUNSUB 1\r\nPING\r\n', None),
    "pedantic": (b'CONNECT {"verbose":false}\r\nSUB a..b 1\r\nSUB a q.* 2\r\nPUB a.* 1\r\nx\r\n'
                 b"PUB a. 1\r\nx\r\nPING\r\n", None),
    "echo off": (b'CONNECT {"verbose":false,"echo":false}\r\nSUB a 1\r\nPUB a 1\r\nx\r\nPING\r\n', None),
    "hpub without headers": (NV + b"HPUB a 12 14\r\nNATS/1.0\r\n\r\nhi\r\n", SAYS_ERR),
    "hpub 0 without headers": (NV + b"SUB a 1\r\nPUB a 1\r\nx\r\nhpub a 0 1\r\nx\r\nPING\r\n", SAYS_ERR),
    "hpub 0 with headers": (NH + b"SUB a 1\r\nHPUB a 0 1\r\nx\r\nHPUB a 0 1\r\ny\r\nPING\r\n", None),
    "no_responders without headers": (b'CONNECT {"no_responders":true}\r\n', None),
    "unknown fields": (b'CONNECT {"verbose":false,"zzz":[1,{"a":null}],"tls_required":false}\r\nPING\r\n', None),
    "malformed json": (b'CONNECT {"verbose":false\r\nPING\r\n', SAYS_ERR),
    "NaN": (b'CONNECT {"verbose":false,"x":NaN}\r\nPING\r\n', SAYS_ERR),
    "null options": (b'CONNECT {"verbose":null,"echo":null,"headers":null,"name":null,"protocol":null}\r\n'
                     b"PING\r\n", None),
    "keys in any case": (b'CONNECT {"VERBOSE":false,"Headers":true}\r\nSUB a 1\r\n'
                         b"HPUB a 12 14\r\nNATS/1.0\r\n\r\nhi\r\nPING\r\n", None),
    "the last key wins": (b'CONNECT {"verbose":false,"Verbose":true}\r\nPING\r\n', None),
    "invalid utf-8": (b'CONNECT {"verbose":false,"name":"\xff","\xfe":1}\r\nPING\r\n', None),
    "protocol over int64": (b'CONNECT {"protocol":99999999999999999999}\r\nPING\r\n', SAYS_ERR),
    "connect twice": (b'CONNECT {"verbose":true}\r\nCONNECT {"verbose":false}\r\nPING\r\n', None),
    "second connect keeps headers": (NH + b"SUB a 1\r\nCONNECT {}\r\nHPUB a 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"
                                     b"PING\r\n", None),
    "ops before connect": (b"SUB a 1\r\nPUB a 1\r\nx\r\nPING\r\nCONNECT {}\r\nPING\r\n", None),
    # PUB / HPUB
    "payload too short": (NV + b"PUB a 3\r\nab\r\nPING\r\n", None),
    "negative size": (NV + b"PUB a -1\r\nPING\r\n", SAYS_ERR),
    "10-digit size": (NV + b"SUB a 1\r\nPUB a 0000000001\r\nx\r\nPING\r\n", SAYS_ERR),
    "header size over total": (NH + b"HPUB a 14 12\r\nNATS/1.0\r\n\r\nhi\r\n", SAYS_ERR),
    "no crlf after payload": (NV + b"PUB a 1\r\nxPING\r\n", None),
    "lf after payload": (NV + b"SUB a 1\r\nPUB a 1\r\nx\nPING\r\n", None),
    "max_payload + 1": (NV + b"PUB a %d\r\n" % (MP + 1), None),
    "empty tokens": (NV + b"SUB > 1\r\nPUB a..b 1\r\nx\r\nPING\r\n", None),
    "wildcards when not pedantic": (b'CONNECT {"verbose":false,"pedantic":false}\r\nSUB a.* 1\r\n'
                                    b"PUB a.* 1\r\nx\r\nPING\r\n", None),
    "extra argument": (NV + b"PUB a b c 1\r\nx\r\n", SAYS_ERR),
    "tabs and case": (NV + b"sUb\ta\t1\r\npub  a\t 1 \r\nx\r\nPing\r\n", None),
    "leading blank": (NV + b" PUB a 1\r\nx\r\nPING\r\n", None),
    "cr inside a line": (NV + b"SUB a\rq 1\r\nPUB a 1\r\nx\r\nPING\r\n", None),
    "binary subject": (NV + b"SUB \x01\xff 1\r\nPUB \x01\xff 1\r\nx\r\nPING\r\n", None),
    # SUB / UNSUB
    "duplicate sid": (NV + b"SUB a 1\r\nSUB b 1\r\nPUB a 1\r\nx\r\nPUB b 1\r\ny\r\nPING\r\n", None),
    "unsub unknown sid": (NV + b"UNSUB 9\r\nUNSUB 9 3\r\nPING\r\n", None),
    "unsub max": (NV + b"SUB a 1\r\nUNSUB 1 2\r\nPUB a 1\r\n1\r\nPUB a 1\r\n2\r\nPUB a 1\r\n3\r\nPING\r\n", None),
    "unsub max lowered": (NV + b"SUB a 1\r\nPUB a 1\r\n1\r\nUNSUB 1 5\r\nUNSUB 1 1\r\nPUB a 1\r\n2\r\nPING\r\n", None),
    "unsub max of 10 digits": (NV + b"SUB a 1\r\nUNSUB 1 1000000000\r\nPUB a 1\r\nx\r\nPING\r\n", None),
    "queue names with wildcards": (NV + b"SUB a q* 1\r\nSUB a q.> 2\r\nPUB a 1\r\nx\r\nPING\r\n", None),
    "invalid subjects": (NV + b"SUB a.>.b 1\r\nSUB .a 2\r\nSUB a..b 3\r\nSUB a.*b 4\r\nPING\r\n", None),
    # framing
    "ping and pong prefixes": (b"PINGPONG\r\nPONGx\r\nPIN\r\n", None),
    "empty line": (b"\r\nPING\r\n", None),
    "binary garbage": (b"\x00\x01\xff\xfe\r\n", None),
    "client -ERR": (b"-ERR x\r\nPING\r\n", None),
    "control line of 4096": (NV + b"SUB " + b"a" * 4094 + b" 1\r\nPING\r\n", None),
    "control line of 4097": (NV + b"SUB " + b"a" * 4095 + b" 1\r\nPING\r\n", None),
    "no crlf ever": (NV + b"SUB " + b"a" * 5000, None),
    "closed mid-payload": (NV + b"SUB a 1\r\nPUB a 10\r\nabc", None),
}


AUTH_CASES: dict[str, bytes] = {
    "ping first": b"PING\r\n",
    "info first": b'INFO {}\r\nCONNECT {"verbose":false,"user":"alice","pass":"s3cret"}\r\nPING\r\n',
    "+OK first": b"+OK\r\n",
    "garbage first": b"XYZ\r\n",
    "bad password": b'CONNECT {"user":"alice","pass":"no"}\r\n',
    "keys in any case": b'CONNECT {"verbose":false,"USER":"alice","Pass":"s3cret"}\r\nPING\r\n',
    "second connect with a bad password": b'CONNECT {"verbose":false,"user":"alice","pass":"s3cret"}\r\n'
                                          b'CONNECT {"pass":"no"}\r\nPING\r\n',
    "second connect without credentials": b'CONNECT {"verbose":false,"user":"alice","pass":"s3cret"}\r\n'
                                          b'CONNECT {"verbose":false}\r\nPING\r\n',
    "null password": b'CONNECT {"verbose":false,"user":"alice","pass":null}\r\nPING\r\n',
}


def expected(ref: bytes, kept: str | None) -> bytes:
    return ref + b"-ERR 'Unknown Protocol Operation'\r\n" if kept == SAYS_ERR else ref


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    with nats_pair(tmp_path_factory.mktemp("nats_diff")) as (p, _, _):
        yield p


@pytest.mark.parametrize("name", list(CASES))
def test_replies_match_nats_server(pair: Pair, name: str) -> None:
    script, kept = CASES[name]
    (ref, ref_closed), (us, us_closed) = pair.run(script)
    assert (us, us_closed) == (expected(ref, kept), ref_closed)


@pytest.fixture(scope="module")
def auth_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    with nats_pair(tmp_path_factory.mktemp("nats_diff_auth"), "alice", "s3cret") as (p, _, _):
        yield p


@pytest.mark.parametrize("name", list(AUTH_CASES))
def test_authentication_matches_nats_server(auth_pair: Pair, name: str) -> None:
    ref, us = auth_pair.run(AUTH_CASES[name])
    assert us == ref


SPLIT = ["verbose", "hpub 0 with headers", "keys in any case", "tabs and case", "unsub max", "leading blank",
         "no crlf after payload", "ping and pong prefixes"]


@pytest.mark.parametrize("name", SPLIT)
def test_a_script_read_byte_by_byte_gets_the_same_replies(pair: Pair, name: str) -> None:
    """Every offset of the script a read boundary, on both servers: nothing depends on
    TCP segmentation."""
    script, kept = CASES[name]
    cuts = list(range(1, len(script)))
    (ref, ref_closed), (us, us_closed) = pair.run(script, cuts)
    assert (ref, ref_closed) == pair.run(script)[0]
    assert (us, us_closed) == (expected(ref, kept), ref_closed)


def test_info_claims_the_version_raims_follows(pair: Pair) -> None:
    """INFO's `version` is nats-server's, 2.9.10, the release this bridge is tested
    against (it claimed 2.10.0, as Redis HELLO claims 7.0.15: clients such as nats.js
    turn features on by the server's version)."""
    (ref, _), (us, _) = pair.run(b"PING\r\n")
    assert b'"version": "2.9.10"' in ref and us == ref


def test_a_payload_of_exactly_max_payload_is_delivered(pair: Pair) -> None:
    script = NV + b"SUB a 1\r\nPUB a %d\r\n" % MP + b"x" * MP + b"\r\nPING\r\n"
    (ref, ref_closed), (us, us_closed) = pair.run(script)
    assert len(ref) > MP and (us, us_closed) == (ref, ref_closed)


def test_kept_the_503_carries_the_subject(pair: Pair) -> None:
    """nats-server 2.9.10's no-responders status has no header; raims sends the
    `Nats-Subject` of later releases (nats_session.py), which clients ignore."""
    script = b'CONNECT {"verbose":false,"headers":true,"no_responders":true}\r\nSUB _INBOX.x 1\r\n' \
             b"PUB nobody _INBOX.x 1\r\nx\r\nPING\r\n"
    (ref, _), (us, _) = pair.run(script)
    assert ref.endswith(b"HMSG _INBOX.x 1 16 16\r\nNATS/1.0 503\r\n\r\n\r\nPONG\r\n")
    assert us.endswith(b"HMSG _INBOX.x 1 38 38\r\nNATS/1.0 503\r\nNats-Subject: nobody\r\n\r\n\r\nPONG\r\n")


def test_kept_a_msg_line_carries_the_size_as_a_number(pair: Pair) -> None:
    """nats-server copies the PUB's size digits into MSG (`000000001`); raims writes the
    number, the size having crossed the network as one."""
    script = NV + b"SUB a 1\r\nPUB a 000000001\r\nx\r\nPING\r\n"
    (ref, _), (us, _) = pair.run(script)
    assert ref.endswith(b"MSG a 1 000000001\r\nx\r\nPONG\r\n") and us.endswith(b"MSG a 1 1\r\nx\r\nPONG\r\n")


def test_kept_vt_and_ff_separate_arguments(pair: Pair) -> None:
    """nats-server splits arguments at space, tab and CR only; raims at any ASCII blank
    (nats_proto.py), so a subject never holds VT or FF."""
    script = NV + b"SUB a\x0bb 1\r\nPUB a\x0bb 1\r\nx\r\nSUB c 2\r\nPUB c\x0cr 1\r\ny\r\nPING\r\n"
    (ref, _), (us, _) = pair.run(script)
    assert ref.endswith(b"\r\nMSG a\x0bb 1 1\r\nx\r\nPONG\r\n")
    assert us.endswith(b"\r\nMSG a 1 b 1\r\nx\r\nMSG c 2 r 1\r\ny\r\nPONG\r\n")  # queue b; replies b, r


def test_kept_a_ping_line_is_held_to_the_control_line_limit(pair: Pair) -> None:
    """nats-server skips whatever follows PING up to the newline, however long; raims
    holds every line to max_control_line (nats_proto.py), so 5,000 bytes after PING close."""
    script = NV + b"PING" + b"X" * 5000 + b"\r\nPING\r\n"
    (ref, ref_closed), (us, us_closed) = pair.run(script)
    assert ref.endswith(b"PONG\r\nPONG\r\n") and not ref_closed
    assert us.endswith(b"-ERR 'maximum control line exceeded'\r\n") and us_closed


def test_a_client_that_never_reads_its_pongs_is_held_back_not_cut(pair: Pair) -> None:
    """PINGs written without reading: raims stops reading the client (flow.py) once its
    PONGs are queued past the high-water mark, so the writer blocks, nothing is cut, and
    every PING is answered when it reads (nats-server reads on and resets the client)."""
    chunk = memoryview(b"PING\r\n" * 20000)
    sent = lines = 0
    with socket.create_connection(("127.0.0.1", pair.raims_port), timeout=WAIT_S) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
        s.settimeout(0.3)
        held = False
        for _ in range(2000):  # at most 240 MB
            try:
                sent += s.send(chunk[sent % len(chunk):])
            except TimeoutError:
                held = True
                break
        s.settimeout(WAIT_S)
        while lines < 1 + sent // 6:  # the INFO line, then a PONG per complete PING
            data = s.recv(1 << 20)
            assert data, f"closed after {lines} lines"
            lines += data.count(b"\n")
    assert held and lines == 1 + sent // 6


def test_a_client_that_does_not_connect_in_time_is_told_and_closed(auth_pair: Pair, pair: Pair) -> None:
    """nats-server's auth timer: with credentials required, a client that has not sent
    its CONNECT (none, or a line that never ends) AUTH_TIMEOUT_S after connecting gets
    `-ERR 'Authentication Timeout'` and is closed; without credentials a silent client
    stays. All eight exchanges at once: one timeout's wait in all."""
    quiet = AUTH_TIMEOUT_S + 1.0
    runs = {(kind, side, name): (port, script)
            for kind, p in (("auth", auth_pair), ("open", pair))
            for side, port in (("ref", p.ref_port), ("raims", p.raims_port))
            for name, script in (("silent", b""), ("unended", b'CONNECT {"user":"alice"'))}
    with ThreadPoolExecutor(len(runs)) as pool:
        futures = {key: pool.submit(exchange, port, script, quiet=quiet) for key, (port, script) in runs.items()}
        got = {key: (normalize(f.result()[0]).split(b"\r\n", 1)[1], f.result()[1]) for key, f in futures.items()}
    for name in ("silent", "unended"):
        assert got["auth", "raims", name] == got["auth", "ref", name] == (b"-ERR 'Authentication Timeout'\r\n", True)
        assert got["open", "raims", name] == got["open", "ref", name] == (b"", False)
