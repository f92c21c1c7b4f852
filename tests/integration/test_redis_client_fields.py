"""CLIENT LIST / INFO's buffer and memory fields (qbuf, qbuf-free, argv-mem, multi-mem,
rbs, rbp, obl, oll, omem, tot-mem, events, cmd) against Debian's redis-server 7.0.15:
the same clients on both (idle, subscribed, blocked, never heard from, in MULTI with
WATCHed keys, the caller), their lines compared with only ids, addresses, fds, ages,
idle times and rbp masked (redis-server's rbp is the largest reply pending since its
cron's last visit that reset it: timing, not modelled), and raims's 7.2 fields watch /
lib-name / lib-ver dropped (kept, DESIGN-NOTES). The model is raims_node/bridges/redis_client_mem.py."""

from __future__ import annotations

import re
import time

from tests.integration.kv_diff import RawClient

_MASK = re.compile(rb"\b(id|addr|laddr|fd|age|idle|rbp)=\S*")
_OURS = re.compile(rb" watch=\d+| lib-name=\S*| lib-ver=\S*")


def _lines(reply: bytes, skip: set[bytes]) -> list[bytes]:
    body = reply.split(b"\r\n", 1)[1].removeprefix(b"txt:")
    out = []
    for line in body.rstrip(b"\r\n").split(b"\n"):
        if line.split(b" ", 1)[0] not in skip:
            out.append(_MASK.sub(rb"\1=?", _OURS.sub(b"", line)))
    return sorted(out)  # redis-server's cron rotates its client list


def _clients(port: int) -> dict[str, RawClient]:
    c = {name: RawClient(port, 3 if name in ("sub", "caller3") else 2)
         for name in ("idle", "sub", "blocked", "fresh", "multi", "caller", "caller3", "late")}
    c["idle"].call([b"PING"])
    c["sub"].call([b"SUBSCRIBE", b"a", b"b", b"c"])
    c["sub"].call([b"PSUBSCRIBE", b"p*"])
    c["blocked"].send([b"BLPOP", b"nokey", b"0"])
    c["multi"].call([b"WATCH", b"w1", b"w2"])
    for cmd in ([b"MULTI"], [b"SET", b"k", b"v"], [b"GET", b"k"], [b"INCR", b"n"]):
        c["multi"].call(cmd)
    for name in ("caller", "caller3", "late"):
        c[name].call([b"PING"])
    return c


def test_client_fields_as_redis_server(servers: tuple[int, int]) -> None:
    """Half a second in (query buffers in use, reply buffers shrunk to 1 KB), then 3.6 s
    in (query buffers of the clients idle over 2 s freed): every field the same."""
    sides = [_clients(port) for port in servers]
    try:
        ids = [{n: b"id=" + c.call([b"CLIENT", b"ID"])[1:-2] for n, c in cs.items() if n not in ("blocked", "fresh")}
               for cs in sides]
        t0 = time.monotonic()
        time.sleep(0.5)  # redis-server's cron shrinks the reply buffers within 0.2 s
        warm = [_lines(cs["caller"].call([b"CLIENT", b"LIST"]), set()) for cs in sides]
        assert warm[1] == warm[0]
        mine = [_lines(cs["caller3"].call([b"CLIENT", b"INFO"]), set()) for cs in sides]
        assert mine[1] == mine[0]
        assert b"qbuf=26 qbuf-free=20448 argv-mem=10" in mine[0][0]
        time.sleep(max(0.0, t0 + 3.6 - time.monotonic()))  # idle over 2 s: query buffers freed
        # "caller"'s 1.5 KB reply filled its 1 KB buffer, which redis-server then grew
        cold = [_lines(cs["late"].call([b"CLIENT", b"LIST"]), {i["caller"]})
                for cs, i in zip(sides, ids, strict=True)]
        assert cold[1] == cold[0]
        assert sum(b"qbuf-free=0 " in line for line in cold[0]) == 5  # fresh keeps its 4
    finally:
        for cs in sides:
            for c in cs.values():
                c.close()
