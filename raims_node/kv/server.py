"""Server commands of the data side: INFO (keyspace, server, stats, persistence),
CONFIG GET / SET for the parameters the map has (notify-keyspace-events, databases),
SAVE / BGSAVE / LASTSAVE on the map file, MODULE LIST (none), and WAIT.

Decisions: CONFIG GET knows the parameters that describe what the map does (its
databases, notifications, OBJECT ENCODING's size limits, maxmemory and its policy, the
log as `appendonly` with `appendfsync everysec`, the map's `dir` / `dbfilename` /
`appendfilename`); CONFIG SET only changes notify-keyspace-events (node-wide, as in
redis-server), busy-reply-threshold / lua-time-limit (a script's time limit,
scripting.py), maxmemory (node-wide, redis-server's memory values, enforced as
`noeviction`: kv/__init__.py) and maxmemory-policy, which takes only noeviction (another
of redis-server's policies gets "ERR CONFIG SET failed (possibly related to argument
'maxmemory-policy') - the map does not evict keys: noeviction is its only policy", an
unknown one redis-server's error); the other known parameters are read-only and an
unknown one gets redis-server's error. INFO answers a RESP3 client with a verbatim string. SAVE and
BGSAVE write the map's snapshot (persist.py's compaction: the snapshot, then an empty
log) in the node's loop, so BGSAVE has finished when it answers redis-server's "Background
saving started" and `rdb_bgsave_in_progress` is always 0; BGSAVE SCHEDULE does the same.
Without a map they get the map's error; LASTSAVE then answers the node's start. A failed
save answers `ERR saving the map failed: <cause>` and INFO shows `rdb_last_bgsave_status:err`.

WAIT numreplicas timeout: as redis-server 7.0.15 without replicas (the map has none):
0 at once when numreplicas <= 0 or inside MULTI, else the client blocks until the timeout
(0: until CLIENT UNBLOCK) and answers 0 (also without a map: the engine is there). Its
arguments are read as redis-server reads them; a timeout so large that redis-server's
deadline overflows waits for ever there (its timeout table reads the wrapped deadline as
unsigned: measured still blocked after 2 s) and here alike. The session's READONLY / READWRITE / ASKING / CLUSTER answer redis-server's error
for cluster support disabled (CLUSTER_DISABLED, with CLUSTER's subcommands' arities
here for scripts and the Redis bridge alike).
"""


from __future__ import annotations

from collections.abc import Callable
from typing import Any

from raims_node.kv.commands import (
    Engine,
    KVClient,
    check_writable,
    command,
    parse_int,
    syntax_error,
)
from raims_node.kv.errors import CommandError, MapFileError
from raims_node.kv.glob import glob_match
from raims_node.kv.notify import notify_flags_text, parse_notify_flags
from raims_node.kv.reply import OK, Map, Simple, Verbatim

# The redis-server these commands follow and are differential-tested against (Debian
# 12's): clients and their test suites turn features on by it, so it claims no later one.
REDIS_VERSION = b"7.0.15"


# What the map does, under redis-server 7.0's parameter names and values: OBJECT
# ENCODING's size limits (objects.py, with their pre-7.0 aliases), no eviction, the log's
# fsync policy; read-only here (but maxmemory-policy noeviction).
_FIXED = {
    b"hash-max-listpack-entries": b"512", b"hash-max-ziplist-entries": b"512",
    b"hash-max-listpack-value": b"64", b"hash-max-ziplist-value": b"64",
    b"set-max-intset-entries": b"512",
    b"zset-max-listpack-entries": b"128", b"zset-max-ziplist-entries": b"128",
    b"zset-max-listpack-value": b"64", b"zset-max-ziplist-value": b"64",
    b"list-max-listpack-size": b"-2", b"list-max-ziplist-size": b"-2",
    b"maxmemory-policy": b"noeviction", b"appendfsync": b"everysec", b"save": b"",
}
_POLICIES = (b"volatile-lru", b"volatile-lfu", b"volatile-random", b"volatile-ttl", b"allkeys-lru", b"allkeys-lfu",
             b"allkeys-random", b"noeviction")
LLONG_MAX = (1 << 63) - 1
_UNITS = {b"": 1, b"b": 1, b"k": 1000, b"kb": 1024, b"m": 1000 ** 2, b"mb": 1024 ** 2, b"g": 1000 ** 3,
          b"gb": 1024 ** 3}


def parse_memory(raw: bytes) -> int:
    """redis-server's memory value: digits and an optional unit (k = 1000, kb = 1024...)."""
    digits = raw.rstrip(b"bBkKmMgG")
    unit = _UNITS.get(raw[len(digits):].lower())
    if not digits.isdigit() or unit is None or int(digits) * unit > LLONG_MAX:
        raise ValueError("argument must be a memory value")
    return int(digits) * unit


CLUSTER_DISABLED = b"ERR This instance has cluster support disabled"
# redis-server 7.0.15's CLUSTER subcommands and their arities (COMMAND INFO cluster)
CLUSTER_SUBCOMMANDS = {
    b"addslots": -3, b"addslotsrange": -4, b"bumpepoch": 2, b"count-failure-reports": 3,
    b"countkeysinslot": 3, b"delslots": -3, b"delslotsrange": -4, b"failover": -2, b"flushslots": 2,
    b"forget": 3, b"getkeysinslot": 4, b"help": 2, b"info": 2, b"keyslot": 3, b"links": 2, b"meet": -4,
    b"myid": 2, b"nodes": 2, b"replicas": 3, b"replicate": 3, b"reset": -2, b"saveconfig": 2,
    b"set-config-epoch": 3, b"setslot": -4, b"shards": 2, b"slaves": 3, b"slots": 2}


def wait_args(a: list[bytes]) -> tuple[int, int]:
    """WAIT's numreplicas and timeout (ms) with redis-server's errors, in its order."""
    numreplicas = parse_int(a[1])
    timeout = parse_int(a[2], b"ERR timeout is not an integer or out of range")
    if timeout < 0:
        raise CommandError(b"ERR timeout is negative")
    return numreplicas, timeout


@command("wait", 3)
def wait(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    numreplicas, timeout = wait_args(a)
    if numreplicas <= 0 or c.in_multi:  # no replica ever acknowledges
        return 0
    return e.block(c, (), timeout, a, timeout_reply=0)


SETTABLE = (b"notify-keyspace-events", b"busy-reply-threshold", b"lua-time-limit", b"maxmemory",
            b"maxmemory-policy")  # the map's, by CONFIG SET


def config_params(e: Engine) -> dict[bytes, bytes]:
    """The map's parameters for CONFIG GET (the session's CONFIG adds the transport's)."""
    saver = e.saver
    params = {b"notify-keyspace-events": notify_flags_text(e.notify_flags).encode(),
              b"databases": b"%d" % len(e.store.dbs), b"appendonly": b"yes" if saver is not None else b"no",
              b"busy-reply-threshold": b"%d" % e.script_time_limit_ms,
              b"lua-time-limit": b"%d" % e.script_time_limit_ms, b"maxmemory": b"%d" % e.maxmemory, **_FIXED}
    if saver is not None:
        params.update({b"dir": str(saver.path.parent).encode(), b"dbfilename": saver.path.name.encode(),
                       b"appendfilename": saver.log_path.name.encode()})
    return params


def config_matches(params: dict[bytes, bytes], patterns: list[bytes]) -> list[tuple[bytes, bytes]]:
    """CONFIG GET's answer: the parameters a glob pattern matches; a plain name answers as
    it was asked, as redis-server 7.0."""
    out: dict[bytes, bytes] = {}
    for pattern in patterns:
        if any(ch in pattern for ch in b"*?["):
            out.update((k, v) for k, v in params.items() if glob_match(pattern.lower(), k))
        elif pattern.lower() in params:
            out[pattern] = params[pattern.lower()]
    return list(out.items())


def config_setter(e: Engine, name: bytes, value: bytes) -> Callable[[], None]:
    """CONFIG SET of one of the map's parameters: the change to apply once every value of
    the command is known good; CommandError for an immutable or unknown one, a bad value."""
    failed = b"ERR CONFIG SET failed (possibly related to argument '%s') - " % name
    if name.lower() == b"maxmemory":
        try:
            limit = parse_memory(value)
        except ValueError as exc:
            raise CommandError(failed + str(exc).encode()) from None
        def apply() -> None:
            e.maxmemory = limit
            e.sample_memory()
        return apply
    if name.lower() == b"maxmemory-policy":
        if value.lower() not in _POLICIES:
            raise CommandError(failed + b"argument(s) must be one of the following: " + b", ".join(_POLICIES))
        if value.lower() != b"noeviction":
            raise CommandError(failed + b"the map does not evict keys: noeviction is its only policy")
        return lambda: None
    if name.lower() in (b"busy-reply-threshold", b"lua-time-limit"):
        limit = parse_int(value, b"ERR CONFIG SET failed (possibly related to argument '%s') - "
                          b"argument couldn't be parsed into an integer" % name)
        if limit < 0:
            raise CommandError(b"ERR CONFIG SET failed (possibly related to argument '%s') - "
                               b"argument must be between 0 and 9223372036854775807 inclusive" % name)
        return lambda: setattr(e, "script_time_limit_ms", limit)
    if name.lower() not in SETTABLE:
        if name.lower() in config_params(e):
            raise CommandError(b"ERR CONFIG SET failed (possibly related to argument '%s') - "
                               b"can't set immutable config" % name)
        raise CommandError(b"ERR Unknown option or number of arguments for CONFIG SET - '%s'" % name)
    flags = parse_notify_flags(value.decode("latin-1"))
    if flags is None:
        raise CommandError(b"ERR CONFIG SET failed (possibly related to argument "
                           b"'notify-keyspace-events') - Invalid event class character. "
                           b"Use 'Ag$lshzxeKEtmdn'.")
    return lambda: e.set_notify_flags(flags)


def reset_stats(e: Engine) -> None:
    """CONFIG RESETSTAT's part in the map: its command and expiry counters."""
    e.commands_processed = 0
    e.store.expired_keys = 0


@command("config", -2, subcommands=("get", "set", "resetstat"))
def config(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    """CONFIG of a map without a Redis transport (the transport's session answers its own)."""
    sub = a[1].lower()
    if sub == b"get":
        if len(a) < 3:
            raise CommandError(b"ERR wrong number of arguments for 'config|get' command")
        return Map(config_matches(config_params(e), a[2:]))
    if sub == b"set":
        if len(a) < 4 or len(a) % 2:
            raise CommandError(b"ERR wrong number of arguments for 'config|set' command")
        changes = [config_setter(e, a[i], a[i + 1]) for i in range(2, len(a), 2)]
        for change in changes:
            change()
        return OK
    if sub == b"resetstat":
        if len(a) != 2:
            raise CommandError(b"ERR wrong number of arguments for 'config|resetstat' command")
        reset_stats(e)
        return OK
    raise CommandError(b"ERR unknown subcommand '%s'. Try CONFIG HELP." % a[1][:128])


@command("module", -2, subcommands=("list",))
def module(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    """MODULE LIST: a node loads no Redis modules; LOAD and the others are unknown here."""
    if a[1].lower() == b"list":
        if len(a) != 2:
            raise CommandError(b"ERR wrong number of arguments for 'module|list' command")
        return []
    raise CommandError(b"ERR unknown subcommand '%s'. Try MODULE HELP." % a[1][:128])


def _save(e: Engine) -> None:
    check_writable(e)
    assert e.saver is not None
    try:
        e.saver.rewrite(e.store)
    except MapFileError as exc:
        e.save_failed = True
        raise CommandError(b"ERR saving the map failed: %s" % str(exc).encode()) from None
    e.save_failed = False


@command("save", 1)
def save(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    _save(e)
    return OK


@command("bgsave", -1)
def bgsave(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    if len(a) > 2 or (len(a) == 2 and a[1].lower() != b"schedule"):
        raise syntax_error()
    _save(e)
    return Simple(b"Background saving started")


@command("lastsave", 1)
def lastsave(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return int(e.saver.last_save if e.saver is not None else e.started)


def persistence_section(e: Engine) -> bytes:
    """INFO's persistence section (the session's INFO and this module's)."""
    saver = e.saver
    return (b"# Persistence\r\nloading:0\r\nrdb_changes_since_last_save:%d\r\nrdb_bgsave_in_progress:0\r\n"
            b"rdb_last_save_time:%d\r\nrdb_last_bgsave_status:%s\r\n" % (
                e.store.dirty - (saver.saved_dirty if saver is not None else 0),
                int(saver.last_save if saver is not None else e.started), b"err" if e.save_failed else b"ok"))


def keyspace_lines(e: Engine) -> list[bytes]:
    now = e.store.now_ms()
    out = []
    for i, d in enumerate(e.store.dbs):
        if d.data:
            ttls = [t - now for t in d.expires.values() if t > now]
            avg = sum(ttls) // len(ttls) if ttls else 0
            out.append(b"db%d:keys=%d,expires=%d,avg_ttl=%d" % (i, len(d.data), len(d.expires), avg))
    return out


@command("info", -1)
def info(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    wanted = {s.lower() for s in a[1:]} or {b"default"}
    every = bool(wanted & {b"all", b"everything", b"default"})
    sections: list[bytes] = []
    if every or b"server" in wanted:
        sections.append(b"# Server\r\nredis_version:%s\r\nredis_mode:standalone\r\nraims_map:%s\r\n" % (
            REDIS_VERSION, b"yes" if e.store.writable else b"no"))
    if every or b"persistence" in wanted:
        sections.append(persistence_section(e))
    if every or b"stats" in wanted:
        sections.append(b"# Stats\r\ntotal_commands_processed:%d\r\nexpired_keys:%d\r\n" % (
            e.commands_processed, e.store.expired_keys))
    if every or b"keyspace" in wanted:
        sections.append(b"# Keyspace\r\n" + b"".join(line + b"\r\n" for line in keyspace_lines(e)))
    return Verbatim(b"\r\n".join(sections))
