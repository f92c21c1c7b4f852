"""Links that have not authenticated yet: a deadline each, and caps on how many.

Implements issue 18's rule for the manual's link ports ("TCP Point-to-point", "TCP
Mesh"): a connection must complete the peer handshake within `tcp_auth_timeout`
(default 10 s) or it is closed, and at most `tcp_pending_max` inbound connections
(`tcp_pending_per_host` per source address) may be unauthenticated at once; one
over a cap is closed as it arrives. Outbound links have the deadline but no cap (we
opened them). Sans-IO: the daemon reports links made, authenticated and closed, and
asks which deadlines passed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

AUTH_TIMEOUT_S = 10.0
PENDING_MAX = 1024
PENDING_PER_HOST = 64


@dataclass(slots=True)
class _Pending:
    host: str | None  # None: outbound
    deadline: float


class Admission:
    def __init__(self, auth_timeout_s: float = AUTH_TIMEOUT_S, pending_max: int = PENDING_MAX,
                 per_host: int = PENDING_PER_HOST) -> None:
        self.auth_timeout_s = auth_timeout_s
        self.pending_max = pending_max
        self.per_host = per_host
        self._pending: dict[int, _Pending] = {}
        self._by_host: dict[str, int] = {}
        self._inbound = 0

    def __len__(self) -> int:
        return len(self._pending)

    def pending(self) -> list[int]:
        return list(self._pending)

    def admit(self, conn_id: int, host: str | None, now: float) -> str | None:
        """Register a new link (`host`: the source address of an inbound one). None when
        admitted, else the cause it must be closed for ("pending_cap")."""
        if host is not None:
            if self._inbound >= self.pending_max:
                return (f"{self._inbound} inbound links are waiting for authentication "
                        f"(tcp_pending_max {self.pending_max})")
            held = self._by_host.get(host, 0)
            if held >= self.per_host:
                return (f"{held} links from {host} are waiting for authentication "
                        f"(tcp_pending_per_host {self.per_host})")
            self._by_host[host] = held + 1
            self._inbound += 1
        self._pending[conn_id] = _Pending(host, now + self.auth_timeout_s)
        return None

    def done(self, conn_id: int) -> None:
        """The link authenticated or closed: no longer pending."""
        p = self._pending.pop(conn_id, None)
        if p is None or p.host is None:
            return
        self._inbound -= 1
        left = self._by_host[p.host] - 1
        if left:
            self._by_host[p.host] = left
        else:
            del self._by_host[p.host]

    def sweep(self, now: float, authenticated: Callable[[int], bool]) -> list[int]:
        """Forget the links that authenticated; return (and forget) those past their
        deadline, for the caller to close."""
        for cid in [cid for cid in self._pending if authenticated(cid)]:
            self.done(cid)
        late = self.expired(now)
        for cid in late:
            self.done(cid)
        return late

    def expired(self, now: float) -> list[int]:
        """Links whose deadline passed (still registered: the caller closes them, and
        reports `done` when they are gone)."""
        return [cid for cid, p in self._pending.items() if p.deadline <= now]
