"""What the console completes and how it prompts, for the terminal and telnet alike.

The prompt is the manual's `user.svc[bridge]@host[N]> ` (N counts the commands run).
Completion offers the command words (with the optional `show`), then the names the
argument letters stand for: peers' user names, transport names (configured and
running) and the subjects and patterns subscribed on this node.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable

from raims_node.console.commands import COMMANDS
from raims_node.console.session import ConsoleHost
from raims_node.wire.subjects import bridge_b64


def prompt_text(host: ConsoleHost, count: int, mode: str | None = None) -> str:
    """The manual's prompt; `mode` is the transport a `configure transport` sub-mode sets."""
    node = host.node
    tail = f"({mode})" if mode else ""
    return f"{node.user}.{node.service}[{bridge_b64(node.bridge)}]@{socket.gethostname()}[{count}]{tail}> "


def completions(host: ConsoleHost, typed: list[str]) -> Iterable[str]:
    """The words that may follow the words `typed` (all complete)."""
    forms = [c.words for c in COMMANDS] + [c.words[1:] for c in COMMANDS if c.words[0] == "show"]
    n = len(typed)
    nexts = {f[n] for f in forms if len(f) > n and all(f[i].startswith(typed[i]) for i in range(n))}
    return sorted(nexts) if nexts else sorted(_names(host))


def _names(host: ConsoleHost) -> set[str]:
    node = host.node
    out = {p.user for p in node.peers.values()}
    out |= {t.name for t in node.tports}
    out |= {t.tport for t in getattr(host.tree, "transports", ())}
    out |= set(node.subs.subjects()) | {text for _, text in node.subs.patterns()}
    return out
