"""The geo commands and ZINTERCARD / ZMPOP / BZMPOP of ms_server's Redis transport
against Debian's redis-server: the same commands to both, replies compared byte for
byte in RESP2 and RESP3 (kv_diff.py); searches over a few hundred seeded random
points (boundaries, poles, the antimeridian and repeated positions included); a
blocked BZMPOP served by a ZADD and timing out; the keyspace notifications;
hypothesis-generated sequences of these commands with ZADD and SADD."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.integration.kv_diff import Pair, RawClient, cmds

SICILY = "GEOADD Sicily 13.361389 38.115556 Palermo 15.087269 37.502669 Catania\n"

GEOADD = """
GEOADD g 13.361389 38.115556 Palermo 15.087269 37.502669 Catania
GEOADD g 13.361389 38.115556 Palermo
GEOADD g CH 13.361390 38.115556 Palermo 1 1 new
GEOADD g NX CH 0 0 Palermo 2 2 other
GEOADD g XX CH 3 3 Palermo 4 4 absent
GEOADD g XX NX 1 2 m
GEOADD g CH NX XX 1 2 m
GEOADD g CH CH CH
GEOADD g 1 2
GEOADD g 1 2 m 3
GEOADD g GT 1 2 m
GEOADD g GT 1 2
GEOADD g 200 10 m
GEOADD g -180.0000001 0 m
GEOADD g 10 85.05112879 m
GEOADD g 10 -85.05112879 m
GEOADD g 180 85.05112878 ne -180 -85.05112878 sw 0 0 origin
GEOADD g abc 10 m
GEOADD g 10 abc m
GEOADD g 1 2 ok 200 3 bad
GEOADD g inf 0 m
GEOADD g 1e400 0 m
GEOADD g 0 1e-400 m
GEOADD g 0 0e-400 zero
GEOADD g 0 1e-310 tiny
GEOADD g -inf 0 m
GEOADD g 0 nan m
GEOADD g 0x10 0 hex 0x1p3 0x1.8p1 hex2 -0x.8 0 hex3 0X1P-2 0x1p-1070 hex4
GEOADD g 0x 0 m
GEOADD g 0x1p 0 m
GEOADD g 0x1p2000 0 m
GEOADD g 0x1p-2000 0 m
GEOADD g 0xg 0 m
GEOADD g 00012 +5 lead .5 5. dots
GEOADD g 1_0 0 m
GEOPOS g hex hex2 hex3 hex4 lead dots
GEOADD g
GEOADD g 1 2 m
ZRANGE g 0 -1 WITHSCORES
TYPE g
OBJECT ENCODING g
SET s v
GEOADD s 1 2 m
GEOADD nothere XX 1 2 m
EXISTS nothere
"""

GEOPOS_DIST_HASH = SICILY + """
GEOADD Sicily 180 85.05112878 ne -180 -85.05112878 sw 0 0 origin -0.0000001 -0.0000001 tiny
GEOPOS Sicily Palermo Catania nosuch ne sw origin tiny
GEOPOS Sicily
GEOPOS nokey a b
GEOPOS
GEODIST Sicily Palermo Catania
GEODIST Sicily Palermo Catania m
GEODIST Sicily Palermo Catania KM
GEODIST Sicily Palermo Catania mi
GEODIST Sicily Palermo Catania fT
GEODIST Sicily ne sw km
GEODIST Sicily Palermo Palermo
GEODIST Sicily Palermo Catania parsec
GEODIST Sicily Palermo nosuch
GEODIST Sicily nosuch Palermo km
GEODIST nokey a b
GEODIST nokey a b parsec
GEODIST Sicily Palermo Catania km extra
GEODIST Sicily Palermo
GEOHASH Sicily Palermo Catania nosuch ne sw origin tiny
GEOHASH Sicily
GEOHASH nokey a
GEOHASH
ZADD odd -1 a 1e20 b inf c -inf d 4503599627370496 e 1152921504606846976 f 0 g 2.5 h 9007199254740993 i
GEOPOS odd a b c d e f g h i
GEOHASH odd a b c d e f g h i
GEODIST odd a e km
SET s v
GEOPOS s m
GEODIST s a b
GEODIST s a b parsec
GEOHASH s m
"""

GEORADIUS = SICILY + """
GEOADD Sicily 13.583333 37.316667 Agrigento 12.758489 38.788135 edge1 17.241510 38.788135 edge2
GEORADIUS Sicily 15 37 200 km
GEORADIUS Sicily 15 37 200 km WITHDIST
GEORADIUS Sicily 15 37 200 km WITHCOORD WITHDIST WITHHASH
GEORADIUS Sicily 15 37 200 km withhash withcoord ASC
GEORADIUS Sicily 15 37 200 km DESC
GEORADIUS Sicily 15 37 200 km ASC DESC
GEORADIUS Sicily 15 37 200 km COUNT 1
GEORADIUS Sicily 15 37 200 km COUNT 2 DESC WITHDIST
GEORADIUS Sicily 15 37 200 km COUNT 1 ANY
GEORADIUS Sicily 15 37 200 km COUNT 3 ANY DESC
GEORADIUS Sicily 15 37 200 km ANY
GEORADIUS Sicily 15 37 200 km COUNT 0
GEORADIUS Sicily 15 37 200 km COUNT -3
GEORADIUS Sicily 15 37 200 km COUNT x
GEORADIUS Sicily 15 37 200 km COUNT
GEORADIUS Sicily 15 37 200 km BOGUS
GEORADIUS Sicily 15 37 0 km
GEORADIUS Sicily 13.361389 38.115556 0 m
GEORADIUS Sicily 15 37 1000000 mi
GEORADIUS Sicily 15 37 inf km
GEORADIUS Sicily 15 37 1e400 km
GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 1e400 1 km
GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX inf inf km
GEORADIUS Sicily 15 37 -1 km
GEORADIUS Sicily 15 37 x km
GEORADIUS Sicily 15 37 200 parsec
GEORADIUS Sicily 200 37 200 km
GEORADIUS Sicily x 37 200 km
GEORADIUS Sicily 15 37 200
GEORADIUS nokey 15 37 200 km
GEORADIUS nokey 15 37 200 km STORE dst
GEORADIUS Sicily 15 37 200 km STORE dst WITHDIST
GEORADIUS Sicily 15 37 200 km STORE dst
ZRANGE dst 0 -1 WITHSCORES
GEORADIUS Sicily 15 37 200 km STOREDIST dst COUNT 2 DESC
ZRANGE dst 0 -1 WITHSCORES
GEORADIUS Sicily 15 37 200 km STORE dst STOREDIST dst2
EXISTS dst dst2
GEORADIUS Sicily 0 0 1 km STORE dst2
EXISTS dst2
GEORADIUS Sicily 15 37 200 km STORE
GEORADIUS_RO Sicily 15 37 200 km WITHDIST ASC
GEORADIUS_RO Sicily 15 37 200 km STORE dst
GEORADIUS_RO Sicily 15 37 200 km STOREDIST dst
GEORADIUSBYMEMBER Sicily Palermo 200 km WITHDIST WITHCOORD
GEORADIUSBYMEMBER Sicily Palermo 200 km COUNT 1 DESC
GEORADIUSBYMEMBER Sicily Palermo 200 km STORE dst3
ZRANGE dst3 0 -1 WITHSCORES
GEORADIUSBYMEMBER Sicily nosuch 200 km
GEORADIUSBYMEMBER Sicily Palermo -1 km
GEORADIUSBYMEMBER Sicily Palermo 1 parsec
GEORADIUSBYMEMBER nokey nosuch x y
GEORADIUSBYMEMBER nokey nosuch x y STORE dst3
EXISTS dst3
GEORADIUSBYMEMBER nokey nosuch x y BOGUS
GEORADIUSBYMEMBER_RO Sicily Palermo 200 km WITHHASH
GEORADIUSBYMEMBER_RO Sicily Palermo 200 km STORE dst
GEORADIUSBYMEMBER Sicily Palermo 200
SET s v
GEORADIUS s 15 37 200 km
GEORADIUSBYMEMBER s m 200 km
"""

GEOSEARCH = SICILY + """
GEOADD Sicily 13.583333 37.316667 Agrigento 12.758489 38.788135 edge1 17.241510 38.788135 edge2
GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km ASC WITHCOORD WITHDIST
GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 400 400 km ASC WITHCOORD WITHDIST WITHHASH
GEOSEARCH Sicily FROMMEMBER Palermo BYBOX 400 400 km DESC WITHHASH
GEOSEARCH Sicily FROMMEMBER Palermo BYRADIUS 100 mi COUNT 2
GEOSEARCH Sicily FROMMEMBER Palermo BYRADIUS 1000 km COUNT 2 ANY
GEOSEARCH Sicily FROMMEMBER Palermo BYRADIUS 1000 km ANY
GEOSEARCH Sicily FROMMEMBER Palermo BYBOX 0 0 km
GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 1 800 km
GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 800 1 km
GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 800 800 ft
GEOSEARCH Sicily FROMMEMBER nosuch BYRADIUS 1 km
GEOSEARCH Sicily FROMMEMBER Palermo FROMLONLAT 1 2 BYBOX 400 400 km
GEOSEARCH Sicily FROMLONLAT 1 2 FROMMEMBER Palermo BYBOX 400 400 km
GEOSEARCH Sicily FROMMEMBER Palermo FROMMEMBER Catania BYRADIUS 100 km
GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 1 km BYBOX 1 1 km
GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 1 1 km BYRADIUS 1 km
GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 1 km BYRADIUS 300 km
GEOSEARCH Sicily BYBOX 400 400 km WITHDIST
geosearch Sicily FROMLONLAT 1 2 WITHDIST
GeoSearch Sicily FROMMEMBER Palermo COUNT 1
GEOSEARCH Sicily FROMLONLAT 1 2 BYBOX -1 400 km
GEOSEARCH Sicily FROMLONLAT 1 2 BYBOX 400 -1 km
GEOSEARCH Sicily FROMLONLAT 1 2 BYBOX a 400 km
GEOSEARCH Sicily FROMLONLAT 1 2 BYBOX 1 b km
GEOSEARCH Sicily FROMLONLAT 1 2 BYBOX 1 1 parsec
GEOSEARCH Sicily FROMLONLAT 1 2 BYBOX 1 1
GEOSEARCH Sicily FROMLONLAT 1 2 BYRADIUS x km
GEOSEARCH Sicily FROMLONLAT 1 200 BYRADIUS 1 km
GEOSEARCH Sicily FROMLONLAT 1 BYRADIUS 1 km
GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km STORE dst
GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km STOREDIST
GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km COUNT 0
GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km ANY
GEOSEARCH nokey FROMMEMBER nosuch BYRADIUS 200 km
GEOSEARCH nokey FROMMEMBER nosuch BYBOX 1 1 km WITHDIST
GEOSEARCH nokey FROMLONLAT 1 2
GEOSEARCH nokey FROMLONLAT 1 200 BYRADIUS 1 km
GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200
GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYBOX 400 400 km STOREDIST
ZRANGE dst 0 -1 WITHSCORES
GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYBOX 400 400 km COUNT 2 DESC
ZRANGE dst 0 -1 WITHSCORES
GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYBOX 400 400 km WITHDIST
GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYBOX 400 400 km STORE other
GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYBOX 400 400 km STOREDIST STOREDIST
ZRANGE dst 0 -1 WITHSCORES
GEOSEARCHSTORE Sicily Sicily FROMMEMBER Palermo BYRADIUS 1 km
ZRANGE Sicily 0 -1 WITHSCORES
GEOSEARCHSTORE dst nokey FROMLONLAT 15 37 BYBOX 400 400 km
EXISTS dst
SET s v
GEOSEARCHSTORE s Sicily FROMLONLAT 13 38 BYRADIUS 1000 km
TYPE s
GEOSEARCH s FROMLONLAT 1 2 BYRADIUS 1 m
GEOSEARCHSTORE dst s FROMLONLAT 1 2 BYRADIUS 1 m
GEOSEARCHSTORE dst Sicily FROMLONLAT 1 2 BYRADIUS 1
"""

ZINTERCARD = """
ZADD z1 1 a 2 b 3 c 4 d
ZADD z2 1 b 2 c 3 d 4 e
SADD s1 a b c d e f
ZINTERCARD 2 z1 z2
ZINTERCARD 3 z1 z2 s1
ZINTERCARD 1 z1
ZINTERCARD 2 z1 none
ZINTERCARD 2 z1 z2 LIMIT 1
ZINTERCARD 2 z1 z2 LIMIT 2
ZINTERCARD 2 z1 z2 LIMIT 0
ZINTERCARD 2 z1 z2 LIMIT 100
ZINTERCARD 2 z1 z2 LIMIT 1 LIMIT 0
ZINTERCARD 2 z1 z2 limit 2
ZINTERCARD 2 z1 z2 LIMIT -1
ZINTERCARD 2 z1 z2 LIMIT x
ZINTERCARD 2 z1 z2 LIMIT
ZINTERCARD 2 z1 z2 WITHSCORES
ZINTERCARD 2 z1 z2 AGGREGATE SUM
ZINTERCARD 0 z1
ZINTERCARD -1 z1
ZINTERCARD x z1
ZINTERCARD 3 z1 z2
ZINTERCARD 1
SET s v
ZINTERCARD 2 z1 s
ZINTERCARD 2 none s
ZINTERCARD 1 z1 LIMIT 9223372036854775807
ZINTERCARD 1 z1 LIMIT 9223372036854775808
"""

ZMPOP = """
ZADD z 1 a 2 b 3 c 4 d 5 e
ZMPOP 1 z MIN
ZMPOP 1 z max
ZMPOP 2 none z MAX COUNT 2
ZMPOP 1 z MIN COUNT 10
EXISTS z
ZMPOP 1 z MIN
ZMPOP 2 none none2 MAX
ZADD z 1 a 2 b
ZMPOP 0 z MIN
ZMPOP -1 z MIN
ZMPOP x z MIN
ZMPOP 1 z
ZMPOP 2 z MIN
ZMPOP 1 z LEFT
ZMPOP 1 z MIN COUNT 0
ZMPOP 1 z MIN COUNT -1
ZMPOP 1 z MIN COUNT x
ZMPOP 1 z MIN COUNT
ZMPOP 1 z MIN COUNT 1 COUNT 2
ZMPOP 1 z MIN BOGUS
ZMPOP 1 z MIN COUNT 9223372036854775807
ZMPOP 1
SET s v
ZMPOP 1 s MIN
ZMPOP 2 none s MIN
ZADD z 1 a
ZMPOP 2 z s MIN
ZMPOP 2 s z MIN
BZMPOP 0.01 1 none MIN
BZMPOP 0.01 2 none s MIN
BZMPOP 0 2 none s MIN
ZADD z 1 a 2 b 3 c
BZMPOP 0 1 z MAX COUNT 2
BZMPOP 0 2 none z MIN
BZMPOP x 1 none MIN
BZMPOP -1 1 none MIN
BZMPOP inf 1 none MIN
BZMPOP -inf 1 none MIN
BZMPOP 1e30 1 none MIN
BZMPOP nan 1 none MIN
BLPOP none inf
BZMPOP 0 0 none MIN
BZMPOP 0 1 none
BZMPOP 0 1 none LEFT
BZMPOP 0 1 none MIN COUNT 0
BZMPOP x 1 none MIN COUNT 0
MULTI
BZMPOP 0 1 none MIN
ZMPOP 1 none MAX
EXEC
"""

# numbers as redis-server reads them: getDoubleFromObject for scores, increments and
# weights (range errors refused, hexadecimal taken), plain strtod for score ranges
ZSET_NUMBERS = """
ZADD z 1e400 m
ZADD z 1e-400 m
ZADD z 0x10 m
ZINCRBY z 1e400 m
ZINCRBY z 0x10 m
ZADD w 1 a
ZUNION 1 w WEIGHTS 1e400
ZUNION 1 w WEIGHTS 0x2 WITHSCORES
ZRANGEBYSCORE w 1e400 +inf
ZRANGEBYSCORE w 0x0 0x10
ZRANGEBYSCORE w -1e400 1e-400
ZADD z 0xa.p-2000 m
ZADD z 0x0.0p-2000 m
ZADD z 0x1p2000 m
ZADD z 1e-310 m
ZADD z 0e-999 m
ZADD z -inf m
ZADD z +Infinity m
ZADD z -0x1p3 m
ZADD z NX 1e400 m
ZRANGE z 0 -1 WITHSCORES
ZRANGEBYSCORE w 0x1p2000 +inf
ZRANGEBYSCORE w -0x1p2000 0x1p2000
ZRANGEBYSCORE w (0x0 (0x10
"""


@pytest.mark.parametrize("block", [GEOADD, GEOPOS_DIST_HASH, GEORADIUS, GEOSEARCH, ZINTERCARD, ZMPOP, ZSET_NUMBERS],
                         ids=["geoadd", "geopos_dist_hash", "georadius", "geosearch", "zintercard", "zmpop",
                              "zset_numbers"])
def test_commands(pair: Pair, block: str) -> None:
    pair.check(cmds(block))


def _random_points(rnd: random.Random, n: int) -> list[tuple[float, float]]:
    """Clustered points (searches find many), the whole map, the antimeridian, the
    latitude limits, and repeated positions (equal distances)."""
    pts: list[tuple[float, float]] = []
    for _ in range(n):
        kind = rnd.random()
        if kind < 0.5:
            p = rnd.uniform(12, 16), rnd.uniform(36, 39)
        elif kind < 0.7:
            p = rnd.uniform(-180, 180), rnd.uniform(-85.05112878, 85.05112878)
        elif kind < 0.8:
            p = rnd.choice([-180.0, 180.0, 179.9999, -179.9999, 0.0, 0.00001]), rnd.uniform(-85, 85)
        elif kind < 0.9:
            p = rnd.uniform(-180, 180), rnd.choice([85.05112878, -85.05112878, 0.0, 84.9, -84.9, 66.1, 80.5])
        else:
            p = rnd.choice(pts) if pts else (0.0, 0.0)
        pts.append(p)
    return pts


def _random_search(rnd: random.Random, pts: list[tuple[float, float]]) -> list[bytes]:
    lon, lat = rnd.choice(pts) if rnd.random() < 0.5 else (rnd.uniform(-180, 180), rnd.uniform(-85, 85))
    unit = rnd.choice([b"m", b"km", b"mi", b"ft"])
    scale = {b"m": 1, b"km": 1000, b"mi": 1609.34, b"ft": 0.3048}[unit]
    r = rnd.choice([0, 1, 50, 1000, 20000, 100000, 500000, 3000000, 10000000, 25000000]) * rnd.random() / scale
    opts = [o for o in (b"WITHDIST", b"WITHCOORD", b"WITHHASH") if rnd.random() < 0.4]
    if rnd.random() < 0.6:
        opts.append(rnd.choice([b"ASC", b"DESC"]))
    if rnd.random() < 0.5:
        opts += [b"COUNT", b"%d" % rnd.choice([1, 2, 3, 5, 10, 50])]
        if rnd.random() < 0.3:
            opts.append(b"ANY")
    center = [b"%.6f" % lon, b"%.6f" % lat]
    if rnd.random() < 0.5:
        return [b"GEORADIUS", b"g", *center, b"%.4f" % r, unit, *opts]
    if rnd.random() < 0.5:
        shape = [b"BYRADIUS", b"%.4f" % r, unit]
    else:
        shape = [b"BYBOX", b"%.4f" % (2 * r), b"%.4f" % (r * rnd.uniform(0.3, 3)), unit]
    frm = [b"FROMLONLAT", *center] if rnd.random() < 0.7 else [b"FROMMEMBER", b"m%d" % rnd.randrange(len(pts))]
    return [b"GEOSEARCH", b"g", *frm, *shape, *opts]


@pytest.mark.parametrize("seed", [1, 2])
def test_random_points_and_searches(pair: Pair, seed: int) -> None:
    """300 seeded random points, then 200 random GEORADIUS / GEOSEARCH (radius and box,
    every unit, ASC / DESC, COUNT with and without ANY, the WITH options); GEOPOS,
    GEOHASH and GEODIST of all of them."""
    rnd = random.Random(seed * 10 + pair.ref.resp)
    pts = _random_points(rnd, 300)
    pair.check([[b"GEOADD", b"g", b"%.6f" % lon, b"%.6f" % lat, b"m%d" % i] for i, (lon, lat) in enumerate(pts)])
    names = [b"m%d" % i for i in range(len(pts))]
    pair.check([[b"GEOPOS", b"g", *names], [b"GEOHASH", b"g", *names], [b"ZRANGE", b"g", b"0", b"-1", b"WITHSCORES"]])
    pair.check([[b"GEODIST", b"g", names[i], names[i + 1], b"km"] for i in range(0, len(names) - 1, 3)])
    pair.check([_random_search(rnd, pts) for _ in range(200)])
    pair.check([[b"GEOSEARCHSTORE", b"dst", b"g", b"FROMMEMBER", b"m0", b"BYRADIUS", b"3000", b"km", b"STOREDIST"],
                [b"ZRANGE", b"dst", b"0", b"-1", b"WITHSCORES"]])


def test_blocked_bzmpop_is_served_by_a_zadd_and_times_out(pair: Pair, servers: tuple[int, int]) -> None:
    """BZMPOP parks the client; a ZADD creating one of its keys serves it (COUNT taken
    at most); a list pushed to its key leaves it waiting; its deadline answers null."""
    other = Pair(servers[0], servers[1], pair.ref.resp)
    try:
        for c in (pair.ref, pair.us):
            c.send([b"BZMPOP", b"5", b"2", b"z1", b"z2", b"MAX", b"COUNT", b"2"])
        other.wait_blocked(1)
        other.check(cmds("ZADD z2 1 a 2 b 3 c"))
        assert pair.us.read() == pair.ref.read()
        for c in (pair.ref, pair.us):
            c.send([b"BZMPOP", b"0.3", b"1", b"q", b"MIN"])
        other.wait_blocked(1)
        other.check(cmds("RPUSH q a"))
        assert pair.us.read() == pair.ref.read()  # null at its deadline
        pair.check(cmds("ZRANGE z2 0 -1 WITHSCORES\nLRANGE q 0 -1\nBZMPOP 0.05 1 none MIN"))
    finally:
        other.close()


def test_keyspace_notifications(pair: Pair, servers: tuple[int, int]) -> None:
    """The events (and their order) of GEOADD, the STORE searches and the pops."""
    subs = [RawClient(port, pair.ref.resp) for port in servers]
    try:
        pair.check(cmds("CONFIG SET notify-keyspace-events KEA"))
        for s in subs:
            s.call([b"PSUBSCRIBE", b"__key*"])
            s.call([b"SUBSCRIBE", b"end"])
        pair.check(cmds(SICILY + """
GEOADD Sicily 13.361389 38.115556 Palermo
GEORADIUS Sicily 15 37 200 km STORE dst
GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYRADIUS 200 km STOREDIST
GEOSEARCHSTORE dst Sicily FROMLONLAT 0 0 BYRADIUS 1 km
GEORADIUS Sicily 15 37 200 km STORE dst
GEORADIUS Sicily 0 0 1 km STOREDIST dst
ZMPOP 1 Sicily MIN
ZMPOP 1 Sicily MAX COUNT 5
ZADD z 1 a
ZINTERCARD 1 z
BZMPOP 0 1 z MIN
PUBLISH end x
"""))
        got = []
        for s in subs:
            events = []
            while True:
                frame = s.read()
                if b"end" in frame and b"message" in frame:
                    break
                events.append(frame)
            got.append(events)
        assert got[1] == got[0]
        assert len(got[0]) >= 20
    finally:
        for s in subs:
            s.close()
        pair.check([[b"CONFIG", b"SET", b"notify-keyspace-events", b""]])


def _sequence_command() -> st.SearchStrategy[list[bytes]]:
    k = st.sampled_from([b"g1", b"g2", b"z", b"s"])
    m = st.sampled_from([b"a", b"b", b"c", b"d"])
    lon = st.sampled_from([b"0", b"13.361389", b"15.087269", b"-180", b"180", b"179.99", b"-0.0001", b"200"])
    lat = st.sampled_from([b"0", b"38.115556", b"37.502669", b"85.05112878", b"-85.05112878", b"-45.5", b"90"])
    dist = st.sampled_from([b"0", b"1", b"150", b"500", b"20000", b"-1"])
    unit = st.sampled_from([b"m", b"km", b"mi", b"ft"])
    extra = st.lists(st.sampled_from([b"WITHDIST", b"WITHCOORD", b"WITHHASH", b"ASC", b"DESC", b"ANY"]), max_size=3)
    count = st.sampled_from([[], [b"COUNT", b"1"], [b"COUNT", b"3"]])
    origin = st.one_of(st.tuples(st.just(b"FROMLONLAT"), lon, lat).map(list),
                       st.tuples(st.just(b"FROMMEMBER"), m).map(list))
    shape = st.one_of(st.tuples(st.just(b"BYRADIUS"), dist, unit).map(list),
                      st.tuples(st.just(b"BYBOX"), dist, dist, unit).map(list))
    forms = [
        st.tuples(st.just(b"GEOADD"), k, st.sampled_from([b"NX", b"XX", b"CH", b"GT"]), lon, lat, m).map(list),
        st.tuples(st.just(b"GEOADD"), k, lon, lat, m, lon, lat, m).map(list),
        st.tuples(st.just(b"ZADD"), k, st.sampled_from([b"1", b"-1", b"3479099956230698", b"inf"]), m).map(list),
        st.tuples(st.just(b"GEOPOS"), k, m, m).map(list),
        st.tuples(st.just(b"GEOHASH"), k, m).map(list),
        st.tuples(st.just(b"GEODIST"), k, m, m, unit).map(list),
        st.tuples(st.just(b"GEOSEARCH"), k, origin, shape, count, extra).map(
            lambda t: [t[0], t[1], *t[2], *t[3], *t[4], *t[5]]),
        st.tuples(st.just(b"GEOSEARCHSTORE"), k, k, origin, shape, count,
                  st.sampled_from([[], [b"STOREDIST"]])).map(lambda t: [t[0], t[1], t[2], *t[3], *t[4], *t[5], *t[6]]),
        st.tuples(st.just(b"GEORADIUS"), k, lon, lat, dist, unit, count, extra).map(
            lambda t: [*t[:6], *t[6], *t[7]]),
        st.tuples(st.just(b"GEORADIUSBYMEMBER"), k, m, dist, unit, st.sampled_from([b"STORE", b"STOREDIST"]), k).map(list),
        st.tuples(st.just(b"ZMPOP"), st.just(b"2"), k, k, st.sampled_from([b"MIN", b"MAX"]), st.just(b"COUNT"),
                  st.sampled_from([b"1", b"2"])).map(list),
        st.tuples(st.just(b"BZMPOP"), st.just(b"0.01"), st.just(b"1"), k, st.sampled_from([b"MIN", b"MAX"])).map(list),
        st.tuples(st.just(b"ZINTERCARD"), st.just(b"2"), k, k, st.just(b"LIMIT"), st.sampled_from([b"0", b"1"])).map(list),
        st.tuples(st.just(b"ZRANGE"), k, st.just(b"0"), st.just(b"-1"), st.just(b"WITHSCORES")).map(list),
        st.tuples(st.just(b"SADD"), k, m).map(list),
    ]
    return st.one_of(forms)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sequence=st.lists(_sequence_command(), min_size=1, max_size=20))
def test_generated_sequences(pair: Pair, sequence: list[list[bytes]]) -> None:
    pair.reset()
    pair.check(sequence)


def test_equal_distances_keep_redis_servers_order(pair: Pair) -> None:
    """120 members on 5 positions: under COUNT (the partial quicksort) and without it
    (the stable sort), ascending and descending, members at equal distances come out
    in redis-server's order."""
    rnd = random.Random(5)
    spots = [(b"15", b"37"), (b"15.001", b"37"), (b"15", b"37.001"), (b"14.999", b"37"), (b"15.002", b"37.002")]
    add: list[bytes] = [b"GEOADD", b"t"]
    for i in range(120):
        add += [*rnd.choice(spots), b"d%d" % i]
    searches = [add]
    for count in (b"1", b"3", b"7", b"20", b"41", b"60", b"119"):
        for order in (b"ASC", b"DESC"):
            searches.append([b"GEOSEARCH", b"t", b"FROMLONLAT", b"15", b"37", b"BYRADIUS", b"10", b"km",
                             b"COUNT", count, order, b"WITHDIST"])
            searches.append([b"GEORADIUS", b"t", b"15.0005", b"37", b"10", b"km", b"COUNT", count, order])
    searches += cmds("GEOSEARCH t FROMLONLAT 15 37 BYRADIUS 10 km DESC\nGEOSEARCH t FROMLONLAT 15 37 BYRADIUS 10 km")
    pair.check(searches)
