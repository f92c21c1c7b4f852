"""MONITOR on the Redis transport: the commands the transport's other clients run, one
line each as redis-server writes them:
`+<unix seconds>.<microseconds> [<db> <client address>] "arg" "arg" ...`, every
argument quoted with redis-server's escapes (`\\"`, `\\\\`, `\\n`, `\\r`, `\\t`,
`\\a`, `\\b`, `\\xHH` for other unprintable bytes).

Decisions:
- A command is shown when it runs: one queued by MULTI when EXEC runs it, one held
  behind a blocked pop when it is replayed, a pipeline's data commands and PUBLISHes
  (redis_batch.run_fast) after their run, with the database they ran in.
- A command a script runs is shown as `[db lua]` after the EVAL / EVALSHA that runs it
  (the engine's `script_monitor` hook; the EVAL is shown first, as redis-server does).
- A monitor's own commands are not shown; RESET ends monitoring (as in redis-server),
  QUIT or a close too. AUTH's arguments, and HELLO's after AUTH, show as "(redacted)".
- Lines are queued as pushes (sent whatever CLIENT REPLY says) under the pub/sub output
  limits: a monitor that does not read is cut as a slow consumer. redis-server counts a
  monitor as a normal client, without a limit; here one unread monitor must not hold
  the node's memory.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Protocol

from raims_node.bridges.resp import OK


class Monitors(Protocol):
    monitors: set[Client]


class Client(Protocol):
    """What MONITOR uses of a Redis session (redis_session.py)."""

    db: int
    addr: str

    @property
    def host(self) -> Monitors: ...

    @property
    def closing(self) -> bool: ...

    def _write(self, data: bytes) -> bool: ...

    def _push(self, data: bytes) -> bool: ...


_ESCAPES = {ord("\\"): b"\\\\", ord('"'): b'\\"', ord("\n"): b"\\n", ord("\r"): b"\\r", ord("\t"): b"\\t",
            7: b"\\a", 8: b"\\b"}
_REPR = [_ESCAPES.get(c, bytes([c]) if 32 <= c < 127 else b"\\x%02x" % c) for c in range(256)]
_REDACTED = b'"(redacted)"'


def start(s: Client, args: list[bytes]) -> None:
    """MONITOR: `s` is shown every command the transport's other clients run from now."""
    s.host.monitors.add(s)
    s._write(OK)


def feed_script(hosts: list[Monitors], db: int, args: list[bytes]) -> None:
    """A command a Lua script runs, shown as redis-server shows it: `[db lua]`."""
    for host in hosts:
        if host.monitors:
            line = _line(b"+%.6f [%d lua] " % (time.time(), db), args)
            for m in list(host.monitors):
                if m.closing:
                    host.monitors.discard(m)
                else:
                    m._push(line)


def quote(arg: bytes) -> bytes:
    """One argument as redis-server's MONITOR writes it."""
    if arg.isalnum():  # the usual name or key: nothing to escape
        return b'"%s"' % arg
    return b'"%s"' % b"".join(map(_REPR.__getitem__, arg))


def _line(head: bytes, args: list[bytes]) -> bytes:
    name = args[0].lower()
    shown = len(args)  # the arguments shown; the rest are redacted
    if name == b"auth":
        shown = 1
    elif name == b"hello":
        shown = next((i + 1 for i, a in enumerate(args) if a.lower() == b"auth"), shown)
    return head + b" ".join([*map(quote, args[:shown]), *[_REDACTED] * (len(args) - shown)]) + b"\r\n"


def feed(s: Client, commands: Sequence[list[bytes]]) -> None:
    """Show `commands`, run by `s` in its current database, to the transport's monitors."""
    monitors = s.host.monitors
    if s in monitors:
        return
    head = b"+%.6f [%d %s] " % (time.time(), s.db, s.addr.encode())
    lines = b"".join(_line(head, args) for args in commands)
    for m in list(monitors):
        if m.closing:
            monitors.discard(m)
        else:
            m._push(lines)
