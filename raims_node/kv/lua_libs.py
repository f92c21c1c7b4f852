"""The Lua side of the scripting sandbox (scripting.py): the setup chunk that builds the
`redis`, `cjson` and `bit` libraries, the error handler, the time-limit hook and the
restore of the globals; and the Python kernels behind cjson.decode and bit.

redis-server 7.0's sandbox, as far as a stock Lua 5.1 allows: the globals are those of
redis-server (no os, io, print, require, loadfile, dofile, debug, getfenv / setfenv,
newproxy, module, package); reading a missing global or creating one is an error
("Script attempted to access nonexistent global variable", "Attempt to modify a
readonly table"). Decisions: redis-server's patched Lua also refuses writes to existing
globals and library fields (`string.x = 1`); here such writes take effect for the rest
of the script and are undone when it ends (RESTORE), so no script changes another's
environment. `cjson.encode` is Lua (its object key order is Lua's `next`, as
redis-server's), `cjson.decode` is Python's json (error texts "Expected value but found
token at character N" as lua-cmsgpack's for the common malformed inputs). cmsgpack is
lua_msgpack.py's; struct is not provided (a script naming it gets the nonexistent-global
error).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from typing import Any

SETUP = rb"""
local py, version, version_num = ...
local dbg, setfenv, loadstring, load, pcall = debug, setfenv, loadstring, load, pcall
local rawget, rawset, next, type, error, tostring, select, setmetatable, getmetatable =
      rawget, rawset, next, type, error, tostring, select, setmetatable, getmetatable
local xpcall, strformat, strgsub, strbyte, floor, huge = xpcall, string.format, string.gsub,
      string.byte, math.floor, math.huge
local concat = table.concat
local null = newproxy(false)  -- cjson.null: a userdata, as redis-server's
local unwrap, expired = py.unwrap, py.expired

-- scripts run in their own environment G (lupa keeps the real globals for itself)
local G = {}
for k, v in next, _G do G[k] = v end
for _, name in ipairs({'print', 'getfenv', 'setfenv', 'newproxy', 'module', 'require', 'package',
                       'os', 'io', 'debug', 'dofile', 'loadfile', 'python'}) do
  G[name] = nil
end
G._G = G
G.loadstring = function(...)
  local f, err = loadstring(...)
  if f then setfenv(f, G) end
  return f, err
end
G.load = function(...)
  local f, err = load(...)
  if f then setfenv(f, G) end
  return f, err
end
-- errors raised by Python functions arrive as userdata: pcall / xpcall hand scripts what
-- redis-server's do (its pcall turns an {err=...} error into the err string)
local function fix(ok, ...)
  if ok then return ok, ... end
  local e = ...
  if type(e) == 'userdata' then e = unwrap(e) end
  if type(e) == 'table' and type(rawget(e, 'err')) == 'string' then e = rawget(e, 'err') end
  return false, e
end
-- the Python functions are callable userdata: `type` names them functions, as redis-server's
local pyfuncs, rawtype = {}, type
for _, f in next, py do pyfuncs[f] = true end
type = function(v)
  local t = rawtype(v)
  if t == 'userdata' and pyfuncs[v] then return 'function' end
  return t
end
G.type = type
G.pcall = function(f, ...) return fix(pcall(f, ...)) end
G.xpcall = function(f, h)
  return xpcall(f, function(e)
    if type(e) == 'userdata' then e = unwrap(e) end
    return h(e)
  end)
end

-- redis: the functions that run commands or raise are Python's (C functions to Lua, so
-- a `return redis.call(...)` keeps the script's line for the error)
local redis = {REDIS_VERSION = version, REDIS_VERSION_NUM = version_num,
               LOG_DEBUG = 0, LOG_VERBOSE = 1, LOG_NOTICE = 2, LOG_WARNING = 3,
               REPL_NONE = 0, REPL_AOF = 1, REPL_SLAVE = 2, REPL_REPLICA = 2, REPL_ALL = 3,
               call = py.call, pcall = py.pcall, setresp = py.setresp, sha1hex = py.sha1hex,
               log = py.log, set_repl = py.set_repl, acl_check_cmd = py.acl_check_cmd}
redis.status_reply = function(...)
  local v = ...
  if select('#', ...) ~= 1 or type(v) ~= 'string' then return {err = 'ERR wrong number or type of arguments'} end
  return {ok = v}
end
redis.error_reply = function(...)
  local v = ...
  if select('#', ...) ~= 1 or type(v) ~= 'string' then return {err = 'ERR wrong number or type of arguments'} end
  if v:sub(1, 1) ~= '-' then v = '-' .. v end
  local space = v:find(' ', 1, true)
  local code, msg
  if space then code, msg = v:sub(2, space - 1), v:sub(space + 1) else code, msg = 'ERR', v:sub(2) end
  msg = strgsub(strgsub(msg, '^[\r\n]+', ''), '[\r\n]+$', '')
  return {err = code .. ' ' .. msg}
end
redis.replicate_commands = function() return true end
redis.breakpoint = function() return false end
redis.debug = function() end
G.redis = redis

-- cjson
local cjson = {null = null}
local escapes = {['"'] = '\\"', ['\\'] = '\\\\', ['/'] = '\\/', ['\b'] = '\\b', ['\f'] = '\\f',
                 ['\n'] = '\\n', ['\r'] = '\\r', ['\t'] = '\\t'}
local function escape(c) return escapes[c] or strformat('\\u%04x', strbyte(c)) end
local encode
local function enc_key(k)
  if type(k) == 'string' then return '"' .. strgsub(k, '[%z\1-\31"\\/]', escape) .. '"' end
  if type(k) == 'number' then return '"' .. strformat('%.14g', k) .. '"' end
  error('Cannot serialise ' .. type(k) .. ': table key must be a number or string', 0)
end
encode = function(v, depth)
  local t = type(v)
  if t == 'string' then return '"' .. strgsub(v, '[%z\1-\31"\\/]', escape) .. '"' end
  if t == 'number' then
    if v ~= v or v == huge or v == -huge then error('Cannot serialise number: must not be NaN or Inf', 0) end
    return strformat('%.14g', v)
  end
  if t == 'boolean' then return tostring(v) end
  if v == null then return 'null' end
  if t ~= 'table' then error('Cannot serialise ' .. t .. ': type not supported', 0) end
  if depth > 1000 then error('Cannot serialise, excessive nesting (' .. depth .. ')', 0) end
  local max, items, array = 0, 0, true
  for k in next, v do
    if type(k) == 'number' and k >= 1 and floor(k) == k then
      if k > max then max = k end
      items = items + 1
    else
      array = false
      break
    end
  end
  local out = {}
  if array and items > 0 then
    if max > items * 2 and max > 10 then error('Cannot serialise table: excessively sparse array', 0) end
    for i = 1, max do
      local x = rawget(v, i)
      out[i] = x == nil and 'null' or encode(x, depth + 1)
    end
    return '[' .. concat(out, ',') .. ']'
  end
  for k, x in next, v do out[#out + 1] = enc_key(k) .. ':' .. encode(x, depth + 1) end
  return '{' .. concat(out, ',') .. '}'
end
cjson.encode = py.cjson_encode
cjson.decode = py.cjson_decode
local function encode_safe(v) return pcall(encode, v, 1) end
G.cjson = cjson

-- bit (LuaBitOp), Python's
local bit = {}
for _, name in ipairs({'tobit', 'bnot', 'bswap', 'band', 'bor', 'bxor', 'lshift', 'rshift', 'arshift',
                       'rol', 'ror', 'tohex'}) do
  bit[name] = py['bit_' .. name]
end
G.bit = bit
G.cmsgpack = {pack = py.cmsgpack_pack, unpack = py.cmsgpack_unpack}

-- errors: redis-server's {err=, source=, line=} with the user's position
local function handler(err)
  local level = 2
  local info = dbg.getinfo(level, 'Sl')
  while info and (info.what == 'C' or info.source == '=raims') do
    level = level + 1
    info = dbg.getinfo(level, 'Sl')
  end
  if type(err) == 'userdata' then err = unwrap(err, info and info.source, info and info.currentline) end
  if type(err) ~= 'table' then err = {err = 'ERR ' .. tostring(err)} end
  if info then
    err.source = info.source
    err.line = info.currentline
  end
  return err
end

-- the time limit: a count hook asks Python whether the script's time is up; once it
-- is, every instruction raises, so a pcall in the script cannot swallow it
local killed = {err = 'killed'}
local function in_user_code()
  local info = dbg.getinfo(3, 'S')  -- 1: this function, 2: the hook, 3: what was running
  return info and info.source ~= '=raims'
end
local function killhook() if in_user_code() then error(killed) end end
local function hook()
  if expired() then
    dbg.sethook(killhook, '', 1)
    if in_user_code() then error(killed) end
  end
end

-- the environment every script starts from
local libs = {'string', 'math', 'table', 'coroutine', 'redis', 'cjson', 'bit', 'cmsgpack'}
local saved, saved_libs = {}, {}
for k, v in next, G do saved[k] = v end
for _, name in ipairs(libs) do
  local copy = {}
  for k, v in next, G[name] do copy[k] = v end
  saved_libs[name] = copy
end
local strmeta = getmetatable('')
local gmeta = {
  __index = function(_, k) error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2) end,
  __newindex = function() error('Attempt to modify a readonly table', 2) end,
}

local function sync(t, want)
  for k in next, t do if want[k] == nil then rawset(t, k, nil) end end
  for k, v in next, want do if rawget(t, k) ~= v then rawset(t, k, v) end end
end

local function restore()
  setmetatable(G, nil)
  sync(G, saved)
  for _, name in ipairs(libs) do sync(saved[name], saved_libs[name]) end
  setmetatable(saved.string, nil)
  strmeta.__index = saved.string
  setmetatable(G, gmeta)
end
restore()

local function run(f, keys, argv)
  rawset(G, 'KEYS', keys)
  rawset(G, 'ARGV', argv)
  dbg.sethook(hook, '', 100000)
  local ok, r = xpcall(f, handler)
  dbg.sethook()
  restore()
  return ok, r
end

local function compile(body)
  local f, err = loadstring(body, '@user_script')
  if f then
    setfenv(f, G)
    return true, f
  end
  return false, err
end

return run, compile, null, encode_safe
"""

HOOK_EVERY = 100_000  # Lua instructions between two looks at the clock


_TOKENS = {ord("{"): b"T_OBJ_BEGIN", ord("}"): b"T_OBJ_END", ord("["): b"T_ARR_BEGIN", ord("]"): b"T_ARR_END",
           ord(","): b"T_COMMA", ord(":"): b"T_COLON", ord('"'): b"T_STRING"}
_WORDS = ((b"true", b"T_BOOLEAN"), (b"false", b"T_BOOLEAN"), (b"null", b"T_NULL"))


def _json_error(text: bytes, exc: json.JSONDecodeError) -> bytes:
    """lua-cjson's "Expected X but found TOKEN at character N" for Python's decode error."""
    pos = exc.pos
    while pos < len(text) and text[pos] in b" \t\r\n":
        pos += 1
    if pos >= len(text):
        token = b"T_END"
    elif text[pos] in b"-0123456789":
        token = b"T_NUMBER"
    else:
        token = _TOKENS.get(text[pos], b"invalid token")
        for word, name in _WORDS:
            if text.startswith(word, pos):
                token = name
    msg = exc.msg
    if msg.startswith("Expecting ',' delimiter"):
        depth: list[int] = []
        in_string = escaped = False
        for ch in text[:pos]:
            if in_string:
                escaped, in_string = (not escaped and ch == 92), in_string and (escaped or ch != 34)
            elif ch == 34:
                in_string = True
            elif ch in b"[{":
                depth.append(ch)
            elif ch in b"]}" and depth:
                depth.pop()
        what = b"comma or array end" if depth and depth[-1] == ord("[") else b"comma or object end"
    elif msg.startswith("Expecting ':'"):
        what = b"colon"
    elif msg.startswith("Expecting property name"):
        what = b"object key string"
    elif msg.startswith("Extra data"):
        what = b"the end"
    else:
        what = b"value"
    return b"Expected %s but found %s at character %d" % (what, token, pos + 1)


class _Pairs(list):
    """A JSON object's (key, value) pairs, in their order."""


def make_decode(table: Callable[[], Any], null: object) -> Callable[[bytes], tuple[bool, Any]]:
    """cjson.decode: JSON text -> Lua values (objects and arrays as tables, null as
    cjson.null, numbers as Lua numbers)."""

    def lua(v: Any) -> Any:
        if isinstance(v, str):
            return v.encode("utf-8", "surrogateescape")
        if isinstance(v, bool) or v is None:
            return null if v is None else v
        if isinstance(v, int | float):
            return float(v) if not isinstance(v, int) or abs(v) >= 1 << 53 else v
        out = table()
        if type(v) is list:
            for i, item in enumerate(v, 1):
                out[i] = lua(item)
        else:
            for k, item in v:
                out[k.encode("utf-8", "surrogateescape")] = lua(item)
        return out

    def decode(text: bytes) -> tuple[bool, Any]:
        try:
            value = json.loads(text.decode("utf-8", "surrogateescape"), object_pairs_hook=_Pairs)
        except json.JSONDecodeError as exc:
            return False, _json_error(text, exc)
        except RecursionError:
            return False, b"Found too many nested data structures"
        try:
            return True, lua(value)
        except RecursionError:
            return False, b"Found too many nested data structures"

    return decode


class ScriptRaise(Exception):
    """An error a Python function of the sandbox raises into the script: `text` is the
    Redis error (`ERR ...`), or with `where` a message the script's position and ERR
    prefix (as luaL_error's) are put before."""

    def __init__(self, text: bytes, where: bool = False) -> None:
        super().__init__(text.decode("utf-8", "replace"))
        self.text = text
        self.where = where


_BIT_ARGS = {"tobit": 1, "bnot": 1, "bswap": 1, "band": 1, "bor": 1, "bxor": 1, "lshift": 2, "rshift": 2,
             "arshift": 2, "rol": 2, "ror": 2, "tohex": 1}
BIT_NAMES = tuple(_BIT_ARGS)


def make_bit(name: str, lua_type: Callable[[Any], Any]) -> Callable[..., Any]:
    """bit.<name> with LuaBitOp's argument checks (numbers, or strings that are numbers)."""
    need = _BIT_ARGS[name]
    variadic = name in ("band", "bor", "bxor")

    def fn(*args: Any) -> Any:
        n = len(args)
        top = max(n, need) if variadic else (min(max(n, 1), 2) if name == "tohex" else need)
        nums: list[float] = []
        for i in range(top):
            v = args[i] if i < n else None
            if type(v) is bytes:
                try:
                    v = float(v)
                except ValueError:
                    pass
            if type(v) not in (int, float):
                got = (b"no value" if i >= n else b"nil" if v is None else b"boolean" if type(v) is bool
                       else b"string" if type(v) is bytes else str(lua_type(v)).encode())
                raise ScriptRaise(b"bad argument #%d to '%s' (number expected, got %s)" % (i + 1, name.encode(), got),
                                  True)
            nums.append(float(v) if type(v) is float else int(v))  # type: ignore[arg-type]
        return bit_op(name, *nums)

    return fn


def _tobit(x: float | int) -> int:
    """LuaBitOp's normalisation: the low 32 bits of x + 2^52 + 2^51, signed."""
    try:
        raw = struct.unpack("<Q", struct.pack("<d", float(x) + 6755399441055744.0))[0] & 0xFFFFFFFF
    except OverflowError:
        raw = 0
    return raw - (1 << 32) if raw & 0x80000000 else raw


def _signed(u: int) -> int:
    u &= 0xFFFFFFFF
    return u - (1 << 32) if u & 0x80000000 else u


def bit_op(op: str, *args: float) -> Any:
    """One bit.* function on numbers already checked."""
    a = [_tobit(x) for x in args]
    if op == "tobit":
        return a[0]
    if op == "bnot":
        return _signed(~a[0])
    if op == "bswap":
        u = a[0] & 0xFFFFFFFF
        return _signed(int.from_bytes(u.to_bytes(4, "little"), "big"))
    if op in ("band", "bor", "bxor"):
        acc = a[0]
        for v in a[1:]:
            acc = acc & v if op == "band" else acc | v if op == "bor" else acc ^ v
        return _signed(acc)
    if op == "tohex":
        n = a[1] if len(a) > 1 else 8
        digits = "0123456789abcdef"
        if n < 0:
            n, digits = -n, digits.upper()
        n = min(n, 8)
        u = a[0] & 0xFFFFFFFF
        return "".join(digits[(u >> (4 * i)) & 15] for i in range(n - 1, -1, -1)).encode()
    x, s = a[0] & 0xFFFFFFFF, a[1] & 31
    if op == "lshift":
        return _signed(x << s)
    if op == "rshift":
        return _signed(x >> s)
    if op == "arshift":
        return _signed(_signed(x) >> s)
    if op == "rol":
        return _signed((x << s) | (x >> (32 - s)))
    return _signed((x >> s) | (x << (32 - s)))  # ror
