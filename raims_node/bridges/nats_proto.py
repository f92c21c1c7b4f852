"""The NATS client protocol, server side: a sans-IO parser, pure encoders, subject rules.

Manual sections "NATS" and "NATS subject rules"; protocol facts from the NATS client
protocol as nats-server 2.x speaks it:

- Operations are case-insensitive; arguments are separated by spaces or tabs; a line
  ends at `\\n` with an optional `\\r` before it (nats-server accepts bare `\\n`).
- `PUB <subject> [reply] <#bytes>` and `HPUB <subject> [reply] <#hdr> <#total>` are
  followed by exactly the announced bytes and `\\r\\n`; `SUB <subject> [queue] <sid>`,
  `UNSUB <sid> [max]`, `CONNECT <json>`, `PING`, `PONG`.
- A control line whose arguments (after the operation and its space, as nats-server
  counts) pass `max_control_line` (4096) is fatal, as is a payload larger
  than `max_payload` (1 MiB) announced by PUB/HPUB: the parser raises as soon as the
  line is seen, so neither the line nor the payload is ever buffered beyond the limits.

Decisions: every malformed line (unknown operation, wrong argument count, a size that is
not a decimal number, bad CONNECT JSON, a payload not followed by CRLF, an empty line)
answers `-ERR 'Unknown Protocol Operation'` and closes; nats-server closes silently on
some of these, an error line is more useful and the client is gone either way. The
max-control-line text is the one current nats-server sends ('maximum control line
exceeded'). An UNSUB max that is not a number counts as none (unsubscribe now), as in
nats-server. As nats-server does, PING, PONG, CONNECT, INFO and +OK are recognised by
their first letters (`PINGX`, `CONNECT{}` are valid), a client's INFO and +OK are
ignored and a client's -ERR closes the connection without a reply. An HPUB header size
of 0 is a message without headers (its Pub has headers b"", so that a client that did not
negotiate headers is refused, as nats-server does). As nats-server's: a size (or UNSUB
max) has at most 9 digits, a line starting with a blank is no operation, CONNECT JSON
keys match in any case, a null leaves an option as it was, invalid UTF-8 is replaced and
NaN / Infinity are refused (Go's encoding/json).
Unlike nats-server, VT and FF separate arguments as spaces do (bytes.split(), no cost
per line; no subject holds one, so no MSG line can be split differently by a client).
Subjects, replies, queues and sids are decoded as UTF-8 with `surrogateescape` (any byte
string survives, see bus.py). Pub, Sub and Unsub are NamedTuples, built per message for
half the cost of a frozen dataclass; the rare events are frozen dataclasses (two
NamedTuples without fields would compare equal).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, NamedTuple

from raims_node.bridges.errors import ProtocolViolation
from raims_node.wire.batch import PackedRun, Run

MAX_CONTROL_LINE = 4096
_OP_ROOM = len(b"CONNECT ")  # the limit is on a line's arguments: the longest operation and its space
MAX_PAYLOAD = 1024 * 1024
_MAX_SIZE_DIGITS = 9  # nats-server's parseSize: a longer size (or UNSUB max) is no number

ERR_UNKNOWN_OP = "Unknown Protocol Operation"
ERR_MAX_CONTROL_LINE = "maximum control line exceeded"
ERR_MAX_PAYLOAD = "Maximum Payload Violation"
ERR_AUTHORIZATION = "Authorization Violation"
ERR_INVALID_SUBJECT = "Invalid Subject"
ERR_INVALID_PUBLISH_SUBJECT = "Invalid Publish Subject"
ERR_SLOW_CONSUMER = "Slow Consumer"
ERR_STALE_CONNECTION = "Stale Connection"
ERR_AUTH_TIMEOUT = "Authentication Timeout"
ERR_BAD_CLIENT_PROTOCOL = "invalid client protocol"
ERR_NO_RESPONDERS_NEEDS_HEADERS = "no responders requires headers support"

OK = b"+OK\r\n"
PING = b"PING\r\n"
PONG = b"PONG\r\n"


# ------------------------------------------------------------------ errors

def encode_err(text: str) -> bytes:
    return b"-ERR '%s'\r\n" % text.encode()


class NatsProtocolError(ProtocolViolation):
    """Malformed client input; `reply` is the -ERR line nats-server would send."""

    err_text: str | None = ERR_UNKNOWN_OP  # None: close without a reply

    def __init__(self, message: str) -> None:
        super().__init__(message, b"" if self.err_text is None else encode_err(self.err_text))
        self.events: list[NatsEvent] = []


class UnknownOperation(NatsProtocolError):
    """An operation the client may not send, or one with malformed arguments."""


class ClientError(NatsProtocolError):
    """The client sent -ERR: nats-server closes the connection without a reply."""

    err_text = None


class ControlLineTooLong(NatsProtocolError):
    err_text = ERR_MAX_CONTROL_LINE


class PayloadTooLarge(NatsProtocolError):
    err_text = ERR_MAX_PAYLOAD


# ------------------------------------------------------------------ events

@dataclass(frozen=True, slots=True)
class Connect:
    options: dict[str, Any]


class Pub(NamedTuple):
    subject: str
    reply: str | None
    headers: bytes | None  # the raw header block, "NATS/1.0\r\n...\r\n\r\n", from HPUB (b"": HPUB 0)
    payload: bytes


class Sub(NamedTuple):
    subject: str
    queue: str | None
    sid: str


class Unsub(NamedTuple):
    sid: str
    max_msgs: int  # 0: unsubscribe now


@dataclass(frozen=True, slots=True)
class Ping:
    pass


@dataclass(frozen=True, slots=True)
class Pong:
    pass


class PubRun(NamedTuple):
    """Consecutive `PUB subject size` operations (no reply, no headers) repeating the
    control line of the PUB parsed last: a pipelined run, parsed without splitting each
    line again. Only a parser made with `runs=True` gives them (NatsSession); the
    first PUB with a new line is a Pub."""

    subject: str
    payloads: Run  # a PackedRun when every record of the read was checked at once


NatsEvent = Connect | Pub | PubRun | Sub | Unsub | Ping | Pong


_new = tuple.__new__  # builds a Pub for a third of what its generated __new__ costs


def _text(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


_UNFRAMABLE = re.compile(r"[\x00-\x20\x7f]")  # whitespace and controls end a MSG line's fields


def framable(s: str) -> bool:
    """Whether a subject or reply from another protocol (RV, Redis, a remote node) can go
    into a MSG line as one field: one that cannot would forge the client's protocol."""
    return _UNFRAMABLE.search(s) is None


def wire(s: str) -> bytes:
    """A subject, reply or sid as bytes again (inverse of the parser's decoding)."""
    return s.encode("utf-8", "surrogateescape")


def _bad_size(b: bytes) -> UnknownOperation:
    return UnknownOperation(f"bad size {b[:32]!r}")


# ------------------------------------------------------------------ parser

class NatsParser:
    """`feed(bytes) -> events`; partial lines and payloads are kept across calls.

    Raises a NatsProtocolError (with `.events` decoded before the bad bytes) on malformed
    input; every later call raises again.
    """

    def __init__(self, max_payload: int = MAX_PAYLOAD,
                 max_control_line: int = MAX_CONTROL_LINE, runs: bool = False) -> None:
        self.runs = runs
        self.max_payload = max_payload
        self.max_control_line = max_control_line
        self._tail = bytearray()  # unparsed bytes of earlier reads
        self._need = 0  # bytes the tail must hold before a parse can progress
        self._last_pub: bytes | None = None  # the last PUB / HPUB control line, its arguments
        self._last_pub_args: tuple[str, str | None, int, int] = ("", None, 0, 0)
        self._error: NatsProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Input bytes kept for a partial operation."""
        return len(self._tail)

    def feed(self, data: bytes | bytearray | memoryview) -> list[NatsEvent]:
        if self._error is not None:
            raise type(self._error)(f"stream already failed: {self._error}")
        tail = self._tail
        if tail:
            tail += data
            if len(tail) < self._need:  # a payload still arriving: do not parse again
                return []
            data = bytes(tail)
            tail.clear()
        elif type(data) is not bytes:
            data = bytes(data)
        events: list[NatsEvent] = []
        try:
            pos = self._parse(data, events)
        except NatsProtocolError as exc:
            exc.events = events
            self._error = exc
            raise
        if pos < len(data):
            with memoryview(data) as mv:
                tail += mv[pos:]
        return events

    def lone_pub(self, data: bytes) -> tuple[str, bytes] | None:
        """(subject, payload) when `data` is exactly one PUB without reply repeating the
        last PUB line and nothing is buffered (a publisher sending one message at a
        time): what `feed` would return, without its machinery; the parser's state is
        the same after it. None: use `feed`."""
        line = self._last_pub
        if line is None or self._tail or self._error is not None:
            return None
        subject, reply, hdr, size = self._last_pub_args
        n = len(line)
        if (reply is not None or hdr or len(data) != n + size + 4 or not data.startswith(line)
                or data[n:n + 2] != b"\r\n" or data[-2:] != b"\r\n"):
            return None
        return subject, data[n + 2:n + 2 + size]

    def _parse(self, data: bytes, events: list[NatsEvent]) -> int:
        """Parse complete operations from `data`; the offset of the first unparsed byte."""
        n = len(data)
        pos = 0
        maxcl = self.max_control_line
        append = events.append
        self._need = 0
        while pos < n:
            nl = data.find(b"\n", pos)
            if nl < 0:
                if n - pos > maxcl + _OP_ROOM + 1:  # + 1: the line may be complete but for its \n
                    raise ControlLineTooLong(
                        f"control line of more than {n - pos} bytes exceeds max {maxcl}")
                return pos
            end = nl - 1 if nl > pos and data[nl - 1] == 13 else nl
            if end - pos > maxcl + _OP_ROOM:
                raise ControlLineTooLong(f"control line of {end - pos} bytes exceeds max {maxcl}")
            line = data[pos:end]
            if line == self._last_pub:  # a pipelined run on one subject: its line parsed once
                pub = self._last_pub_args
                if self.runs and pub[1] is None and not pub[2] and end + 2 == nl + 1:
                    run_end = _run(data, pos, nl + 1, pub[3], events, pub[0])
                    if run_end > pos:
                        pos = run_end
                        continue
            else:
                args = line.split()
                if not args or line[0] == 32 or line[0] == 9:  # a blank first is no operation to nats-server
                    raise UnknownOperation(f"no operation at the start of {line[:32]!r}")
                if len(line) - len(args[0]) - 1 > maxcl:  # nats-server counts the arguments only
                    raise ControlLineTooLong(f"control line arguments of {len(line) - len(args[0]) - 1} bytes "
                                             f"exceed max {maxcl}")
                op = args[0]
                if op != b"PUB":
                    op = op.upper()
                if op != b"PUB" and op != b"HPUB":
                    _control(op, args, line, events)
                    pos = nl + 1
                    continue
                pub = self._pub_args(op, args)
                self._last_pub, self._last_pub_args = line, pub
            subject, reply, hdr, size = pub
            start = nl + 1
            stop = start + size
            if stop + 2 > n:
                self._need = stop + 2 - pos
                return pos
            if data[stop] != 13 or data[stop + 1] != 10:
                raise UnknownOperation("payload not followed by CRLF")
            if hdr:
                if hdr < 0:  # HPUB with no header bytes: b"" marks it as an HPUB all the same
                    append(_new(Pub, (subject, reply, b"", data[start:stop])))
                else:
                    append(_new(Pub, (subject, reply, data[start:start + hdr], data[start + hdr:stop])))
            else:
                append(_new(Pub, (subject, reply, None, data[start:stop])))
            pos = stop + 2
        return pos

    def _pub_args(self, op: bytes, args: list[bytes]) -> tuple[str, str | None, int, int]:
        """(subject, reply, header size, total size) of a PUB or HPUB line."""
        nargs = len(args)
        size_b = args[-1]
        if not size_b.isdigit() or len(size_b) > _MAX_SIZE_DIGITS:
            raise _bad_size(size_b)
        size = int(size_b)
        hdr = 0
        if op == b"PUB":
            if nargs != 3 and nargs != 4:
                raise UnknownOperation(f"PUB takes 2 or 3 arguments, got {nargs - 1}")
            reply = _text(args[2]) if nargs == 4 else None
        else:
            if nargs != 4 and nargs != 5:
                raise UnknownOperation(f"HPUB takes 3 or 4 arguments, got {nargs - 1}")
            reply = _text(args[2]) if nargs == 5 else None
            hdr_b = args[-2]
            if not hdr_b.isdigit() or len(hdr_b) > _MAX_SIZE_DIGITS:
                raise _bad_size(hdr_b)
            hdr = int(hdr_b)
            if hdr > size:
                raise UnknownOperation(f"HPUB header size {hdr} exceeds total size {size}")
            hdr = hdr or -1  # an HPUB all the same: not part of a run of PUBs (see _parse)
        if size > self.max_payload:
            raise PayloadTooLarge(f"payload of {size} bytes exceeds max_payload {self.max_payload}")
        return args[1].decode("utf-8", "surrogateescape"), reply, hdr, size


def _run(data: bytes, pos: int, start: int, size: int, events: list[NatsEvent], subject: str) -> int:
    """The PubRun of the identical `PUB subject size` records from `pos` (its line ends
    at `start` with CRLF); the offset after the last complete record, `pos` when not even
    the first is complete or well-formed (the caller parses it the usual way)."""
    head = data[pos:start]
    hlen = start - pos
    rec = hlen + size + 2
    n = len(data)
    k = (n - pos) // rec
    if k >= _SKELETON_MIN and _skeleton(data, pos, head + b"\r\n", rec, k, start - pos + size):
        end = pos + k * rec  # every record is well formed: cut the payloads in one pass
        events.append(_new(PubRun, (subject, PackedRun(data, start, k, size, rec))))  # no object per payload
        return end
    payloads: list[bytes] = []
    append = payloads.append
    startswith = data.startswith
    p = pos
    while p + rec <= n and startswith(head, p) and data[p + rec - 2] == 13 and data[p + rec - 1] == 10:
        append(data[p + hlen:p + rec - 2])
        p += rec
    if payloads:
        events.append(_new(PubRun, (subject, payloads)))
    return p


_SKELETON_MIN = 16  # records from which checking their fixed bytes column by column pays


def _skeleton(data: bytes, pos: int, fixed: bytes, rec: int, k: int, crlf_at: int) -> bool:
    """Whether the `k` records of `rec` bytes from `pos` all start with fixed[:-2] (the
    control line) and end with CRLF (fixed[-2:], at `crlf_at` in each record): each byte
    column is one strided slice, so the check costs a few C calls per run."""
    stop = pos + k * rec
    hlen = len(fixed) - 2
    for j in range(len(fixed)):
        col = data[pos + (j if j < hlen else crlf_at + j - hlen):stop:rec]
        if col.count(fixed[j]) != k:
            return False
    return True


def _control(op: bytes, args: list[bytes], line: bytes, events: list[NatsEvent]) -> None:
    """Any operation but PUB and HPUB."""
    if op == b"SUB":
        if len(args) == 3:
            events.append(Sub(_text(args[1]), None, _text(args[2])))
        elif len(args) == 4:
            events.append(Sub(_text(args[1]), _text(args[2]), _text(args[3])))
        else:
            raise UnknownOperation(f"SUB takes 2 or 3 arguments, got {len(args) - 1}")
    elif op == b"UNSUB":
        if len(args) == 2:
            events.append(Unsub(_text(args[1]), 0))
        elif len(args) == 3:
            m = args[2]
            events.append(Unsub(_text(args[1]),  # as nats-server's parseSize: else none, unsubscribe now
                                int(m) if m.isdigit() and len(m) <= _MAX_SIZE_DIGITS else 0))
        else:
            raise UnknownOperation(f"UNSUB takes 1 or 2 arguments, got {len(args) - 1}")
    else:
        _rare_operation(line, events)


def _rare_operation(line: bytes, events: list[NatsEvent]) -> None:
    """The operations nats-server matches by prefix (`PINGX`, `CONNECT{...}` are valid)."""
    head = line[:7].upper()
    if head.startswith(b"PING"):
        events.append(Ping())
    elif head.startswith(b"PONG"):
        events.append(Pong())
    elif head == b"CONNECT":
        events.append(Connect(_json_object(line[7:], "CONNECT")))
    elif head.startswith(b"INFO"):
        _json_object(line[4:], "INFO")  # only a server's INFO means anything
    elif head.startswith(b"+OK"):
        pass
    elif head.startswith(b"-ERR"):
        raise ClientError(f"client sent {_text(line[:64])!r}")
    else:
        raise UnknownOperation(f"unknown operation {line[:32]!r}")


def _not_json(constant: str) -> None:
    raise ValueError(f"{constant} is not JSON")  # Python's json takes NaN and Infinity, Go's not


CONNECT_OPTIONS = frozenset(("verbose", "pedantic", "echo", "headers", "no_responders", "name", "lang",
                             "version", "user", "pass", "auth_token", "protocol"))


def _go_fields(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object as Go's encoding/json fills nats-server's CONNECT struct: a key
    names a field whatever its case, a null leaves the field as it was, the last wins."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        folded = key.lower() if key.isascii() else key
        if folded in CONNECT_OPTIONS:
            if value is None:
                continue
            key = folded
        out[key] = value
    return out


def _json_object(arg: bytes, op: str) -> dict[str, Any]:
    try:  # invalid UTF-8 is replaced, not refused, as Go does
        value = json.loads(arg.decode("utf-8", "replace"), parse_constant=_not_json,
                           object_pairs_hook=_go_fields if op == "CONNECT" else None)
    except (ValueError, RecursionError) as exc:
        raise UnknownOperation(f"{op} argument is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise UnknownOperation(f"{op} argument is not a JSON object")
    return value


# ------------------------------------------------------------------ encoders

def encode_info(info: dict[str, Any]) -> bytes:
    return b"INFO %s \r\n" % json.dumps(info, separators=(",", ":")).encode()  # nats-server's space


def encode_msg(subject: bytes, sid: bytes, reply: bytes | None, payload: bytes) -> bytes:
    if reply:
        return b"MSG %s %s %s %d\r\n%s\r\n" % (subject, sid, reply, len(payload), payload)
    return b"MSG %s %s %d\r\n%s\r\n" % (subject, sid, len(payload), payload)


def encode_hmsg(subject: bytes, sid: bytes, reply: bytes | None, headers: bytes,
                payload: bytes) -> bytes:
    hl = len(headers)
    if reply:
        return b"HMSG %s %s %s %d %d\r\n%s%s\r\n" % (
            subject, sid, reply, hl, hl + len(payload), headers, payload)
    return b"HMSG %s %s %d %d\r\n%s%s\r\n" % (subject, sid, hl, hl + len(payload), headers, payload)


def encode_pub(subject: bytes, reply: bytes | None, payload: bytes) -> bytes:
    if reply:
        return b"PUB %s %s %d\r\n%s\r\n" % (subject, reply, len(payload), payload)
    return b"PUB %s %d\r\n%s\r\n" % (subject, len(payload), payload)


def encode_hpub(subject: bytes, reply: bytes | None, headers: bytes, payload: bytes) -> bytes:
    hl = len(headers)
    if reply:
        return b"HPUB %s %s %d %d\r\n%s%s\r\n" % (subject, reply, hl, hl + len(payload), headers, payload)
    return b"HPUB %s %d %d\r\n%s%s\r\n" % (subject, hl, hl + len(payload), headers, payload)


def encode_sub(subject: bytes, queue: bytes | None, sid: bytes) -> bytes:
    if queue:
        return b"SUB %s %s %s\r\n" % (subject, queue, sid)
    return b"SUB %s %s\r\n" % (subject, sid)


def encode_unsub(sid: bytes, max_msgs: int = 0) -> bytes:
    if max_msgs:
        return b"UNSUB %s %d\r\n" % (sid, max_msgs)
    return b"UNSUB %s\r\n" % sid


def no_responders_headers(subject: bytes) -> bytes:
    """The status header block nats-server sends on a request nobody can answer."""
    return b"NATS/1.0 503\r\nNats-Subject: %s\r\n\r\n" % subject


# ------------------------------------------------------------------ subject rules

def is_valid_subject(subject: str) -> bool:
    """A SUB subject: non-empty tokens, `>` only as the last token."""
    tokens = subject.split(".")
    return all(t and (t != ">" or i == len(tokens) - 1) for i, t in enumerate(tokens))


def has_wildcard(subject: str) -> bool:
    return ("*" in subject or ">" in subject) and any(t in ("*", ">") for t in subject.split("."))


def is_literal_subject(subject: str) -> bool:
    """A valid PUB subject in pedantic mode: non-empty tokens, no wildcard token."""
    if "*" not in subject and ">" not in subject:  # the common case, without splitting
        return bool(subject) and ".." not in subject and subject[0] != "." and subject[-1] != "."
    return all(t and t != "*" and t != ">" for t in subject.split("."))
