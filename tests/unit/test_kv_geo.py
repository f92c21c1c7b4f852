"""The geo commands' pure logic (geohash.py: cells, neighbours, distances, number
formats; geo.py's partial sort) and, in-process, how GEOADD / GEOSEARCHSTORE / ZMPOP /
BZMPOP are logged, blocked, woken and replayed from the map file."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from hypothesis import assume, example, given
from hypothesis import strategies as st

from raims_node.kv import open_kv
from raims_node.kv.commands import BLOCKED, Engine, KVClient
from raims_node.kv.geo import partial_sort
from raims_node.kv.geohash import (
    LAT_MAX,
    LAT_MIN,
    STEP_MAX,
    Shape,
    decode,
    distance,
    distance_text,
    encode,
    estimate_step,
    geohash_text,
    human_double,
    neighbours,
    position,
    score_bits,
    score_range,
    search_cells,
)
from raims_node.kv.persist import init_map
from raims_node.kv.reply import NULL_ARRAY
from raims_node.kv.reply import encode as resp_encode
from raims_node.kv.store import KVStore

PALERMO = 3479099956230698  # redis-server's score for 13.361389 38.115556


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def run(e: Engine, c: KVClient, line: str) -> Any:
    return e.execute(c, line.encode().split())


# ------------------------------------------------------------------ geohash.py

def test_encode_matches_redis_scores_and_decodes_to_the_cell_centre() -> None:
    assert encode(13.361389, 38.115556, STEP_MAX) == PALERMO
    lon, lat = position(float(PALERMO))
    assert human_double(lon) == b"13.36138933897018433" and human_double(lat) == b"38.11555639549629859"
    assert geohash_text(float(PALERMO)) == b"sqc8b49rny0"
    assert encode(181, 0, STEP_MAX) is None and encode(0, LAT_MAX + 1e-9, STEP_MAX) is None


@given(st.floats(-180, 180, exclude_max=True), st.floats(LAT_MIN, LAT_MAX, exclude_max=True))
@example(179.99999999999997, 2.0)
def test_a_position_stays_in_its_cell(lon: float, lat: float) -> None:
    """(180 degrees east and the top latitude, and what rounds to them such as
    179.99999999999997, encode one bit beyond the 52, as in redis-server; the
    differential tests cover them.)"""
    bits = encode(lon, lat, STEP_MAX)
    assert bits is not None
    assume(bits < 1 << 52)
    area = decode(bits, STEP_MAX)
    assert area.lon_min - 1e-9 <= lon <= area.lon_max + 1e-9 and area.lat_min - 1e-9 <= lat <= area.lat_max + 1e-9
    plon, plat = position(float(bits))
    assert encode(plon, plat, STEP_MAX) == bits  # the centre hashes back to its cell
    lo, hi = score_range(bits, STEP_MAX)
    assert lo <= bits < hi


def test_odd_scores_decode_as_the_c_cast_makes_them() -> None:
    assert score_bits(-1.0) == (1 << 64) - 1
    assert score_bits(float("inf")) == 0 and score_bits(float("-inf")) == 1 << 63
    assert score_bits(2.0 ** 63) == 1 << 63 and score_bits(1e20) == 0
    assert position(float("inf")) == (-179.99999731779099, -85.05112751263943)


def test_neighbours_are_one_cell_away() -> None:
    bits = encode(10.0, 20.0, 10)
    assert bits is not None
    north, south, east, west = neighbours(bits, 10)[:4]
    here = decode(bits, 10)
    assert decode(north, 10).lat_min == here.lat_max and decode(south, 10).lat_max == here.lat_min
    assert decode(east, 10).lon_min == here.lon_max and decode(west, 10).lon_max == here.lon_min
    assert neighbours(north, 10)[1] == bits and neighbours(east, 10)[3] == bits


def test_steps_and_cells_of_a_search() -> None:
    assert estimate_step(0, 0) == 26 and estimate_step(1e9, 0) == 1
    assert estimate_step(1000, 0) == 14 and estimate_step(1000, 70) == 13 and estimate_step(1000, 85) == 12
    cells = search_cells(Shape(15.0, 37.0, 1000.0, radius=200.0))
    assert cells[0] is not None and sum(c is None for c in cells) in (0, 3, 5)
    box = search_cells(Shape(15.0, 37.0, 1.0, width=100.0, height=100.0, box=True))
    assert box[0] is not None and box[0][1] >= 16


def test_distances_and_their_formats() -> None:
    d = distance(13.361389338970184, 38.1155563954963, 15.087267458438873, 37.50266842333162)
    assert distance_text(d) == b"166274.1516"
    assert distance(1.0, 2.0, 1.0, 3.0) == distance(5.0, 2.0, 5.0, 3.0)  # the same longitude: latitudes only
    assert distance_text(0.0) == b"0.0000" and distance_text(0.00005) == b"0.0000"  # half to even
    assert distance_text(0.00015) == b"0.0001"  # 0.00015 * 10000 is 1.4999999999999998
    assert distance_text(0.00025) == b"0.0002" and distance_text(12.5) == b"12.5000"  # 2.5: half to even
    assert human_double(-0.0) == b"0" and human_double(180.0) == b"180" and human_double(1.5) == b"1.5"


# ------------------------------------------------------------------ the partial sort

def _cmp(x: tuple[float, int], y: tuple[float, int]) -> int:
    return (x[0] > y[0]) - (x[0] < y[0])


@given(st.lists(st.integers(0, 20), max_size=120), st.data())
def test_partial_sort_orders_the_asked_prefix(keys: list[int], data: st.DataObject) -> None:
    v = [(float(k), i) for i, k in enumerate(keys)]
    if not v:
        return
    n = data.draw(st.integers(1, len(v)))
    w = list(v)
    partial_sort(w, _cmp, 0, n - 1)
    assert sorted(w) == sorted(v)  # a permutation
    assert [x[0] for x in w[:n]] == sorted(k for k, _ in v)[:n]


def test_partial_sort_of_many_equal_distances_is_deterministic() -> None:
    rnd = random.Random(7)
    v = [(float(rnd.randrange(5)), i) for i in range(200)]
    a, b = list(v), list(v)
    partial_sort(a, _cmp, 0, 9)
    partial_sort(b, _cmp, 0, 9)
    assert a == b and [x[0] for x in a[:10]] == [0.0] * 10


# ------------------------------------------------------------------ logging, blocking, replay

def _logging_engine(clock: Clock | None = None) -> tuple[Engine, list[tuple[int, list[list[bytes]]]]]:
    logged: list[tuple[int, list[list[bytes]]]] = []
    return Engine(KVStore(16, clock), lambda db, cmds: logged.append((db, cmds))), logged


def test_geo_writes_are_logged_as_their_effect() -> None:
    e, logged = _logging_engine()
    c = KVClient()
    assert run(e, c, "GEOADD g CH 13.361389 38.115556 Palermo") == 1
    assert logged[-1] == (0, [[b"ZADD", b"g", b"CH", b"%d" % PALERMO, b"Palermo"]])
    assert run(e, c, "GEOADD g 13.361389 38.115556 Palermo") == 0
    assert len(logged) == 1  # nothing changed, nothing logged
    assert run(e, c, "GEOSEARCHSTORE dst g FROMLONLAT 13 38 BYRADIUS 100 km STOREDIST") == 1
    dist = e.store.dbs[0].data[b"dst"].scores[b"Palermo"]
    assert logged[-1] == (0, [[b"DEL", b"dst"], [b"ZADD", b"dst", b"%.17g" % dist, b"Palermo"]])
    assert run(e, c, "GEORADIUS g 0 0 1 m STORE dst") == 0
    assert logged[-1] == (0, [[b"DEL", b"dst"]]) and b"dst" not in e.store.dbs[0].data
    assert run(e, c, "GEORADIUS g 13 38 100 km") == [b"Palermo"]
    assert len(logged) == 3  # a search without STORE is not logged


def test_zmpop_and_bzmpop_pop_block_wake_and_log_their_plain_form() -> None:
    clock = Clock()
    e, logged = _logging_engine(clock)
    c, waiter = KVClient(), KVClient()
    replies: list[Any] = []
    waiter.wake = replies.append
    run(e, c, "ZADD z 1 a 2 b 3 c")
    assert run(e, c, "ZMPOP 2 none z MAX COUNT 2") == [b"z", [[b"c", 3.0], [b"b", 2.0]]]
    assert logged[-1] == (0, [[b"ZPOPMAX", b"z", b"2"]])
    assert run(e, c, "ZMPOP 1 z MIN COUNT 9") == [b"z", [[b"a", 1.0]]]
    assert logged[-1] == (0, [[b"ZPOPMIN", b"z", b"1"]]) and b"z" not in e.store.dbs[0].data
    assert run(e, c, "ZMPOP 1 z MIN") is NULL_ARRAY
    assert run(e, waiter, "BZMPOP 5 2 q1 q2 MIN COUNT 2") is BLOCKED
    run(e, c, "ZADD q2 5 x 6 y 7 z")
    assert replies == [[b"q2", [[b"x", 5.0], [b"y", 6.0]]]] and waiter.blocked is None
    assert logged[-1] == (0, [[b"ZPOPMIN", b"q2", b"2"]])
    assert run(e, waiter, "BZMPOP 0.5 1 empty MAX") is BLOCKED
    clock.ms += 600
    e.tick()
    assert replies[-1] is NULL_ARRAY
    run(e, c, "RPUSH lst a")
    assert resp_encode(run(e, c, "BZMPOP 0 1 lst MIN"), 2).startswith(b"-WRONGTYPE")


def test_geo_and_zmpop_survive_a_replay_of_the_map(tmp_path: Path) -> None:
    path = tmp_path / "map"
    init_map(path)
    e, mf = open_kv(str(path))
    assert mf is not None
    c = KVClient()
    for line in ("GEOADD g 13.361389 38.115556 Palermo 15.087269 37.502669 Catania 2.35 48.85 Paris",
                 "GEOSEARCHSTORE near g FROMMEMBER Palermo BYRADIUS 300 km STOREDIST",
                 "ZMPOP 1 g MAX", "ZADD z 1 a 2 b", "ZINTERCARD 1 z"):
        run(e, c, line)
    before = {k: dict(v.scores) for k, v in e.store.dbs[0].data.items()}
    mf.close()
    e2, mf2 = open_kv(str(path))
    assert mf2 is not None
    assert {k: dict(v.scores) for k, v in e2.store.dbs[0].data.items()} == before
    assert set(before[b"g"]) == {b"Palermo", b"Catania"} and set(before[b"near"]) == {b"Palermo", b"Catania"}
    assert run(e2, c, "GEODIST g Palermo Catania km") == b"166.2742"
    mf2.close()


@given(st.one_of(st.integers(0, (1 << 54) - 1).map(float), st.floats(allow_nan=False)))
def test_position_is_decode_at_the_full_step(score: float) -> None:
    """position() inlines decode() for speed: the same answer for any score."""
    a = decode(score_bits(score), STEP_MAX)
    lon = min(max((a.lon_min + a.lon_max) / 2, -180.0), 180.0)
    lat = min(max((a.lat_min + a.lat_max) / 2, LAT_MIN), LAT_MAX)
    assert position(score) == (lon, lat)


@given(st.floats(-180, 180), st.floats(LAT_MIN, LAT_MAX), st.sampled_from([0.0, 10.0, 1e5, 1e7, 3e7]),
       st.floats(-180, 180), st.floats(LAT_MIN, LAT_MAX), st.booleans())
def test_a_circles_matcher_is_contains(lon: float, lat: float, radius: float, plon: float, plat: float,
                                       same_meridian: bool) -> None:
    """The search's matcher precomputes the centre's terms: the same answers, bit for bit."""
    shape = Shape(lon, lat, 1.0, radius=radius)
    if same_meridian:
        plon = lon
    assert shape.matcher()(plon, plat) == shape.contains(plon, plat)
