"""The module commands `message.create|export|prune|append` and the node command `trace`
(seed 004 sections 3.4, 3.5), written once for `ms_msglog` and the console.

Each command takes its words as the seed orders them, an optional path first (a path
must start with "/" or "./"; default `./message`), and returns lines of text. Errors
are `MsgLogError`s whose text is the one line to show. `CONSOLE` is the table the
console registers (`message.create ...` -> its `run(words)`, lines of text back; `help`
shows `words`, `args`, `description`); `trace` is the node command `node:trace [on|off]`
on a running `CabalNode`.

Retention (prune) is a number and a unit: `20d`, `12h`, `30m`, `10s`. A numbered file is
retired when the next file started before now minus the retention (the next file's
header time is when this one was closed); the active file is never pruned, and files
go oldest first, so what remains is always a contiguous log.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from raims_node.msglog import paths, record
from raims_node.msglog.errors import BadArgument, LogNotFound
from raims_node.msglog.log import MessageLog, check_number, create_log, read_file_header
from raims_node.msglog.record import Kind, LogKind
from raims_node.msglog.state import State

_UNITS: Final = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_RETENTION: Final = re.compile(r"^(\d+)([dhms])$")


def split_path(words: list[str]) -> tuple[str, list[str]]:
    """The optional leading path (it starts with "/" or "./") and the other words."""
    if words and (words[0].startswith("/") or words[0].startswith("./")):
        return words[0], words[1:]
    if words and (words[0] in (".", "..") or "/" in words[0] or words[0].startswith("~")):
        # a cabal name holds no '/': `../logs` or `logs/x` is a path the seed's rule refuses
        # (it was taken as the cabal and the error named the wrong word)
        raise BadArgument(f"a path must start with '/' or './': {words[0]!r}")
    return paths.DEFAULT_ROOT, words


def _number(text: str) -> int:
    if not text.isascii() or not text.isdigit():  # int() also took " 3", "+3" and "1_0" (10)
        raise BadArgument(f"node number {text!r} is not a number 0..255")
    return check_number(int(text))


def parse_retention(text: str) -> float:
    m = _RETENTION.match(text)
    if m is None:
        raise BadArgument(f"retention {text!r} is not a number and d, h, m or s (e.g. 20d)")
    return int(m.group(1)) * _UNITS[m.group(2)]


def stamp(ns: int) -> str:
    return (
        datetime.fromtimestamp(ns // 1_000_000_000, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        + f".{ns % 1_000_000_000:09d}Z"
    )


def fmt_state(s: State) -> str:
    return ",".join(f"{o}:{m}" for o, m in s.items()) or "-"


def fmt_data(data: bytes) -> str:
    try:
        return "data=" + json.dumps(data.decode("utf-8"), ensure_ascii=False)
    except UnicodeDecodeError:
        return "hex=" + data.hex()


def create(words: list[str]) -> list[str]:
    usage = "message.create [path] cabal nodename nodenumber [content|state]"
    root, rest = split_path(words)
    if len(rest) not in (3, 4):
        raise BadArgument(f"usage: {usage}")
    kind = LogKind.CONTENT
    if len(rest) == 4:
        if rest[3] not in ("content", "state"):
            raise BadArgument(f"type {rest[3]!r} is not content or state")
        kind = LogKind.CONTENT if rest[3] == "content" else LogKind.STATE
    d = create_log(root, rest[0], rest[1], _number(rest[2]), kind)
    return [f"created {d}" + (" (state only)" if kind is LogKind.STATE else "")]


def export(words: list[str]) -> list[str]:
    usage = "message.export [path] cabal nodename nodenumber filename"
    root, rest = split_path(words)
    if len(rest) != 4:
        raise BadArgument(f"usage: {usage}")
    cabal, node, number, filename = rest[0], rest[1], _number(rest[2]), rest[3]
    if filename != f"{node}.msg" and paths.file_number(filename) is None:
        raise BadArgument(f"file {filename!r} is neither {node}.msg nor nnnnnnnn.msg")
    path = paths.log_dir(root, cabal, node) / filename
    try:
        buf = path.read_bytes()
    except FileNotFoundError:
        raise LogNotFound(f"no message file {path}") from None
    header = read_file_header(path)
    if header.node_number != number:
        raise BadArgument(f"{path} is a file of node number {header.node_number}, not {number}")
    lines = [f"# message file {path}"]
    for item in record.scan(buf):
        if isinstance(item, record.Bad):
            lines.append(f"# bad record at offset {item.offset}: {item.why}")
            break
        off, rec = item
        if rec.kind == Kind.HEADER:
            h = record.decode_header(rec, str(path))
            lines.append(
                f"header offset={off} node={h.node_number} file={h.file_no} kind={h.log_kind.name.lower()} "
                f"time={stamp(h.time_ns)} state={fmt_state(h.state)}"
            )
        elif rec.kind == Kind.FOOTER:
            st, _ = State.decode(rec.data)
            lines.append(
                f"footer offset={off} file={rec.mid} time={stamp(rec.time_ns)} state={fmt_state(st)}"
            )
        else:
            lines.append(
                f"message offset={off} origin={rec.origin} id={rec.mid} time={stamp(rec.time_ns)} {fmt_data(rec.data)}"
            )
    return lines


def prune(words: list[str], now: float | None = None) -> list[str]:
    usage = "message.prune [path] cabal nodename nodenumber retention"
    root, rest = split_path(words)
    if len(rest) != 4:
        raise BadArgument(f"usage: {usage}")
    cabal, node, number = rest[0], rest[1], _number(rest[2])
    keep = parse_retention(rest[3])
    d = paths.log_dir(root, cabal, node)
    named = paths.named_file(d, node)
    if not named.is_symlink():
        if named.exists():
            return [f"{d} is a state-only log: nothing to prune"]
        raise LogNotFound(f"no message log {d}")
    active = paths.file_number(os.readlink(named))
    files = paths.numbered_files(d)
    if not files:
        raise LogNotFound(f"message log {d} has no numbered files ({named.name} links to {os.readlink(named)})")
    if read_file_header(d / paths.numbered(files[-1])).node_number != number:
        raise BadArgument(f"message log {d} is not node number {number}")
    cutoff_ns = int(((time.time() if now is None else now) - keep) * 1e9)
    removed = []
    for a, b in zip(files, files[1:], strict=False):
        if a == active or read_file_header(d / paths.numbered(b)).time_ns >= cutoff_ns:
            break
        os.unlink(d / paths.numbered(a))
        removed.append(paths.numbered(a))
    return [
        f"pruned {len(removed)} file(s) from {d}" + (f": {', '.join(removed)}" if removed else "")
    ]


def append(words: list[str], lines: Iterable[bytes]) -> list[str]:
    usage = "message.append [path] cabal nodename nodenumber"
    root, rest = split_path(words)
    if len(rest) != 3:
        raise BadArgument(f"usage: {usage}")
    n = 0
    with MessageLog.open(root, rest[0], rest[1], _number(rest[2])) as log:
        first = last = 0
        for line in lines:
            last = log.originate(line.rstrip(b"\r\n") if line.endswith(b"\n") else line)
            first = first or last
            n += 1
    return [f"appended {n} message(s)" + (f", ids {first}..{last}" if n else "")]


def trace(node: object, words: list[str]) -> list[str]:
    """`node:trace [on|off]` on a running CabalNode (toggles without an argument)."""
    current = bool(getattr(node, "trace_on", False))
    if not words:
        value = not current
    elif words == ["on"] or words == ["off"]:
        value = words[0] == "on"
    else:
        raise BadArgument("usage: node:trace [on|off]")
    node.trace_on = value  # type: ignore[attr-defined]
    return [f"trace {'on' if value else 'off'}"]


COMMANDS: Final[dict[str, Callable[[list[str]], list[str]]]] = {
    "create": create,
    "export": export,
    "prune": prune,
}


@dataclass(frozen=True, slots=True)
class ConsoleCommand:
    """A row of the console table: `message.<verb> <args>`, its help line and handler."""

    words: str
    args: str
    description: str
    run: Callable[[list[str]], list[str]]


CONSOLE: Final[tuple[ConsoleCommand, ...]] = (
    ConsoleCommand(
        "message.create",
        "[path] cabal node number [content|state]",
        "Create a message log",
        create,
    ),
    ConsoleCommand(
        "message.export",
        "[path] cabal node number file",
        "Print a message file as text",
        export,
    ),
    ConsoleCommand(
        "message.prune",
        "[path] cabal node number retention",
        "Retire message files older than the retention (20d, 12h, 30m, 10s)",
        prune,
    ),
)
