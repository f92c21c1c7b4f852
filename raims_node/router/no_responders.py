"""A NATS request that reached this node with nobody here to answer it: the 503 status.

A requester's node sends a request to every node whose bloom filter passes its subject,
and answers 503 no-responders itself only when none does (nats_session.py). Right after
a client with many subscriptions leaves, its node still announces their withdrawals (a
slice per loop turn, router/interest.py): until the last arrives, the other nodes still
see the subjects in its filter, send it their requests, and their requesters waited for
a timeout instead of the 503 (0.3-2.4 s after a client with 100,000 subscriptions
closed; nats-server answers at once once the subscriber is gone).

So a node that receives a request (a NATS-style `_INBOX.` reply, no headers of a status)
that no subscription of its own takes answers it with the status message nats-server
2.9.10 sends, `NATS/1.0 503` and an empty payload, on the reply subject, unless some
other node's filter (as this node's replica has it, the requester's node included)
passes the subject: then that node may answer, and a 503 from here would cut the
request short. A requester that did not ask for no-responders never sees the status
(nats_session.py drops it, as nats-server would not send it); nor does an RV or /ws
client, whose `_INBOX.` replies get it too (rv_session.py, web/admin.py drop it). A false positive of
another node's filter leaves the requester to its timeout, as before.
"""

from __future__ import annotations

from typing import Protocol

from raims_node.bloom import SubjectHashes
from raims_node.router.peer import Peer
from raims_node.router.state import NodeState
from raims_node.wire import decode_message_fields
from raims_node.wire.batch import decode_batch_run
from raims_node.wire.subjects import NATS_INBOX

STATUS_503 = b"NATS/1.0 503\r\n\r\n"  # nats-server 2.9.10's no-responders status
MAX_SERVICE_TOKENS = 4  # the dotted service names tried before a reply (_inbox)


class Publisher(Protocol):  # router/forward.py's Forward
    st: NodeState

    def publish(self, subject: str, payload: bytes, now_ns: int, reply: str | None, headers: bytes | None,
                no_echo: object | None, opt: int, to: bytes | None = None) -> None: ...


def is_no_responders(headers: bytes | None, payload: bytes) -> bool:
    return headers == STATUS_503 and not payload


def unheard(forward: Publisher, peer: Peer, source: bytes, subject: bytes, data: bytes | bytearray, off: int,
            end: int, now_ns: int) -> None:
    """A message from `peer` (`source`) that no local subscription took: counted as
    such (show loss), and answered when it is a request (`answer`)."""
    peer.loss.not_subscribed(now_ns)
    answer(forward, source, subject, data, off, end, now_ns)


def answer(forward: Publisher, source: bytes, subject: bytes, data: bytes | bytearray, off: int, end: int,
           now_ns: int) -> None:
    """`data` (fields at data[off:end]) came from `source` on `subject` and no local
    subscription takes it: a request among them gets its 503 when no other node may answer."""
    if decode_batch_run(data, off, end) is not None:
        return  # a pipelined run: no replies
    msg = decode_message_fields(data, off, end)
    reply = msg.reply
    if not reply or not is_inbox_reply(reply) or is_no_responders(msg.headers, msg.payload):
        return
    st = forward.st
    hashes = SubjectHashes(subject)
    for bridge, peer in st.peers.items():
        if bridge != st.bridge and peer.filter_passes(hashes) is not False:
            return
    inbox = _inbox(st, source, subject.decode("utf-8", "surrogateescape"), reply)
    if inbox is not None:
        st.counters.no_responders += 1
        forward.publish(inbox, b"", now_ns, None, STATUS_503, None, 0, to=source)  # not to a monitor


def _inbox(st: NodeState, source: bytes, subject: str, reply: str) -> str | None:
    """The node subject of `reply`: a message carries its reply as the client gave it,
    and the requester's bridge puts its service (`_nats.`, perhaps dotted) before it, as
    before the subject. The service is the shortest head of `subject` that makes a
    subject the requester's node subscribes (its inbox, in its filter)."""
    peer = st.peers.get(source)
    if peer is None:
        return None
    dot = -1
    for _ in range(MAX_SERVICE_TOKENS + 1):  # no service first (a client of the node itself)
        inbox = subject[:dot + 1] + reply
        if peer.filter_passes(SubjectHashes(inbox.encode("utf-8", "surrogateescape"))):
            return inbox
        dot = subject.find(".", dot + 1)
        if dot < 0:
            return None
    return None


def is_inbox_reply(subject: str) -> bool:
    """A NATS-style reply subject: `_INBOX.` first, or second after a namespace."""
    return subject.startswith(NATS_INBOX) or subject.partition(".")[2].startswith(NATS_INBOX)
