"""The daemon's guard on link sockets: admission (transports/admission.py) and the
rate-limited log lines (lograte.py), wired to the node's reject counters.

The daemon reports each link made and lost, calls `tick` from its timer, and writes
flood-prone lines through `warn` (link closes) and `line` (the node's keyed Log
actions, e.g. rejected handshakes). See docs/DESIGN-NOTES.md, "Hardening".
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Protocol

from raims_node.config.params import Parameters
from raims_node.lograte import RateLimitedLog
from raims_node.transports.admission import Admission


class _Conn(Protocol):
    active: bool


class GuardedNode(Protocol):
    @property
    def conns(self) -> Mapping[int, _Conn]: ...
    def count_reject(self, kind: str) -> None: ...


class GuardedLink(Protocol):
    outbound: bool
    peer_addr: str
    refusal: str | None

    def close(self, reason: str) -> None: ...


class LinkGuard:
    def __init__(self, params: Parameters, node: GuardedNode, say: Callable[[str, int], None]) -> None:
        self.admission = Admission(params.time("tcp_auth_timeout"), params.count("tcp_pending_max"),
                                   params.count("tcp_pending_per_host"))
        self.limited = RateLimitedLog(lambda level, text: say(text, level))
        self.node = node
        self._say = say

    def admit(self, conn_id: int, link: GuardedLink) -> bool:
        """False (the link is closed, never shown to the node) when over a pending cap."""
        host = None if link.outbound else link.peer_addr.rpartition(":")[0].strip("[]")
        refused = self.admission.admit(conn_id, host, time.monotonic())
        if refused is None:
            return True
        self.node.count_reject("pending_cap")
        link.close(f"refused: {refused}")
        return False

    def authenticated(self, conn_id: int) -> bool:
        """Whether the node made the link active (its peer authenticated)."""
        conn = self.node.conns.get(conn_id)
        return conn is not None and conn.active

    def lost(self, conn_id: int, link: GuardedLink | None) -> None:
        """A link closed; one its peer's input closed is counted (show counters reject)."""
        self.admission.done(conn_id)
        if link is not None and link.refusal is not None:
            self.node.count_reject(link.refusal)

    def tick(self, now: float, links: Mapping[int, GuardedLink]) -> None:
        """Close the links past tcp_auth_timeout; write the summaries of ended log windows."""
        conns = self.node.conns
        for cid in self.admission.sweep(now, lambda cid: (c := conns.get(cid)) is not None and c.active):
            if (link := links.get(cid)) is not None:
                self.node.count_reject("auth_timeout")
                link.close(f"not authenticated within tcp_auth_timeout {self.admission.auth_timeout_s:g} s")
        self.limited.flush(now)

    def warn(self, text: str) -> None:
        self.limited.log(None, logging.WARNING, text)

    def line(self, key: str | None, text: str) -> None:
        """A node's log line: as is, or rate-limited per key when it has one."""
        if key is None:
            self._say(text, logging.INFO)
        else:
            self.limited.log(key, logging.INFO, text)
