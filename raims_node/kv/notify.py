"""Keyspace notification flags (redis-server's `notify-keyspace-events`) and the `m`
class: the "keymiss" event of a read of a missing key.

redis-server 7.0.15 sends "keymiss" from lookupKey for every read lookup (lookupKeyRead*,
never a write lookup: INCR, LPOP, DEL... say nothing) that finds no key, unless the
caller passes LOOKUP_NONOTIFY (OBJECT, serving a blocked client). `m` is not in `A`.
Measured there, one command at a time on an empty map (tests/integration/
test_kv_diff_keymiss.py): READ_KEYS below lists each command's read lookups in their
order, a key as many times as redis-server looks it up (MGET k k: twice; XREAD: each
stream twice, once parsing its ID, once reading).

The engine (commands.Engine.execute) looks those keys up before the command runs and
holds the command's events until it returns, so that a "keymiss" comes before them, as
in redis-server, and is dropped when the command failed on its arguments before any
lookup (a syntax error, a bad number). Kept different, documented in DESIGN-NOTES:
- an error after the lookups (WRONGTYPE of a later key, NOGROUP) keeps the misses of the
  keys before the first existing one only;
- an expired key's "expired" event comes with the lookups, before all "keymiss" events
  rather than just before its own.
SORT's BY / GET pattern keys are read lookups of the command itself (sort.py calls
`Engine.read_miss`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from raims_node.kv.errors import CommandError
from raims_node.kv.reply import Err

# notify-keyspace-events flags (Redis's server.h)
N_KEYSPACE, N_KEYEVENT, N_GENERIC, N_STRING, N_LIST, N_SET = 1, 2, 4, 8, 16, 32
N_HASH, N_ZSET, N_EXPIRED, N_EVICTED, N_STREAM, N_KEY_MISS, N_MODULE, N_NEW = (
    64, 128, 256, 512, 1024, 2048, 4096, 8192)
N_ALL = N_GENERIC | N_STRING | N_LIST | N_SET | N_HASH | N_ZSET | N_EXPIRED | N_EVICTED | N_STREAM | N_MODULE
_FLAG_CHARS = {"g": N_GENERIC, "$": N_STRING, "l": N_LIST, "s": N_SET, "h": N_HASH, "z": N_ZSET,
               "x": N_EXPIRED, "e": N_EVICTED, "t": N_STREAM, "d": N_MODULE, "n": N_NEW,
               "K": N_KEYSPACE, "E": N_KEYEVENT, "m": N_KEY_MISS, "A": N_ALL}


def parse_notify_flags(text: str) -> int | None:
    """Redis's keyspaceEventsStringToFlags; None for an unknown character."""
    flags = 0
    for ch in text:
        bit = _FLAG_CHARS.get(ch)
        if bit is None:
            return None
        flags |= bit
    return flags


def notify_flags_text(flags: int) -> str:
    """Redis's keyspaceEventsFlagsToString."""
    out = ""
    if flags & N_ALL == N_ALL:
        out = "A"
    else:
        for ch in "g$lshzxetdn":
            if flags & _FLAG_CHARS[ch]:
                out += ch
    for ch in "KEm":
        if flags & _FLAG_CHARS[ch]:
            out += ch
    return out


# ---------------------------------------------------------------- read lookups

Keys = Callable[[list[bytes]], list[bytes]]


def _first(a: list[bytes]) -> list[bytes]:
    return a[1:2]


def _second(a: list[bytes]) -> list[bytes]:
    return a[2:3]


def _rest(a: list[bytes]) -> list[bytes]:
    return a[1:]


def _counted(at: int) -> Keys:
    """`numkeys` at a[at], the keys after it."""
    def keys(a: list[bytes]) -> list[bytes]:
        n = int(a[at])
        return a[at + 1:at + 1 + n] if 0 < n <= len(a) else []
    return keys


def _set(a: list[bytes]) -> list[bytes]:
    """SET ... GET reads the old value (getGenericCommand)."""
    return a[1:2] if any(x.upper() == b"GET" for x in a[3:]) else []


def _bitfield(a: list[bytes]) -> list[bytes]:
    """BITFIELD with GET operations only is a read (lookupKeyRead)."""
    return [] if any(x.upper() in (b"SET", b"INCRBY") for x in a[2:]) else a[1:2]


def _xinfo(a: list[bytes]) -> list[bytes]:
    return a[2:3] if a[1].upper() in (b"STREAM", b"GROUPS", b"CONSUMERS") else []


def _streams(a: list[bytes]) -> list[bytes]:
    """The keys after STREAMS (XREAD: looked up twice, XREADGROUP: once)."""
    upper = [x.upper() for x in a]
    if b"STREAMS" not in upper:
        return []
    at = upper.index(b"STREAMS") + 1
    n = (len(a) - at) // 2
    keys = a[at:at + n]
    return keys + keys if a[0].lower() == b"xread" else keys


READ_KEYS: dict[bytes, Keys] = {name: _first for name in (
    b"get", b"strlen", b"getrange", b"substr", b"getdel", b"getex", b"getset", b"getbit", b"bitcount",
    b"bitpos", b"bitfield_ro", b"type", b"ttl", b"pttl", b"expiretime", b"pexpiretime", b"dump", b"copy",
    b"sort", b"sort_ro", b"llen", b"lrange", b"lindex", b"lpos", b"hget", b"hmget", b"hgetall", b"hkeys",
    b"hvals", b"hlen", b"hexists", b"hstrlen", b"hrandfield", b"hscan", b"smembers", b"sismember",
    b"smismember", b"scard", b"srandmember", b"sscan", b"zcard", b"zscore", b"zmscore", b"zrank", b"zrevrank",
    b"zcount", b"zlexcount", b"zrange", b"zrangebyscore", b"zrevrangebyscore", b"zrevrange", b"zrangebylex",
    b"zrevrangebylex", b"zrandmember", b"zscan", b"geopos", b"geodist", b"geohash", b"georadius",
    b"georadius_ro", b"georadiusbymember", b"georadiusbymember_ro", b"geosearch", b"xlen", b"xrange",
    b"xrevrange", b"xpending", b"xack", b"xautoclaim", b"xclaim")}
READ_KEYS.update({name: _rest for name in (
    b"mget", b"exists", b"touch", b"sinter", b"sunion", b"sdiff", b"pfcount", b"pfmerge")})
READ_KEYS.update({name: _counted(1) for name in (b"sintercard", b"zunion", b"zinter", b"zdiff", b"zintercard")})
READ_KEYS.update({name: _counted(2) for name in (b"zunionstore", b"zinterstore", b"zdiffstore")})
READ_KEYS.update({
    b"set": _set, b"bitfield": _bitfield, b"xinfo": _xinfo, b"xread": _streams, b"xreadgroup": _streams,
    b"lcs": lambda a: a[1:3], b"bitop": lambda a: a[3:], b"zrangestore": _second, b"geosearchstore": _second,
    b"sinterstore": lambda a: a[2:], b"sunionstore": lambda a: a[2:], b"sdiffstore": lambda a: a[2:]})
# XREADGROUP stops at its first missing stream (NOGROUP)
STOP_AT_MISS = frozenset((b"xreadgroup",))
# errors a command gives after its lookups: the misses before them stand
AFTER_LOOKUP = (b"WRONGTYPE", b"NOGROUP", b"ERR no such key")


def read_keys(name: bytes, args: list[bytes]) -> list[bytes]:
    """The keys `args` reads in redis-server's lookup order ([] when not a reader)."""
    keys = READ_KEYS.get(name)
    if keys is None:
        return []
    try:
        return keys(args)
    except (ValueError, IndexError):
        return []


def run_reading(e: Any, client: Any, cmd: Any, args: list[bytes], keys: list[bytes]) -> Any:
    """Run `cmd` (a reader of `keys`) with `m` on: the keys' lookups first, their
    "keymiss" events then the command's own, in that order, once it has returned."""
    held: list[tuple[Any, Any]] = []
    publish = e.publish
    e.publish, e.held = (lambda channel, payload: held.append((channel, payload))), held
    db, lookup = client.db, e.store.lookup
    stop_at_miss = args[0].lower() in STOP_AT_MISS
    try:
        present = False
        for key in keys:
            if lookup(db, key) is not None:
                present = True
                continue
            held.append((None, (db, key, present)))
            if stop_at_miss:
                break
        try:
            reply = cmd.handler(e, client, args)
        except CommandError as exc:
            reply = Err(exc.text)
    finally:
        e.publish, e.held = publish, None
    keep: Callable[[bool], bool] = _keep_all
    if type(reply) is Err:
        keep = _before_present if reply.text.startswith(AFTER_LOOKUP) else _keep_none
    for channel, payload in held:
        if channel is not None:
            publish(channel, payload)
        elif keep(payload[2]):
            e.notify(N_KEY_MISS, "keymiss", payload[0], payload[1])
    return reply


def _keep_all(present_before: bool) -> bool:
    return True


def _keep_none(present_before: bool) -> bool:
    return False


def _before_present(present_before: bool) -> bool:
    return not present_before
