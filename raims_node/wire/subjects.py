"""System subjects: the seven prefix classes, inbox subjects, publish types.

Implements the manual's "System Subjects", "Heartbeat Subjects", "Subscription
Subjects" and "Inbox Subjects" (seed 000). An inbox subject is
`_I.<bridge>.<suffix>` where <bridge> is the destination's 128-bit bridge id in
standard base64 without padding (22 characters, as in `_I.duBVZZwXfwBVlYgGNUZQTw.auth`).

Decision: subscription updates carry the subject in the subject string, as the
reference does (`_S.JOIN.<subject>`, `_P.PSUB.<pattern>`), so a receiver learns
what changed from the subject alone; the manual's `_P.STOP` name is used for a
pattern stop.
"""

from __future__ import annotations

import base64
import binascii
from enum import IntEnum
from functools import lru_cache

from raims_node.wire.errors import WireError
from raims_node.wire.frame import BRIDGE_LEN, MsgType

INBOX = "_I."
MCAST = "_M."
HEARTBEAT = "_X."
BCAST = "_Z."
SUB = "_S."
PSUB = "_P."
STATS = "_N."
SYSTEM_PREFIXES = (INBOX, MCAST, HEARTBEAT, BCAST, SUB, PSUB, STATS)

X_HELLO = "_X.HELLO"
X_HB = "_X.HB"
X_BYE = "_X.BYE"
X_NAME = "_X.NAME"
Z_ADD = "_Z.ADD"
Z_DEL = "_Z.DEL"
Z_BLM = "_Z.BLM"
Z_ADJ = "_Z.ADJ"
Z_NAMES = "_Z.NAMES"  # the name table's updates (raims_node/names), flooded
NAMES_SUFFIX = "names"  # the name table's point-to-point frames, `_I.<bridge>.names`
S_JOIN = "_S.JOIN."
S_LEAV = "_S.LEAV."
P_PSUB = "_P.PSUB."
P_STOP = "_P.STOP."
M_PING = "_M.ping"
M_SYNC = "_M.sync"
NATS_INBOX = "_INBOX."

INBOX_SUFFIXES = (
    "auth", "subs", "ping", "pong", "rem", "add_rte", "sync_req", "sync_rpy",
    "bloom_req", "bloom_rpy", "adj_req", "adj_rpy", "mesh_req", "mesh_rpy",
    "trace", "ack", "any",
)

BRIDGE_B64_LEN = 22


class PublishType(IntEnum):
    """Kinds of received messages, as `show pubtype` counts them."""

    U_NORMAL = 0
    U_SESSION_HELLO = 1
    U_SESSION_HB = 2
    U_SESSION_BYE = 3
    U_PEER_ADD = 4
    U_PEER_DEL = 5
    U_BLOOM_FILTER = 6
    U_ADJACENCY = 7
    U_SUB_JOIN = 8
    U_SUB_LEAVE = 9
    U_PSUB_START = 10
    U_PSUB_STOP = 11
    U_INBOX_AUTH = 16
    U_INBOX_SUBS = 17
    U_INBOX_PING = 18
    U_INBOX_PONG = 19
    U_INBOX_REM = 20
    U_INBOX_ADD_RTE = 22
    U_INBOX_SYNC_REQ = 23
    U_INBOX_SYNC_RPY = 24
    U_INBOX_BLOOM_REQ = 25
    U_INBOX_BLOOM_RPY = 26
    U_INBOX_ADJ_REQ = 27
    U_INBOX_ADJ_RPY = 28
    U_INBOX_MESH_REQ = 29
    U_INBOX_MESH_RPY = 30
    U_INBOX_TRACE = 31
    U_INBOX_ACK = 32
    U_INBOX_ANY = 33
    U_INBOX = 34
    U_MCAST_PING = 35
    U_MCAST = 36
    MCAST_SUBJECT = 38


_EXACT = {
    X_HELLO: PublishType.U_SESSION_HELLO, X_HB: PublishType.U_SESSION_HB,
    X_BYE: PublishType.U_SESSION_BYE, Z_ADD: PublishType.U_PEER_ADD,
    Z_DEL: PublishType.U_PEER_DEL, Z_BLM: PublishType.U_BLOOM_FILTER,
    Z_ADJ: PublishType.U_ADJACENCY, M_PING: PublishType.U_MCAST_PING,
}
_PREFIXED = (
    (S_JOIN, PublishType.U_SUB_JOIN), (S_LEAV, PublishType.U_SUB_LEAVE),
    (P_PSUB, PublishType.U_PSUB_START), (P_STOP, PublishType.U_PSUB_STOP),
)
_INBOX_TYPE = {
    s: PublishType[f"U_INBOX_{s.upper()}"] for s in INBOX_SUFFIXES
}


class BadSubject(WireError):
    """A system subject is malformed (e.g. an inbox with a bad bridge id)."""


def msg_type_of(subject: str) -> MsgType:
    """The header message type a subject travels with."""
    if len(subject) > 2 and subject[0] == "_" and subject[2] == ".":
        c = subject[1]
        if c == "I":
            return MsgType.INBOX
        if c == "X":
            return MsgType.HEARTBEAT
        if c in "MPSZ":
            return MsgType.RTR_ALERT
    return MsgType.MCAST


def is_system(subject: str) -> bool:
    return subject[:3] in SYSTEM_PREFIXES


def bridge_b64(bridge: bytes) -> str:
    """A bridge id as printed in subjects and consoles (22 base64 characters)."""
    return _bridge_b64(bytes(bridge))  # bytes(b) is b itself for bytes


@lru_cache(maxsize=8192)  # a node names the same peers again and again (subjects, logs)
def _bridge_b64(bridge: bytes) -> str:
    return base64.b64encode(bridge).decode()[:BRIDGE_B64_LEN]


def bridge_from_b64(text: str) -> bytes:
    if len(text) != BRIDGE_B64_LEN:
        raise BadSubject(f"bridge id {text!r} is not {BRIDGE_B64_LEN} base64 characters")
    try:
        raw = base64.b64decode(text + "==", validate=True)
    except (binascii.Error, ValueError):
        raise BadSubject(f"bridge id {text!r} is not base64") from None
    if len(raw) != BRIDGE_LEN:
        raise BadSubject(f"bridge id {text!r} decodes to {len(raw)} bytes")
    return raw


def inbox_subject(bridge: bytes, suffix: str) -> str:
    """`_I.<bridge>.<suffix>`: a point-to-point subject to the node `bridge`."""
    return f"{INBOX}{bridge_b64(bridge)}.{suffix}"


@lru_cache(maxsize=16384)  # a node receives its inbox messages on few subjects
def parse_inbox(subject: str) -> tuple[bytes, str]:
    """(destination bridge, suffix) of an inbox subject."""
    if not subject.startswith(INBOX):
        raise BadSubject(f"{subject!r} is not an inbox subject")
    end = len(INBOX) + BRIDGE_B64_LEN
    if len(subject) < end + 2 or subject[end] != ".":
        raise BadSubject(f"inbox subject {subject!r} lacks '<bridge>.<suffix>'")
    return bridge_from_b64(subject[len(INBOX) : end]), subject[end + 1 :]


@lru_cache(maxsize=16384)
def publish_type_name(subject: str) -> str:
    """`publish_type(subject)` as the counters name it ("u_inbox_sync_rpy"); a router
    counts every system message it sends and receives, on few distinct subjects."""
    return publish_type(subject).name.lower()


def publish_type(subject: str) -> PublishType:
    """Classify a received subject for `show pubtype`."""
    t = _EXACT.get(subject)
    if t is not None:
        return t
    if subject.startswith(INBOX):
        suffix = subject[len(INBOX) + BRIDGE_B64_LEN + 1 :]
        return _INBOX_TYPE.get(suffix, PublishType.U_INBOX)
    for prefix, ptype in _PREFIXED:
        if subject.startswith(prefix):
            return ptype
    if subject.startswith(MCAST):
        return PublishType.U_MCAST
    if subject[:3] in SYSTEM_PREFIXES:
        return PublishType.U_NORMAL
    return PublishType.MCAST_SUBJECT
