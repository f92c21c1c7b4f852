"""Differential testing of the Redis pub/sub protocol: redis-server 7.0.15 and one raims
node's Redis transport side by side, the same raw bytes to both (wire_diff.exchange),
replies and closes compared byte for byte (kv_diff.py compares the data commands, a
command at a time; nats_diff.py is the NATS counterpart).

A script ends with QUIT, so the reply is complete when the server closes; one that
cannot reach it (a protocol error, a request left incomplete) ends on a quiet time.
`normalize` masks what the two servers need not share: client ids (HELLO's `id`,
CLIENT INFO / LIST's id, addresses, fd, ages).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path

from raims_node.kv.cli import main as ms_kv
from tests.integration.kv_diff import RedisServer
from tests.integration.test_bridges_net import BridgeNet, start_network
from tests.integration.wire_diff import Pair

_MASKS = (
    (re.compile(rb"(\$2\r\nid\r\n:)\d+"), rb"\1?"),  # HELLO's map
    (re.compile(rb"\b(id|fd|age|idle|tot-mem|qbuf|qbuf-free|argv-mem|obl|oll|omem|rbs|rbp)=\d+"), rb"\1=?"),
    (re.compile(rb"\b(addr|laddr)=\S+"), rb"\1=?"),
)


# (head, name, tail) of the frames whose order redis-server leaves to a hash table
_UNSUB = re.compile(rb"([*>]3\r\n\$1[12]\r\ns?unsubscribe\r\n)\$\d+\r\n([^\r\n]*)\r\n(:\d+\r\n)")
_PMESSAGE = re.compile(rb"([*>]4\r\n\$8\r\npmessage\r\n)\$\d+\r\n([^\r\n]*)\r\n(\$\d+\r\n[^\r\n]*\r\n\$\d+\r\n[^\r\n]*\r\n)")


def normalize(reply: bytes) -> bytes:
    """The reply with client ids, addresses and ages masked (and the length of a CLIENT
    INFO / LIST bulk, which they change), and the names sorted in each run of (S)UNSUBSCRIBE
    confirmations (an unsubscribe of all) and of pmessages of one message (one per
    matching pattern): redis-server 7.0 sends them in its hash tables' order."""
    reply = re.sub(rb"[$=]\d+\r\n(?:txt:)?id=", b"$?\r\nid=", reply)
    for rx, sub in _MASKS:
        reply = rx.sub(sub, reply)
    return _sort_runs(_sort_runs(reply, _UNSUB, False), _PMESSAGE, True)


def _sort_runs(reply: bytes, frame: re.Pattern[bytes], same_tail: bool) -> bytes:
    """Each run of adjacent `frame`s with one head (and tail, if `same_tail`) with its
    names sorted, the tails left in place."""
    out, pos = [], 0
    matches = list(frame.finditer(reply))
    i = 0
    while i < len(matches):
        first = matches[i]
        run = [first]
        while i + len(run) < len(matches):
            m = matches[i + len(run)]
            if m.start() != run[-1].end() or m.group(1) != first.group(1) or (same_tail and m.group(3) != first.group(3)):
                break
            run.append(m)
        names = sorted(m.group(2) for m in run)
        out.append(reply[pos:first.start()])
        out += [b"%s$%d\r\n%s\r\n%s" % (m.group(1), len(n), n, m.group(3)) for m, n in zip(run, names, strict=True)]
        pos = run[-1].end()
        i += len(run)
    out.append(reply[pos:])
    return b"".join(out)


@contextlib.contextmanager
def redis_pair(workdir: Path, kv: bool = False) -> Iterator[tuple[Pair, RedisServer, BridgeNet]]:
    """redis-server and a one-node network (with a key-value map if `kv`)."""
    ref = RedisServer(workdir)
    try:
        params = None
        if kv:
            assert ms_kv(["init", str(workdir / "map")]) == 0
            params = {"map_file": str(workdir / "map")}
        net = start_network(workdir, "node A\n", params=params)
        try:
            yield Pair(ref.port, net.port("A", "redis"), normalize), ref, net
        finally:
            net.stop()
    finally:
        ref.stop()
