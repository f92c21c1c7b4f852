"""What a console command may look at: the node, and what only the daemon knows.

The router node is sans-IO, so the transports' file descriptors, byte counters and
addresses (`show ports`), the loaded configuration (`show running`, `show users`) and the
log buffer (`show logs`) come from the daemon through this context; the simulator and
tests pass their own.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from raims_node.console.result import CommandResult
from raims_node.names.service import NameService
from raims_node.router.node import Node
from raims_node.transports.poll_stats import PollStats


def _no_rows() -> list[dict[str, object]]:
    return []


def _no_lines() -> list[str]:
    return []


def _no_flow() -> dict[str, int]:
    return {}


@dataclass
class ConsoleContext:
    """`ports()` gives one row per transport connection for `show ports`, with the keys
    tport ("<name>.<tport_id>", as the console prints transports), type, cost, fd, bs,
    br, ms, mr, lat (ns), idle (ns), fl and address; a missing key is an empty cell.
    `flow()` the daemon's flow control counters (buffered bytes, slow consumers, dropped
    links); `now_ns()` is the daemon's clock; `config` the loaded
    `raims_node.config.tree.ConfigTree`, or None; `names` the daemon's name service."""

    node: Node
    ports: Callable[[], list[dict[str, object]]] = _no_rows
    now_ns: Callable[[], int] = time.time_ns
    config: object | None = None
    log_lines: Callable[[], list[str]] = _no_lines
    names: NameService | None = None  # the service name table (show names, show topology)
    flow: Callable[[], dict[str, int]] = _no_flow  # the daemon's flow control counters
    poll: PollStats | None = None  # the daemon's event loop times (show poll)
    fds: Callable[[], list[dict[str, object]]] = _no_rows  # its network fds (transports/fds.py)


Handler = Callable[[ConsoleContext, list[str]], CommandResult]
