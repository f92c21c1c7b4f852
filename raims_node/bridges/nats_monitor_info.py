"""What nats_monitor.py's endpoints say about connections, in nats-server 2.9.10's
formats: its `ConnInfo` fields and order, Go's time and duration texts, its close
reasons, its query decoding and its /connz sorts (server/monitor.go and
monitor_sort_opts.go of v2.9.10, measured against the binary).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from raims_node.bridges.errors import (
    AuthorizationViolation,
    HandshakeTimeout,
    SlowConsumer,
    StaleConnection,
)
from raims_node.bridges.nats_proto import (
    ClientError,
    ControlLineTooLong,
    PayloadTooLarge,
    UnknownOperation,
)

GLOBAL_ACCOUNT = "$G"  # nats-server's account of clients when none is configured


class QueryError(Exception):
    """A monitoring query nats-server answers with 400 and this text."""


# ------------------------------------------------------------------ Go's texts

def go_time(ns: int) -> str:
    """A time as Go's JSON (RFC 3339 with nanoseconds, trailing zeros dropped)."""
    secs, frac = divmod(ns, 1_000_000_000)
    text = datetime.datetime.fromtimestamp(secs, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return text + (f".{frac:09d}".rstrip("0") if frac else "") + "Z"


def go_uptime(ns: int) -> str:
    """nats-server's `myUptime`: whole seconds as 1y2d3h4m5s."""
    secs = max(0, ns) // 1_000_000_000
    mins, hrs, days = secs // 60, secs // 3600, secs // 86400
    years = days // 365
    if years:
        return f"{years}y{days % 365}d{hrs % 24}h{mins % 60}m{secs % 60}s"
    if days:
        return f"{days}d{hrs % 24}h{mins % 60}m{secs % 60}s"
    if hrs:
        return f"{hrs}h{mins % 60}m{secs % 60}s"
    if mins:
        return f"{mins}m{secs % 60}s"
    return f"{secs}s"


def go_duration(ns: int) -> str:
    """Go's `time.Duration.String()` (0s, 687µs, 6.081959ms, 1m2.5s)."""
    if ns == 0:
        return "0s"
    sign, ns = ("-", -ns) if ns < 0 else ("", ns)
    if ns < 1_000_000_000:
        for unit, size in (("ns", 1), ("µs", 1_000), ("ms", 1_000_000)):
            if ns < size * 1000:
                whole, frac = divmod(ns, size)
                digits = len(str(size)) - 1
                return sign + str(whole) + (f".{frac:0{digits}d}".rstrip("0") if frac else "") + unit
    hours, rest = divmod(ns, 3_600_000_000_000)
    mins, rest = divmod(rest, 60_000_000_000)
    secs, frac = divmod(rest, 1_000_000_000)
    text = str(secs) + (f".{frac:09d}".rstrip("0") if frac else "") + "s"
    if hours or mins:
        text = f"{mins}m" + text
    if hours:
        text = f"{hours}h" + text
    return sign + text


def go_rtt(ns: int) -> str:
    """nats-server's `getRTT`: truncated to microseconds between 1 µs and 1 ms."""
    return go_duration(ns - ns % 1000 if 1000 < ns < 1_000_000 else ns)


def go_json(value: Any) -> bytes:
    """Go's `json.MarshalIndent(v, "", "  ")`: HTML characters escaped, whole floats
    without a fraction."""
    text = json.dumps(_whole(value), indent=2, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").encode()


def _whole(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _whole(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole(v) for v in value]
    return value


# ------------------------------------------------------------------ query decoding

_GO_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_GO_FALSE = ("0", "f", "F", "FALSE", "false", "False")


def go_bool(query: Mapping[str, str], name: str) -> bool:
    text = query.get(name, "")
    if text in _GO_TRUE:
        return True
    if text in ("", *_GO_FALSE):
        return False
    raise QueryError(f"Error decoding boolean for '{name}': strconv.ParseBool: parsing {json.dumps(text)}: "
                     "invalid syntax")


def go_int(query: Mapping[str, str], name: str, unsigned: bool = False) -> int:
    text = query.get(name, "")
    if not text:
        return 0
    digits = text[1:] if text[:1] in "+-" and not unsigned else text
    if digits.isascii() and digits.isdigit():
        return int(text)
    kind, func = ("uint64", "ParseUint") if unsigned else ("int", "Atoi")
    raise QueryError(f"Error decoding {kind} for '{name}': strconv.{func}: parsing {json.dumps(text)}: "
                     "invalid syntax")


def go_state(query: Mapping[str, str]) -> str:
    """open, closed or any (nats-server's ConnOpen, ConnClosed, ConnAll)."""
    text = query.get("state", "")
    state = {"": "open", "open": "open", "closed": "closed", "any": "any", "all": "any"}.get(text.lower())
    if state is None:
        raise QueryError(f"Error decoding state for {text}")
    return state


# ------------------------------------------------------------------ connections

def close_reason(error: BaseException | None, shut_down: bool = False) -> str:
    """nats-server's ClosedState text for why a session ended (measured: a wrong
    password, or anything before CONNECT where one is required, is an Authentication
    Failure there)."""
    if shut_down:
        return "Server Shutdown"
    if error is None:
        return "Client Closed"
    if isinstance(error, AuthorizationViolation):
        return "Authentication Failure"
    if isinstance(error, HandshakeTimeout):
        return "Authentication Timeout"
    if isinstance(error, SlowConsumer):
        return "Slow Consumer (Pending Bytes)"
    if isinstance(error, StaleConnection):
        return "Stale Connection"
    if isinstance(error, PayloadTooLarge):
        return "Maximum Message Payload Exceeded"
    if isinstance(error, ControlLineTooLong):
        return "Maximum Control Line Exceeded"
    if isinstance(error, ClientError):  # the client sent -ERR
        return "Parse Error"
    if isinstance(error, UnknownOperation):  # nats_session's texts for these two refusals
        if str(error).startswith("client protocol"):
            return "Bad Client Protocol Version"
        if str(error).startswith("no_responders without headers"):
            return "No Responders Requires Headers"
    return "Protocol Violation"


@dataclass(slots=True)
class Conn:
    """One connection as /connz sees it: nats-server's ConnInfo, and what the options
    need besides (open or closed)."""

    cid: int
    ip: str
    port: int
    start: int
    last: int
    rtt: int
    pending: int
    in_msgs: int
    out_msgs: int
    in_bytes: int
    out_bytes: int
    name: str
    lang: str
    version: str
    user: str
    subs: list[tuple[str, str | None, str, int, int]] = field(default_factory=list)
    stop: int | None = None
    reason: str = ""
    nsubs: int = -1  # its subscription count (the list of a closed one may have been let go)

    def __post_init__(self) -> None:
        if self.nsubs < 0:
            self.nsubs = len(self.subs)

    @classmethod
    def of(cls, session: Any, peer: tuple[str, int], pending: int, listed: bool = True) -> Conn:
        """From a NatsSession (open, or at its close); `listed` False: its subscriptions
        counted, not listed (a /connz without `subs` walks no subscription)."""
        s = session
        return cls(s.client_id, peer[0], peer[1], s.started_ns, s.last_ns, s.rtt_ns, pending, s.msgs_in,
                   s.msgs_out, s.payload_in, s.payload_out, s.name, s.lang, s.version, s.auth_user,
                   s.subscription_details() if listed else [], nsubs=-1 if listed else s.subscriptions)

    def info(self, now: int, subs: bool, detail: bool, auth: bool) -> dict[str, Any]:
        """The ConnInfo, in nats-server's field order."""
        end = self.stop if self.stop is not None else now
        out: dict[str, Any] = {"cid": self.cid, "kind": "Client", "type": "nats", "ip": self.ip, "port": self.port,
                               "start": go_time(self.start), "last_activity": go_time(self.last)}
        if self.stop is not None:
            out["stop"], out["reason"] = go_time(self.stop), self.reason
        out.update({"rtt": go_rtt(self.rtt), "uptime": go_uptime(end - self.start),
                    "idle": go_uptime(end - self.last), "pending_bytes": self.pending,
                    "in_msgs": self.in_msgs, "out_msgs": self.out_msgs, "in_bytes": self.in_bytes,
                    "out_bytes": self.out_bytes, "subscriptions": self.nsubs})
        for key, value in (("name", self.name), ("lang", self.lang), ("version", self.version)):
            if value:
                out[key] = value
        if auth and self.user:
            out["authorized_user"] = self.user
        if self.subs and detail:  # a closed one's details name the account, as nats-server's
            out["subscriptions_list_detail"] = [sub_detail(self.cid, s, self.stop is not None) for s in self.subs]
        elif self.subs and subs:
            out["subscriptions_list"] = [s[0] for s in self.subs]
        return out


def sub_detail(cid: int, sub: tuple[str, str | None, str, int, int], account: bool) -> dict[str, Any]:
    """nats-server's SubDetail."""
    subject, queue, sid, msgs, max_msgs = sub
    out: dict[str, Any] = {"account": GLOBAL_ACCOUNT} if account else {}
    out["subject"] = subject
    if queue:
        out["qgroup"] = queue
    out.update({"sid": sid, "msgs": msgs})
    if max_msgs:
        out["max"] = max_msgs
    out["cid"] = cid
    return out


def _up(now: int) -> Callable[[Conn], int]:
    return lambda c: (c.stop if c.stop is not None else now) - c.start


# /connz?sort=: the key and whether descending (nats-server's orders; `idle` is its
# byIdle, last activity minus start, descending); ties by cid
def sort_key(sort: str, now: int) -> tuple[Callable[[Conn], Any], bool] | None:
    return {
        "cid": (lambda c: c.cid, False), "start": (lambda c: c.cid, False),
        "subs": (lambda c: c.nsubs, True), "pending": (lambda c: c.pending, True),
        "msgs_to": (lambda c: c.out_msgs, True), "msgs_from": (lambda c: c.in_msgs, True),
        "bytes_to": (lambda c: c.out_bytes, True), "bytes_from": (lambda c: c.in_bytes, True),
        "last": (lambda c: c.last, True), "idle": (lambda c: c.last - c.start, True),
        "uptime": (_up(now), False), "stop": (lambda c: c.stop or 0, True), "reason": (lambda c: c.reason, False),
    }.get(sort)


def sort_conns(conns: list[Conn], sort: str, now: int) -> None:
    order = sort_key(sort, now)
    assert order is not None
    key, descending = order
    conns.sort(key=lambda c: c.cid)
    conns.sort(key=key, reverse=descending)


def literal_subject(subject: str) -> bool:
    """nats-server's IsValidLiteralSubject."""
    tokens = subject.split(".")
    return bool(subject) and all(t and t not in ("*", ">") and not any(ch.isspace() for ch in t) for t in tokens)


def matches(pattern: str, subject: str) -> bool:
    """Whether a subscription `pattern` takes the literal `subject` (matchLiteral)."""
    pt, st = pattern.split("."), subject.split(".")
    for i, token in enumerate(pt):
        if token == ">":
            return len(st) > i
        if i >= len(st) or (token != "*" and token != st[i]):
            return False
    return len(pt) == len(st)
