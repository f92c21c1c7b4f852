"""Generate raims_node/bridges/redis_commands.json: redis-server's own COMMAND INFO and
COMMAND DOCS entries for exactly the commands (and subcommands) a raims node answers.

Rerun after adding a command to the session table (bridges/redis_session.py) or to the
map's COMMANDS (kv/), from the repository root:

    PYTHONPATH=. .venv/bin/python scripts/gen_redis_commands.py [/usr/bin/redis-server]

It starts its own redis-server (7.0.15, Debian's) on a free 127.0.0.1 port, asks it in
RESP3 and stops it. Entries are stored per full name (`client|list`) without their
subcommands (the node assembles those from what it answers). Values keep their RESP3
kinds: a JSON string is a bulk string, {"+": s} a status, {"~": [...]} a set,
{"%": [k, v, ...]} a map, a list an array. CLIENT SETINFO (redis 7.2) is not in 7.0.15:
its entries are written here from redis 7.2's client-setinfo.json.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from raims_node.bridges.redis_admin import data_tree
from raims_node.bridges.redis_session import session_command_tree
from raims_node.kv.commands import load_families

OUT = Path(__file__).resolve().parent.parent / "raims_node" / "bridges" / "redis_commands.json"
SETINFO_INFO: list[Any] = [
    "client|setinfo", 4, {"~": [{"+": "noscript"}, {"+": "loading"}, {"+": "stale"}]}, 0, 0, 0,
    {"~": [{"+": "@slow"}, {"+": "@connection"}]},
    {"~": ["request_policy:all_nodes", "response_policy:all_succeeded"]}, {"~": []}]
SETINFO_DOCS: list[Any] = [
    "summary", "Sets information specific to the client or connection.", "since", "7.2.0",
    "group", "connection", "complexity", "O(1)", "arguments", [{"%": [
        "name", "attr", "type", "oneof", "arguments", [
            {"%": ["name", "libname", "type", "string", "token", "LIB-NAME"]},
            {"%": ["name", "libver", "type", "string", "token", "LIB-VER"]}]]}]]


def _read(f: Any) -> Any:
    line = f.readline()
    kind, head = line[:1], line[1:-2]
    if kind in (b"$", b"="):
        n = int(head)
        if n < 0:
            return None
        data = f.read(n + 2)[:-2]
        return data.decode()
    if kind == b":":
        return int(head)
    if kind == b"+":
        return {"+": head.decode()}
    if kind == b"_":
        return None
    if kind == b"-":
        raise RuntimeError(head.decode())
    n = int(head)
    if kind == b"*":
        return [_read(f) for _ in range(n)]
    if kind == b"~":
        return {"~": [_read(f) for _ in range(n)]}
    if kind == b"%":
        return {"%": [_read(f) for _ in range(2 * n)]}
    raise ValueError(line)


def _ask(sock: socket.socket, f: Any, *args: str) -> Any:
    sock.sendall(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a.encode()) for a in args))
    return _read(f)


def _dump(version: str, info: dict[str, Any], docs: dict[str, Any]) -> str:
    """The table as JSON, one entry a line (readable diffs when it is regenerated)."""
    def section(table: dict[str, Any]) -> str:
        return ",\n".join(f"  {json.dumps(k)}: {json.dumps(table[k], separators=(',', ':'))}"
                           for k in sorted(table))
    return (f'{{"version": {json.dumps(version)},\n"info": {{\n{section(info)}\n}},\n'
            f'"docs": {{\n{section(docs)}\n}}}}\n')


def main() -> None:
    load_families()
    tree = session_command_tree()
    for name, subs in data_tree().items():
        tree.setdefault(name, subs)
    wanted = set(tree) | {sub for subs in tree.values() for sub in subs}
    server = sys.argv[1] if len(sys.argv) > 1 else "/usr/bin/redis-server"
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    proc = subprocess.Popen([server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", tempfile.gettempdir()], stdout=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                sock = socket.create_connection(("127.0.0.1", port))
                break
            except OSError:
                time.sleep(0.05)
        f = sock.makefile("rb")
        _ask(sock, f, "HELLO", "3")
        info: dict[str, Any] = {}
        docs: dict[str, Any] = {}
        for name in sorted(tree):
            [entry] = _ask(sock, f, "COMMAND", "INFO", name)
            if entry is None:
                raise SystemExit(f"redis-server does not know {name}")
            for sub in [entry, *entry[9]]:
                if sub[0] in wanted:
                    info[sub[0]] = sub[:9]
            doc = _ask(sock, f, "COMMAND", "DOCS", name)["%"][1]["%"]
            subs = doc[doc.index("subcommands") + 1]["%"] if "subcommands" in doc else []
            if "subcommands" in doc:
                doc = doc[:doc.index("subcommands")]
            docs[name] = doc
            for i in range(0, len(subs), 2):
                if subs[i] in wanted:
                    docs[subs[i]] = subs[i + 1]["%"]
        info["client|setinfo"], docs["client|setinfo"] = SETINFO_INFO, SETINFO_DOCS
        missing = wanted - set(info) | wanted - set(docs)
        if missing:
            raise SystemExit(f"redis-server does not know {sorted(missing)}")
        version = _ask(sock, f, "INFO", "server").split("redis_version:")[1].split("\r\n")[0]
        OUT.write_text(_dump(version, info, docs))
        print(f"{OUT}: {len(info)} entries")
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
