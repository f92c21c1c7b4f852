"""HRANDFIELD and ZRANDMEMBER (Redis 7.0): random fields of a hash, members of a sorted set.

As redis-server: without a count, one field (a bulk, or nil for a missing key); with a
count, an array: a positive count gives distinct elements (all of them when the count
reaches the size), a negative one |count| elements that may repeat. WITHVALUES /
WITHSCORES add each value: a flat array in RESP2, [element, value] pairs in RESP3. The
count is parsed before the key is looked up (its errors win over WRONGTYPE). Decision,
as SRANDMEMBER here: a negative count may ask for at most MAX_REPEATS elements.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from raims_node.kv.commands import Engine, KVClient, command, parse_int
from raims_node.kv.errors import SYNTAX, CommandError
from raims_node.kv.sets import MAX_REPEATS
from raims_node.kv.store import ZSet

_LONG_MAX = (1 << 63) - 1


def _count_args(a: list[bytes], option: bytes) -> tuple[int, bool]:
    """(count, with values) of `KEY count [option]`, redis-server's checks and texts."""
    count = parse_int(a[2])
    if count < -_LONG_MAX:
        raise CommandError(b"ERR value is out of range, value must between %d and %d" % (-_LONG_MAX, _LONG_MAX))
    if len(a) > 4 or (len(a) == 4 and a[3].lower() != option):
        raise CommandError(SYNTAX)
    values = len(a) == 4
    if values and not -_LONG_MAX // 2 <= count <= _LONG_MAX // 2:
        raise CommandError(b"ERR value is out of range")
    return count, values


def _pick(e: Engine, items: Sequence[Any], count: int) -> list[Any]:
    rng = e.store.rng
    if count >= 0:
        return rng.sample(list(items), min(count, len(items)))
    if -count > MAX_REPEATS:
        raise CommandError(b"ERR value is out of range")
    return rng.choices(items, k=-count)


def _reply(c: KVClient, pairs: list[tuple[bytes, Any]], values: bool) -> list[Any]:
    if not values:
        return [k for k, _v in pairs]
    if c.resp == 3:
        return [[k, v] for k, v in pairs]
    return [x for pair in pairs for x in pair]


@command("hrandfield", -2)
def hrandfield(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    if len(a) == 2:
        h = e.get(c.db, a[1], dict)
        return e.store.rng.choice(list(h)) if h else None
    count, values = _count_args(a, b"withvalues")
    h = e.get(c.db, a[1], dict)
    if not h or count == 0:
        return []
    return _reply(c, _pick(e, list(h.items()), count), values)


@command("zrandmember", -2)
def zrandmember(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    if len(a) == 2:
        z = e.get(c.db, a[1], ZSet)
        return e.store.rng.choice(list(z.scores)) if z else None
    count, scores = _count_args(a, b"withscores")
    z = e.get(c.db, a[1], ZSet)
    if not z or count == 0:
        return []
    return _reply(c, _pick(e, list(z.scores.items()), count), scores)
