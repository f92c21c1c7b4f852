"""`ack` and `trace` for clients (manual "System subjects": the console's `ack` / `trace`
publishes; issue 28).

Convention (decision): a client publishes with a reply subject `_ACK.<inbox>` (every node
that delivers the message to a subscriber answers) or `_TRACE.<inbox>` (every router the
message passes answers). The message travels without a reply subject, with the frame's
ack or trace option; each answer reaches the client as a message on `<inbox>` (in the
client's namespace) whose payload is JSON {"kind": "ack"|"trace", "user", "subject",
"seqno", "tport"}. Answers are awaited for ACK_WAIT_S after the publish; later ones are
dropped. An answer goes to the publish of its subject and seqno only: two publishes of
one subject within ACK_WAIT_S each get their own answers (before, each answer went to
every wait of the subject: the second publish's inbox got both messages' answers, and
every answer came twice).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field

ACK_PREFIX = "_ACK."
TRACE_PREFIX = "_TRACE."
ACK_WAIT_S = 10.0
ACK_WAIT_NS = int(ACK_WAIT_S * 1e9)
MAX_WAITS = 4096  # outstanding publishes awaiting answers (the oldest are dropped)


def ack_request(reply: str | None) -> tuple[str, str] | None:
    """("ack" | "trace", inbox) when `reply` asks for answers."""
    if reply is None:
        return None
    if reply.startswith(ACK_PREFIX) and len(reply) > len(ACK_PREFIX):
        return "ack", reply[len(ACK_PREFIX):]
    if reply.startswith(TRACE_PREFIX) and len(reply) > len(TRACE_PREFIX):
        return "trace", reply[len(TRACE_PREFIX):]
    return None


@dataclass
class AckWaits:
    """Publishes awaiting answers, by node subject: (inbox node subject, deadline, seqno)."""

    waits: dict[str, list[tuple[str, int, int | None]]] = field(default_factory=dict)
    count: int = 0
    mark_ns: int = 0  # the arrival time of the newest answer already handled

    def add(self, subject: str, inbox: str, now_ns: int, seqno: int | None = None) -> None:
        """`seqno`: the message's (None: answers to any message of the subject)."""
        if not self.waits:  # answers() skips the log while nothing waits: older ones are not ours
            self.mark_ns = max(self.mark_ns, now_ns - 1)
        if self.count >= MAX_WAITS:
            self.expire(now_ns + ACK_WAIT_NS + 1)  # full: make room by dropping all
        self.waits.setdefault(subject, []).append((inbox, now_ns + ACK_WAIT_NS, seqno))
        self.count += 1

    def expire(self, now_ns: int) -> None:
        for subject in list(self.waits):
            kept = [w for w in self.waits[subject] if w[1] > now_ns]
            self.count -= len(self.waits[subject]) - len(kept)
            if kept:
                self.waits[subject] = kept
            else:
                del self.waits[subject]

    def answers(self, acks: Iterable[tuple[str, str, str, int, str, int]], now_ns: int) -> list[tuple[str, bytes]]:
        """(inbox, payload) for each answer newer than the last call that a publish awaits."""
        out: list[tuple[str, bytes]] = []
        if not self.waits:
            return out
        newest = self.mark_ns
        for kind, user, subject, seqno, tport, at_ns in acks:
            if at_ns <= self.mark_ns:
                continue
            newest = max(newest, at_ns)
            for inbox, _, wanted in self.waits.get(subject, ()):
                if wanted is not None and wanted != seqno:
                    continue
                body = {"kind": kind, "user": user, "subject": subject, "seqno": seqno, "tport": tport}
                out.append((inbox, json.dumps(body).encode()))
        self.mark_ns = newest
        self.expire(now_ns)
        return out
