"""Lua scripting on the key-value map: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT LOAD
| EXISTS | FLUSH | KILL | HELP, as redis-server 7.0.15 (issue 27).

Scripts run in one Lua 5.1 state per engine (lupa's bundled Lua 5.1, Redis's version;
sandbox and the redis, cjson and bit libraries in lua_libs.py, cmsgpack in
lua_msgpack.py, conversions in lua_convert.py; struct is left out), cached by the SHA1
of their body (EVAL caches too; SCRIPT FLUSH drops the cache and the state). redis.call
and redis.pcall run commands through the engine (Engine.execute) as a client of the
caller's database; SELECT in a script changes the script's database only. Commands a
script may not run get redis-server's "This Redis command is not allowed from script"
(MULTI / EXEC / WATCH, (un)subscriptions, blocking pops, SAVE, EVAL, SCRIPT, ...).

Decisions:
- Effects: a script's writes are logged for the map file as the commands it ran (each
  as the engine logs it), never as the EVAL, so a restart rebuilds the same data; the
  script cache itself is not persisted (as redis-server 7.0: clients reload on NOSCRIPT).
  Blocked clients are served after the script, which is atomic.
- The time limit: the node serves others from one loop, so it cannot answer BUSY while
  a script runs. A script running longer than busy-reply-threshold (alias
  lua-time-limit, 5000 ms, CONFIG SET changes it) is stopped by a count hook with
  "ERR Script killed by the node's time limit of N ms (busy-reply-threshold) ..."; its
  writes so far stay (redis-server does not undo them either). The clock is read every
  100,000 Lua instructions, so one slow instruction (a long string operation) or a slow
  command can overrun the limit by its own length. SCRIPT KILL therefore
  never finds a script running: NOTBUSY, as redis-server when idle. The Lua state may
  use LUA_MEMORY bytes; a script over it gets "not enough memory (...)", and when a
  full collection cannot bring the state under three quarters of it, the state is
  replaced (the cached scripts are compiled again when next run).
- PUBLISH from a script goes through the engine's publish hook (the one keyspace
  notifications take to the node's Redis buses) and answers the receivers it reached;
  without a Redis transport it is refused with a clear error. PING, ECHO, TIME and
  SELECT run as well; other connection commands (CLIENT, INFO's session sections, ...)
  answer "Unknown Redis command called from script".
- Errors: redis-server 7.0's forms ("ERR user_script:1: ... script: <sha>, on
  @user_script:1.", a redis.call error's own text with the script's position). A script
  that raises a table without an err string (redis-server 7.0.15 crashes on error({}))
  gets "ERR script error without a message". A redis.call error caught by pcall in the
  script is its err string, as redis-server's pcall gives; a luaL_error-style message
  (cjson, bit, cmsgpack) caught by pcall lacks the "user_script:N:" position.
- MONITOR shows the commands a script runs as `[db lua]` (the `script_monitor` hook).
- SCRIPT DEBUG (the Lua debugger) is refused with an error.
- Without the lupa package the scripting commands answer LUA_MISSING, and nothing else
  changes.
"""

from __future__ import annotations

import gc
import hashlib
import logging
import time
from collections.abc import Callable
from typing import Any

from raims_node.kv.commands import (
    COMMANDS,
    INT32_MAX,
    INT32_MIN,
    Engine,
    KVClient,
    command,
    parse_int,
    parse_ranged,
)
from raims_node.kv.errors import OOM, CommandError
from raims_node.kv.lua_convert import LuaConverter, finish, lua_size
from raims_node.kv.lua_libs import BIT_NAMES, SETUP, ScriptRaise, make_bit, make_decode
from raims_node.kv.lua_msgpack import MsgpackError, make_pack, make_unpack
from raims_node.kv.reply import OK, Err, Map, SetReply, Simple
from raims_node.kv.script_flags import eval_denyoom, shebang
from raims_node.kv.server import CLUSTER_DISABLED, CLUSTER_SUBCOMMANDS, REDIS_VERSION

try:
    import lupa.lua51 as lua51
except ImportError:  # pragma: no cover - the package is a dependency; the node runs without it
    lua51 = None

log = logging.getLogger("raims.kv.lua")

LUA_MEMORY = 256 * 1024 * 1024
LUA_MISSING = b"ERR Lua scripting is not available on this node (the lupa package is not installed)"
NOT_ALLOWED = b"ERR This Redis command is not allowed from script"
RO_WRITE = b"ERR Write commands are not allowed from read-only scripts."
NOSCRIPT = b"NOSCRIPT No matching script. Please use EVAL."
# redis-server 7.0's `noscript` commands this node knows, with their arity
NOSCRIPT_ARITY = {b"multi": 1, b"exec": 1, b"discard": 1, b"watch": -2, b"unwatch": 1, b"subscribe": -2,
                  b"unsubscribe": -1, b"psubscribe": -2, b"punsubscribe": -1, b"ssubscribe": -2,
                  b"sunsubscribe": -1, b"hello": -1, b"reset": 1, b"quit": -1, b"monitor": 1, b"auth": -2,
                  b"role": 1, b"save": 1, b"bgsave": -1, b"blpop": -3, b"brpop": -3, b"brpoplpush": 4,
                  b"blmove": 6, b"bzpopmin": -3, b"bzpopmax": -3, b"eval": -3, b"evalsha": -3,
                  b"eval_ro": -3, b"evalsha_ro": -3, b"script": -2, b"module": -2, b"client": -2,
                  b"wait": 3}
_LOG_LEVELS = (logging.DEBUG, logging.INFO, logging.INFO, logging.WARNING)
_VERSION_NUM = sum(int(p) << s for p, s in zip(REDIS_VERSION.split(b"."), (16, 8, 0), strict=True))

HELP = [b"SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        b"DEBUG (YES|SYNC|NO)",
        b"    Set the debug mode for subsequent scripts executed.",
        b"EXISTS <sha1> [<sha1> ...]",
        b"    Return information about the existence of the scripts in the script cache.",
        b"FLUSH [ASYNC|SYNC]",
        b"    Flush the Lua scripts cache. Very dangerous on replicas.",
        b"    When called without the optional mode argument, the behavior is determined by the",
        b"    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
        b"    * ASYNC: Asynchronously flush the scripts cache.",
        b"    * SYNC: Synchronously flush the scripts cache.",
        b"KILL",
        b"    Kill the currently executing Lua script.",
        b"LOAD <script>",
        b"    Load a script into the scripts cache without executing it.",
        b"HELP",
        b"    Prints this help."]


def sha1hex(body: bytes) -> bytes:
    return hashlib.sha1(body).hexdigest().encode()


class Script:
    __slots__ = ("fn", "shebang", "no_writes", "allow_oom")

    def __init__(self, fn: Any, has_shebang: bool, no_writes: bool, allow_oom: bool) -> None:
        self.fn = fn
        self.shebang = has_shebang
        self.no_writes = no_writes
        self.allow_oom = allow_oom  # its writes may run over maxmemory (allow-oom, or no-writes)


class Scripts:
    """The Lua state and the script cache of one engine."""

    def __init__(self, engine: Engine) -> None:
        assert lua51 is not None
        self.engine = engine
        self.cache: dict[bytes, Script] = {}  # compiled in the current Lua state
        self.bodies: dict[bytes, bytes] = {}  # every script loaded, by sha
        self.client = KVClient()
        self.read_only = self.allow_oom = self.wrote = False  # this run's: no writes, writes over maxmemory, wrote
        self.deadline = 0.0
        self.killed = False
        self.resp = 2  # redis.setresp
        self._new_state()

    def _new_state(self) -> None:
        assert lua51 is not None
        rt = lua51.LuaRuntime(encoding=None, unpack_returned_tuples=True, register_eval=False,
                              register_builtins=False, max_memory=LUA_MEMORY)
        self.rt = rt
        self.conv = LuaConverter(rt.table, rt.eval(b"rawget"), lua51.lua_type)
        self._decode: Callable[[bytes], tuple[bool, Any]] | None = None
        self._encode: Any = None
        py: dict[bytes, Callable[..., Any]] = {b"call": self._call, b"pcall": self._pcall, b"setresp": self._setresp, b"sha1hex": self._sha1,
              b"log": self._log, b"set_repl": self._set_repl, b"acl_check_cmd": self._acl_check,
              b"unwrap": self._unwrap, b"cjson_encode": self._cjson_encode, b"cjson_decode": self._cjson_decode,
              b"expired": self._expired, b"cmsgpack_pack": self._msgpack_pack,
              b"cmsgpack_unpack": self._msgpack_unpack}
        for name in BIT_NAMES:
            py[b"bit_" + name.encode()] = make_bit(name, lua51.lua_type)
        run, compile_, null, encode = rt.execute(SETUP, rt.table_from(py), REDIS_VERSION, _VERSION_NUM,
                                                 name=b"=raims")
        self._decode = make_decode(rt.table, null)
        self.conv.negative_zero = rt.eval(b"function(t) local d = rawget(t, 'double') return d == 0 and 1 / d < 0 end")
        self._pack = make_pack(lua51.lua_type)
        self._unpack = make_unpack(rt.table)
        self._encode = encode
        self._run, self._compile = run, compile_

    def flush(self) -> None:
        self.bodies.clear()
        self.cache.clear()
        self._new_state()

    def _headroom(self) -> None:
        """Keep a quarter of LUA_MEMORY free between scripts (lupa's own calls into the
        state are unprotected: one failing for memory would abort the process): a full
        collection, or a new state (the scripts are compiled again when next run)."""
        rt = self.rt
        if rt.get_memory_used() <= LUA_MEMORY * 3 // 4:
            return
        try:
            rt.eval(b"collectgarbage")(b"collect")
        except Exception:  # noqa: BLE001 - the state is then replaced whatever went wrong
            pass
        if rt.get_memory_used() > LUA_MEMORY * 3 // 4:
            log.warning("the Lua state holds %d bytes after a full collection: a new state", rt.get_memory_used())
            self.cache.clear()
            self._new_state()
            del rt
            gc.collect()  # the old state and the bound methods it holds form a cycle

    def get(self, sha: bytes) -> Script | None:
        """The compiled script of `sha`, None when no script has it."""
        script = self.cache.get(sha)
        if script is None and sha in self.bodies:
            script = self.load(self.bodies[sha])[1]
        return script

    # ------------------------------------------------------------ the sandbox's Python functions

    def _unwrap(self, err: Any, source: Any = None, line: Any = None) -> Any:
        """An error a Python function raised, as a script sees it: redis-server's {err=...}
        table, or for luaL_error's messages the string with the script's position."""
        if isinstance(err, ScriptRaise):
            if not err.where:
                return self.conv.to_lua(Err(err.text), 2)
            if isinstance(source, bytes) and isinstance(line, int) and line > 0:
                return b"%s:%d: %s" % (source.lstrip(b"@="), line, err.text)
            return err.text
        if isinstance(err, BaseException):
            self.engine.internal_errors += 1
            log.error("a script's Python function failed: %r", err)
            return self.conv.to_lua(Err(b"ERR internal error in a script's function, see the node's log"), 2)
        return err

    def _call(self, *args: Any) -> Any:
        reply = self._fitting(self._invoke(args))
        if type(reply) is Err:
            raise ScriptRaise(reply.text.strip(b"\r\n"))
        return self.conv.to_lua(reply, self.resp)

    def _pcall(self, *args: Any) -> Any:
        reply = self._fitting(self._invoke(args))
        if type(reply) is Err:
            return self.conv.to_lua(Err(reply.text.strip(b"\r\n")), 2)
        return self.conv.to_lua(reply, self.resp)

    def _fitting(self, reply: Any) -> Any:
        """`reply`, or an error when its Lua form would not fit the state's memory (the
        tables are made by Python, outside the script's protected call)."""
        if type(reply) in (list, Map, SetReply) and \
                self.rt.get_memory_used() + lua_size(reply) > LUA_MEMORY * 7 // 8:
            return Err(b"ERR not enough memory for the command's reply in the script (the Lua state "
                       b"may use %d MiB)" % (LUA_MEMORY >> 20))
        return reply

    def _invoke(self, args: tuple[Any, ...]) -> Any:
        try:
            return self._dispatch(args)
        except CommandError as exc:
            return Err(exc.text)
        except Exception:  # a bug costs this call only
            self.engine.internal_errors += 1
            log.exception("redis.call from a script failed")
            return Err(b"ERR internal error in a script's command, see the node's log")

    def _setresp(self, *args: Any) -> None:
        if len(args) != 1:
            raise ScriptRaise(b"ERR redis.setresp() requires one argument.")
        if args[0] not in (2, 3) or type(args[0]) is bool:
            raise ScriptRaise(b"ERR RESP version must be 2 or 3.")
        self.resp = int(args[0])

    def _sha1(self, *args: Any) -> bytes:
        if len(args) != 1:
            raise ScriptRaise(b"ERR wrong number of arguments")
        return sha1hex(_tostring(args[0]))

    def _log(self, *args: Any) -> None:
        if len(args) < 2:
            raise ScriptRaise(b"ERR redis.log() requires two arguments or more.")
        level = args[0]
        if type(level) not in (int, float):
            raise ScriptRaise(b"ERR First argument must be a number (log level).")
        if not 0 <= level <= 3:
            raise ScriptRaise(b"ERR Invalid debug level.")
        text = b" ".join(_tostring(a) for a in args[1:])
        log.log(_LOG_LEVELS[int(level)], "script: %s", text.decode("utf-8", "replace"))

    def _set_repl(self, *args: Any) -> None:
        if len(args) != 1:
            raise ScriptRaise(b"ERR redis.set_repl() requires two arguments.")
        if type(args[0]) not in (int, float) or args[0] not in (0, 1, 2, 3):
            raise ScriptRaise(b"ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.")

    def _acl_check(self, *args: Any) -> bool:
        if not args:
            raise ScriptRaise(b"ERR Please specify at least one argument for this redis lib call")
        name = args[0].lower() if type(args[0]) is bytes else b""
        if name not in COMMANDS and name not in NOSCRIPT_ARITY and name not in _SESSION_ARITY:
            raise ScriptRaise(b"ERR Invalid command passed to redis.acl_check_cmd()")
        return True

    def _cjson_encode(self, *args: Any) -> bytes:
        if len(args) != 1:
            raise ScriptRaise(b"bad argument #1 to 'encode' (expected 1 argument)", True)
        ok, text = self._encode(args[0])
        if not ok:
            raise ScriptRaise(text, True)
        return text

    def _cjson_decode(self, *args: Any) -> Any:
        if len(args) != 1:
            raise ScriptRaise(b"bad argument #1 to 'decode' (expected 1 argument)", True)
        text = args[0]
        if type(text) in (int, float):
            text = _tostring(text)
        if type(text) is not bytes:
            got = _lua_type_name(text)
            raise ScriptRaise(b"bad argument #1 to 'decode' (string expected, got %s)" % got, True)
        assert self._decode is not None
        self._room_for(8 * len(text))
        ok, value = self._decode(text)
        if not ok:
            raise ScriptRaise(value, True)
        return value

    def _msgpack_pack(self, *args: Any) -> bytes:
        if not args:
            raise ScriptRaise(b"bad argument #0 to 'pack' (MessagePack pack needs input.)", True)
        return b"".join(self._pack(a) for a in args)

    def _msgpack_unpack(self, *args: Any) -> tuple[Any, ...]:
        data = args[0] if args else None
        if type(data) in (int, float):
            data = _tostring(data)
        if type(data) is not bytes:
            got = b"no value" if not args else _lua_type_name(data)
            raise ScriptRaise(b"bad argument #1 to 'unpack' (string expected, got %s)" % got, True)
        self._room_for(8 * len(data))
        try:
            return tuple(self._unpack(data))
        except MsgpackError as exc:
            raise ScriptRaise(exc.text, True) from None

    def _room_for(self, size: int) -> None:
        """Refuse to make `size` bytes of Lua values from Python past 7/8 of the limit."""
        if self.rt.get_memory_used() + size > LUA_MEMORY * 7 // 8:
            raise ScriptRaise(b"not enough memory", True)

    def _expired(self) -> bool:
        if time.monotonic() > self.deadline:
            self.killed = True
        return self.killed

    def _dispatch(self, args: tuple[Any, ...]) -> Any:
        argv: list[bytes] = []
        for a in args:
            t = type(a)
            if t is bytes:
                argv.append(a)
            elif t is int or t is float:
                argv.append(b"%.17g" % a)
            else:
                return Err(b"ERR Lua redis lib command arguments must be strings or integers")
        if not argv:
            return Err(b"ERR Please specify at least one argument for this redis lib call")
        name = argv[0].lower()
        cmd = COMMANDS.get(name)
        arity = cmd.arity if cmd is not None else NOSCRIPT_ARITY.get(name, _SESSION_ARITY.get(name))
        if name == b"cluster" and len(argv) > 1:  # a container: its subcommand's arity
            arity = CLUSTER_SUBCOMMANDS.get(argv[1].lower())
        if arity is None:
            return Err(b"ERR Unknown Redis command called from script")
        n = len(argv)
        if (arity != n if arity > 0 else n < -arity):
            return Err(b"ERR Wrong number of args calling Redis command from script")
        if name in NOSCRIPT_ARITY:
            return Err(NOT_ALLOWED)
        if cmd is None:
            if self.engine.script_monitor is not None:
                self.engine.script_monitor(self.client.db, argv)
            return self._session(name, argv)
        if cmd.write and self.read_only:
            return Err(RO_WRITE)
        e = self.engine  # over maxmemory only its first write is refused (redis-server's scriptVerifyOOM)
        if e.oom and cmd.denyoom and not self.wrote and not self.allow_oom and e.denies(cmd, argv):
            return Err(OOM)
        self.wrote |= cmd.write
        if self.engine.script_monitor is not None:
            self.engine.script_monitor(self.client.db, argv)
        self.client.resp = self.resp
        return self.engine.execute(self.client, argv, cmd)

    def _session(self, name: bytes, argv: list[bytes]) -> Any:
        """The connection commands a script may run."""
        if name in _CLUSTER:
            return Err(CLUSTER_DISABLED)
        if name == b"select":
            db = parse_ranged(argv[1], INT32_MIN, INT32_MAX)
            if not 0 <= db < len(self.engine.store.dbs):
                return Err(b"ERR DB index is out of range")
            self.client.db = db
            return OK
        if name == b"ping":
            if len(argv) > 2:
                return Err(b"ERR wrong number of arguments for 'ping' command")
            return argv[1] if len(argv) == 2 else Simple(b"PONG")
        if name == b"echo":
            return argv[1]
        if name == b"time":
            now = time.time_ns() // 1000
            return [b"%d" % (now // 1_000_000), b"%d" % (now % 1_000_000)]
        publish = self.engine.publish
        if publish is None:
            return Err(b"ERR PUBLISH from a script needs the node's Redis transport (none publishes the map's events)")
        count = publish(argv[1].decode("utf-8", "surrogateescape"), argv[2])
        return count if isinstance(count, int) else 0

    # ------------------------------------------------------------ running

    def load(self, body: bytes) -> tuple[bytes, Script]:
        """The sha and compiled script of `body` (cached); CommandError when it does not compile."""
        sha = sha1hex(body)
        script = self.cache.get(sha)
        if script is not None:
            return sha, script
        self._headroom()
        skip, no_writes, allow_oom = shebang(body)
        ok, fn = self._compile(body[skip:])
        if not ok:
            raise CommandError(b"ERR Error compiling script (new function): " + fn)
        script = self.cache[sha] = Script(fn, skip > 0, no_writes, allow_oom)
        self.bodies[sha] = body
        return sha, script

    def run(self, sha: bytes, caller: KVClient, keys: list[bytes], argv: list[bytes], ro: bool) -> Any:
        """Run the loaded script `sha` for `caller` (the caller made sure it exists)."""
        e = self.engine
        self._headroom()
        script = self.get(sha)
        assert script is not None
        if ro and script.shebang and not script.no_writes:
            return Err(b"ERR Can not execute a script with write flag using *_ro command.")
        client = self.client = KVClient()
        client.db = caller.db
        client.in_multi = True  # a pop never blocks in a script
        self.read_only, self.allow_oom, self.wrote = ro or script.no_writes, script.allow_oom, False
        self.killed = False
        self.resp = 2
        self.deadline = time.monotonic() + e.script_time_limit_ms / 1000
        rt = self.rt
        if rt.get_memory_used() + lua_size(keys) + lua_size(argv) > LUA_MEMORY * 7 // 8:
            return self._out_of_memory(sha)
        e.in_script = True
        try:
            ok, res = self._run(script.fn, rt.table_from(keys), rt.table_from(argv))
        except lua51.LuaError as exc:
            if isinstance(exc, lua51.LuaMemoryError) or not str(exc):
                return self._out_of_memory(sha)
            return Err(b"ERR Error running script %s, %s" % (sha, str(exc).encode()[:100]))
        finally:
            e.in_script = False
            self._headroom()
        if res == b"not enough memory":
            return self._out_of_memory(sha)
        if self.killed:
            return Err(b"ERR Script killed by the node's time limit of %d ms (busy-reply-threshold) "
                       b"script: %s, on @user_script:%d." % (e.script_time_limit_ms, sha, self._line(res)))
        if ok:
            return finish(self.conv.from_lua(res, self.resp), caller.resp)
        return self._error(sha, res)

    def _out_of_memory(self, sha: bytes) -> Err:
        return Err(b"ERR Error running script %s, not enough memory (a script's Lua state may use %d MiB)"
                   % (sha, LUA_MEMORY >> 20))

    def _line(self, res: Any) -> int:
        if lua51 is not None and lua51.lua_type(res) == "table":
            line = self.conv.rawget(res, b"line")
            if isinstance(line, int):
                return line
        return 0

    def _error(self, sha: bytes, res: Any) -> Err:
        """A script's raised error as redis-server 7.0 answers it."""
        if lua51 is None or lua51.lua_type(res) != "table":
            text = res if isinstance(res, bytes) else str(res).encode()
            return Err(b"ERR Error running script %s, %s" % (sha, text[:100]))
        get = self.conv.rawget
        msg, source, line = get(res, b"err"), get(res, b"source"), get(res, b"line")
        if not isinstance(msg, bytes):
            msg = b"ERR script error without a message"
        if isinstance(source, bytes) and isinstance(line, int):
            msg += b" script: %s, on %s:%d." % (sha, source, line)
        return Err(msg)


def _tostring(v: Any) -> bytes:
    """Lua's tostring of a string or number (%.14g), empty for anything else."""
    if type(v) is bytes:
        return v
    if type(v) in (int, float):
        return b"%.14g" % v
    return b""


def _lua_type_name(v: Any) -> bytes:
    if v is None:
        return b"nil"
    if type(v) is bool:
        return b"boolean"
    if type(v) in (int, float):
        return b"number"
    return str(lua51.lua_type(v) if lua51 is not None else "userdata").encode()


_CLUSTER = {b"readonly": 1, b"readwrite": 1, b"asking": 1, b"cluster": -2}  # cluster support disabled
_SESSION_ARITY = {b"select": 2, b"ping": -1, b"echo": 2, b"time": 1, b"publish": 3, **_CLUSTER}


def scripts_of(e: Engine) -> Scripts:
    if lua51 is None:
        raise CommandError(LUA_MISSING)
    if e.scripts is None:
        e.scripts = Scripts(e)
    scripts: Scripts = e.scripts
    return scripts


def _eval(e: Engine, c: KVClient, a: list[bytes], by_sha: bool, ro: bool) -> Any:
    if by_sha and len(a[1]) != 40:
        raise CommandError(NOSCRIPT)
    numkeys = parse_int(a[2])
    if numkeys > len(a) - 3:
        raise CommandError(b"ERR Number of keys can't be greater than number of args")
    if numkeys < 0:
        raise CommandError(b"ERR Number of keys can't be negative")
    scripts = scripts_of(e)
    if by_sha:
        sha = a[1].lower()
        if sha not in scripts.bodies:
            raise CommandError(NOSCRIPT)
    else:
        sha = scripts.load(a[1])[0]
    return scripts.run(sha, c, a[3:3 + numkeys], a[3 + numkeys:], ro)


@command("eval", -3, denyoom=eval_denyoom)
def eval_(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _eval(e, c, a, False, False)


@command("evalsha", -3, denyoom=eval_denyoom)
def evalsha(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _eval(e, c, a, True, False)


@command("eval_ro", -3)
def eval_ro(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _eval(e, c, a, False, True)


@command("evalsha_ro", -3)
def evalsha_ro(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    return _eval(e, c, a, True, True)


_SCRIPT_ARITY = {b"exists": -3, b"load": 3, b"flush": -2, b"kill": 2, b"help": 2, b"debug": 3}


@command("script", -2, subcommands=("exists", "flush", "help", "kill", "load"))
def script_(e: Engine, c: KVClient, a: list[bytes]) -> Any:
    sub = a[1].lower()
    arity = _SCRIPT_ARITY.get(sub)
    if arity is None:
        raise CommandError(b"ERR unknown subcommand '%s'. Try SCRIPT HELP." % a[1][:128])
    if (arity != len(a) if arity > 0 else len(a) < -arity):
        raise CommandError(b"ERR wrong number of arguments for 'script|%s' command" % sub)
    if sub == b"help":
        return [Simple(line) for line in HELP]
    if sub == b"kill":
        return Err(b"NOTBUSY No scripts in execution right now.")
    if sub == b"flush":
        if len(a) > 3 or (len(a) == 3 and a[2].lower() not in (b"sync", b"async")):
            raise CommandError(b"ERR SCRIPT FLUSH only support SYNC|ASYNC option")
        if e.scripts is not None:
            e.scripts.flush()
        return OK
    if sub == b"debug":
        raise CommandError(b"ERR SCRIPT DEBUG (the Lua debugger) is not provided by this node")
    scripts = scripts_of(e)
    if sub == b"exists":
        return [int(sha.lower() in scripts.bodies) for sha in a[2:]]
    sha, _script = scripts.load(a[2])
    return sha
