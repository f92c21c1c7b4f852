"""The geohash arithmetic of the geo commands (geo.py), pure functions only.

A position is stored as a sorted set score: the 52-bit interleave of 26 latitude bits
(even positions) and 26 longitude bits (odd positions), latitude in [-85.05112878,
85.05112878] (the Web Mercator limits) and longitude in [-180, 180], as redis-server
stores it. Decoding answers the centre of the cell. A radius or box search looks at the
cell holding the centre, at a precision estimated from the radius, and its 8
neighbours (cells made useless by the bounding box left out), each cell being one score
range of the sorted set.

The floating point steps are done in redis-server's order with the same constants
(the earth radius 6372797.560856 m, degrees to radians as pi / 180), so distances and
cell edges agree to the last bit; math domain errors answer NaN as C's libm does.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

STEP_MAX = 26  # 52 bits
LAT_MIN, LAT_MAX = -85.05112878, 85.05112878
LON_MIN, LON_MAX = -180.0, 180.0
EARTH_RADIUS_M = 6372797.560856
MERCATOR_MAX = 20037726.37
_D_R = math.pi / 180.0
_M64 = (1 << 64) - 1
_EVEN = 0x5555555555555555
_ODD = 0xAAAAAAAAAAAAAAAA
_BASE32 = b"0123456789bcdefghjkmnpqrstuvwxyz"
UNITS = {b"m": 1.0, b"km": 1000.0, b"ft": 0.3048, b"mi": 1609.34}

Range = tuple[float, float]
WGS84: tuple[Range, Range] = ((LON_MIN, LON_MAX), (LAT_MIN, LAT_MAX))
STANDARD: tuple[Range, Range] = ((-180.0, 180.0), (-90.0, 90.0))  # the public geohash's ranges


# ------------------------------------------------------------------ C's libm on bad input

def _sin(x: float) -> float:
    return math.sin(x) if math.isfinite(x) else math.nan


def _cos(x: float) -> float:
    return math.cos(x) if math.isfinite(x) else math.nan


def _asin(x: float) -> float:
    return math.asin(x) if -1.0 <= x <= 1.0 else math.nan


def _sqrt(x: float) -> float:
    return math.sqrt(x) if x >= 0.0 else math.nan


# ------------------------------------------------------------------ bits

def _spread(v: int) -> int:
    """The 32 bits of `v` on the even bit positions of a 64-bit word."""
    v &= 0xFFFFFFFF
    v = (v | (v << 16)) & 0x0000FFFF0000FFFF
    v = (v | (v << 8)) & 0x00FF00FF00FF00FF
    v = (v | (v << 4)) & 0x0F0F0F0F0F0F0F0F
    v = (v | (v << 2)) & 0x3333333333333333
    return (v | (v << 1)) & _EVEN


def _squash(v: int) -> int:
    """The even bits of the 64-bit `v` packed into 32 bits (the inverse of _spread)."""
    v &= _EVEN
    v = (v | (v >> 1)) & 0x3333333333333333
    v = (v | (v >> 2)) & 0x0F0F0F0F0F0F0F0F
    v = (v | (v >> 4)) & 0x00FF00FF00FF00FF
    v = (v | (v >> 8)) & 0x0000FFFF0000FFFF
    return (v | (v >> 16)) & 0xFFFFFFFF


def score_bits(score: float) -> int:
    """A score as C's (uint64_t) cast gives it on x86-64 (out of range: the CPU's answer)."""
    two63 = 9223372036854775808.0
    if not score >= two63:  # NaN included
        if math.isnan(score) or math.isinf(score) or not -two63 <= math.trunc(score) < two63:
            return 1 << 63
        return math.trunc(score) & _M64
    t = score - two63
    if math.isinf(t) or t >= two63:
        return 0
    return (math.trunc(t) ^ (1 << 63)) & _M64


# ------------------------------------------------------------------ cells

@dataclass(frozen=True, slots=True)
class Area:
    lon_min: float
    lon_max: float
    lat_min: float
    lat_max: float


def encode(lon: float, lat: float, step: int, ranges: tuple[Range, Range] = WGS84) -> int | None:
    """The `2 * step` bit cell holding (lon, lat); None outside the limits."""
    (lo0, lo1), (la0, la1) = ranges
    if lon > LON_MAX or lon < LON_MIN or lat > LAT_MAX or lat < LAT_MIN:
        return None
    if lat < la0 or lat > la1 or lon < lo0 or lon > lo1:
        return None
    lat_off = (lat - la0) / (la1 - la0) * float(1 << step)
    lon_off = (lon - lo0) / (lo1 - lo0) * float(1 << step)
    return _spread(int(lat_off)) | (_spread(int(lon_off)) << 1)


def decode(bits: int, step: int, ranges: tuple[Range, Range] = WGS84) -> Area:
    (lo0, lo1), (la0, la1) = ranges
    ilat, ilon = _squash(bits), _squash(bits >> 1)
    div = float(1 << step)
    lat_scale, lon_scale = la1 - la0, lo1 - lo0
    return Area(lo0 + (ilon * 1.0 / div) * lon_scale, lo0 + (((ilon + 1) & 0xFFFFFFFF) * 1.0 / div) * lon_scale,
                la0 + (ilat * 1.0 / div) * lat_scale, la0 + (((ilat + 1) & 0xFFFFFFFF) * 1.0 / div) * lat_scale)


_CELLS = float(1 << STEP_MAX)
_LAT_SCALE, _LON_SCALE = LAT_MAX - LAT_MIN, LON_MAX - LON_MIN


def position(score: float) -> tuple[float, float]:
    """(longitude, latitude) of a stored score: its cell's centre, within the limits
    (decode's arithmetic at STEP_MAX, inlined: searches decode every candidate)."""
    bits = int(score) if 0.0 <= score < 4503599627370496.0 else score_bits(score)
    ilat, ilon = _squash(bits), _squash(bits >> 1)
    lon_min = LON_MIN + (ilon * 1.0 / _CELLS) * _LON_SCALE
    lon_max = LON_MIN + (((ilon + 1) & 0xFFFFFFFF) * 1.0 / _CELLS) * _LON_SCALE
    lat_min = LAT_MIN + (ilat * 1.0 / _CELLS) * _LAT_SCALE
    lat_max = LAT_MIN + (((ilat + 1) & 0xFFFFFFFF) * 1.0 / _CELLS) * _LAT_SCALE
    lon = min(max((lon_min + lon_max) / 2, LON_MIN), LON_MAX)
    lat = min(max((lat_min + lat_max) / 2, LAT_MIN), LAT_MAX)
    return lon, lat


def score_of(lon: float, lat: float) -> int:
    """The 52-bit score of a position already checked against the limits."""
    bits = encode(lon, lat, STEP_MAX)
    assert bits is not None
    return bits


def geohash_text(score: float) -> bytes:
    """The 11-character standard geohash of a stored position (its last character is
    always '0': 52 bits make 10 characters and 2 bits)."""
    lon, lat = position(score)
    bits = encode(lon, lat, STEP_MAX, STANDARD) or 0
    return bytes(_BASE32[(bits >> (52 - (i + 1) * 5)) & 0x1F] for i in range(10)) + b"0"


def _move(bits: int, step: int, d: int, axis: int) -> int:
    """The cell `d` (+1 / -1) cells away along `axis` (_ODD: longitude, _EVEN: latitude)."""
    moving, other = bits & axis, bits & (axis ^ _M64)
    zz = ((axis ^ _M64) & _M64) >> (64 - step * 2)
    if d > 0:
        moving = (moving + zz + 1) & _M64
    else:
        moving = ((moving | zz) - (zz + 1)) & _M64
    return (moving & (axis >> (64 - step * 2))) | other


def neighbours(bits: int, step: int) -> list[int]:
    """North, south, east, west, north-east, north-west, south-east, south-west."""
    def at(dx: int, dy: int) -> int:
        b = bits
        if dx:
            b = _move(b, step, dx, _ODD)
        if dy:
            b = _move(b, step, dy, _EVEN)
        return b
    return [at(0, 1), at(0, -1), at(1, 0), at(-1, 0), at(1, 1), at(-1, 1), at(1, -1), at(-1, -1)]


# ------------------------------------------------------------------ distances

def lat_distance(lat1: float, lat2: float) -> float:
    return EARTH_RADIUS_M * abs(lat2 * _D_R - lat1 * _D_R)


def distance(lon1: float, lat1: float, lon2: float, lat2: float) -> float:
    """The haversine distance in metres, as redis-server computes it."""
    v = _sin((lon2 * _D_R - lon1 * _D_R) / 2)
    if v == 0.0:
        return lat_distance(lat1, lat2)
    lat1r, lat2r = lat1 * _D_R, lat2 * _D_R
    u = _sin((lat2r - lat1r) / 2)
    a = u * u + _cos(lat1r) * _cos(lat2r) * v * v
    return 2.0 * EARTH_RADIUS_M * _asin(_sqrt(a))


@dataclass(slots=True)
class Shape:
    """A search: its centre, a radius or a box (width, height), in units of `conversion`
    metres."""

    lon: float
    lat: float
    conversion: float
    radius: float = 0.0
    width: float = 0.0
    height: float = 0.0
    box: bool = False

    def contains(self, lon: float, lat: float) -> float | None:
        """The distance (metres) to a point inside the shape, None outside."""
        if not self.box:
            d = distance(self.lon, self.lat, lon, lat)
            return None if d > self.radius * self.conversion else d
        if lat_distance(lat, self.lat) > self.height * self.conversion / 2:
            return None
        if distance(lon, lat, self.lon, lat) > self.width * self.conversion / 2:
            return None
        return distance(self.lon, self.lat, lon, lat)

    def matcher(self) -> Callable[[float, float], float | None]:
        """`contains` for many points: a circle's centre terms computed once (the same
        operations in the same order as `distance`, so the same bits)."""
        if self.box:
            return self.contains
        c_lon_r, c_lat_r = self.lon * _D_R, self.lat * _D_R
        cos_c = math.cos(c_lat_r)
        limit = self.radius * self.conversion
        sin, cos = math.sin, math.cos

        def circle(lon: float, lat: float) -> float | None:
            v = sin((lon * _D_R - c_lon_r) / 2)
            if v == 0.0:
                d = EARTH_RADIUS_M * abs(lat * _D_R - c_lat_r)
            else:
                lat_r = lat * _D_R
                u = sin((lat_r - c_lat_r) / 2)
                d = 2.0 * EARTH_RADIUS_M * _asin(_sqrt(u * u + cos_c * cos(lat_r) * v * v))
            return None if d > limit else d
        return circle

    def bounds(self) -> tuple[float, float, float, float]:
        """(min lon, min lat, max lon, max lat) of the shape."""
        h = self.conversion * (self.height / 2 if self.box else self.radius)
        w = self.conversion * (self.width / 2 if self.box else self.radius)
        lat_delta = h / EARTH_RADIUS_M / _D_R
        top = w / EARTH_RADIUS_M / _cos((self.lat + lat_delta) * _D_R) / _D_R
        bottom = w / EARTH_RADIUS_M / _cos((self.lat - lat_delta) * _D_R) / _D_R
        lon_delta = bottom if self.lat < 0 else top
        return self.lon - lon_delta, self.lat - lat_delta, self.lon + lon_delta, self.lat + lat_delta


def estimate_step(range_m: float, lat: float) -> int:
    if range_m == 0:
        return STEP_MAX
    step = 1
    while range_m < MERCATOR_MAX:
        range_m *= 2
        step += 1
    step -= 2
    if lat > 66 or lat < -66:
        step -= 1
        if lat > 80 or lat < -80:
            step -= 1
    return min(max(step, 1), STEP_MAX)


def search_cells(shape: Shape) -> list[tuple[int, int] | None]:
    """The 9 cells (bits, step) to scan for `shape`: its centre's cell, then north,
    south, east, west, north-east, north-west, south-east, south-west; None for a
    neighbour the bounding box leaves out."""
    min_lon, min_lat, max_lon, max_lat = shape.bounds()
    radius = shape.radius
    if shape.box:  # the centre to a corner
        radius = _sqrt((shape.width / 2) * (shape.width / 2) + (shape.height / 2) * (shape.height / 2))
    step = estimate_step(radius * shape.conversion, shape.lat)
    bits = encode(shape.lon, shape.lat, step) or 0
    near = neighbours(bits, step)
    north, south, east, west = (decode(b, step) for b in near[:4])
    if (north.lat_max < max_lat or south.lat_min > min_lat or east.lon_max < max_lon
            or west.lon_min > min_lon) and step > 1:
        step -= 1
        bits = encode(shape.lon, shape.lat, step) or 0
        near = neighbours(bits, step)
    cells: list[tuple[int, int] | None] = [(bits, step)]
    cells += [(b, step) for b in near]
    if step >= 2:
        area = decode(bits, step)
        drop: set[int] = set()
        if area.lat_min < min_lat:
            drop |= {2, 7, 8}  # south, south-east, south-west
        if area.lat_max > max_lat:
            drop |= {1, 5, 6}
        if area.lon_min < min_lon:
            drop |= {4, 6, 8}
        if area.lon_max > max_lon:
            drop |= {3, 5, 7}
        for i in drop:
            cells[i] = None
    return cells


def score_range(bits: int, step: int) -> tuple[float, float]:
    """The scores [lo, hi) of the positions inside a cell."""
    shift = 52 - step * 2
    return float((bits << shift) & _M64), float(((bits + 1) << shift) & _M64)


# ------------------------------------------------------------------ replies

def human_double(d: float) -> bytes:
    """A coordinate as redis-server's addReplyHumanLongDouble prints it: 17 decimals,
    trailing zeros (and a bare dot) removed, -0 as 0."""
    text = b"%.17f" % d
    if b"." in text:
        text = text.rstrip(b"0").rstrip(b".")
    return b"0" if text == b"-0" else text


def distance_text(d: float) -> bytes:
    """A distance with 4 decimals, rounded half to even (redis-server's fixedpoint_d2string)."""
    if d == 0:
        return b"0.0000"
    scaled = d * 10000.0
    v = round(scaled) if math.isfinite(scaled) and abs(scaled) < 2.0 ** 63 else -(1 << 63)  # llrint's answer
    digits = b"%05d" % abs(v)
    return (b"-" if v < 0 else b"") + digits[:-4] + b"." + digits[-4:]
