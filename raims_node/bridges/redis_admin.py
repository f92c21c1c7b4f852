"""Introspection and server commands of the Redis transport (issue 23 item 6): CLIENT
LIST | INFO | KILL | REPLY, COMMAND COUNT | DOCS, INFO, AUTH, HELLO, TIME, ROLE, REPLICAOF (MONITOR
in redis_monitor.py), in redis-server 7's reply formats.

A session reaches the transport's other connections through its `RedisHost` (one per
listening transport, made by redis.py; a unit test makes its own): the live sessions,
the start time, the connection and command counters. The handlers here take the
session through `ClientView`, so this module imports no session code.

- CLIENT LIST [TYPE normal|pubsub|master|replica] [ID id...] and CLIENT INFO answer
  redis-server's `id=.. addr=.. laddr=.. fd=.. name=.. age=.. idle=.. flags=.. db=..
  sub=.. psub=.. ssub=.. multi=.. watch=.. qbuf=.. ... cmd=.. user=default redir=-1
  resp=.. lib-name=.. lib-ver=..` lines (a verbatim string in RESP3); the buffer and
  memory fields follow redis-server's model (redis_client_mem.py); flags are N, P
  (subscribed), x (in MULTI), b (blocked).
- CLIENT KILL ip:port (old form: +OK or `No such client`) and CLIENT KILL with filters
  ID, ADDR, LADDR, USER, TYPE, MAXAGE, SKIPME (answer: how many were killed). A killed
  connection closes after its queued output; killing oneself closes after the reply.
- CLIENT REPLY ON|OFF|SKIP as redis-server: OFF silences every reply until ON (whose
  +OK is sent), SKIP silences the next command's (unless that is ON: answered); pub/sub
  messages and (un)subscribe confirmations are pushes and still flow (as redis-server 7.0.15 does). A QUIT under OFF
  closes at once (redis-server 7.0 leaves that connection open: nothing to write).
- CLIENT UNBLOCK id [TIMEOUT|ERROR]: a client blocked in a pop answers as if it timed
  out, or `-UNBLOCKED client unblocked via CLIENT UNBLOCK`; 1 if it was blocked.
  CLIENT GETREDIR (-1) and TRACKINGINFO (off) as redis-server without tracking (client
  tracking is not provided); CLIENT NO-EVICT ON|OFF answers +OK (the map never evicts).
- COMMAND COUNT counts the top-level commands this connection can run (the data
  commands with a key-value map); COMMAND DOCS [name...] answers redis-server 7.0.15's
  entries (redis_docs.py), with the subcommands raims answers; COMMAND, COMMAND INFO |
  LIST | GETKEYS | GETKEYSANDFLAGS are redis_command_info.py.
- AUTH (as HELLO AUTH: the `default` user with any password), TIME and ROLE (a master
  without replicas), REPLICAOF | SLAVEOF NO ONE (+OK: it is one already; another server
  to follow is refused), MONITOR (redis_monitor.py).
- INFO [section...]: server, clients, memory (used_memory is the resident set, its peak
  the process's max resident set), stats, replication (a standalone master: no replicas,
  no backlog, offset 0, redis-server 7.0.15's fields), cpu, cluster (disabled: tools
  such as redis-py's own test suite read `cluster_enabled`), and with a map persistence
  and keyspace (from raims_node.kv.server, which also answers INFO for a map without a
  transport), commandstats, errorstats (also in the default INFO, as redis-server 7.0.15's),
  latencystats (redis_stats.py; per transport, as the rest of INFO). Not provided: modules.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from raims_node.bridges.redis_client_mem import buffer_fields
from raims_node.bridges.redis_docs import command_doc
from raims_node.bridges.redis_monitor import Client
from raims_node.bridges.redis_ops import OpsState
from raims_node.bridges.redis_stats import Stats
from raims_node.bridges.resp import (
    OK,
    encode_array_header,
    encode_bulk,
    encode_int,
    encode_map_header,
    parse_ll,
)
from raims_node.kv.commands import COMMANDS, Engine
from raims_node.kv.reply import Map, SetReply, Verbatim, encode
from raims_node.kv.server import REDIS_VERSION, keyspace_lines, persistence_section
from raims_node.procmem import rss_bytes as _rss_bytes

ERR_SYNTAX = "syntax error"
ERR_BAD_NAME = "Client names cannot contain spaces, newlines or special characters."
ERR_WRONGPASS = "invalid username-password pair or user is disabled."


class Versioned(Protocol):
    @property
    def version(self) -> str: ...


class ClientView(Protocol):
    """What the introspection commands read of a Redis session (redis_session.py)."""

    client_id: int
    name: bytes | None
    lib_name: bytes | None
    lib_ver: bytes | None
    db: int
    resp: int
    addr: str
    laddr: str
    fd: int
    created: float
    last_active: float
    last_cmd: str
    reply_off: bool
    reply_skip_next: bool
    _reply_skip: bool  # this command's reply is skipped (a SKIP before it)

    @property
    def config(self) -> Versioned: ...

    @property
    def host(self) -> RedisHost: ...

    @property
    def closing(self) -> bool: ...

    @property
    def buffered(self) -> int: ...

    @property
    def input_buffered(self) -> int: ...

    def sub_names(self) -> tuple[Collection[bytes], Collection[bytes], Collection[bytes]]: ...

    def multi_state(self) -> tuple[int, int, list[bytes] | None, list[list[bytes]]]: ...

    def engine(self) -> Engine | None: ...

    def kill(self) -> None: ...

    def unblock(self, error: bool) -> bool: ...

    def command_tree(self) -> dict[str, list[str]]: ...

    def _write(self, data: bytes) -> bool: ...

    def _error(self, message: str | bytes, code: str = "ERR") -> None: ...


@dataclass(slots=True)
class RedisHost:
    """One Redis transport as its sessions see it."""

    sessions: Callable[[], Iterable[ClientView]] = tuple
    clock: Callable[[], float] = time.time
    started: float = field(default_factory=time.time)
    port: int = 0
    connections: int = 0
    commands: int = 0
    monitors: set[Client] = field(default_factory=set)  # MONITOR's clients (redis_monitor.py)
    ops: OpsState = field(default_factory=OpsState)  # SLOWLOG, CLIENT PAUSE, timeout... (redis_ops.py)
    stats: Stats = field(default_factory=Stats)  # INFO commandstats, errorstats... (redis_stats.py)

    def __post_init__(self) -> None:
        self.ops.clock = self.clock


def sub_counts(c: ClientView) -> tuple[int, int, int]:
    """Channels, patterns and shard channels `c` holds."""
    channels, patterns, shards = c.sub_names()
    return len(channels), len(patterns), len(shards)


# ------------------------------------------------------------ CLIENT ID / SETNAME / GETNAME / SETINFO

def valid_attr(value: bytes) -> bool:
    """Client names and library attributes: printable ASCII without spaces."""
    return all(33 <= c <= 126 for c in value)


def client_id(s: ClientView, args: list[bytes]) -> None:
    s._write(b":%d\r\n" % s.client_id)


def client_setname(s: ClientView, args: list[bytes]) -> None:
    if not valid_attr(args[2]):
        s._error(ERR_BAD_NAME)
        return
    s.name = args[2] or None
    s._write(OK)


def client_getname(s: ClientView, args: list[bytes]) -> None:
    s._write(encode(s.name, s.resp))


def client_setinfo(s: ClientView, args: list[bytes]) -> None:
    attr, value = args[2], args[3]
    if attr.lower() not in (b"lib-name", b"lib-ver"):
        s._error(b"Unrecognized option '%s'" % attr)
    elif not valid_attr(value):
        s._error(b"%s cannot contain spaces, newlines or special characters." % attr)
    else:
        if attr.lower() == b"lib-name":
            s.lib_name = value or None
        else:
            s.lib_ver = value or None
        s._write(OK)


# ------------------------------------------------------------ CLIENT LIST / INFO

def _flags(s: ClientView) -> str:
    multi, _watch, blocked, _ = s.multi_state()
    flags = ("P" if any(sub_counts(s)) else "") + ("x" if multi >= 0 else "") + ("b" if blocked else "")
    return flags or "N"


def client_line(s: ClientView, now: float, running: list[bytes] | None = None) -> bytes:
    """`s`'s line; `running`: the command it runs now (CLIENT LIST / INFO of its own)."""
    sub, psub, ssub = sub_counts(s)
    multi, watch, blocked, queued = s.multi_state()
    fields = (
        f"id={s.client_id} addr={s.addr} laddr={s.laddr} fd={s.fd} name={_txt(s.name)} "
        f"age={int(now - s.created)} idle={int(now - s.last_active)} flags={_flags(s)} db={s.db} "
        f"sub={sub} psub={psub} ssub={ssub} multi={multi} watch={watch} "
        + buffer_fields(pending_in=s.input_buffered, running=running, blocked=blocked, fresh=s.last_cmd == "NULL",
                        watched=watch, queued=queued,
                        age=now - s.created, idle=now - s.last_active, output=s.buffered, subs=(sub, psub, ssub))
        + f" cmd={s.last_cmd} user=default redir=-1 resp={s.resp} "
        f"lib-name={_txt(s.lib_name)} lib-ver={_txt(s.lib_ver)}\n")
    return fields.encode("utf-8", "surrogateescape")


def _txt(b: bytes | None) -> str:
    return "" if b is None else b.decode("utf-8", "surrogateescape")


def _live(s: ClientView) -> list[ClientView]:
    return sorted((c for c in s.host.sessions() if not c.closing), key=lambda c: c.client_id)


def client_list(s: ClientView, args: list[bytes]) -> None:
    clients = _live(s)
    i = 2
    while i < len(args):
        opt = args[i].lower()
        if opt == b"type" and i + 1 < len(args):
            kind = args[i + 1].lower()
            if kind not in (b"normal", b"pubsub", b"master", b"replica", b"slave"):
                s._error(b"Unknown client type '%s'" % args[i + 1])
                return
            clients = [c for c in clients if _kind(c) == kind]
            i += 2
        elif opt == b"id" and i + 1 < len(args):
            ids = set()
            for raw in args[i + 1:]:
                if not raw.isdigit() or int(raw) <= 0:
                    s._error("Invalid client ID")
                    return
                ids.add(int(raw))
            clients = [c for c in clients if c.client_id in ids]
            i = len(args)
        else:
            s._error(ERR_SYNTAX)
            return
    now = s.host.clock()
    s._write(encode(Verbatim(b"".join(client_line(c, now, args if c is s else None) for c in clients)), s.resp))


def _kind(c: ClientView) -> bytes:
    return b"pubsub" if any(sub_counts(c)) else b"normal"


def client_info(s: ClientView, args: list[bytes]) -> None:
    s._write(encode(Verbatim(client_line(s, s.host.clock(), args)), s.resp))


# ------------------------------------------------------------ CLIENT KILL / REPLY

def client_kill(s: ClientView, args: list[bytes]) -> None:
    clients = _live(s)
    if len(args) == 3:  # the old form: CLIENT KILL addr
        victims = [c for c in clients if c.addr == args[2].decode("utf-8", "replace")]
        if not victims:
            s._error("No such client")
            return
        s._write(OK)
        _kill(victims)
        return
    if len(args) % 2:
        s._error(ERR_SYNTAX)
        return
    skipme = True
    now = s.host.clock()
    for i in range(2, len(args), 2):
        opt, raw = args[i].lower(), args[i + 1]
        value = raw.decode("utf-8", "replace")
        if opt == b"id":
            if not raw.isdigit() or int(raw) <= 0:
                s._error("client-id should be greater than 0")
                return
            clients = [c for c in clients if c.client_id == int(raw)]
        elif opt == b"addr":
            clients = [c for c in clients if c.addr == value]
        elif opt == b"laddr":
            clients = [c for c in clients if c.laddr == value]
        elif opt == b"user":
            if raw != b"default":
                s._error(b"No such user '%s'" % raw)
                return
        elif opt == b"type":
            kind = raw.lower()
            if kind not in (b"normal", b"pubsub", b"master", b"replica", b"slave"):
                s._error(b"Unknown client type '%s'" % raw)
                return
            clients = [c for c in clients if _kind(c) == kind]
        elif opt == b"skipme":
            if raw.lower() not in (b"yes", b"no"):
                s._error(ERR_SYNTAX)
                return
            skipme = raw.lower() == b"yes"
        elif opt == b"maxage":
            if not raw.lstrip(b"-").isdigit():
                s._error("value is not an integer or out of range")
                return
            clients = [c for c in clients if now - c.created >= int(raw)]
        else:
            s._error(ERR_SYNTAX)
            return
    if skipme:
        clients = [c for c in clients if c is not s]
    s._write(b":%d\r\n" % len(clients))
    _kill(clients)


def _kill(victims: Sequence[ClientView]) -> None:
    for c in victims:
        c.kill()


def client_reply(s: ClientView, args: list[bytes]) -> None:
    mode = args[2].lower()
    if mode == b"on":  # clears a SKIP given just before it too, and is answered (as redis-server)
        s.reply_off = s.reply_skip_next = s._reply_skip = False
        s._write(OK)
    elif mode == b"off":
        s.reply_off = True
    elif mode == b"skip":
        if not s.reply_off:
            s.reply_skip_next = True
    else:
        s._error(ERR_SYNTAX)


def client_unblock(s: ClientView, args: list[bytes]) -> None:
    if len(args) > 4:
        s._error(b"unknown subcommand or wrong number of arguments for '%s'. Try CLIENT HELP." % args[1])
        return
    target = parse_ll(args[2])
    if target is None:
        s._error("value is not an integer or out of range")
        return
    if len(args) == 4 and args[3].lower() not in (b"timeout", b"error"):
        s._error("CLIENT UNBLOCK reason should be TIMEOUT or ERROR")
        return
    error = len(args) == 4 and args[3].lower() == b"error"
    done = any(c.unblock(error) for c in _live(s) if c.client_id == target)
    s._write(b":%d\r\n" % done)


def client_no_evict(s: ClientView, args: list[bytes]) -> None:
    if args[2].lower() in (b"on", b"off"):
        s._write(OK)
    else:
        s._error(ERR_SYNTAX)


def client_getredir(s: ClientView, args: list[bytes]) -> None:
    s._write(b":-1\r\n")


def client_trackinginfo(s: ClientView, args: list[bytes]) -> None:
    s._write(encode(Map([(b"flags", SetReply([b"off"])), (b"redirect", -1), (b"prefixes", [])]), s.resp))


# ------------------------------------------------------------ COMMAND

_TX = ("multi", "exec", "discard", "watch", "unwatch")


def data_tree() -> dict[str, list[str]]:
    """The map's commands (and MULTI...UNWATCH) -> their subcommands' full names."""
    tree = {cmd.name: [f"{cmd.name}|{sub}" for sub in cmd.subcommands] for cmd in COMMANDS.values()}
    for name in _TX:
        tree.setdefault(name, [])
    return tree


def full_tree(s: ClientView) -> dict[str, list[str]]:
    """Every top-level command this connection runs -> its subcommands' full names."""
    tree = s.command_tree()
    if s.engine() is not None:
        for name, subs in data_tree().items():
            tree.setdefault(name, subs)
    return tree


def command_count(s: ClientView, args: list[bytes]) -> None:
    s._write(b":%d\r\n" % len(full_tree(s)))


def command_docs(s: ClientView, args: list[bytes]) -> None:
    tree = full_tree(s)
    names = [a.decode("utf-8", "replace").lower() for a in args[2:]] or sorted(tree)
    pairs = [(name.encode(), command_doc(name, tree.get(name, []))) for name in names
             if name in tree or name in tree.get(name.partition("|")[0], ())]
    s._write(encode(Map(pairs), s.resp))


# ------------------------------------------------------------ AUTH, HELLO, TIME, ROLE, REPLICAOF

def auth(s: ClientView, args: list[bytes]) -> None:
    """AUTH as a redis-server without requirepass or ACL users answers it: the `default`
    user with any password, no other user (HELLO AUTH decides the same)."""
    if len(args) > 3:
        s._error(ERR_SYNTAX)
    elif len(args) == 2:
        s._error("AUTH <password> called without any password configured for the default user. "
                 "Are you sure your configuration is correct?")
    elif args[1] == b"default":
        s._write(OK)
    else:
        s._error(ERR_WRONGPASS, "WRONGPASS")


def hello(s: ClientView, args: list[bytes]) -> None:
    """HELLO [protover [AUTH user pass] [SETNAME name]] (AUTH as `auth` decides)."""
    version = 0
    if len(args) >= 2:
        v = parse_ll(args[1])
        if v is None:
            s._error("Protocol version is not an integer or out of range")
            return
        if not 2 <= v <= 3:
            s._error("unsupported protocol version", "NOPROTO")
            return
        version = v
    user: bytes | None = None
    name: bytes | None = None
    j = 2
    while j < len(args):
        more = len(args) - 1 - j
        opt = args[j].lower()
        if opt == b"auth" and more >= 2:
            user = args[j + 1]
            j += 3
        elif opt == b"setname" and more >= 1:
            name = args[j + 1]
            if not valid_attr(name):
                s._error(ERR_BAD_NAME)
                return
            j += 2
        else:
            s._error(b"Syntax error in HELLO option '%s'" % args[j])
            return
    if user is not None and user != b"default":
        s._error(ERR_WRONGPASS, "WRONGPASS")
        return
    if name is not None:
        s.name = name or None
    if version:
        s.resp = version
    s._write(b"".join((
        encode_map_header(7, s.resp),
        encode_bulk(b"server"), encode_bulk(b"redis"),
        encode_bulk(b"version"), encode_bulk(s.config.version.encode()),
        encode_bulk(b"proto"), encode_int(s.resp),
        encode_bulk(b"id"), encode_int(s.client_id),
        encode_bulk(b"mode"), encode_bulk(b"standalone"),
        encode_bulk(b"role"), encode_bulk(b"master"),
        encode_bulk(b"modules"), encode_array_header(0),
    )))


def server_time(s: ClientView, args: list[bytes]) -> None:
    """The wall clock as [seconds, microseconds], as redis-server answers TIME."""
    sec, ns = divmod(time.time_ns(), 1_000_000_000)
    s._write(encode([b"%d" % sec, b"%d" % (ns // 1000)], s.resp))


def role(s: ClientView, args: list[bytes]) -> None:
    """A node's Redis transport is a master with no replicas."""
    s._write(encode([b"master", 0, []], s.resp))


def replicaof(s: ClientView, args: list[bytes]) -> None:
    """REPLICAOF (SLAVEOF) NO ONE: already a master, +OK as redis-server answers it; a
    master to follow is refused, as the map is the node's own (no replication)."""
    if args[1].lower() == b"no" and args[2].lower() == b"one":
        s._write(OK)
    else:
        s._error(f"{args[0].decode(errors='replace').upper()} to another server is not supported: "
                 "a raims node's Redis transport is a master with no replicas")


# ------------------------------------------------------------ INFO

def _human(n: int) -> bytes:
    """redis-server's bytesToHuman: 512B, 1.50K, 13.45M, 2.00G."""
    if n < 1024:
        return b"%dB" % n
    value = n / 1024
    for unit in (b"K", b"M", b"G", b"T"):
        if value < 1024:
            return b"%.2f%s" % (value, unit)
        value /= 1024
    return b"%.2fP" % value


def _memory_section(engine: Engine | None) -> bytes:
    """The node process's memory: used_memory is its resident set (Python has no
    allocator count to give), sampled by the map as its maxmemory check samples it
    (kv/__init__.py); the peak getrusage's max resident set."""
    rss = engine.sample_memory() if engine is not None else _rss_bytes()
    peak = max(rss, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    limit = engine.maxmemory if engine is not None else 0
    return (b"# Memory\r\nused_memory:%d\r\nused_memory_human:%s\r\nused_memory_rss:%d\r\n"
            b"used_memory_rss_human:%s\r\nused_memory_peak:%d\r\nused_memory_peak_human:%s\r\n"
            b"maxmemory:%d\r\nmaxmemory_human:%s\r\nmaxmemory_policy:noeviction\r\n" % (
                rss, _human(rss), rss, _human(rss), peak, _human(peak), limit, _human(limit)))


def _cpu_section() -> bytes:
    t = os.times()
    main = resource.getrusage(getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF))  # INFO runs in the loop
    return (b"# CPU\r\nused_cpu_sys:%.6f\r\nused_cpu_user:%.6f\r\nused_cpu_sys_children:%.6f\r\n"
            b"used_cpu_user_children:%.6f\r\nused_cpu_sys_main_thread:%.6f\r\nused_cpu_user_main_thread:%.6f\r\n"
            % (t.system, t.user, t.children_system, t.children_user, main.ru_stime, main.ru_utime))


# the replication section of a master without replicas or backlog (the ids are this process's)
_REPLICATION = (b"# Replication\r\nrole:master\r\nconnected_slaves:0\r\nmaster_failover_state:no-failover\r\n"
                b"master_replid:%s\r\nmaster_replid2:%s\r\nmaster_repl_offset:0\r\nsecond_repl_offset:-1\r\n"
                b"repl_backlog_active:0\r\nrepl_backlog_size:1048576\r\nrepl_backlog_first_byte_offset:0\r\n"
                b"repl_backlog_histlen:0\r\n" % (os.urandom(20).hex().encode(), b"0" * 40))
_RUN_ID = os.urandom(20).hex().encode()


def info(s: ClientView, args: list[bytes]) -> None:
    wanted = {a.lower() for a in args[1:]} or {b"default"}
    every = bool(wanted & {b"all", b"everything", b"default"})
    everything = bool(wanted & {b"all", b"everything"})  # commandstats and latencystats are not default
    host = s.host
    now = host.clock()
    engine = s.engine()
    clients = _live(s)
    sections: list[bytes] = []
    if every or b"server" in wanted:
        up = int(now - host.started)
        sections.append(
            b"# Server\r\nredis_version:%s\r\nredis_mode:standalone\r\nos:%s\r\narch_bits:64\r\n"
            b"process_id:%d\r\nrun_id:%s\r\ntcp_port:%d\r\nserver_time_usec:%d\r\nuptime_in_seconds:%d\r\n"
            b"uptime_in_days:%d\r\nhz:10\r\nconfigured_hz:10\r\nraims_map:%s\r\n" % (
                REDIS_VERSION, os.uname().sysname.encode(), os.getpid(), _RUN_ID, host.port, int(now * 1e6), up,
                up // 86400, b"yes" if engine is not None and engine.store.writable else b"no"))
    if every or b"clients" in wanted:
        blocked = sum(1 for c in clients if c.multi_state()[2])
        pubsub = sum(1 for c in clients if any(sub_counts(c)))
        watching = sum(1 for c in clients if c.multi_state()[1])
        sections.append(b"# Clients\r\nconnected_clients:%d\r\nmaxclients:10000\r\nblocked_clients:%d\r\n"
                        b"pubsub_clients:%d\r\nwatching_clients:%d\r\n" % (
                            len(clients), blocked, pubsub, watching))
    if every or b"memory" in wanted:
        sections.append(_memory_section(engine))
    if engine is not None and (every or b"persistence" in wanted):
        sections.append(persistence_section(engine))
    if every or b"stats" in wanted:
        names: tuple[set[bytes], set[bytes], set[bytes]] = (set(), set(), set())
        for c in clients:
            for kind, held in zip(names, c.sub_names(), strict=True):
                kind.update(held)
        sections.append(b"# Stats\r\ntotal_connections_received:%d\r\ntotal_commands_processed:%d\r\n"
                        b"expired_keys:%d\r\npubsub_channels:%d\r\npubsub_patterns:%d\r\n"
                        b"pubsub_shardchannels:%d\r\ntotal_error_replies:%d\r\n" % (
                            host.connections, host.commands,
                            engine.store.expired_keys if engine is not None else 0,
                            len(names[0]), len(names[1]), len(names[2]), host.stats.total_errors))
    if every or b"replication" in wanted:  # a node's bridge is a standalone master, never a replica
        sections.append(_REPLICATION)
    if every or b"cpu" in wanted:
        sections.append(_cpu_section())
    if everything or b"commandstats" in wanted:
        sections.append(host.stats.commandstats())
    if every or b"errorstats" in wanted:
        sections.append(host.stats.errorstats())
    if everything or b"latencystats" in wanted:
        sections.append(host.stats.latencystats())
    if every or b"cluster" in wanted:  # tools (redis-py's own test suite) read cluster_enabled
        sections.append(b"# Cluster\r\ncluster_enabled:0\r\n")
    if every or b"keyspace" in wanted:
        lines = keyspace_lines(engine) if engine is not None else []
        sections.append(b"# Keyspace\r\n" + b"".join(line + b"\r\n" for line in lines))
    s._write(encode(Verbatim(b"\r\n".join(sections)), s.resp))
