"""WAIT of the node's map against Debian's redis-server 7.0.15, which has no replicas
either: numreplicas > 0 blocks the client until its timeout (0: until CLIENT UNBLOCK)
and answers 0, the blocked client counted in INFO clients and its next commands held
(kv_diff.py; raw replies compared byte for byte in RESP2 and RESP3)."""

from __future__ import annotations

import time

from tests.integration.kv_diff import Pair, RawClient


def _id(c: RawClient) -> bytes:
    return c.call([b"CLIENT", b"ID"])[1:-2]


def test_wait_blocks_until_its_timeout(pair: Pair, servers: tuple[int, int]) -> None:
    """WAIT 1 300 answers 0 after about 300 ms on both (not at once); the PING sent
    behind it answers after it."""
    took = []
    for port in servers:
        c = RawClient(port, pair.ref.resp)
        try:
            t0 = time.monotonic()
            c.send([b"WAIT", b"1", b"300"])
            c.send([b"PING"])
            assert c.read() == b":0\r\n"
            took.append(time.monotonic() - t0)
            assert c.read() == b"+PONG\r\n"
        finally:
            c.close()
    assert all(0.25 <= t < 3.0 for t in took), took


def test_wait_without_timeout_until_client_unblock(pair: Pair, servers: tuple[int, int]) -> None:
    """WAIT 1 0 waits for ever: one blocked client in INFO; CLIENT UNBLOCK answers it 0
    (TIMEOUT) or -UNBLOCKED (ERROR), and 1 to the unblocker."""
    waiters = [RawClient(port, pair.ref.resp) for port in servers]
    try:
        ids = [_id(w) for w in waiters]
        for mode, want in ((b"TIMEOUT", b":0\r\n"), (b"ERROR", b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n")):
            for w in waiters:
                w.send([b"WAIT", b"5", b"0"])
            pair.wait_blocked(1)
            for c, i in ((pair.ref, ids[0]), (pair.us, ids[1])):
                assert c.call([b"CLIENT", b"UNBLOCK", i, mode]) == b":1\r\n"
            assert [w.read() for w in waiters] == [want, want]
        pair.wait_blocked(0)
    finally:
        for w in waiters:
            w.close()


def test_wait_timeout_at_the_edges(pair: Pair, servers: tuple[int, int]) -> None:
    """The timeout's errors at int64's edges and beyond (numreplicas' first), and a
    timeout whose deadline overflows (now + 2^63-1 ms, + 9e18 ms): redis-server 7.0.15
    keeps the wrapped deadline as unsigned in its timeout table, so the client waits for
    ever (measured: still blocked after 2 s; the same here), until CLIENT UNBLOCK."""
    bad = ("0 -1", "0 9223372036854775808", "0 -9223372036854775808", "0 -9223372036854775809",
           "0 18446744073709551615", "0 1.5", "0 1e3", "abc 0", "9223372036854775808 0", "abc -1", "1 -1",
           "-1 9223372036854775807", "0 9223372036854775807")
    pair.check([[b"WAIT", *x.encode().split()] for x in bad])
    pair.check([[b"MULTI"], [b"WAIT", b"1", b"9223372036854775807"], [b"EXEC"]])
    waiters = [RawClient(port, pair.ref.resp) for port in servers]
    try:
        ids = [_id(w) for w in waiters]
        for timeout in (b"9223372036854775807", b"9000000000000000000"):
            for w in waiters:
                w.send([b"WAIT", b"1", timeout])
            pair.wait_blocked(1)
            time.sleep(0.3)  # redis-server's timeout check runs in every event loop turn
            pair.wait_blocked(1)
            for c, i in ((pair.ref, ids[0]), (pair.us, ids[1])):
                assert c.call([b"CLIENT", b"UNBLOCK", i]) == b":1\r\n"
            assert [w.read() for w in waiters] == [b":0\r\n", b":0\r\n"]
    finally:
        for w in waiters:
            w.close()
