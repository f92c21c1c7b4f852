"""Stream commands (kv/streams*.py) against Debian's redis-server: the same commands to
both, replies compared byte for byte in RESP2 and RESP3 (kv_diff.py). Idle times and
delivery times depend on the clock: XPENDING's and XINFO's replies are compared with
those numbers masked (their shapes, names, counts and ids exactly); `*` ids are left
out of the compared tables."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raims_node.kv.cli import main as ms_kv
from tests.integration.kv_diff import Pair, RawClient, cmds, parse
from tests.integration.test_bridges_net import start_network

_CLOCKED = (b"xpending", b"xinfo")


def _is_id(v: Any) -> bool:
    return isinstance(v, bytes) and b"-" in v and v.replace(b"-", b"").isdigit()


def _is_int(v: Any) -> bool:
    return isinstance(v, tuple) and v[0] == b":"


def mask(v: Any) -> Any:
    """A parsed reply with its clock readings replaced: the values of `idle` and
    `seen-time`, the time of XPENDING rows [id, consumer, idle, count] and of XINFO FULL's
    pending rows [id, consumer, time, count] / [id, time, count]."""
    if not (isinstance(v, tuple) and isinstance(v[1], list)):
        return v
    items = [mask(x) for x in v[1]]
    for i in range(len(items) - 1):
        if items[i] in (b"idle", b"seen-time"):
            items[i + 1] = "T"
    if len(items) == 4 and _is_id(items[0]) and isinstance(items[1], bytes) and _is_int(items[2]):
        items[2] = "T"
    if len(items) == 3 and _is_id(items[0]) and _is_int(items[1]) and _is_int(items[2]):
        items[1] = "T"
    return (v[0], items)


def check(pair: Pair, commands: list[list[bytes]]) -> None:
    for cmd in commands:
        ref, us = pair.run(cmd)
        if cmd[0].lower() in _CLOCKED and ref[:1] != b"-":
            ref, us = mask(parse(ref)), mask(parse(us))
        assert us == ref, f"{b' '.join(cmd)!r}: redis-server {ref!r}, raims {us!r}"


BASICS = """
XADD s 1-1 a 1
XADD s 1-1 a 1
XADD s 1-0 a 1
XADD s 1-2 a 1 b
XADD s 0-0 a 1
XADD s 0-1 a 1
XADD s 2 f v
XADD s 2-* f v
XADD s 5-* f v
XADD s 01-5 a b
XADD s +8 a b
XADD s 9-01 a b
XADD s -5 a b
XADD s 10-18446744073709551615 a b
XADD s 10-* a b
XADD s 18446744073709551615-18446744073709551615 a b
XADD s 18446744073709551615-* a b
XADD s * a b
XADD s 18446744073709551616 a b
XADD s abc a b
XADD s
XADD s 100-1
XADD s 100-1 a
XLEN s
XLEN nosuch
SET str x
XADD str 1-1 a b
XLEN str
XRANGE str - +
XADD new NOMKSTREAM 1-1 a b
EXISTS new
XADD new NOMKSTREAM MAXLEN 5 1-1 a b
XADD t MAXLEN 2 1-1 a 1
XADD t MAXLEN 2 2-1 a 2
XADD t MAXLEN 2 3-1 a 3
XADD t MAXLEN = 2 4-1 a 4
XRANGE t - +
XADD t MAXLEN -1 5-1 a 5
XADD t MAXLEN abc 5-1 a 5
XADD t MAXLEN 1 MINID 0 5-1 a 5
XADD t MINID 0 MAXLEN 1 5-1 a 5
XADD t MINID 4-1 5-1 a 5
XRANGE t - +
XADD t MINID = 5-2 6-1 a 6
XADD t MINID - 7-1 a 6
XADD t MINID abc 7-1 a 6
XADD t LIMIT 10 7-1 a 6
XADD t MAXLEN 1 LIMIT 10 7-1 a 6
XADD t MAXLEN ~ 1 LIMIT -1 7-1 a 6
XADD t MAXLEN ~ 1 LIMIT x 7-1 a 6
XADD t LIMIT 0 7-1 a 6
XADD t MAXLEN 5
XADD t MAXLEN
XADD t NOMKSTREAM
XADD t nomkstream 8-1 a b
XADD t MAXLEN ~ 0 9-1 a b
XLEN t
XINFO STREAM t
TYPE t
OBJECT ENCODING t
XADD e MAXLEN 0 1-1 a b
XLEN e
XINFO STREAM e
XADD s2 1-1 a 1 b 2 c 3
XADD s2 1-2 a 1 b 2
XADD s2 2-1 x y
XADD s2 3-0 a 1 b 2 c 3
XRANGE s2 - +
XRANGE s2 - + COUNT 2
XRANGE s2 - + COUNT 0
XRANGE s2 - + COUNT -1
XRANGE s2 - + COUNT x
XRANGE s2 - + FOO 1
XRANGE s2 - + COUNT
XRANGE s2 1 1
XRANGE s2 1-2 2
XRANGE s2 (1-1 +
XRANGE s2 - (3-0
XRANGE s2 (1 (3
XRANGE s2 ( +
XRANGE s2 (- +
XRANGE s2 - (+
XRANGE s2 (18446744073709551615-18446744073709551615 +
XRANGE s2 - (0-0
XRANGE s2 + -
XRANGE s2 3 1
XRANGE s2 abc +
XRANGE s2 -
XREVRANGE s2 + -
XREVRANGE s2 + - COUNT 1
XREVRANGE s2 (3-0 -
XREVRANGE s2 + (1-1
XREVRANGE s2 - +
XREVRANGE s2 2 1
XREVRANGE nosuch + -
XREVRANGE str + -
XRANGE nosuch - +
"""


DEL_TRIM_SETID = """
SET str x
XRANGE nosuch - + COUNT 0
XRANGE str - + COUNT 0
XADD s 1-1 a 1
XADD s 2-1 a 2
XADD s 3-1 a 3
XADD s 4-1 a 4
XDEL s 2-1
XDEL s 2-1 3-1 9-9
XDEL s abc
XDEL s 1-1 abc
XDEL s -
XDEL s +
XDEL s 5
XDEL nosuch 1-1
XDEL nosuch abc
XDEL str 1-1
XDEL s
XINFO STREAM s
XDEL s 1-1
XINFO STREAM s
XDEL s 4-1
XINFO STREAM s
XADD s 3-1 a 1
XADD s 5-1 a 1
XINFO STREAM s
XTRIM s MAXLEN 0
XINFO STREAM s
XADD t 1-1 a 1
XADD t 2-1 a 2
XADD t 3-1 a 3
XADD t 4-1 a 4
XTRIM t MAXLEN 3
XTRIM t MAXLEN = 2
XTRIM t MAXLEN ~ 1
XTRIM t MAXLEN ~ 1 LIMIT 0
XTRIM t MINID 4
XTRIM t MINID ~ 5
XTRIM t MINID = 5
XTRIM t MAXLEN 1 foo
XTRIM t MAXLEN
XTRIM t LIMIT 5
XTRIM t LIMIT 5 MAXLEN 1
XTRIM t MAXLEN 1 LIMIT 5
XTRIM t MAXLEN 1 MINID 1
XTRIM t MINID +
XTRIM t MINID -1
XTRIM t FOO 1
XTRIM t NOMKSTREAM MAXLEN 1
XTRIM nosuch MAXLEN 1
XTRIM nosuch MAXLEN x
XTRIM str MAXLEN 1
XINFO STREAM t
XSETID t 1-1
XSETID t 9-9
XINFO STREAM t
XSETID t 9-9 ENTRIESADDED 0
XSETID t 9-9 ENTRIESADDED -1
XSETID t 9-9 ENTRIESADDED x
XSETID t 9-9 ENTRIESADDED 10 MAXDELETEDID 3-0
XINFO STREAM t
XSETID t 9-9 MAXDELETEDID 10-0
XSETID t 8-0
XSETID t 9-9 MAXDELETEDID 2-0
XSETID t 9-9 FOO
XSETID t 9-9 ENTRIESADDED
XSETID t +
XSETID t abc
XSETID nosuch 1-1
XSETID nosuch 1-1 FOO 1
XSETID str 1-1
XSETID t
XADD t 9-9 a b
XADD t 9-10 a b
XSETID e 5-0
XADD e MAXLEN 0 1-1 a b
XSETID e 0-5
XSETID e 0-0
XINFO STREAM e
XSETID e 0-0 MAXDELETEDID 0-0
XSETID e 7-7 ENTRIESADDED 0
XINFO STREAM e
"""


XREAD = """
SET str x
XDEL str abc
XREAD STREAMS
XREAD STREAMS s
XREAD STREAMS s 0
XADD s 1-1 a 1
XADD s 2-1 a 2
XADD t 1-5 b 1
XREAD STREAMS s 0
XREAD STREAMS s t 0 0
XREAD COUNT 1 STREAMS s t 0 0
XREAD COUNT 1 STREAMS s t 1-1 1-5
XREAD STREAMS s t $ $
XREAD STREAMS s nosuch 0 0
XREAD STREAMS nosuch 0
XREAD STREAMS str 0
XREAD STREAMS s str 0 0
XREAD STREAMS s >
XREAD STREAMS s abc
XREAD STREAMS s +
XREAD STREAMS s -
XREAD STREAMS s 1
XREAD COUNT x STREAMS s 0
XREAD COUNT -5 STREAMS s 0
XREAD COUNT 0 STREAMS s 0
XREAD BLOCK x STREAMS s 0
XREAD BLOCK -1 STREAMS s 0
XREAD BLOCK 10 STREAMS s 0
XREAD BLOCK 1.5 STREAMS s 0
XREAD GROUP g c STREAMS s 0
XREAD NOACK STREAMS s 0
XREAD FOO STREAMS s 0
XREAD COUNT
XREAD COUNT 1 STREAMS s 0 t
XREAD STREAMS s 18446744073709551615-18446744073709551615
XREAD BLOCK 10 STREAMS s $
XREAD BLOCK 10 STREAMS nosuch $
XREAD STREAMS s t s 0 0 0
XREADGROUP STREAMS s >
XREADGROUP GROUP g c STREAMS s >
XREADGROUP GROUP g c STREAMS s
XREADGROUP GROUP g STREAMS s >
XREADGROUP GROUP g c COUNT 1 STREAMS s >
XREADGROUP NOACK STREAMS s >
XREADGROUP COUNT 1 STREAMS s >
XREADGROUP GROUP g c STREAMS str >
XREADGROUP GROUP g c STREAMS nosuch >
"""


GROUPS = """
SET str x
XGROUP CREATE s g $
XGROUP CREATE s g $ MKSTREAM ENTRIESREAD
XGROUP CREATE s g $ MKSTREAM FOO
XGROUP FOO s
XGROUP CREATE s
XGROUP SETID s g 0 ENTRIESREAD
XGROUP SETID s g 0 ENTRIESREAD 5 x
XGROUP SETID s nog 0
XGROUP CREATE s g2 $ MKSTREAM ENTRIESREAD -2
XGROUP CREATE s g2 $ MKSTREAM ENTRIESREAD x
XGROUP CREATECONSUMER s g c
XGROUP DELCONSUMER s g c
XGROUP DESTROY s g
XGROUP CREATE str g $
XGROUP CREATE str g $ MKSTREAM
XGROUP CREATE s g $ MKSTREAM
XGROUP CREATE s g $ MKSTREAM
XINFO STREAM s
XINFO GROUPS s
XADD s 1-1 a 1
XADD s 2-1 b 2
XGROUP CREATE s g1 0
XGROUP CREATE s g2 0 ENTRIESREAD 1
XGROUP CREATE s g3 +
XGROUP CREATE s g3 -
XGROUP CREATE s g3 1-1 ENTRIESREAD 1 ENTRIESREAD 2 MKSTREAM MKSTREAM
XGROUP CREATE s g4 1 ENTRIESREAD -1 MKSTREAM
XGROUP CREATE s g5 abc
XINFO GROUPS s
XGROUP SETID s g 0 FOO 5
XGROUP SETID s g 0 ENTRIESREAD x
XGROUP SETID s g 0 ENTRIESREAD -3
XGROUP SETID s nog 0
XGROUP SETID s g +
XGROUP SETID s g - ENTRIESREAD 3
XGROUP SETID s g abc
XGROUP SETID s g $
XINFO GROUPS s
XGROUP CREATECONSUMER s g c
XGROUP CREATECONSUMER s g c
XGROUP CREATECONSUMER s nog c
XGROUP CREATECONSUMER nosuch g c
XGROUP CREATECONSUMER s g
XGROUP DELCONSUMER s g nobody
XGROUP DELCONSUMER s g c
XGROUP DELCONSUMER s nog c
XGROUP DESTROY s nog
XGROUP DESTROY nokey g
XGROUP DESTROY s g4
XGROUP DESTROY s g4
XGROUP DESTROY str g
XGROUP
XINFO GROUPS s
XGROUP SETID s g1 0
XREADGROUP GROUP g1 c1 STREAMS s >
XREADGROUP GROUP g1 c1 STREAMS s >
XREADGROUP GROUP g1 c1 STREAMS s 0
XREADGROUP GROUP g1 c1 STREAMS s $
XREADGROUP GROUP g1 c1 STREAMS s 1-1
XREADGROUP GROUP g1 c1 STREAMS s abc
XREADGROUP GROUP g1 c2 STREAMS s 0
XREADGROUP GROUP nog c STREAMS s >
XREADGROUP GROUP g1 c2 COUNT 1 STREAMS s >
XADD s 3-1 c 3
XADD s 4-1 d 4
XREADGROUP GROUP g1 c2 COUNT 1 STREAMS s >
XREADGROUP GROUP g1 c2 NOACK STREAMS s >
XPENDING s g1
XPENDING s g1 - + 10
XPENDING s g1 - + 10 c1
XPENDING s g1 - + 10 c2
XPENDING s g1 - + 10 nobody
XPENDING s g1 (1-1 + 10
XPENDING s g1 - (2-1 10
XPENDING s g1 - + 1
XPENDING s g1 - + 0
XPENDING s g1 - + -1
XPENDING s g1 - + x
XPENDING s g1 x + 1
XPENDING s g1 - x 1
XPENDING s g1 ( + 1
XPENDING s g1 (18446744073709551615-18446744073709551615 + 1
XPENDING s g1 - (0-0 1
XPENDING s g1 - +
XPENDING s g1 -
XPENDING s g1 IDLE 0 - + 10
XPENDING s g1 IDLE x - + 10
XPENDING s g1 IDLE 0 - +
XPENDING s g1 IDLE 0 - + 10 c1 extra
XPENDING s g1 - + 10 c1 extra
XPENDING s nog
XPENDING nosuch g
XPENDING str g
XPENDING s g2
XPENDING s
XACK s g1 1-1
XACK s g1 1-1 2-1 9-9
XACK s g1 abc
XACK s nog abc
XACK nosuch g abc
XACK str g 1-1
XACK s g1
XPENDING s g1
XDEL s 3-1
XINFO GROUPS s
XINFO CONSUMERS s nog
XINFO CONSUMERS nosuch g
XINFO GROUPS str
XINFO GROUPS s x
XINFO STREAM s count 2
XINFO STREAM s FULL COUNT
XINFO STREAM s FULL foo
XINFO STREAM nokey FULL foo
XINFO STREAM nokey
XINFO FOO s
XINFO
"""


CLAIMS = """
XADD s 1-1 a 1
XADD s 2-1 b 2
XADD s 3-1 c 3
XADD s 4-1 d 4
XGROUP CREATE s g 0
XREADGROUP GROUP g c1 COUNT 2 STREAMS s >
XREADGROUP GROUP g c2 STREAMS s >
XCLAIM s g c3 0 1-1
XCLAIM s g c3 0 1-1 JUSTID
XCLAIM s g c3 0 2-1 3-1 JUSTID
XCLAIM s g c3 0 9-9
XCLAIM s g c3 0 9-9 FORCE
XCLAIM s g c3 999999 1-1
XCLAIM s g c3 x 1-1
XCLAIM s g c3 -5 1-1 JUSTID
XCLAIM s g c3 0 1-1 FOO
XCLAIM s g c3 0 1-1 IDLE x
XCLAIM s g c3 0 1-1 TIME x
XCLAIM s g c3 0 1-1 RETRYCOUNT x
XCLAIM s g c3 0 1-1 LASTID x
XCLAIM s g c3 0 1-1 IDLE
XCLAIM s g c3 0 1-1 RETRYCOUNT 7
XCLAIM s g c3 0 1-1 RETRYCOUNT 7 JUSTID
XCLAIM s g c3 0 1-1 IDLE 1000 JUSTID
XCLAIM s g c3 0 1-1 TIME 0 JUSTID
XCLAIM s g c3 0 1-1 TIME 999999999999999 JUSTID
XCLAIM s g c3 0 abc 1-1
XCLAIM s nog c3 0 1-1
XCLAIM nosuch g c3 0 1-1
XCLAIM s g c3 0 1-1 LASTID 100-0
XINFO GROUPS s
XADD s 5-1 e 5
XADD s 6-1 f 6
XCLAIM s g c4 0 5-1 FORCE
XCLAIM s g c4 0 6-1 FORCE JUSTID
XPENDING s g
XDEL s 2-1
XCLAIM s g c4 0 2-1
XPENDING s g
XAUTOCLAIM s g c5 0 0
XAUTOCLAIM s g c5 0 0 COUNT 1
XAUTOCLAIM s g c5 0 0 COUNT 2 JUSTID
XAUTOCLAIM s g c5 0 (3-1 JUSTID
XAUTOCLAIM s g c5 0 (18446744073709551615-18446744073709551615
XAUTOCLAIM s g c5 0 - COUNT 0
XAUTOCLAIM s g c5 0 - COUNT x
XAUTOCLAIM s g c5 0 - COUNT 1152921504606846975
XAUTOCLAIM s g c5 0 - COUNT 576460752303423487
XAUTOCLAIM s g c5 0 - FOO
XAUTOCLAIM s g c5 x -
XAUTOCLAIM s g c5 0 x
XAUTOCLAIM s nog c5 0 -
XAUTOCLAIM nosuch g c5 0 -
XAUTOCLAIM s g c5 999999 -
XDEL s 4-1 5-1
XAUTOCLAIM s g c6 0 - COUNT 1
XAUTOCLAIM s g c6 0 - COUNT 10
XPENDING s g
XINFO GROUPS s
XGROUP DELCONSUMER s g c5
XPENDING s g
XINFO GROUPS s
XREADGROUP GROUP g c1 STREAMS s 0
XREADGROUP GROUP g c3 STREAMS s 0
XREADGROUP GROUP g c3 COUNT 1 STREAMS s 0
XREADGROUP GROUP g c6 STREAMS s 0
XGROUP CREATE s h 0
XREADGROUP GROUP h x NOACK STREAMS s >
XINFO GROUPS s
XPENDING s h
XGROUP SETID s h 0
XREADGROUP GROUP h x COUNT 1 STREAMS s >
XREADGROUP GROUP h y STREAMS s >
XPENDING s h
XREADGROUP GROUP h y STREAMS s >
XREADGROUP GROUP h y BLOCK 10 STREAMS s >
XREADGROUP GROUP h y STREAMS s 0 s 0
XINFO GROUPS s
"""

ARITY_TYPES_LAG = """
SET str x
XADD
XADD s
XADD s 1-1
XADD s 1-1 a
XLEN
XLEN s t
XRANGE s -
XREVRANGE s +
XDEL s
XTRIM s MAXLEN
XSETID s
XREAD STREAMS
XREAD COUNT 1
XREADGROUP GROUP g c STREAMS
XREADGROUP GROUP g c STREAMS s
XACK s g
XPENDING s
XCLAIM s g c 0
XAUTOCLAIM s g c 0
XGROUP
XINFO
XGROUP HELP extra
XINFO HELP extra
XGROUP DESTROY s
XGROUP DELCONSUMER s g
XINFO CONSUMERS s
XINFO STREAM
XADD str 1-1 a b
XRANGE str - +
XREVRANGE str + -
XDEL str 1-1
XTRIM str MAXLEN 0
XSETID str 1-1
XREAD STREAMS str 0
XREADGROUP GROUP g c STREAMS str >
XACK str g 1-1
XPENDING str g
XPENDING str g - + 10
XCLAIM str g c 0 1-1
XAUTOCLAIM str g c 0 0
XGROUP CREATE str g $
XGROUP SETID str g $
XGROUP DESTROY str g
XGROUP CREATECONSUMER str g c
XGROUP DELCONSUMER str g c
XINFO STREAM str
XINFO GROUPS str
XINFO CONSUMERS str g
XADD s 1-1 a 1
XADD s 2-1 a 2
XADD s 3-1 a 3
XADD s 4-1 a 4
XADD s 5-1 a 5
XGROUP CREATE s g 0
XGROUP CREATE s h 2-1
XGROUP CREATE s i 3-1 ENTRIESREAD 3
XINFO GROUPS s
XDEL s 1-1
XINFO GROUPS s
XDEL s 3-1
XINFO GROUPS s
XREADGROUP GROUP g c COUNT 1 STREAMS s >
XINFO GROUPS s
XREADGROUP GROUP h c COUNT 1 STREAMS s >
XREADGROUP GROUP i c STREAMS s >
XINFO GROUPS s
XREADGROUP GROUP g c STREAMS s >
XINFO GROUPS s
XTRIM s MAXLEN 1
XINFO GROUPS s
XGROUP SETID s g 0
XINFO GROUPS s
XGROUP SETID s g 5-1
XINFO GROUPS s
XGROUP SETID s g 9-0
XINFO GROUPS s
XADD s 6-1 a 6
XINFO GROUPS s
XINFO STREAM s FULL
XINFO STREAM s FULL COUNT 0
XINFO STREAM s FULL COUNT 1
XINFO STREAM s FULL COUNT -5
XINFO STREAM s FULL COUNT x
XINFO STREAM s full count 1
XINFO STREAM s FULL COUNT 1 x
XADD t 1-1 a 1
XGROUP CREATE t g 0
XGROUP CREATE t h 0
XREADGROUP GROUP g c STREAMS s t > >
XREADGROUP GROUP h c STREAMS s t > >
XREADGROUP GROUP g c STREAMS s t 0 0
XREADGROUP GROUP g c COUNT 1 STREAMS s t 0 0
XREADGROUP GROUP g c STREAMS s t > 0
XREADGROUP GROUP g c STREAMS s s > >
XREAD STREAMS s t s 0 0 0
XINFO CONSUMERS t g
XACK t g 1-1 1-1
XSETID t 1-1 ENTRIESADDED 1
XSETID t 1-1 ENTRIESADDED 0
XSETID t 0-5 MAXDELETEDID 0-6
"""

TOMBSTONES = """
XADD s 1-0 a 1
XADD s 2-0 a 2
XADD s 3-0 a 3
XADD s 4-0 a 4
XADD s 5-0 a 5
XADD s 6-0 a 6
XGROUP CREATE s g 0
XGROUP CREATE s h 0 ENTRIESREAD 0
XGROUP CREATE s i 3-0
XGROUP CREATE s j 3-0 ENTRIESREAD 2
XDEL s 4-0
XINFO GROUPS s
XREADGROUP GROUP g c COUNT 2 STREAMS s >
XREADGROUP GROUP h c COUNT 2 STREAMS s >
XREADGROUP GROUP i c COUNT 1 STREAMS s >
XREADGROUP GROUP j c COUNT 1 STREAMS s >
XINFO GROUPS s
XREADGROUP GROUP g c STREAMS s >
XREADGROUP GROUP i c STREAMS s >
XINFO GROUPS s
XDEL s 1-0
XINFO GROUPS s
XGROUP SETID s g 0
XINFO GROUPS s
XDEL s 2-0 3-0 5-0 6-0
XINFO STREAM s
XINFO GROUPS s
XADD s 7-0 a 7
XINFO GROUPS s
XINFO STREAM s
XREADGROUP GROUP g c STREAMS s >
XINFO GROUPS s
XADD s NOMKSTREAM MAXLEN 1 8-0 a 8
XADD s NOMKSTREAM MINID 8-0 9-0 a 9
XINFO STREAM s
XSETID s 9-0 ENTRIESADDED 2
XSETID s 9-0 ENTRIESADDED 100
XINFO GROUPS s
XTRIM s MINID 10-0
XINFO STREAM s
XINFO GROUPS s
XSETID s 8-0
XSETID s 9-0 MAXDELETEDID 9-0
XINFO STREAM s
XGROUP CREATE s k 1-0
XINFO GROUPS s
XCLAIM s g c2 0 1-0 LASTID 50-0 JUSTID
XINFO GROUPS s
XPENDING s g
XAUTOCLAIM s g c3 0 0 COUNT 100
XPENDING s g
XINFO GROUPS s
XADD s 10-0 b 1
XADD s 11-0 b 2
XGROUP CREATE s m 10-0
XINFO GROUPS s
XGROUP CREATE s n 9-0
XINFO GROUPS s
XREADGROUP GROUP n c STREAMS s >
XINFO GROUPS s
"""


@pytest.mark.parametrize("block", [BASICS, DEL_TRIM_SETID, XREAD, GROUPS, CLAIMS, ARITY_TYPES_LAG, TOMBSTONES],
                         ids=["basics", "del-trim-setid", "xread", "groups", "claims", "arity-types-lag",
                              "tombstones"])
def test_block(pair: Pair, block: str) -> None:
    check(pair, cmds(block))


def _node_table() -> str:
    """Streams over many radix-tree nodes: entries of mixed sizes (the 100-entry and the
    4096-byte node limits), then approximate trims, deletions and XINFO's node counts."""
    import random

    rnd = random.Random(5)
    lines = []
    for i in range(1, 351):
        if i % 37 == 0:
            lines.append(f"XADD a {i}-{i % 3} other {'x' * rnd.choice([1, 60, 70, 200, 5000])} f2 {i}")
        else:
            lines.append(f"XADD a {i}-{i % 3} f {rnd.choice(['1', '-5', '300', '70000', 'abc', 'y' * 80, '9' * 25])}")
    lines += ["XINFO STREAM a", "XTRIM a MAXLEN ~ 300", "XINFO STREAM a", "XTRIM a MAXLEN ~ 150", "XINFO STREAM a",
              "XDEL a 200-2 201-0 250-1", "XTRIM a MINID ~ 260", "XINFO STREAM a", "XTRIM a MINID ~ 300 LIMIT 10",
              "XTRIM a MINID ~ 300 LIMIT 1000", "XINFO STREAM a", "XADD a MAXLEN ~ 10 9999-0 x y", "XLEN a",
              "XTRIM a MAXLEN 3", "XINFO STREAM a", "XINFO STREAM a FULL COUNT 2"]
    for i in range(1, 260):
        lines.append(f"XADD b {i * 1000}-{i} f {'z' * (i * 7 % 400)}")
    lines += ["XINFO STREAM b", "XTRIM b MAXLEN ~ 100", "XINFO STREAM b"]
    lines += [f"XDEL b {i * 1000}-{i}" for i in range(1, 120, 2)]
    lines += ["XINFO STREAM b", "XTRIM b MINID ~ 200000", "XINFO STREAM b", "XADD b MINID ~ 250000 260000-0 f v",
              "XINFO STREAM b", "XADD b MAXLEN ~ 5 LIMIT 100 260000-1 f v", "XINFO STREAM b"]
    return "\n".join(lines)


def test_radix_tree_nodes_and_approximate_trims(pair: Pair) -> None:
    check(pair, cmds(_node_table()))


KEYS = """
XADD s 1-1 a 1
XADD s 2-1 b 2
XGROUP CREATE s g 0
XREADGROUP GROUP g c COUNT 1 STREAMS s >
TYPE s
OBJECT ENCODING s
EXISTS s
SCAN 0 TYPE stream
SCAN 0 TYPE string
SET str x
SCAN 0 TYPE stream COUNT 100
COPY s s2
XINFO GROUPS s2
XADD s2 3-1 c 3
XLEN s
XLEN s2
XGROUP DESTROY s2 g
XINFO GROUPS s
COPY s s2
COPY s s2 REPLACE
XINFO STREAM s2
RENAME s2 s3
XINFO GROUPS s3
EXISTS s2 s3
MOVE s3 1
SELECT 1
XRANGE s3 - +
XINFO GROUPS s3
SELECT 0
EXPIRE s 100
TTL s
PERSIST s
DEL s s3
EXISTS s
XADD e MAXLEN 0 1-1 a b
TYPE e
EXISTS e
DEL e
XGROUP CREATE m g $ MKSTREAM
TYPE m
DBSIZE
LPUSH s x
XADD str 1-1 a b
GET m
LPUSH m x
SADD m x
HSET m a b
ZADD m 1 x
INCR m
APPEND m x
RPOPLPUSH m m
XADD m 1-1 a b
RENAME m m2
XLEN m2
"""


def test_key_commands_on_streams(pair: Pair) -> None:
    check(pair, cmds(KEYS))


def _both(pair: Pair, servers: tuple[int, int]) -> tuple[RawClient, RawClient]:
    return RawClient(servers[0], pair.ref.resp), RawClient(servers[1], pair.ref.resp)


def _send(clients: tuple[RawClient, RawClient], text: str) -> None:
    for c in clients:
        for cmd in cmds(text):
            c.send(cmd)


def _same(clients: tuple[RawClient, RawClient]) -> bytes:
    ref, us = clients[0].read(), clients[1].read()
    assert us == ref
    return ref


def test_blocked_xread_is_served_by_xadd_and_times_out(pair: Pair, servers: tuple[int, int]) -> None:
    """XREAD BLOCK parks the client; an XADD after its ids serves it with that one stream
    (COUNT kept), an XADD at or below them does not; `$` is the last id when it blocked;
    a timeout answers the null array."""
    blocked = _both(pair, servers)
    try:
        check(pair, cmds("XADD s 5-0 a 1"))
        _send(blocked, "XREAD COUNT 1 BLOCK 0 STREAMS s t $ 9-0")
        pair.wait_blocked(1)
        check(pair, cmds("XADD t 8-0 b 1\nXADD t 9-0 b 2\nXADD s 6-0 c 1"))
        assert b"6-0" in _same(blocked)
        pair.wait_blocked(0)
        _send(blocked, "XREAD BLOCK 0 STREAMS t $\nPING")
        pair.wait_blocked(1)
        check(pair, cmds("XADD t 10-0 b 3\nXADD t 11-0 b 4"))
        _same(blocked)
        _same(blocked)
        _send(blocked, "XREAD BLOCK 50 STREAMS nosuch 0\nXREAD BLOCK 50 STREAMS t 11-0")
        assert _same(blocked) in (b"*-1\r\n", b"_\r\n")
        _same(blocked)
        check(pair, cmds("MULTI\nXREAD BLOCK 0 STREAMS t $\nEXEC"))
    finally:
        for c in blocked:
            c.close()


def test_blocked_xreadgroup_is_served_and_times_out(pair: Pair, servers: tuple[int, int]) -> None:
    """XREADGROUP ... BLOCK with `>` waits for an entry after the group's last id, then
    delivers it (pending unless NOACK); history ids never block."""
    blocked = _both(pair, servers)
    try:
        check(pair, cmds("XGROUP CREATE s g $ MKSTREAM"))
        _send(blocked, "XREADGROUP GROUP g c BLOCK 0 STREAMS s >")
        pair.wait_blocked(1)
        check(pair, cmds("XADD s 1-1 a 1"))
        _same(blocked)
        check(pair, cmds("XGROUP CREATE s h $"))
        _send(blocked, "XREADGROUP GROUP h c NOACK BLOCK 0 STREAMS s >")
        pair.wait_blocked(1)
        check(pair, cmds("XADD s 2-1 a 2"))
        _same(blocked)
        _send(blocked, "XREADGROUP GROUP g c BLOCK 0 STREAMS s 0\nXREADGROUP GROUP g c BLOCK 30 STREAMS s >")
        _same(blocked)
        _same(blocked)
        check(pair, cmds("XPENDING s g\nXPENDING s h\nXINFO GROUPS s\nXINFO CONSUMERS s g"))
    finally:
        for c in blocked:
            c.close()


@pytest.mark.parametrize("gone", ["XGROUP DESTROY s g", "DEL s", "SET s x", "FLUSHALL", "RENAME s s2",
                                  "PEXPIRE s 20", "SWAPDB 0 1"])
def test_blocked_xreadgroup_is_told_its_group_or_key_went(pair: Pair, servers: tuple[int, int],
                                                          gone: str) -> None:
    """-NOGROUP when the group is destroyed, -UNBLOCKED when the key goes away; a blocked
    XREAD waits on."""
    blocked = _both(pair, servers)
    readers = _both(pair, servers)
    try:
        check(pair, cmds("XGROUP CREATE s g $ MKSTREAM"))
        _send(blocked, "XREADGROUP GROUP g c BLOCK 0 STREAMS s >")
        _send(readers, "XREAD BLOCK 300 STREAMS s $")
        pair.wait_blocked(2)
        check(pair, cmds(gone))
        assert _same(blocked)[:1] == b"-"
        assert _same(readers) in (b"*-1\r\n", b"_\r\n")
    finally:
        check(pair, cmds("SWAPDB 0 1\nFLUSHALL"))
        for c in (*blocked, *readers):
            c.close()


def test_keyspace_notifications(pair: Pair, servers: tuple[int, int]) -> None:
    """The stream events (flag t) and the generic ones, as redis-server sends them."""
    subs = _both(pair, servers)
    try:
        check(pair, cmds("CONFIG SET notify-keyspace-events KEA"))
        _send(subs, "PSUBSCRIBE __key*__:*")
        _same(subs)
        check(pair, cmds("""
XADD s 1-1 a 1
XADD s MAXLEN 1 2-1 a 2
XADD s 3-1 a 3
XDEL s 3-1 9-9
XDEL s 9-9
XTRIM s MAXLEN 0
XTRIM s MAXLEN 0
XSETID s 5-0
XGROUP CREATE s g $
XGROUP CREATE t g $ MKSTREAM
XGROUP SETID s g 0
XGROUP CREATECONSUMER s g c
XGROUP CREATECONSUMER s g c
XADD s 6-0 f v
XREADGROUP GROUP g c2 STREAMS s >
XCLAIM s g c3 0 6-0 JUSTID
XAUTOCLAIM s g c4 0 0
XACK s g 6-0
XGROUP DELCONSUMER s g c
XGROUP DELCONSUMER s g nobody
XGROUP DESTROY s g
XGROUP DESTROY s g
DEL s t
"""))
        _send(subs, "PING")
        ref: list[bytes] = []
        for _ in range(100):  # redis-server's events up to the subscriber's PONG
            ref.append(subs[0].read())
            if b"pong" in ref[-1].lower():
                break
        assert len(ref) > 20
        assert [subs[1].read() for _ in ref] == ref
    finally:
        check(pair, cmds('CONFIG SET notify-keyspace-events ""'))
        for c in subs:
            c.close()


_FILL = """
XADD s 1-1 a 1
XADD s 2-1 b 2 c 3
XADD s 3-1 a 4
XADD s 4-1 d 5
XADD s * e 6
XADD s MAXLEN ~ 100 * e 7
XDEL s 2-1
XGROUP CREATE s g 0
XGROUP CREATE s h $ ENTRIESREAD 3
XREADGROUP GROUP g c1 COUNT 2 STREAMS s >
XREADGROUP GROUP g c2 STREAMS s >
XDEL s 3-1
XCLAIM s g c3 0 4-1 RETRYCOUNT 5
XAUTOCLAIM s g c4 0 0 COUNT 1
XACK s g 1-1
XGROUP CREATECONSUMER s h idle
XADD empty MAXLEN 0 7-7 x y
XSETID empty 9-9 ENTRIESADDED 42 MAXDELETEDID 8-0
XGROUP CREATE made g $ MKSTREAM
PEXPIRE made 100000000
"""
_STATE = """
XINFO STREAM s FULL
XINFO GROUPS s
XRANGE s - +
XINFO STREAM empty FULL
XINFO STREAM made FULL
PEXPIRETIME made
TYPE made
"""


def _state(port: int) -> list[Any]:
    """The streams as XINFO shows them; the node counts aside (after a restart the nodes
    are rebuilt from the live entries)."""
    c = RawClient(port)
    try:
        out = []
        for cmd in cmds(_STATE):
            v = parse(c.call(cmd))
            if isinstance(v, tuple) and isinstance(v[1], list):
                items = list(v[1])
                for i in range(len(items) - 1):
                    if items[i] in (b"radix-tree-keys", b"radix-tree-nodes"):
                        items[i + 1] = "N"
                v = (v[0], items)
            out.append(v)
        return out
    finally:
        c.close()


def test_restart_keeps_streams_groups_and_pending_entries(tmp_path: Path) -> None:
    """Streams, their counters, groups, consumers (seen-times) and pending entries
    (delivery times and counts) survive a SIGKILL (the log replayed) and then a SIGTERM
    (the snapshot replayed) unchanged."""
    assert ms_kv(["init", str(tmp_path / "map")]) == 0
    net = start_network(tmp_path, "node A\n", params={"map_file": str(tmp_path / "map")})
    try:
        c = RawClient(net.port("A", "redis"))
        for cmd in cmds(_FILL):
            assert not c.call(cmd).startswith(b"-"), cmd
        c.close()
        before = _state(net.port("A", "redis"))
        assert any(b"c3" in repr(x).encode() for x in before)
        for sig in (signal.SIGKILL, signal.SIGTERM):
            net.restart("A", sig)
            assert _state(net.port("A", "redis")) == before, sig
    finally:
        net.stop()


def _sequence_command() -> st.SearchStrategy[list[bytes]]:
    """Stream commands on two keys with explicit, often colliding ids (no clock in the
    replies; groups' idle times are not looked at)."""
    k = st.sampled_from([b"s", b"t"])
    sid = st.builds(lambda ms, seq: b"%d-%d" % (ms, seq), st.integers(0, 6), st.integers(0, 3)) | st.sampled_from(
        [b"-", b"+", b"3", b"(2-1", b"5-*", b"0-0"])
    n = st.sampled_from([b"0", b"1", b"2", b"5", b"-1"])
    forms = [
        st.tuples(st.just(b"XADD"), k, sid, st.just(b"f"), st.sampled_from([b"1", b"x"])).map(list),
        st.tuples(st.just(b"XADD"), k, st.sampled_from([b"MAXLEN", b"MINID"]), st.sampled_from([b"=", b"~"]), sid,
                  sid, st.just(b"f"), st.just(b"v")).map(list),
        st.tuples(st.just(b"XDEL"), k, sid, sid).map(list),
        st.tuples(st.just(b"XTRIM"), k, st.sampled_from([b"MAXLEN", b"MINID"]), n).map(list),
        st.tuples(st.sampled_from([b"XRANGE", b"XREVRANGE"]), k, sid, sid, st.just(b"COUNT"), n).map(list),
        st.tuples(st.just(b"XLEN"), k).map(list),
        st.tuples(st.just(b"XSETID"), k, sid).map(list),
        st.tuples(st.just(b"XREAD"), st.just(b"COUNT"), n, st.just(b"STREAMS"), k, sid).map(list),
        st.tuples(st.just(b"XGROUP"), st.sampled_from([b"CREATE", b"SETID"]), k, st.sampled_from([b"g", b"h"]),
                  sid).map(list),
        st.tuples(st.just(b"XREADGROUP"), st.just(b"GROUP"), st.sampled_from([b"g", b"h"]),
                  st.sampled_from([b"a", b"b"]), st.just(b"COUNT"), n, st.just(b"STREAMS"), k,
                  st.sampled_from([b">", b"0"])).map(list),
        st.tuples(st.just(b"XACK"), k, st.just(b"g"), sid).map(list),
        st.tuples(st.just(b"XCLAIM"), k, st.just(b"g"), st.sampled_from([b"a", b"b"]), st.just(b"0"), sid,
                  st.just(b"JUSTID")).map(list),
        st.tuples(st.just(b"XAUTOCLAIM"), k, st.just(b"g"), st.just(b"b"), st.just(b"0"), sid,
                  st.just(b"COUNT"), st.just(b"2")).map(list),
        st.tuples(st.just(b"XPENDING"), k, st.sampled_from([b"g", b"h"])).map(list),
        st.tuples(st.just(b"XINFO"), st.sampled_from([b"STREAM", b"GROUPS"]), k).map(list),
    ]
    return st.one_of(forms)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sequence=st.lists(_sequence_command(), min_size=1, max_size=30))
def test_generated_sequences(pair: Pair, sequence: list[list[bytes]]) -> None:
    pair.reset()
    check(pair, sequence)
