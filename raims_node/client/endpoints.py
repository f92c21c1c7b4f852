"""The endpoints file: how a client on a host finds the node(s) running there.

Each ms_server writes, once its transports listen, `endpoints_dir()/<user>.<service>.json`
(`$XDG_RUNTIME_DIR/raims/`, else `${TMPDIR:-/tmp}/raims-<uid>/`, beside the named sbus
sockets) and removes it when it stops:

    {"node": "A", "service": "test", "pid": 1234,
     "sbus": ["/tmp/raims-0/A.test.sock"], "nats": ["127.0.0.1:4222"],
     "redis": ["127.0.0.1:6379"], "web": ["127.0.0.1:8080"]}

`find()` picks the file: `$RAIMS_ENDPOINTS` (a file path) wins, then the node named by
the argument or `$RAIMS_NODE` (`user` or `user.service`; a `user` running in two services
on the host is ambiguous), then the only live node of the host. Files whose pid is gone
are ignored (left by a daemon killed with SIGKILL).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raims_node.bridges.ipc import socket_dir

ENV_FILE = "RAIMS_ENDPOINTS"
ENV_NODE = "RAIMS_NODE"
SUFFIX = ".json"


class NoNode(ConnectionError):
    """No node runs on this host (or not the one asked for)."""


@dataclass(frozen=True)
class Endpoints:
    node: str
    service: str = ""
    pid: int = 0
    sbus: list[str] = field(default_factory=list)
    nats: list[str] = field(default_factory=list)
    redis: list[str] = field(default_factory=list)
    web: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, data: dict[str, Any]) -> Endpoints:
        return cls(str(data["node"]), str(data.get("service", "")), int(data.get("pid", 0)),
                   *(list(map(str, data.get(k, []))) for k in ("sbus", "nats", "redis", "web")))


def endpoints_dir() -> Path:
    return socket_dir()


def endpoints_file(node: str, service: str) -> Path:
    return endpoints_dir() / f"{node}.{service}{SUFFIX}"


def write(ep: Endpoints) -> Path:
    """Write `ep` atomically (readers never see half a file)."""
    path = endpoints_file(ep.node, ep.service)
    path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(ep.__dict__))
    tmp.chmod(0o644)
    tmp.replace(path)
    return path


def remove(node: str, service: str) -> None:
    path = endpoints_file(node, service)
    try:
        data = json.loads(path.read_text())
        if int(data.get("pid", 0)) == os.getpid():
            path.unlink()
    except (OSError, ValueError):
        pass


def _alive(pid: int) -> bool:
    if pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read(path: Path) -> Endpoints:
    try:
        return Endpoints.of(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError) as exc:
        raise NoNode(f"endpoints file {path}: {exc}") from None


def nodes() -> list[Endpoints]:
    """The live nodes of this host, by name."""
    out = []
    for path in sorted(endpoints_dir().glob(f"*{SUFFIX}")):
        try:
            ep = read(path)
        except NoNode:
            continue
        if _alive(ep.pid):
            out.append(ep)
    return out


def find(node: str | None = None) -> Endpoints:
    """The endpoints of this host's node (module docstring); NoNode otherwise."""
    env = os.environ.get(ENV_FILE)
    if env:
        return read(Path(env))
    node = node or os.environ.get(ENV_NODE) or None
    if node is not None:
        named = [e for e in nodes() if node in (e.node, f"{e.node}.{e.service}")]
        if not named:
            raise NoNode(f"no node {node!r} runs on this host (no live endpoints file in {endpoints_dir()})")
        if len(named) > 1:
            raise NoNode(f"node {node!r} is ambiguous on this host: "
                         f"{', '.join(f'{e.node}.{e.service}' for e in named)}")
        return named[0]
    live = nodes()
    if not live:
        raise NoNode(f"no raims node runs on this host (no endpoints file in {endpoints_dir()}; "
                     f"set ${ENV_FILE} or start ms_server)")
    if len(live) > 1:
        raise NoNode(f"{len(live)} nodes run on this host ({', '.join(e.node for e in live)}): "
                     f"pass node= or set ${ENV_NODE}")
    return live[0]
