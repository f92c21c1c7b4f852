"""Geo commands (Redis 7.0): GEOADD, GEOPOS, GEODIST, GEOHASH, GEORADIUS,
GEORADIUSBYMEMBER and their _RO forms, GEOSEARCH and GEOSEARCHSTORE.

A geo key is a sorted set whose scores are 52-bit geohashes (geohash.py), as in
redis-server: every sorted set command works on it and TYPE says `zset`. A search scans
the score ranges of 9 cells in redis-server's order and sorts by distance the way it
does (a stable sort; with COUNT below the number of matches, the partial quicksort
redis-server uses, so equal distances come out in the same order).

Decisions:
- GEOADD is logged as the ZADD it makes; GEORADIUS ... STORE and GEOSEARCHSTORE as
  their effect (DEL of the destination, then a ZADD of what was stored).
- GEORADIUS and GEORADIUSBYMEMBER are write commands (their STORE option), as
  redis-server flags them: a node without a map refuses them; the _RO forms and
  GEOSEARCH are reads.
- Numbers are read as redis-server's getDoubleFromObject reads them: strtod's range
  errors (1e400, 1e-400) are refused, "inf" is taken (an infinite radius finds all).
- Coordinates print as redis-server's human doubles (17 decimals, trailing zeros cut),
  distances with 4 decimals; both are bulk strings in RESP2, coordinates doubles in RESP3.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from raims_node.kv.commands import (
    Engine,
    KVClient,
    command,
    parse_double,
    parse_int,
)
from raims_node.kv.errors import SYNTAX, CommandError
from raims_node.kv.geohash import (
    LAT_MAX,
    LAT_MIN,
    LON_MAX,
    LON_MIN,
    STEP_MAX,
    UNITS,
    Shape,
    distance,
    distance_text,
    encode,
    geohash_text,
    human_double,
    position,
    score_range,
    search_cells,
)
from raims_node.kv.reply import NULL_ARRAY, Raw
from raims_node.kv.store import ZSet
from raims_node.kv.zsets import zadd
from raims_node.kv.zsets_algebra import store_zset

_NO_MEMBER = b"ERR could not decode requested zset member"


def _zset(e: Engine, c: KVClient, key: bytes) -> ZSet | None:
    return e.get_zset(c.db, key)


def _coordinate(c: KVClient, d: float) -> Any:
    text = human_double(d)
    return text if c.resp == 2 else Raw(b",%s\r\n" % text)


def lon_lat(lon_raw: bytes, lat_raw: bytes) -> tuple[float, float]:
    lon, lat = parse_double(lon_raw), parse_double(lat_raw)
    if lon < LON_MIN or lon > LON_MAX or lat < LAT_MIN or lat > LAT_MAX:
        raise CommandError(b"ERR invalid longitude,latitude pair %s,%s" % (b"%f" % lon, b"%f" % lat))
    return lon, lat


def unit(raw: bytes) -> float:
    to_m = UNITS.get(raw.lower())
    if to_m is None:
        raise CommandError(b"ERR unsupported unit provided. please use M, KM, FT, MI")
    return to_m


# ------------------------------------------------------------------ GEOADD, GEOPOS, GEODIST, GEOHASH

@command("geoadd", -5, write=True)
def geoadd(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    nx = xx = False
    i = 2
    while i < len(a):
        o = a[i].lower()
        if o == b"nx":
            nx = True
        elif o == b"xx":
            xx = True
        elif o != b"ch":
            break
        i += 1
    triples = a[i:]
    if len(triples) % 3 or (nx and xx) or not triples:
        raise CommandError(SYNTAX)
    zargs = [b"ZADD", *a[1:i]]
    for j in range(0, len(triples), 3):
        lon, lat = lon_lat(triples[j], triples[j + 1])
        bits = encode(lon, lat, STEP_MAX)
        zargs += (b"%d" % (bits or 0), triples[j + 2])
    reply = zadd(e, c, zargs)
    e.prop = [zargs]
    return reply


@command("geopos", -2)
def geopos(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    z = _zset(e, c, a[1])
    out: list[Any] = []
    for m in a[2:]:
        score = z.scores.get(m) if z is not None else None
        if score is None:
            out.append(NULL_ARRAY)
        else:
            lon, lat = position(score)
            out.append([_coordinate(c, lon), _coordinate(c, lat)])
    return out


@command("geodist", -4)
def geodist(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    to_m = 1.0
    if len(a) == 5:
        to_m = unit(a[4])
    elif len(a) > 5:
        raise CommandError(SYNTAX)
    z = _zset(e, c, a[1])
    if z is None:
        return None
    s1, s2 = z.scores.get(a[2]), z.scores.get(a[3])
    if s1 is None or s2 is None:
        return None
    (lon1, lat1), (lon2, lat2) = position(s1), position(s2)
    return distance_text(distance(lon1, lat1, lon2, lat2) / to_m)


@command("geohash", -2)
def geohash(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    z = _zset(e, c, a[1])
    out: list[Any] = []
    for m in a[2:]:
        score = z.scores.get(m) if z is not None else None
        out.append(None if score is None else geohash_text(score))
    return out


# ------------------------------------------------------------------ searches

_COORDS, _MEMBER, _NOSTORE, _SEARCH, _SEARCHSTORE = 1, 2, 4, 8, 16


class _Query:
    """The options of a search, as georadiusGeneric parses them."""

    __slots__ = ("shape", "store", "storedist", "withdist", "withhash", "withcoord", "sort", "any",
                 "count", "from_member", "from_lonlat", "by_radius", "by_box")

    def __init__(self) -> None:
        self.shape = Shape(0.0, 0.0, 1.0)
        self.store: bytes | None = None
        self.storedist = False
        self.withdist = self.withhash = self.withcoord = False
        self.sort = 0  # 0 none, 1 ascending, 2 descending
        self.any = False
        self.count = 0
        self.from_member = self.from_lonlat = self.by_radius = self.by_box = False


def _radius(q: _Query, raw: bytes, unit_raw: bytes) -> None:
    r = parse_double(raw, b"ERR need numeric radius")
    if r < 0:
        raise CommandError(b"ERR radius cannot be negative")
    q.shape.radius = r
    q.shape.conversion = unit(unit_raw)


def _member_position(z: ZSet, member: bytes) -> tuple[float, float]:
    score = z.scores.get(member)
    if score is None:
        raise CommandError(_NO_MEMBER)
    return position(score)


def _parse(z: ZSet | None, a: list[bytes], base: int, flags: int, q: _Query) -> None:
    i = base
    n = len(a)
    while i < n:
        o = a[i].lower()
        more = n - 1 - i
        if o == b"withdist":
            q.withdist = True
        elif o == b"withhash":
            q.withhash = True
        elif o == b"withcoord":
            q.withcoord = True
        elif o == b"any":
            q.any = True
        elif o == b"asc":
            q.sort = 1
        elif o == b"desc":
            q.sort = 2
        elif o == b"count" and more >= 1:
            q.count = parse_int(a[i + 1])
            if q.count <= 0:
                raise CommandError(b"ERR COUNT must be > 0")
            i += 1
        elif o in (b"store", b"storedist") and more >= 1 and not flags & (_NOSTORE | _SEARCH):
            q.store, q.storedist = a[i + 1], o == b"storedist"
            i += 1
        elif o == b"storedist" and flags & _SEARCHSTORE:
            q.storedist = True
        elif o == b"frommember" and more >= 1 and flags & _SEARCH and not q.from_lonlat:
            if z is not None:
                q.shape.lon, q.shape.lat = _member_position(z, a[i + 1])
            q.from_member = True
            i += 1
        elif o == b"fromlonlat" and more >= 2 and flags & _SEARCH and not q.from_member:
            q.shape.lon, q.shape.lat = lon_lat(a[i + 1], a[i + 2])
            q.from_lonlat = True
            i += 2
        elif o == b"byradius" and more >= 2 and flags & _SEARCH and not q.by_box:
            _radius(q, a[i + 1], a[i + 2])
            q.shape.box = False
            q.by_radius = True
            i += 2
        elif o == b"bybox" and more >= 3 and flags & _SEARCH and not q.by_radius:
            w = parse_double(a[i + 1], b"ERR need numeric width")
            h = parse_double(a[i + 2], b"ERR need numeric height")
            if h < 0 or w < 0:
                raise CommandError(b"ERR height or width cannot be negative")
            q.shape.conversion = unit(a[i + 3])
            q.shape.width, q.shape.height, q.shape.box = w, h, True
            q.by_box = True
            i += 3
        else:
            raise CommandError(SYNTAX)
        i += 1


Point = tuple[float, float, bytes, float, float]  # distance (m), score, member, longitude, latitude


def _points(z: ZSet, shape: Shape, limit: int) -> list[Point]:
    """The members inside `shape`, cell after cell; stops at `limit` (0: no limit)."""
    found: list[Point] = []
    cells = search_cells(shape)
    inside = shape.matcher()
    last: tuple[int, int] | None = None
    for idx, cell in enumerate(cells):
        if cell is None:
            continue
        if last is not None and cell == last:  # huge radii: neighbours repeat
            continue
        if found and limit and len(found) >= limit:
            break
        lo, hi = score_range(*cell)
        if lo < hi:
            for score, member in z.order.irange((lo, b"")):
                if score >= hi:
                    break
                lon, lat = position(score)
                d = inside(lon, lat)
                if d is not None:
                    found.append((d, score, member, lon, lat))
                if found and limit and len(found) >= limit:
                    break
        if idx:  # redis-server compares with the last neighbour scanned, never the centre
            last = cell
    return found


def _georadius(e: Engine, c: KVClient, a: list[bytes], src_at: int, flags: int) -> Any:
    z = _zset(e, c, a[src_at])
    q = _Query()
    base = 2
    if flags & _COORDS:
        base = 6
        q.shape.lon, q.shape.lat = lon_lat(a[2], a[3])
        _radius(q, a[4], a[5])
    elif flags & _MEMBER:
        base = 5
        if z is not None:
            q.shape.lon, q.shape.lat = _member_position(z, a[2])
            _radius(q, a[3], a[4])
    elif flags & _SEARCHSTORE:
        base = 3
        q.store = a[1]
    _parse(z, a, base, flags, q)
    name = a[0]
    if q.store is not None and (q.withdist or q.withhash or q.withcoord):
        raise CommandError(b"ERR %s is not compatible with WITHDIST, WITHHASH and WITHCOORD options" % (
            b"GEOSEARCHSTORE" if flags & _SEARCHSTORE else b"STORE option in GEORADIUS"))
    if flags & _SEARCH and not (q.from_member or q.from_lonlat):
        raise CommandError(b"ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for %s" % name)
    if flags & _SEARCH and not (q.by_radius or q.by_box):
        raise CommandError(b"ERR exactly one of BYRADIUS and BYBOX can be specified for %s" % name)
    if q.any and not q.count:
        raise CommandError(b"ERR the ANY argument requires COUNT argument")
    event = "geosearchstore" if flags & _SEARCH else "georadiusstore"
    if z is None:
        if q.store is not None:
            _store(e, c, q.store, [], event)
            return 0
        return []
    if q.count and not q.sort and not q.any:
        q.sort = 1
    found = _points(z, q.shape, q.count if q.any else 0)
    if not found and q.store is None:
        return []
    n = min(q.count, len(found)) if q.count else len(found)
    if q.sort:
        sign = 1 if q.sort == 1 else -1
        if n == len(found):
            found.sort(key=lambda p: p[0], reverse=sign < 0)
        else:
            partial_sort(found, lambda x, y: sign * ((x[0] > y[0]) - (x[0] < y[0])), 0, n - 1)
    conv = q.shape.conversion
    if q.store is not None:
        _store(e, c, q.store, [(p[0] / conv if q.storedist else p[1], p[2]) for p in found[:n]], event)
        return n
    out: list[Any] = []
    for d, score, member, lon, lat in found[:n]:
        if not (q.withdist or q.withhash or q.withcoord):
            out.append(member)
            continue
        item: list[Any] = [member]
        if q.withdist:
            item.append(distance_text(d / conv))
        if q.withhash:
            item.append(int(score))
        if q.withcoord:
            item.append([_coordinate(c, lon), _coordinate(c, lat)])
        out.append(item)
    return out


def _store(e: Engine, c: KVClient, dst: bytes, items: list[tuple[float, bytes]], event: str) -> None:
    """Replace `dst` by a sorted set of `items` (deleted when there are none); logged as
    its effect."""
    existed = store_zset(e, c, dst, items, event)
    if items:
        zargs = [b"ZADD", dst]
        for s, m in items:
            zargs += (b"%.17g" % s, m)
        e.prop = [[b"DEL", dst], zargs]
    elif existed:
        e.prop = [[b"DEL", dst]]


@command("georadius", -6, write=True)
def georadius(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _georadius(e, c, a, 1, _COORDS)


@command("georadiusbymember", -5, write=True)
def georadiusbymember(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _georadius(e, c, a, 1, _MEMBER)


@command("georadius_ro", -6)
def georadius_ro(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _georadius(e, c, a, 1, _COORDS | _NOSTORE)


@command("georadiusbymember_ro", -5)
def georadiusbymember_ro(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _georadius(e, c, a, 1, _MEMBER | _NOSTORE)


@command("geosearch", -7)
def geosearch(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _georadius(e, c, a, 1, _SEARCH)


@command("geosearchstore", -8, write=True)
def geosearchstore(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _georadius(e, c, a, 2, _SEARCH | _SEARCHSTORE)


# ------------------------------------------------------------------ redis-server's partial sort

def partial_sort(v: list[Any], cmp: Callable[[Any, Any], int], lo: int, hi: int) -> None:
    """Sort `v` enough that positions lo..hi hold what a full sort puts there: the
    three-way quicksort (median of three, Bentley-McIlroy partitioning) that skips
    the partitions outside lo..hi, with its order of equal elements."""
    _pqsort(v, cmp, 0, len(v), lo, hi)


def _outside(lo: int, hi: int, first: int, last: int) -> bool:
    return (lo < first and hi < first) or (lo > last and hi > last)


def _pqsort(v: list[Any], cmp: Callable[[Any, Any], int], base: int, n: int, lo: int, hi: int) -> None:
    while True:
        if n < 7:
            for m in range(base + 1, base + n):
                k = m
                while k > base and cmp(v[k - 1], v[k]) > 0:
                    v[k - 1], v[k] = v[k], v[k - 1]
                    k -= 1
            return
        pm = base + n // 2
        if n > 7:
            pl, pn = base, base + n - 1
            if n > 40:
                d = n // 8
                pl = _med3(v, pl, pl + d, pl + 2 * d, cmp)
                pm = _med3(v, pm - d, pm, pm + d, cmp)
                pn = _med3(v, pn - 2 * d, pn - d, pn, cmp)
            pm = _med3(v, pl, pm, pn, cmp)
        v[base], v[pm] = v[pm], v[base]
        pa = pb = base + 1
        pc = pd = base + n - 1
        while True:
            while pb <= pc and (r := cmp(v[pb], v[base])) <= 0:
                if r == 0:
                    v[pa], v[pb] = v[pb], v[pa]
                    pa += 1
                pb += 1
            while pb <= pc and (r := cmp(v[pc], v[base])) >= 0:
                if r == 0:
                    v[pc], v[pd] = v[pd], v[pc]
                    pd -= 1
                pc -= 1
            if pb > pc:
                break
            v[pb], v[pc] = v[pc], v[pb]
            pb += 1
            pc -= 1
        end = base + n
        r = min(pa - base, pb - pa)
        _swap_runs(v, base, pb - r, r)
        r = min(pd - pc, end - pd - 1)
        _swap_runs(v, pb, end - r, r)
        size = pb - pa
        if size > 1 and not _outside(lo, hi, base, base + size - 1):
            _pqsort(v, cmp, base, size, lo, hi)
        size = pd - pc
        if size <= 1 or _outside(lo, hi, end - size, end - 1):
            return
        base, n = end - size, size


def _med3(v: list[Any], a: int, b: int, c: int, cmp: Callable[[Any, Any], int]) -> int:
    if cmp(v[a], v[b]) < 0:
        return b if cmp(v[b], v[c]) < 0 else (c if cmp(v[a], v[c]) < 0 else a)
    return b if cmp(v[b], v[c]) > 0 else (a if cmp(v[a], v[c]) < 0 else c)


def _swap_runs(v: list[Any], a: int, b: int, n: int) -> None:
    for k in range(n):
        v[a + k], v[b + k] = v[b + k], v[a + k]
