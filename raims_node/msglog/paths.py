"""Where a message log's files are (seed 1.1): `<path>/<cabal>/<node>/`.

    <node>.msg      the named (state) file: a symlink to the active numbered file, or for
                    a state-only log a regular file holding one header record
    nnnnnnnn.msg    numbered files, 00000001 up, the highest is the active one
    <name>.cursor   a consumer's position (`cursor.Cursor`)
    ~.socket        the producer's datagram socket (live stream requests, `producer`)
    <name>.socket   a consumer's datagram socket (live stream packets)
    <name>.lock     held (flock) by the one running consumer of that name
    ~.lock          held (flock) by the one producer of the log
    ~.opens         one line per producer open: `<file> <end> <torn bytes cut> <time ns>`
                    (readers resync cursors saved before it that point past that end)

Names (cabal, node, consumer) are single path components of letters, digits, `_`, `-`
and `.` (not starting with a dot), so a name can never climb out of the log directory.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

from raims_node.msglog.errors import BadArgument

DEFAULT_ROOT: Final = "./message"
PRODUCER_SOCKET: Final = "~.socket"
LOCK_FILE: Final = "~.lock"
OPENS_FILE: Final = "~.opens"
_NAME: Final = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_NUMBERED: Final = re.compile(r"^(\d{8})\.msg$")


def check_name(what: str, name: str) -> str:
    if not _NAME.match(name):
        raise BadArgument(f"{what} {name!r} is not a plain name (letters, digits, _ . -)")
    return name


def log_dir(root: str | Path, cabal: str, node: str) -> Path:
    return Path(root) / check_name("cabal", cabal) / check_name("node name", node)


def numbered(file_no: int) -> str:
    return f"{file_no:08d}.msg"


def file_number(name: str) -> int | None:
    m = _NUMBERED.match(name)
    return int(m.group(1)) if m else None


def numbered_files(directory: Path) -> list[int]:
    """File numbers present, ascending."""
    out = []
    for p in directory.iterdir():
        n = file_number(p.name)
        if n is not None and not p.is_symlink():
            out.append(n)
    return sorted(out)


def named_file(directory: Path, node: str) -> Path:
    return directory / f"{node}.msg"


def cursor_file(directory: Path, name: str) -> Path:
    return directory / f"{check_name('consumer name', name)}.cursor"


def consumer_socket(directory: Path, name: str) -> Path:
    return directory / f"{check_name('consumer name', name)}.socket"


def consumer_lock(directory: Path, name: str) -> Path:
    return directory / f"{check_name('consumer name', name)}.lock"
