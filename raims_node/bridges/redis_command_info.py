"""COMMAND, COMMAND INFO, COMMAND LIST and COMMAND GETKEYS | GETKEYSANDFLAGS of the Redis
transport, as redis-server 7.0.15 answers them for the commands this connection runs
(redis_admin.full_tree: the session's own, and the map's with a key-value map).

- COMMAND and COMMAND INFO [name...] answer redis-server's 10-element entries from
  redis_docs.py's table (a name may be a full `container|sub` name; unknown: nil), a
  container with the subcommands raims answers. COMMAND LIST [FILTERBY MODULE name |
  ACLCAT category | PATTERN glob] answers the full names of the commands and their
  subcommands (no modules: MODULE matches nothing; an unknown category nothing).
  Order: the table's, where redis-server's is its dictionary's hash order.
- COMMAND GETKEYS | GETKEYSANDFLAGS find the keys of a command line by the key specs
  (begin_search index | keyword, find_keys range | keynum), as redis-server's
  getKeysUsingKeySpecs does; where a spec cannot (an `unknown` or INCOMPLETE spec, a bad
  numkeys, a keyword at the end) or its flags vary with the arguments (VARIABLE_FLAGS:
  SET, BITFIELD), redis-server's per-command key functions decide (`_PROCS`, their rules
  restated here: numkeys read as C's atoi, the last STORE of SORT, GET making SET's key RW).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from raims_node.bridges.redis_admin import ClientView, full_tree
from raims_node.bridges.redis_docs import command_info as info_entry
from raims_node.bridges.redis_docs import raw_info
from raims_node.kv.glob import glob_match
from raims_node.kv.reply import SetReply, Simple, encode

ERR_SYNTAX = "syntax error"
Key = tuple[int, tuple[str, ...]]  # a key's position in the command line, its flags
Proc = Callable[[list[bytes]], list[Key]]


def command_all(s: ClientView, args: list[bytes]) -> None:
    """COMMAND: every command's entry."""
    tree = full_tree(s)
    s._write(encode([info_entry(name, subs) for name, subs in tree.items()], s.resp))


def _entry(tree: dict[str, list[str]], name: str) -> list[Any] | None:
    if name in tree:
        return info_entry(name, tree[name])
    container = name.partition("|")[0]
    if name in tree.get(container, ()):
        return info_entry(name, [])
    return None


def command_info(s: ClientView, args: list[bytes]) -> None:
    """COMMAND INFO [name...]: each name's entry or nil; every command's without names."""
    tree = full_tree(s)
    if len(args) == 2:
        command_all(s, args)
        return
    s._write(encode([_entry(tree, a.decode("utf-8", "replace").lower()) for a in args[2:]], s.resp))


def _full_names(tree: dict[str, list[str]]) -> list[str]:
    return [n for name, subs in tree.items() for n in (name, *subs)]


def _list_filter(args: list[bytes]) -> Callable[[str], bool] | None:
    """COMMAND LIST's filter; None for a syntax error (redis-server takes one FILTERBY,
    last)."""
    if len(args) == 2:
        return lambda name: True
    if len(args) != 5 or args[2].lower() != b"filterby":
        return None
    kind, arg = args[3].lower(), args[4]
    if kind == b"module":
        return lambda name: False  # a node loads no modules
    if kind == b"aclcat":
        category = b"@" + arg.lower()
        return lambda name: category in _categories(name)
    if kind == b"pattern":
        pattern = arg.lower()  # redis-server matches without case
        return lambda name: glob_match(pattern, name.encode())
    return None


def command_list(s: ClientView, args: list[bytes]) -> None:
    """COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern]."""
    match = _list_filter(args)
    if match is None:
        s._error(ERR_SYNTAX)
        return
    s._write(encode([n.encode() for n in _full_names(full_tree(s)) if match(n)], s.resp))


def _categories(name: str) -> set[bytes]:
    entry = raw_info(name)
    return {c["+"].lower().encode() for c in entry[6]["~"]} if entry else set()


# ------------------------------------------------------------ GETKEYS

def _map(v: dict[str, Any]) -> dict[str, Any]:
    items = v["%"]
    return dict(zip(items[::2], items[1::2], strict=True))


def _specs(entry: list[Any]) -> list[dict[str, Any]]:
    """An entry's key specs as dicts: flags (a tuple), begin_search and find_keys
    ({type, spec})."""
    out = []
    for raw in entry[8]["~"]:
        spec = _map(raw)
        out.append({"flags": tuple(f["+"] for f in spec["flags"]["~"]),
                    "bs": (spec["begin_search"]["%"][1], _map(spec["begin_search"]["%"][3])),
                    "fk": (spec["find_keys"]["%"][1], _map(spec["find_keys"]["%"][3]))})
    return out


def keys_by_specs(specs: list[dict[str, Any]], argv: list[bytes]) -> list[Key] | None:
    """redis-server's getKeysUsingKeySpecs: the keys, or None where a spec cannot tell."""
    argc = len(argv)
    keys: list[Key] = []
    for spec in specs:
        if "not_key" in spec["flags"]:
            continue
        (bs_type, bs), (fk_type, fk) = spec["bs"], spec["fk"]
        if bs_type == "index":
            first = bs["index"]
        elif bs_type == "keyword":
            first = _keyword(argv, bs["keyword"].encode().lower(), bs["startfrom"])
            if not first:
                continue
        else:
            return None
        if fk_type == "range":
            step = fk["keystep"]
            if fk["lastkey"] >= 0:
                last = first + fk["lastkey"]
            elif not fk["limit"]:
                last = argc + fk["lastkey"]
            else:
                last = first + ((argc - first) // fk["limit"] + fk["lastkey"])
        elif fk_type == "keynum":
            step = fk["keystep"]
            if fk["keynumidx"] >= argc or first + fk["keynumidx"] >= argc:
                return None
            numkeys = _strict_int(argv[first + fk["keynumidx"]])
            if numkeys is None or numkeys < 0:
                return None
            first += fk["firstkey"]
            last = first + numkeys - 1
        else:
            return None
        if last >= argc or last < first or first >= argc:
            return None
        keys.extend((i, spec["flags"]) for i in range(first, last + 1, step))
        if "incomplete" in spec["flags"]:
            return None
    return keys


def _keyword(argv: list[bytes], keyword: bytes, startfrom: int) -> int:
    argc = len(argv)
    start = startfrom if startfrom > 0 else argc + startfrom
    end = argc - 1 if startfrom > 0 else 1
    i = start
    for _ in range(argc + 1):  # bounded: the walk visits each index at most once
        if i == end or i >= argc or i < 1:
            break
        if argv[i].lower() == keyword:
            return i + 1
        i = i + 1 if start <= end else i - 1
    return 0


def _strict_int(raw: bytes) -> int | None:
    """redis-server's string2ll: a canonical 64-bit decimal ("0", no "-0", no "+") or None."""
    body = raw[1:] if raw[:1] == b"-" else raw
    if not body.isdigit() or len(raw) > 20 or (body[:1] == b"0" and raw != b"0"):
        return None
    n = int(raw)
    return n if -(1 << 63) <= n < (1 << 63) else None


def _atoi(raw: bytes) -> int:
    """C's atoi as glibc does it: leading blanks, a sign, digits; 0 if none."""
    text = raw.lstrip(b" \t\n\v\f\r")
    sign = -1 if text[:1] == b"-" else 1
    if text[:1] in (b"-", b"+"):
        text = text[1:]
    digits = len(text) - len(text.lstrip(b"0123456789"))
    n = sign * int(text[:digits]) if digits else 0
    return max(-(1 << 31), min(n, (1 << 31) - 1))  # atoi goes through a long, then an int


def _numkeys_proc(store: int, count: int, first: int) -> Proc:
    """redis-server's genericGetKeys (ZUNIONSTORE and kin): no flags."""
    def keys(argv: list[bytes]) -> list[Key]:
        num = _atoi(argv[count])
        if num < 1 or num > len(argv) - first:
            return []
        found: list[Key] = [(first + i, ()) for i in range(num)]
        return found + [(store, ())] if store else found
    return keys


def _sort(argv: list[bytes]) -> list[Key]:
    keys: list[Key] = [(1, ("RO", "access"))]
    store = 0
    i = 2
    while i < len(argv):
        arg = argv[i].lower()
        if arg in (b"limit", b"get", b"by"):
            i += 2 if arg == b"limit" else 1
        elif arg == b"store" and i + 1 < len(argv):
            store = i + 1
        i += 1
    return keys + [(store, ("OW", "update"))] if store else keys


def _georadius(argv: list[bytes]) -> list[Key]:
    stored = 0
    i = 5
    while i < len(argv):
        if argv[i].lower() in (b"store", b"storedist") and i + 1 < len(argv):
            stored = i + 1
            i += 1
        i += 1
    return [(1, ()), (stored, ())] if stored else [(1, ())]


def _xread(argv: list[bytes]) -> list[Key]:
    streams = -1
    i = 1
    while i < len(argv):
        arg = argv[i].lower()
        if arg in (b"block", b"count"):
            i += 1
        elif arg == b"group":
            i += 2
        elif arg == b"streams":
            streams = i
            break
        elif arg != b"noack":
            break
        i += 1
    num = len(argv) - streams - 1
    if streams == -1 or num == 0 or num % 2:
        return []
    return [(i, ()) for i in range(streams + 1, len(argv) - num // 2)]


def _set(argv: list[bytes]) -> list[Key]:
    if any(a.lower() == b"get" for a in argv[3:]):
        return [(1, ("RW", "access", "update"))]
    return [(1, ("OW", "update"))]


def _bitfield(argv: list[bytes]) -> list[Key]:
    readonly = True
    i = 2
    while i < len(argv):
        more, arg = len(argv) - i - 1, argv[i].lower()
        if arg == b"get" and more >= 2:
            i += 2
        elif arg in (b"set", b"incrby") and more >= 3:
            readonly = False
            break
        elif arg == b"overflow" and more >= 1:
            i += 1
        else:
            readonly = False
            break
        i += 1
    return [(1, ("RO", "access") if readonly else ("RW", "access", "update"))]


_PROCS: dict[str, Proc] = {
    "sintercard": _numkeys_proc(0, 1, 2), "zunion": _numkeys_proc(0, 1, 2), "zinter": _numkeys_proc(0, 1, 2),
    "zdiff": _numkeys_proc(0, 1, 2), "zintercard": _numkeys_proc(0, 1, 2), "lmpop": _numkeys_proc(0, 1, 2),
    "zmpop": _numkeys_proc(0, 1, 2), "blmpop": _numkeys_proc(0, 2, 3), "bzmpop": _numkeys_proc(0, 2, 3),
    "zunionstore": _numkeys_proc(1, 2, 3), "zinterstore": _numkeys_proc(1, 2, 3),
    "zdiffstore": _numkeys_proc(1, 2, 3), "sort": _sort, "sort_ro": lambda argv: [(1, ("RO", "access"))],
    "georadius": _georadius, "georadiusbymember": _georadius, "xread": _xread, "xreadgroup": _xread,
    "set": _set, "bitfield": _bitfield,
}


def get_keys(tree: dict[str, list[str]], argv: list[bytes]) -> list[Key] | str:
    """The keys of the command line `argv`, or redis-server's error text."""
    name = argv[0].lower().decode("utf-8", "replace")
    if name in tree and tree[name] and len(argv) > 1:
        name = f"{name}|{argv[1].lower().decode('utf-8', 'replace')}"
        if name not in tree[name.partition("|")[0]]:
            return "Invalid command specified"
    elif name not in tree:
        return "Invalid command specified"
    entry = raw_info(name)
    assert entry is not None  # the table covers every command (a unit test)
    specs = _specs(entry)
    proc = _PROCS.get(name)
    has_keyspec = any("not_key" not in spec["flags"] for spec in specs)
    if proc is None and not has_keyspec:
        return "The command has no key arguments"
    arity = entry[1]
    if (arity > 0 and arity != len(argv)) or len(argv) < -arity:
        return "Invalid number of arguments specified for command"
    keys: list[Key] | None = None
    if has_keyspec and not any("variable_flags" in spec["flags"] for spec in specs):
        keys = keys_by_specs(specs, argv)
    if keys is None:
        keys = proc(argv) if proc is not None else []
    if not keys and not any(f["+"] == "no_mandatory_keys" for f in entry[2]["~"]):
        return "Invalid arguments specified for command"
    return keys


def _getkeys(s: ClientView, args: list[bytes], with_flags: bool) -> None:
    keys = get_keys(full_tree(s), args[2:])
    if isinstance(keys, str):
        s._error(keys)
    elif with_flags:
        s._write(encode([[args[2 + i], SetReply([Simple(f.encode()) for f in flags])] for i, flags in keys],
                        s.resp))
    else:
        s._write(encode([args[2 + i] for i, _ in keys], s.resp))


def command_getkeys(s: ClientView, args: list[bytes]) -> None:
    _getkeys(s, args, False)


def command_getkeysandflags(s: ClientView, args: list[bytes]) -> None:
    _getkeys(s, args, True)
