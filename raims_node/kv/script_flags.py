"""A Lua script's shebang line (`#!lua flags=...`) and what its flags mean for the
EVAL that runs it, as redis-server 7.0.15's evalExtractShebangFlags and
evalGetCommandFlags (scripting.py runs the scripts)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from raims_node.kv.errors import CommandError

if TYPE_CHECKING:
    from raims_node.kv.commands import Engine

_SHEBANG_FLAGS = (b"no-writes", b"allow-oom", b"allow-stale", b"no-cluster", b"allow-cross-slot-keys")


def shebang(body: bytes) -> tuple[int, bool, bool]:
    """(length of the `#!lua flags=...` line, no-writes, allow-oom or no-writes) of a
    script; CommandError for a bad one (redis-server's evalExtractShebangFlags)."""
    if not body.startswith(b"#!"):
        return 0, False, False
    end = body.find(b"\n")
    if end < 0:
        raise CommandError(b"ERR Invalid script shebang")
    parts = body[:end].split()
    if not parts:
        raise CommandError(b"ERR Invalid engine in script shebang")
    if parts[0] != b"#!lua":
        raise CommandError(b"ERR Unexpected engine in script shebang: " + parts[0])
    flags: set[bytes] = set()
    for part in parts[1:]:
        if not part.startswith(b"flags="):
            raise CommandError(b"ERR Unknown lua shebang option: " + part)
        for flag in part[6:].split(b","):
            if flag not in _SHEBANG_FLAGS:
                raise CommandError(b"ERR Unexpected flag in script shebang: " + flag)
            flags.add(flag)
    no_writes = b"no-writes" in flags
    return end, no_writes, no_writes or b"allow-oom" in flags


def eval_denyoom(e: Engine, a: list[bytes]) -> bool:
    """EVAL / EVALSHA `a` is refused whole over maxmemory: its script has a shebang with
    neither no-writes nor allow-oom (redis-server gives such an EVAL the denyoom flag; a
    script without a shebang starts, and its first write is refused, scripting.py). A
    bad shebang or an unknown sha is not: the command then answers its own error."""
    if a[0].lower() in (b"evalsha", b"evalsha_ro"):
        body = e.scripts.bodies.get(a[1].lower()) if e.scripts is not None else None
    else:
        body = a[1]
    if not body or not body.startswith(b"#!"):
        return False
    try:
        return not shebang(body)[2]
    except CommandError:
        return False
