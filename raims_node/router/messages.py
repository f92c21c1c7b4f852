"""Field layouts of the router's system messages (manual: "Internal Protocol",
"Inbox Subjects", "Example Message Flow").

The manual names the messages and the fields of its dumps, not the layout of the
replicated records, so these are decided here:

- a link (in `_Z.ADJ`, `adj_rpy`, `sync_rpy`) is a nested message under `adjacency`:
  `sync_bridge` (the peer at the other end), `tport`, `tportid`, `tport_type`,
  `cost`..`cost4`;
- a peer summary (in `add_rte`, `_Z.ADD`) is a nested message under `peer_db`:
  `sync_bridge`, `user`, `start`, `link_state`, `sub_seqno`;
- a full peer state (`sync_rpy`, `adj_rpy`) is a peer summary plus the links (a nested
  `adjacency` list), the bloom filter bytes (`bloom`) and, in `sync_rpy`, the peer's
  session key wrapped for the requester (`sess_key`, see `wrap_session_key`).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import islice
from typing import TypeVar

from raims_node import RaimsError
from raims_node.linkstate.db import MAX_PEER_LINKS
from raims_node.linkstate.errors import LinkStateError
from raims_node.linkstate.records import LinkRecord
from raims_node.wire import Fid, Fields, Nested

SESSION_KEY_LEN = 32
K = TypeVar("K")
V = TypeVar("V")
_WRAP_NONCE = 16


class MalformedMessage(RaimsError):
    """A system message lacks a field it needs or carries one of the wrong kind."""


def get_int(d: dict[int, object], fid: int, default: int = 0) -> int:
    v = d.get(fid, default)
    if type(v) is int:  # the common case first: decoded integers are plain ints
        return v
    if isinstance(v, bool) or not isinstance(v, int):
        raise MalformedMessage(f"field {Fid(fid).name.lower()} is not an integer")
    return v


def get_bytes(d: dict[int, object], fid: int) -> bytes:
    v = d.get(fid)
    if not isinstance(v, bytes):
        raise MalformedMessage(f"field {Fid(fid).name.lower()} missing or not opaque")
    return v


def get_str(d: dict[int, object], fid: int, default: str = "") -> str:
    v = d.get(fid)
    return v if isinstance(v, str) else default


_COST, _COST2, _COST3, _COST4 = int(Fid.COST), int(Fid.COST2), int(Fid.COST3), int(Fid.COST4)
_SYNC_BRIDGE, _TPORT, _TPORTID, _TPORT_TYPE = int(Fid.SYNC_BRIDGE), int(Fid.TPORT), int(Fid.TPORTID), \
    int(Fid.TPORT_TYPE)
_ADJACENCY = int(Fid.ADJACENCY)


def link_fields(link: LinkRecord) -> Fields:
    cost = link.cost
    return [  # plain-int fids: an enum attribute lookup each is a third of the cost
        (_SYNC_BRIDGE, link.peer_bridge), (_TPORT, link.tport_name), (_TPORTID, link.tport_id),
        (_TPORT_TYPE, link.tport_type), (_COST, cost[0]), (_COST2, cost[1]), (_COST3, cost[2]), (_COST4, cost[3]),
    ]


def links_value(links: tuple[LinkRecord, ...] | list[LinkRecord]) -> Fields:
    """A full state's `adjacency` list; a link interned from received bytes is sent as
    those bytes (the same fields), not encoded again."""
    out: Fields = []
    for link in links:
        held = _received.get(id(link))
        out.append((_ADJACENCY, held[1] if held is not None and held[0] is link else link_fields(link)))
    return out


def nested_fields(value: object) -> Fields | None:
    """The fields of a nested message value, decoded or left encoded (`Nested`, from a
    lazy decode); None for any other value."""
    if isinstance(value, list):
        return value
    if isinstance(value, Nested):
        return value.fields()
    return None


# Records decoded from a nested message, interned by its bytes (bounded, oldest out):
# the same link or peer summary recurs in `_Z.ADJ`, `_Z.ADD` and every sync and adj
# reply about its peer, and identical bytes give equal immutable records. One process
# (a simulated network) shares them between its nodes.
INTERN_LIMIT = 1 << 16
_links: dict[tuple[bytes, bytes], LinkRecord] = {}
_link_sets: dict[tuple[bytes, bytes], tuple[LinkRecord, ...]] = {}
_summaries: dict[bytes, PeerSummary] = {}
_received: dict[int, tuple[LinkRecord, Nested]] = {}  # by id: an interned link and its bytes


def _intern(table: dict[K, V], key: K, value: V) -> V:
    if len(table) >= INTERN_LIMIT:
        del table[next(iter(table))]
    table[key] = value
    return value


def parse_link(owner: bytes, fields: Fields) -> LinkRecord:
    """A link from its nested fields (the last of a repeated field wins); one pass over
    the fields, the common case of every cost given as a plain int without lookups."""
    d = dict(fields)
    get = d.get
    c0, c1, c2, c3 = get(_COST), get(_COST2), get(_COST3), get(_COST4)
    if type(c0) is int and type(c1) is int and type(c2) is int and type(c3) is int:
        cost = (c0, c1, c2, c3)
    else:
        c0 = get_int(d, Fid.COST, 1000)
        cost = (c0, get_int(d, Fid.COST2, c0), get_int(d, Fid.COST3, c0), get_int(d, Fid.COST4, c0))
    tport, ttype = get(_TPORT), get(_TPORT_TYPE)
    try:
        return LinkRecord(
            owner, tport if isinstance(tport, str) else "", get_int(d, _TPORTID), get_bytes(d, _SYNC_BRIDGE),
            cost, ttype if isinstance(ttype, str) else "tcp",
        )
    except LinkStateError as exc:
        raise MalformedMessage(f"bad link: {exc}") from None


def link_of(owner: bytes, value: object) -> LinkRecord:
    """The link of `owner` in a nested `adjacency` value (interned when left encoded)."""
    if isinstance(value, Nested):
        key = (owner, value.raw)
        link = _links.get(key)
        if link is None:
            link = _intern(_links, key, parse_link(owner, value.fields()))
            _intern(_received, id(link), (link, value))  # the entry keeps the id's object alive
        return link
    if isinstance(value, list):
        return parse_link(owner, value)
    raise MalformedMessage("adjacency is not a nested message")


def parse_links(owner: bytes, value: object) -> list[LinkRecord]:
    """The links of `owner` in a full state's `adjacency` list (interned when left encoded)."""
    if isinstance(value, Nested):
        key = (owner, value.raw)
        links = _link_sets.get(key)
        if links is None:
            links = _intern(_link_sets, key, tuple(_parse_links(owner, value.fields(lazy=True))))
        return list(links)
    return _parse_links(owner, value) if isinstance(value, list) else []


def _parse_links(owner: bytes, fields: Fields) -> list[LinkRecord]:
    """At most one link past MAX_PEER_LINKS is decoded: the database trims the set to
    the cap (linkstate/db.py) and counts it; a member's 64 MiB list costs no more."""
    subs = (sub for fid, sub in fields if fid == _ADJACENCY and isinstance(sub, list | Nested))
    return [link_of(owner, sub) for sub in islice(subs, MAX_PEER_LINKS + 1)]


@dataclass(frozen=True, slots=True)
class PeerSummary:
    bridge: bytes
    user: str
    start_ns: int
    link_seqno: int
    sub_seqno: int


def summary_fields(s: PeerSummary) -> Fields:
    return [
        (Fid.SYNC_BRIDGE, s.bridge), (Fid.USER, s.user), (Fid.START, s.start_ns),
        (Fid.LINK_STATE, s.link_seqno), (Fid.SUB_SEQNO, s.sub_seqno),
    ]


def summary_of(d: dict[int, object]) -> PeerSummary:
    """The peer summary in a message's fields (a full state carries one at its top)."""
    return PeerSummary(
        get_bytes(d, Fid.SYNC_BRIDGE), get_str(d, Fid.USER), get_int(d, Fid.START),
        get_int(d, Fid.LINK_STATE), get_int(d, Fid.SUB_SEQNO),
    )


def parse_summary(value: object) -> PeerSummary:
    """The summary in a nested `peer_db` value (interned when left encoded)."""
    if isinstance(value, Nested):
        s = _summaries.get(value.raw)
        return s if s is not None else _intern(_summaries, value.raw, summary_of(dict(value.fields())))
    if isinstance(value, list):
        return summary_of(dict(value))
    raise MalformedMessage("peer_db is not a nested message")


def wrap_session_key(key: bytes, for_key: bytes, about: bytes) -> bytes:
    """Encrypt peer `about`'s session key for a requester whose session key is `for_key`.

    64 bytes: 32 of key XOR BLAKE2b(for_key; nonce || about), a random 16-byte nonce,
    16 zero bytes. The frame's MAC authenticates it; only holders of the requester's
    session key (the authenticated network) can unwrap it.
    """
    nonce = os.urandom(_WRAP_NONCE)
    pad = hashlib.blake2b(nonce + about, key=for_key, digest_size=SESSION_KEY_LEN).digest()
    return _xor(key, pad) + nonce + bytes(16)


def unwrap_session_key(blob: bytes, my_key: bytes, about: bytes) -> bytes:
    nonce = blob[SESSION_KEY_LEN : SESSION_KEY_LEN + _WRAP_NONCE]
    pad = hashlib.blake2b(nonce + about, key=my_key, digest_size=SESSION_KEY_LEN).digest()
    return _xor(blob[:SESSION_KEY_LEN], pad)


def _xor(a: bytes, b: bytes) -> bytes:
    if len(a) != len(b):
        raise MalformedMessage(f"session key of {len(a)} bytes, pad of {len(b)}")
    return (int.from_bytes(a) ^ int.from_bytes(b)).to_bytes(len(a))


def sub_list_value(subjects: Iterable[str], patterns: Iterable[tuple[str, str]]) -> Fields:
    """A peer's subscriptions for a full-state reply: subjects, then (pattern, fmt) pairs."""
    out: Fields = [(Fid.SUBJECT, s) for s in subjects]
    out += [(Fid.SUB_LIST, [(Fid.PATTERN, text), (Fid.FMT, SYNTAX_FMT[syntax])]) for syntax, text in patterns]
    return out


def parse_sub_list(value: object) -> tuple[set[str], set[tuple[str, str]]]:
    subjects: set[str] = set()
    patterns: set[tuple[str, str]] = set()
    fields = nested_fields(value)
    if fields is None:
        return subjects, patterns
    for fid, v in fields:
        if fid == Fid.SUBJECT and isinstance(v, str):
            subjects.add(v)
        elif fid == Fid.SUB_LIST and (sub := nested_fields(v)) is not None:
            d = dict(sub)
            text = d.get(Fid.PATTERN)
            if isinstance(text, str):
                patterns.add((FMT_SYNTAX.get(get_int(d, Fid.FMT, 1), "rv"), text))
    return subjects, patterns


SYNTAX_FMT = {"rv": 1, "glob": 2, "sbus": 3}
FMT_SYNTAX = {v: k for k, v in SYNTAX_FMT.items()}
