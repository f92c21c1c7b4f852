"""SORT and SORT_RO (Redis 7.0): the elements of a list, set or sorted set, sorted by
their value or by keys named after them, with LIMIT, GET and STORE.

Facts of redis-server's sort.c kept here: options parse left to right (a later ASC /
DESC wins, LIMIT's numbers must be integers); BY with a pattern without `*` does not
sort (lists and sorted sets keep their order, DESC reverses it; a set with STORE is
sorted ALPHA instead); a pattern substitutes the element for its first `*` and reads a
string key, or a hash field with `->field`; `#` is the element itself. Numeric sorting
reads scores as strtod does (leading blanks, hex, "inf" taken; trailing bytes, NaN and
out of range refused with "One or more scores can't be converted into double" after
the whole sort), a missing BY key counts as 0 (as the lowest with ALPHA), and equal
scores order by the elements' bytes. STORE writes a list (dropping the deadline and
the old value of any type), or deletes the destination when the result is empty, and
answers the number of entries; it is logged as its effect (DEL, RPUSH).

Decisions: ALPHA compares bytes (redis-server uses strcoll without STORE; under the
C and C.UTF-8 locales that is the same order for valid UTF-8); equal ALPHA BY values
keep the elements' order (redis-server's qsort leaves it open); a set answers BY nosort
in the map's set order (sets.py). Raims has no cluster, so BY and GET patterns are
always allowed. SORT is a write command (refused without a map), SORT_RO is not.
A reply (or stored list) of more than MAX_REPLY entries (16 Mi; elements times GET
patterns) is refused with an error, so a few GET arguments on a long list cannot make
the node build billions of entries; redis-server has no such bound.
redis-server leaves errno at ERANGE after an out-of-range score, so its later numeric
SORTs of non-integer strings fail too; each SORT here reads its scores afresh.
"""

from __future__ import annotations

import math
import re
from collections import deque
from typing import Any

from raims_node.kv.commands import (
    N_GENERIC,
    N_LIST,
    Engine,
    KVClient,
    check_writable,
    command,
    parse_int,
)
from raims_node.kv.errors import SYNTAX, WRONGTYPE, CommandError
from raims_node.kv.sets import ordered
from raims_node.kv.store import ZSet

MAX_REPLY = 1 << 24  # entries a SORT answers or stores at most (a decision, module docstring)
NOT_DOUBLE = b"ERR One or more scores can't be converted into double"
_DEC = re.compile(rb"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_HEX = re.compile(rb"[+-]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?[0-9]+)?")
_INF = re.compile(rb"[+-]?(?:inf|infinity)", re.IGNORECASE)
_BLANKS = b" \t\n\v\f\r"


def strtod_score(raw: bytes) -> float | None:
    """The score of a value as sort.c reads it with strtod; None where it refuses."""
    text = raw.split(b"\0", 1)[0].lstrip(_BLANKS)
    if not text:
        return 0.0 if not raw.split(b"\0", 1)[0] else None
    if _DEC.fullmatch(text):
        v = float(text)
        if math.isinf(v) or (v == 0.0 and any(ch in b"123456789" for ch in text.split(b"e")[0].split(b"E")[0])):
            return None
        if v != 0.0 and abs(v) < 2.2250738585072014e-308:
            return None
        return v
    if _HEX.fullmatch(text):
        sign = -1.0 if text[:1] == b"-" else 1.0
        body = text.lstrip(b"+-")
        try:
            v = sign * float.fromhex(body.decode())
        except OverflowError:
            return None
        return v
    if _INF.fullmatch(text):
        return -math.inf if text[:1] == b"-" else math.inf
    return None


def lookup_pattern(e: Engine, db: int, pattern: bytes, elem: bytes) -> bytes | None:
    """The value a GET / BY pattern names for `elem` (lookupKeyByPattern)."""
    cpat = pattern.split(b"\0", 1)[0]
    if cpat == b"#":
        return elem
    star = cpat.find(b"*")
    if star < 0:
        return None
    arrow = cpat.find(b"->", star + 1)
    field: bytes | None = None
    if arrow >= 0 and arrow + 2 < len(cpat):
        field = pattern[arrow + 2:]
        keyname = pattern[:star] + elem + pattern[star + 1:arrow]
    else:
        keyname = pattern[:star] + elem + pattern[star + 1:]
    value = e.store.lookup(db, keyname)
    if value is None:
        e.read_miss(db, keyname)
        return None
    if field is not None:
        if type(value) is not dict:
            return None
        got: bytes | None = value.get(field)
        return got
    return value if type(value) is bytes else None


def _sort(e: Engine, c: KVClient, a: list[bytes], readonly: bool) -> Any:
    desc = alpha = dontsort = False
    limit_start, limit_count = 0, -1
    sortby: bytes | None = None
    store_key: bytes | None = None
    gets: list[bytes] = []
    j = 2
    n = len(a)
    while j < n:
        opt = a[j].lower()
        left = n - j - 1
        if opt == b"asc":
            desc = False
        elif opt == b"desc":
            desc = True
        elif opt == b"alpha":
            alpha = True
        elif opt == b"limit" and left >= 2:
            limit_start = parse_int(a[j + 1])
            limit_count = parse_int(a[j + 2])
            j += 2
        elif not readonly and opt == b"store" and left >= 1:
            store_key = a[j + 1]
            j += 1
        elif opt == b"by" and left >= 1:
            sortby = a[j + 1]
            dontsort = b"*" not in sortby.split(b"\0", 1)[0]
            j += 1
        elif opt == b"get" and left >= 1:
            gets.append(a[j + 1])
            j += 1
        else:
            raise CommandError(SYNTAX)
        j += 1
    if store_key is not None:
        check_writable(e)
    db = c.db
    value = e.store.lookup(db, a[1])
    if value is not None and type(value) not in (deque, set, ZSet):
        raise CommandError(WRONGTYPE)
    if value is None:
        value = deque()
    if dontsort and type(value) is set and store_key is not None:
        dontsort, alpha, sortby = False, True, None
    size = len(value)
    start = max(limit_start, 0)
    end = size - 1 if limit_count < 0 else start + limit_count - 1
    if start >= size:
        start, end = size - 1, size - 2
    end = min(end, size - 1)

    if dontsort and type(value) is not set:
        elems = list(value) if type(value) is deque else [m for _s, m in value.order]
        if desc:
            elems.reverse()
        elems = elems[start:end + 1] if end >= start else []
        start, end = 0, len(elems) - 1
    else:
        elems = ordered(value) if type(value) is set else (
            list(value) if type(value) is deque else list(value.scores))
    bad = False
    if not dontsort:
        if alpha:
            if sortby is not None:
                by = [lookup_pattern(e, db, sortby, x) for x in elems]
                keyed = sorted(zip(by, elems, strict=True), key=lambda t: (t[0] is not None, t[0] or b""), reverse=desc)
                elems = [x for _b, x in keyed]
            else:
                elems.sort(reverse=desc)
        else:
            scored: list[tuple[float, bytes]] = []
            for x in elems:
                raw = lookup_pattern(e, db, sortby, x) if sortby is not None else x
                score = 0.0
                if raw is not None:
                    s = strtod_score(raw)
                    if s is None:
                        bad = True
                    else:
                        score = s
                scored.append((score, x))
            scored.sort(reverse=desc)
            elems = [x for _s, x in scored]
    if bad:
        raise CommandError(NOT_DOUBLE)
    picked = elems[start:end + 1] if end >= start else []
    entries = len(picked) * max(len(gets), 1)
    if entries > MAX_REPLY:
        raise CommandError(b"ERR SORT reply of %d entries exceeds the map's limit of %d" % (entries, MAX_REPLY))
    out: list[bytes | None] = []
    if not gets:
        out = list(picked)
    else:
        for x in picked:
            for g in gets:
                out.append(lookup_pattern(e, db, g, x))
    if store_key is None:
        return out
    items = [b"" if v is None else v for v in out]
    store = e.store
    if items:
        store.put(db, store_key, deque(items))
        e.notify(N_LIST, "sortstore", db, store_key)
        e.prop = [[b"DEL", store_key], [b"RPUSH", store_key, *items]]
    elif store.delete(db, store_key):
        e.notify(N_GENERIC, "del", db, store_key)
        e.prop = [[b"DEL", store_key]]
    return len(items)


@command("sort", -2, write=True)
def sort(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _sort(e, c, a, False)


@command("sort_ro", -2)
def sort_ro(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _sort(e, c, a, True)
