"""One NATS client connection as a sans-IO state machine (issue 8 point 1).

Manual sections "NATS", "NATS subject rules", "Services and Networks"; behaviour as
nats-server 2.x shows it to nats-py and other clients:

- INFO is queued at construction (server_id, server_name, version 2.x, proto 1,
  headers, max_payload, client_id, auth_required when the transport has credentials).
- Until CONNECT the client has nats-server's defaults: verbose, pedantic and echo on,
  headers and no_responders off; fields missing from CONNECT keep them.
- With `user`/`password` or `token` configured, the first operation must be a CONNECT
  carrying them (`user`/`pass`, `auth_token`), else `-ERR 'Authorization Violation'`
  and close (as nats-server: any first line not starting with `C`, INFO and +OK too; a
  later CONNECT is checked with the credentials it names or the earlier ones). `protocol` above 1 and `no_responders` without `headers` are refused with
  nats-server's texts.
- Verbose mode answers `+OK` to CONNECT, PUB/HPUB, SUB and UNSUB.
- SUB with an invalid subject answers `-ERR 'Invalid Subject'` and the connection stays
  open; a SUB reusing a sid is ignored. Subjects with `*`/`>` tokens subscribe as RV
  patterns, others as literal subjects; queue groups go to the bus with either.
- UNSUB with a max: the subscription ends after that many deliveries in total (at once if
  already reached); deliveries for a sid no longer subscribed are dropped.
- PUB to a subject with wildcard tokens: routed as a literal subject ("RV subject rules"
  3), except in pedantic mode where it is refused with `-ERR 'Invalid Publish Subject'`
  ("NATS subject rules" 3: no publish to a wildcard) and not routed.
- No-responders: a PUB with a reply from a client that asked for `no_responders` on a
  subject with no interest anywhere in the network is not routed; the client gets, on
  its own subscription matching the reply, nats-server's status message
  `HMSG <reply> <sid> n n` with `NATS/1.0 503` and `Nats-Subject: <subject>` headers
  and an empty payload. A request sent to another node whose filter still showed the
  subject (its subscriber just left) gets that node's 503 (`NATS/1.0 503`, as nats-server
  2.9.10: router/no_responders.py); a client that did not ask for no-responders never
  gets such a status.
- Headers reach clients that negotiated them as HMSG; others get MSG with the payload.
- `ping()` is for the glue's ping timer: it sends PING, and with `max_pings_out` PINGs
  unanswered closes with `-ERR 'Stale Connection'`.
- A slow consumer (flow.py) gets `-ERR 'Slow Consumer'` before the close; nats-server
  closes silently, the issue asks for the text and the client is gone either way.

Checked byte for byte against nats-server 2.9.10 (tests/unit/test_nats_session.py); the
503 status carries the `Nats-Subject` header of current nats-server releases.
"""

from __future__ import annotations

import hmac
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from raims_node.bridges.bus import Bus
from raims_node.bridges.errors import AuthorizationViolation, BridgeError, StaleConnection
from raims_node.bridges.flow import FlowLimits, SessionOutput
from raims_node.bridges.nats_proto import (
    ERR_AUTH_TIMEOUT,
    ERR_AUTHORIZATION,
    ERR_BAD_CLIENT_PROTOCOL,
    ERR_INVALID_PUBLISH_SUBJECT,
    ERR_INVALID_SUBJECT,
    ERR_NO_RESPONDERS_NEEDS_HEADERS,
    ERR_SLOW_CONSUMER,
    ERR_STALE_CONNECTION,
    ERR_UNKNOWN_OP,
    MAX_CONTROL_LINE,
    MAX_PAYLOAD,
    OK,
    PING,
    PONG,
    Connect,
    NatsEvent,
    NatsParser,
    NatsProtocolError,
    Ping,
    Pong,
    Pub,
    PubRun,
    Sub,
    UnknownOperation,
    Unsub,
    encode_err,
    encode_hmsg,
    encode_info,
    encode_msg,
    framable,
    has_wildcard,
    is_literal_subject,
    is_valid_subject,
    no_responders_headers,
    wire,
)
from raims_node.router.no_responders import is_no_responders
from raims_node.subject import SubjectError, compile_pattern
from raims_node.wire.batch import PackedRun, Run

log = logging.getLogger("raims.bridge.nats")

SERVER_VERSION = "2.9.10"  # the nats-server release followed and differential-tested
PROTO_VERSION = 1
MAX_PINGS_OUT = 2
AUTH_TIMEOUT_S = 2.0  # nats-server's default auth_timeout: with credentials, CONNECT within it (nats.py)


@dataclass(frozen=True, slots=True)
class NatsConfig:
    """One `type: nats` transport, shared by its connections."""

    server_id: str
    server_name: str = "raims"
    version: str = SERVER_VERSION
    host: str = "0.0.0.0"
    port: int = 4222
    max_payload: int = MAX_PAYLOAD
    max_control_line: int = MAX_CONTROL_LINE
    user: str | None = None
    password: str | None = None
    token: str | None = None
    max_pings_out: int = MAX_PINGS_OUT
    limits: FlowLimits = field(default_factory=FlowLimits)

    @property
    def auth_required(self) -> bool:
        return self.user is not None or self.token is not None


@dataclass(slots=True)
class _Subscription:
    subject: str
    queue: str | None
    sid_b: bytes
    msg_head: bytes  # "MSG <subject> <sid> ", for deliveries on the subscribed subject
    max_msgs: int = 0  # 0: unlimited
    delivered: int = 0  # messages delivered on this subscription so far
    size: int = -1  # the payload size of the last delivery, and its MSG line
    line: bytes = b""

    def msg_line(self, size: int) -> bytes:
        """`MSG <subject> <sid> <size>`, kept while a stream's messages are one size."""
        if size != self.size:
            self.size = size
            self.line = b"%s%d\r\n" % (self.msg_head, size)
        return self.line

    @classmethod
    def of(cls, subject: str, queue: str | None, sid: str) -> _Subscription:
        subject_b, sid_b = wire(subject), wire(sid)
        return cls(subject, queue, sid_b, b"MSG %s %s " % (subject_b, sid_b))


_BOOL_OPTIONS = ("verbose", "pedantic", "echo", "headers", "no_responders")
_STR_OPTIONS = ("name", "lang", "version", "user", "pass", "auth_token")
_CREDENTIALS = ("user", "pass", "auth_token")


class NatsSession(SessionOutput):
    """A NATS client as the node sees it: feed it bytes, drain `pending_output()`."""

    def __init__(self, bus: Bus, client_id: int, config: NatsConfig, *,
                 client_ip: str | None = None, wakeup: Callable[[], None] | None = None) -> None:
        self.bus = bus
        self.client_id = client_id
        self.config = config
        self.verbose = True
        self.pedantic = True
        self.echo = True
        self.headers = False
        self.no_responders = False
        self.name = ""
        self.lang = ""
        self.version = ""
        self.connected = False  # a CONNECT was accepted
        self.msgs_in = 0
        self.msgs_out = 0
        self.payload_in = self.payload_out = 0  # message bytes (headers and data): nats-server's in/out_bytes
        self.unframable = 0  # deliveries skipped: a subject or reply NATS cannot carry (nats_proto.framable)
        self._parser = NatsParser(config.max_payload, config.max_control_line, runs=True)
        # RouterBus.publish_lone, when the bus has it: a PUB read alone, written on at once
        self._publish_lone: Callable[[NatsSession, str, bytes], int] | None = getattr(bus, "publish_lone", None)
        self._lone_subject: str | None = None  # the last subject _plain_pub allowed
        self._subs: dict[str, _Subscription] = {}
        self._pings_out = 0
        self._in_bus = True
        self._credentials: dict[str, Any] = {}  # user, pass, auth_token of the CONNECTs so far
        info: dict[str, Any] = {
            "server_id": config.server_id, "server_name": config.server_name,
            "version": config.version, "proto": PROTO_VERSION, "go": "raims",
            "host": config.host, "port": config.port, "headers": True,
        }
        if config.auth_required:
            info["auth_required"] = True
        info["max_payload"] = config.max_payload
        info["client_id"] = client_id
        if client_ip:
            info["client_ip"] = client_ip
        super().__init__(config.limits, wakeup, encode_err(ERR_SLOW_CONSUMER), encode_info(info))
        self._info = info
        self.started_ns = self.last_ns = time.time_ns()  # last_ns: the last PUB, SUB, UNSUB or CONNECT
        self.rtt_ns = 0  # nats-server's estimate: INFO to CONNECT, then our last PING to its PONG
        self._ping_ns = 0
        self._closed_subs: list[_Subscription] = []  # what it had when it closed (/connz?state=closed)

    @property
    def input_buffered(self) -> int:
        return self._parser.buffered

    @property
    def subscriptions(self) -> int:
        return len(self._subs)

    handshake_timeout_reply = encode_err(ERR_AUTH_TIMEOUT)

    @property
    def established(self) -> bool:
        """Past its CONNECT where credentials are required (the glue's `auth_timeout`
        closes it otherwise, as nats-server's auth timer)."""
        return self.connected or not self.config.auth_required

    # ------------------------------------------------------------ input

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        if not self.connected and self.config.auth_required and not self._parser.buffered \
                and data[:1] not in b"Cc":  # as nats-server: not even INFO or +OK before CONNECT
            self._fail(AuthorizationViolation(f"{bytes(data[:16])!r} before CONNECT"), ERR_AUTHORIZATION)
            return
        lone = self._parser.lone_pub(data) if type(data) is bytes else None
        if lone is not None and (lone[0] is self._lone_subject or self._plain_pub(lone[0])):  # written on at once
            self.msgs_in += 1
            self.payload_in += len(lone[1])
            self.last_ns = time.time_ns()
            if self._publish_lone is not None:
                self._publish_lone(self, lone[0], lone[1])
            else:
                self.bus.publish_run(self, lone[0], [lone[1]])
            return
        error: NatsProtocolError | None = None
        try:
            events = self._parser.feed(data)
        except NatsProtocolError as exc:
            events, error = exc.events, exc
        guarded = self.config.auth_required
        msgs_in = self.msgs_in
        run: Run = []  # consecutive plain PUBs on one subject, published together
        run_subject = ""
        for ev in events:
            if self._closing:
                return
            if type(ev) is PubRun:  # PUBs repeating the line before: a plain run, or one by one
                if ((self.connected or not guarded) and not self.verbose
                        and not (self.pedantic and not is_literal_subject(ev.subject))):
                    if run and ev.subject != run_subject:
                        self._publish_run(run_subject, run)
                        run = []
                    run_subject = ev.subject
                    run = ev.payloads if not run else [*run, *ev.payloads]  # a lone run stays packed
                    continue
                if run:
                    self._publish_run(run_subject, run)
                    run = []
                for payload in ev.payloads:
                    if self._closing:
                        return
                    self._on_event(Pub(ev.subject, None, None, payload), guarded)
                continue
            if type(ev) is Pub and (self.connected or not guarded):
                subject, reply, headers, payload = ev
                if (reply is None and headers is None and not self.verbose
                        and not (self.pedantic and not is_literal_subject(subject))):
                    if run and subject != run_subject:
                        self._publish_run(run_subject, run)
                        run = []
                    run_subject = subject
                    if isinstance(run, PackedRun):
                        run = run.payloads()
                    run.append(payload)
                    continue
            if run:
                self._publish_run(run_subject, run)
                run = []
                if self._closing:
                    return
            self._on_event(ev, guarded)
        if run and not self._closing:
            self._publish_run(run_subject, run)
        if self.msgs_in != msgs_in:
            self.last_ns = time.time_ns()
        if error is not None and not self._closing:
            self._close(error.reply, error)

    def _plain_pub(self, subject: str) -> bool:
        """Whether a PUB to `subject` without reply or headers is published as it is
        (connected, not verbose, not refused by pedantic mode): as data_received's runs."""
        if ((self.connected or not self.config.auth_required) and not self.verbose
                and (not self.pedantic or is_literal_subject(subject)) and _matchable(subject)):
            self._lone_subject = subject  # (the parser keeps the same str while the line repeats)
            return True
        return False

    def _on_event(self, ev: NatsEvent, guarded: bool) -> None:
        if guarded and not self.connected and type(ev) is not Connect:
            self._fail(AuthorizationViolation(f"{type(ev).__name__} before CONNECT"), ERR_AUTHORIZATION)
        elif type(ev) is Pub:
            self._on_pub(ev)
        elif type(ev) is Sub:
            self._on_sub(ev)
        elif type(ev) is Unsub:
            self._on_unsub(ev)
        elif type(ev) is Ping:
            self._write(PONG)
        elif type(ev) is Pong:
            self._pings_out = 0
            if self._ping_ns:
                self.rtt_ns = time.time_ns() - self._ping_ns
        elif type(ev) is Connect:
            self._on_connect(ev.options)

    def _publish_run(self, subject: str, payloads: Run) -> None:
        """The common case, routed once for a pipelined run: no reply, no headers, not
        verbose. A run is published whole even if a delivery closes this session."""
        self.msgs_in += len(payloads)
        self.payload_in += (payloads.count * payloads.size if isinstance(payloads, PackedRun)
                            else sum(map(len, payloads)))
        if _matchable(subject):
            self.bus.publish_run(self, subject, payloads)

    def _fail(self, error: BridgeError, err_text: str) -> None:
        self._close(encode_err(err_text), error)

    def _on_connect(self, options: dict[str, Any]) -> None:
        self._lone_subject = None  # the flags _plain_pub read may change
        problem = _bad_option(options)
        if problem is not None:
            self._fail(UnknownOperation(f"CONNECT {problem}"), ERR_UNKNOWN_OP)
            return
        protocol = options.get("protocol", 0)
        self._credentials.update((k, options[k]) for k in _CREDENTIALS if k in options)
        if not self._authorized(self._credentials):  # a later CONNECT without them keeps them
            self._fail(AuthorizationViolation("CONNECT credentials do not match"), ERR_AUTHORIZATION)
            return
        if not 0 <= protocol <= PROTO_VERSION:
            self._fail(UnknownOperation(f"client protocol {protocol} is above {PROTO_VERSION}"),
                       ERR_BAD_CLIENT_PROTOCOL)
            return
        self.verbose = options.get("verbose", self.verbose)
        self.pedantic = options.get("pedantic", self.pedantic)
        self.echo = options.get("echo", self.echo)
        self.headers = options.get("headers", self.headers)  # a second CONNECT changes only what it names
        self.no_responders = options.get("no_responders", self.no_responders)
        self.name = options.get("name", self.name)
        self.lang = options.get("lang", self.lang)
        self.version = options.get("version", self.version)
        if self.no_responders and not self.headers:
            self._fail(UnknownOperation("no_responders without headers"),
                       ERR_NO_RESPONDERS_NEEDS_HEADERS)
            return
        self.connected = True
        self.last_ns = time.time_ns()
        if not self.rtt_ns:
            self.rtt_ns = self.last_ns - self.started_ns
        if self.verbose:
            self._write(OK)

    def _authorized(self, options: dict[str, Any]) -> bool:
        cfg = self.config
        if cfg.token is not None and _same(options.get("auth_token"), cfg.token):
            return True
        if cfg.user is not None:
            return _same(options.get("user"), cfg.user) and _same(options.get("pass"), cfg.password or "")
        return cfg.token is None

    def _on_pub(self, ev: Pub) -> None:
        if ev.headers is not None and not self.headers:
            self._fail(UnknownOperation("HPUB from a client that did not negotiate headers"),
                       ERR_UNKNOWN_OP)
            return
        self.msgs_in += 1
        self.payload_in += len(ev.payload) + (len(ev.headers) if ev.headers else 0)
        subject = ev.subject
        refused = self.pedantic and not is_literal_subject(subject)
        if refused:
            self._write(encode_err(ERR_INVALID_PUBLISH_SUBJECT))
        if self.verbose:
            self._write(OK)
        if refused or not _matchable(subject):
            return
        if ev.reply is not None and self.no_responders \
                and not self.bus.has_interest(subject, None if self.echo else self):
            self._send_no_responders(subject, ev.reply)
            return
        self.bus.publish(self, subject, ev.reply, ev.headers or None, ev.payload)  # b"": an HPUB 0

    def _send_no_responders(self, subject: str, reply: str) -> None:
        for sub in self._subs.values():
            if sub.queue is None and _subscribed(sub.subject, reply):
                self._write(encode_hmsg(wire(reply), sub.sid_b, None,
                                        no_responders_headers(wire(subject)), b""))
                return

    def _on_sub(self, ev: Sub) -> None:
        if not is_valid_subject(ev.subject):
            self._write(encode_err(ERR_INVALID_SUBJECT))
            return
        sid = ev.sid
        self.last_ns = time.time_ns()
        if sid not in self._subs:
            self._subs[sid] = _Subscription.of(ev.subject, ev.queue, sid)
            if has_wildcard(ev.subject):
                if ev.queue is None:
                    refused = self.bus.psubscribe(self, sid, ev.subject, "rv")
                else:
                    refused = self.bus.psubscribe(self, sid, ev.subject, "rv", ev.queue)
            else:
                refused = self.bus.subscribe(self, sid, ev.subject, ev.queue)
            if refused is not None:  # too long for the network (a max_control_line over 64 KB)
                del self._subs[sid]
                self._write(encode_err(ERR_INVALID_SUBJECT))
                return
        if self.verbose:
            self._write(OK)

    def _on_unsub(self, ev: Unsub) -> None:
        self.last_ns = time.time_ns()
        if self.verbose:
            self._write(OK)
        sub = self._subs.get(ev.sid)
        if sub is None:
            return
        if ev.max_msgs > sub.delivered:
            sub.max_msgs = ev.max_msgs
        else:
            del self._subs[ev.sid]
            self.bus.unsubscribe(self, ev.sid)

    # ------------------------------------------------------------ output

    def deliver(self, sid: str, subject: str, reply: str | None,
                headers: bytes | None, payload: bytes) -> None:
        sub = self._subs.get(sid)
        if sub is None:  # unsubscribed meanwhile, or closed (which clears them all)
            return
        if not self.no_responders and headers is not None and is_no_responders(headers, payload):
            return  # another node's 503 for a request of ours (router/no_responders.py): not asked for
        if (reply or subject != sub.subject) and not (framable(subject) and (not reply or framable(reply))):
            self.unframable += 1  # a wildcard's match or a reply from RV or Redis with spaces or CR LF
            if self.unframable == 1:
                log.warning("nats client %d: skipped a message on %r: not a NATS subject", self.client_id,
                            subject + (f" reply {reply}" if reply else ""))
            return
        sub.delivered += 1  # counted from the start: UNSUB max compares with it, as nats-server
        if sub.max_msgs and sub.delivered >= sub.max_msgs:
            del self._subs[sid]
            self.bus.unsubscribe(self, sid)
        self.msgs_out += 1
        self.payload_out += len(payload) + (len(headers) if headers is not None and self.headers else 0)
        if headers is None or not self.headers:
            if not reply and subject == sub.subject:
                self._write(sub.msg_line(len(payload)) + payload + b"\r\n")
            else:
                self._write(encode_msg(wire(subject), sub.sid_b, wire(reply) if reply else None, payload))
        else:
            self._write(encode_hmsg(wire(subject), sub.sid_b, wire(reply) if reply else None,
                                    headers, payload))

    def deliver_run(self, sid: str, subject: str, payloads: list[bytes]) -> None:
        sub = self._subs.get(sid)
        if sub is None or sub.max_msgs or subject != sub.subject:
            super().deliver_run(sid, subject, payloads)  # the rare cases, one by one
            return
        sub.delivered += len(payloads)
        self.msgs_out += len(payloads)
        self.payload_out += sum(map(len, payloads))
        if len(set(map(len, payloads))) == 1:
            line = sub.msg_line(len(payloads[0]))  # one size (a stream): joined in one call
            self._write(line + (b"\r\n" + line).join(payloads) + b"\r\n")
            return
        parts: list[bytes] = []
        for payload in payloads:
            parts += (sub.msg_line(len(payload)), payload, b"\r\n")
        self._write(b"".join(parts))

    def deliver_packed(self, sid: str, subject: str, run: PackedRun) -> None:
        """A run of equal-size payloads still inside its batch frame (wire/batch.py): the
        MSG lines written around them in one pass, no object per message."""
        sub = self._subs.get(sid)
        if sub is None or sub.max_msgs or subject != sub.subject:
            self.deliver_run(sid, subject, run.payloads())
            return
        sub.delivered += run.count
        self.msgs_out += run.count
        self.payload_out += run.count * run.size
        self._write(run.framed(sub.msg_line(run.size), b"\r\n"))

    def lame_duck(self) -> None:
        """The server enters lame duck mode: tell the client (nats-server's `ldm`), so
        that it moves to another server before this one closes it."""
        if not self._closing:
            self._write(encode_info({**self._info, "ldm": True}))

    def subjects(self) -> list[str]:
        """The client's subscription subjects (`/connz?subs=1`)."""
        return [s.subject for s in self._subs.values()]

    def subscription_details(self) -> list[tuple[str, str | None, str, int, int]]:
        """(subject, queue, sid, delivered, max) of each subscription, or of those it had
        when it closed (nats_monitor.py)."""
        return [(s.subject, s.queue, s.sid_b.decode("utf-8", "surrogateescape"), s.delivered, s.max_msgs)
                for s in (self._subs.values() if not self._closing else self._closed_subs)]

    @property
    def auth_user(self) -> str:
        """The user its CONNECTs named, as nats-server's `authorized_user` (which shows a
        token as it is: "[REDACTED]" here)."""
        if self._credentials.get("user"):
            return str(self._credentials["user"])
        return "[REDACTED]" if self._credentials.get("auth_token") else ""

    def ping(self) -> None:
        """The glue's ping timer fired."""
        if self._closing:
            return
        if self._pings_out >= self.config.max_pings_out:
            self._fail(StaleConnection(f"{self._pings_out} PINGs unanswered"), ERR_STALE_CONNECTION)
            return
        self._pings_out += 1
        self._ping_ns = time.time_ns()
        self._write(PING)

    # ------------------------------------------------------------ teardown

    def connection_lost(self) -> None:
        """The transport is gone: release the bus subscriptions and the output (idempotent)."""
        self._close(b"", None)
        self._release()

    def _on_close(self) -> None:
        self._closed_subs = list(self._subs.values())
        self._subs.clear()
        if self._in_bus:
            self._in_bus = False
            self.bus.drop_client(self)


def _bad_option(options: dict[str, Any]) -> str | None:
    """What nats-server's JSON decoding would reject in CONNECT, if anything."""
    for key in _BOOL_OPTIONS:
        if not isinstance(options.get(key, False), bool):
            return f"option {key!r} is not a boolean"
    for key in _STR_OPTIONS:
        if not isinstance(options.get(key, ""), str):
            return f"option {key!r} is not a string"
    protocol = options.get("protocol", 0)
    if type(protocol) is not int or not -1 << 63 <= protocol < 1 << 63:  # a Go int
        return "option 'protocol' is not an integer"
    return None


def _same(given: object, expected: str) -> bool:
    return isinstance(given, str) and hmac.compare_digest(
        given.encode("utf-8", "surrogatepass"), expected.encode("utf-8", "surrogatepass"))


def _matchable(subject: str) -> bool:
    """Whether a published subject can match a subscription: nats-server's sublist
    matches nothing for one with an empty token (`a..b`, `.a`, `a.`), and drops it
    without a word to a client that is not pedantic."""
    return not (subject.startswith(".") or subject.endswith(".") or ".." in subject)


def _subscribed(pattern: str, subject: str) -> bool:
    """Whether a (validated) NATS subscription subject takes `subject`: the node's rv
    patterns have NATS's `*` and trailing `>`."""
    try:
        return compile_pattern(pattern, "rv").matches(subject)
    except SubjectError:
        return False
