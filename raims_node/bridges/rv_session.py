"""One RV client connection as a sans-IO state machine (issue 25 point 1).

Manual "Tib RV", "Notification of message loss", "rvd Compatibility"; the bytes are
rv_codec's. The conversation, as the reference daemon holds it:

1. version and info records (rv_codec), then rvmsgs with an `mtype` field;
2. `I` (init) with `userid`, `service`, `network`: the daemon opens the service (the
   host's `open_service`: its namespace and network) and answers `RVD.INITRESP`
   (mtype `R`, data `ipaddr`, `ipport`, `vmaj` 5, `vmin` 4, `vupd` 2, `gob`), or
   `RVD.INITREFUSED` with an `error` and closes;
3. a second `I` with the client's `session` and `control` inbox: answered with the
   advisory `_RV.INFO.SYSTEM.RVD.CONNECTED`. A session of the form
   `<ip hex>.<gob>` is an RV6+ client using the daemon's session (its session name
   becomes `<ip hex>.DAEMON.<daemon gob>`); any other session is an RV5 client's own,
   announced with `_RV.INFO.SYSTEM.SESSION.START.<session>` (and STOP when it ends);
4. `L` listen (subscribe; `*` and a trailing `>` make a pattern), `C` cancel, `D` data
   (publish; `return` is the reply subject). Deliveries are `D` (`A` for the `_RV.INFO.
   SYSTEM.{HOST,SESSION,LISTEN,UNREACHABLE}.` and `_RV.ERROR.SYSTEM.` advisories) with
   `sub`, `return` and `data`.

Decisions:
- Inboxes are subjects like any other (`_INBOX.<session>.<n>`): RV5 and RV6 clients
  listen on `_INBOX.<session>.>`; the network routes replies by interest, which is
  the point-to-point path. A pattern `>` alone does not match `_INBOX.` subjects (as
  the reference).
- Payloads: a `data` field holding a nested message is published as that rvmsg's
  bytes; an opaque, string or other field as its bytes (a string without its NUL).
  A delivered payload that is one whole rvmsg goes out as a nested message, any other
  as opaque: NATS and Redis clients of the same namespace exchange plain bytes.
- A message matching several of a client's subscriptions is sent to it once (the
  client library dispatches to its listeners; a run handed to each subscription
  likewise). The router hands one message to each matching subscription in turn, so
  a delivery of the payload object and subject just delivered, through a subscription
  that has not had it yet, is that message again; through one that has, it is the
  next message (equal payloads of 0 or 1 byte are one shared object in Python, so the
  object alone does not tell two messages apart).
- A subscription is counted per subject: `L` twice needs `C` twice.
- Loss (the router's sequence windows, `Deliver.loss`): the first loss is reported at
  once with `_RV.ERROR.SYSTEM.DATALOSS.INBOUND.BCAST` (mtype `A`, data `ADV_CLASS`
  ERROR, `ADV_SOURCE` SYSTEM, `ADV_NAME` DATALOSS.INBOUND.BCAST, `ADV_DESC` "lost msgs",
  `lost`, `sub_cnt`, `sub1..9` / `lost1..9`, `scid` the daemon port); losses within the
  next second are summed and sent by `flush_loss` (the glue's one-second timer), so at
  most one advisory a second, as the manual says.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from raims_node.bridges.bus import Bus
from raims_node.bridges.errors import BridgeError
from raims_node.bridges.flow import FlowLimits, SessionOutput
from raims_node.bridges.rv_codec import (
    HEADER,
    HEADER_LEN,
    INFO_AGREE,
    INFO_REC_LEN,
    INFO_REQUEST,
    INFO_RESPONSE,
    MAGIC,
    T_RVMSG,
    T_STRING,
    VERSION_REC,
    VERSION_REC_LEN,
    Envelope,
    RvCodecError,
    RvFrameReader,
    RvMsg,
    Writer,
    data_field,
    decode,
    decode_subject,
    envelope,
    info_kind,
    info_rec,
    is_rvmsg,
    return_field,
)
from raims_node.router.no_responders import is_no_responders

DATALOSS_SUBJECT = "_RV.ERROR.SYSTEM.DATALOSS.INBOUND.BCAST"
INFO_SYSTEM = "_RV.INFO.SYSTEM."
ADVISORY_HEADS = tuple(INFO_SYSTEM + h for h in ("HOST.", "SESSION.", "LISTEN.", "UNREACHABLE.")) + (
    "_RV.ERROR.SYSTEM.",)
LOSS_INTERVAL_S = 1.0
MAX_LOSS_SUBJECTS = 9
HEAD_CACHE = 4096  # encoded `sub` + `mtype` fields kept per subject delivered
DEFAULT_SERVICE = "7500"
ERR_START_FAILED = 17  # the reference's RVD.INITREFUSED error for a network that cannot start


class RvRefused(BridgeError):
    """The service or network a client asked for cannot be opened."""


class RvHost(Protocol):
    """What a session needs of its transport (rv.py's RvServer)."""

    ipaddr: bytes  # 4 bytes: the daemon's (fake) address, INITRESP `ipaddr`
    port: int
    daemon_gob: str

    def open_service(self, service: str, network: str) -> Bus: ...

    def closed_service(self, service: str) -> None: ...


@dataclass(frozen=True, slots=True)
class RvConfig:
    max_payload: int = 8 * 1024 * 1024
    limits: FlowLimits = field(default_factory=FlowLimits)


def advisory(name: str, adv_class: str = "INFO", **extra: str) -> bytes:
    """The data message of an `_RV.` advisory named `name` (ADV_NAME)."""
    w = Writer().string("ADV_CLASS", adv_class).string("ADV_SOURCE", "SYSTEM").string("ADV_NAME", name)
    for k, v in extra.items():
        w.string(k, v)
    return w.finish()


class RvSession(SessionOutput):
    """An RV client as the node sees it: feed it bytes, drain `pending_output()`."""

    def __init__(self, host: RvHost, client_id: int, config: RvConfig, *,
                 wakeup: Callable[[], None] | None = None, loss_timer: Callable[[float], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(config.limits, wakeup, b"", VERSION_REC)
        self.host = host
        self.client_id = client_id
        self.config = config
        self.echo = True
        self.msgs_in = 0
        self.msgs_out = 0
        self.protocol_errors = 0
        self.userid = ""
        self.service = ""
        self.session = ""
        self.style = ""  # "rv5" (own session) or "rv6" (the daemon's), once connected
        self.bus: Bus | None = None
        self.gob = f"{time.time_ns():X}{os.getpid() & 0xFFFF:04X}{client_id:X}"
        self._state = "version"  # version -> info -> init -> connect -> data
        self._reader = RvFrameReader(config.max_payload + 64 * 1024)
        self._subs: dict[str, int] = {}  # subject -> listen count
        self._last_payload: bytes | None = None
        self._last_subject = ""
        self._last_sids: set[str] = set()  # the subscriptions that had the last message
        self._last_run: list[bytes] | None = None
        self._heads: dict[str, bytes] = {}
        self._subjects: dict[bytes, str] = {}  # raw subject field -> subject
        # the last D's layout: (its fields up to the data bytes, its length, subject,
        # where the data starts, the data's type); a message equal up to there is a D alike
        self._fast: tuple[bytes, int, str, int, int] | None = None
        self._pre: dict[tuple[str, int], bytes] = {}  # (subject, payload size) -> delivery bytes before it
        self._loss: dict[str, int] = {}  # subject -> messages lost, not reported yet
        self._loss_sent = float("-inf")
        self._loss_timer = loss_timer
        self._timer_armed = False
        self._clock = clock
        self.advisories_sent = 0
        self.lost_in = 0  # messages the network lost before reaching this client (show hosts `idl`)
        self.started_ns = time.time_ns()

    @property
    def input_buffered(self) -> int:
        return self._reader.buffered

    @property
    def established(self) -> bool:
        """Past the handshake: the version and info records and both `I` messages (the
        glue's deadline, `tcp_auth_timeout`, closes a client that has not got there)."""
        return self._state == "data"

    @property
    def iphex(self) -> str:
        return self.host.ipaddr.hex().upper()

    # ------------------------------------------------------------ input

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        reader = self._reader
        reader.push(data)
        try:
            if self._state == "version":
                version = reader.take(VERSION_REC_LEN)
                if version is None:
                    return
                if version[:4] != bytes(4):  # every RV version record starts with a zero word
                    raise RvCodecError(f"not an RV client: version record {version.hex()}")
                self._write(info_rec(INFO_REQUEST))
                self._state = "info"
            if self._state == "info":
                info = reader.take(INFO_REC_LEN)
                if info is None:
                    return
                if info_kind(info) != INFO_RESPONSE:
                    raise RvCodecError(f"not an RV client: info record of kind {info_kind(info)}, "
                                       f"not the response {INFO_RESPONSE}")
                self._write(info_rec(INFO_AGREE))
                self._state = "init"
            while not self._closing:
                frames = reader.frames()
                if not frames:
                    break
                self._frames(frames)
        except RvCodecError as exc:
            self.protocol_errors += 1
            self._close(b"", exc)

    def _frames(self, frames: list[bytes]) -> None:
        """Run the client's messages in order; consecutive `D`s on one subject without
        a reply are published as one run (routed once, as NATS PUB runs)."""
        run: list[bytes] = []
        run_subject = ""
        try:
            for frame in frames:
                if self._closing:
                    return
                if len(frame) <= HEADER_LEN:  # a keep-alive
                    continue
                if self._state != "data":
                    self._message(decode(frame))
                    continue
                self.msgs_in += 1
                fast = self._fast
                if fast is not None and len(frame) == fast[1] and frame.startswith(fast[0], HEADER_LEN):
                    # laid out as the previous message up to its data: a D on its subject
                    subject, payload = fast[2], frame[fast[3]:]
                    if fast[4] == T_STRING and payload.endswith(b"\x00"):
                        payload = payload[:-1]
                    elif fast[4] == T_RVMSG and int.from_bytes(payload[:4], "big") != len(payload):
                        raise RvCodecError("nested message size is not its length")
                else:
                    env = envelope(frame)
                    if env.mtype != b"D" or env.reply is not None or env.sub is None:
                        if run:
                            self._publish_run(run_subject, run)
                            run = []
                        self._routed(env)
                        continue
                    subject, payload = self._subject(env.sub), _payload(env)
                    if env.data_last and env.data_start:
                        self._fast = (frame[HEADER_LEN:env.data_start], len(frame), subject, env.data_start,
                                      env.dtype)
                if run and subject != run_subject:
                    self._publish_run(run_subject, run)
                    run = []
                run_subject = subject
                run.append(payload)
                continue
        finally:
            if run and self.bus is not None:
                self._publish_run(run_subject, run)

    def _publish_run(self, subject: str, run: list[bytes]) -> None:
        bus = self.bus
        assert bus is not None
        if len(run) == 1:
            bus.publish(self, subject, None, None, run[0])
        else:
            bus.publish_run(self, subject, run)

    def _subject(self, raw: bytes) -> str:
        subject = self._subjects.get(raw)
        if subject is None:
            subject = decode_subject(raw)
            if len(self._subjects) >= HEAD_CACHE:
                self._subjects.clear()
            self._subjects[raw] = subject
        return subject

    def _message(self, msg: RvMsg) -> None:
        """A message before the session started: only `I` is allowed."""
        mtype = msg.text("mtype")
        self.msgs_in += 1
        if mtype != "I":
            raise RvCodecError(f"mtype {mtype!r} before the session started")
        self._init(msg)

    def _routed(self, env: Envelope) -> None:
        bus = self.bus
        assert bus is not None
        mtype = env.mtype
        if mtype == b"I":
            raise RvCodecError("init message after the session started")
        if env.sub is None:
            raise RvCodecError(f"mtype {mtype!r} without a subject")
        subject = self._subject(env.sub)
        if mtype == b"D":
            bus.publish(self, subject, env.reply, None, _payload(env))
        elif mtype == b"L":
            self._listen(bus, subject, env.reply or "")
        elif mtype == b"C":
            count = self._subs.get(subject, 0)
            if count > 1:
                self._subs[subject] = count - 1
            elif count == 1:
                del self._subs[subject]
                bus.unsubscribe(self, subject)
                self._listen_advisory(bus, "STOP", subject, "")
        else:
            raise RvCodecError(f"unknown mtype {mtype!r}")

    def subscriptions(self) -> list[str]:
        """The subjects this client listens to (show rvsub)."""
        return list(self._subs)

    def _listen(self, bus: Bus, subject: str, reply: str) -> None:
        """`L`: a listen the node cannot take (`>` not last, a subject too long for the
        network) is a protocol error, as RV's own library refuses such subjects before
        sending: the client is closed with the reason logged, nothing recorded or
        announced."""
        count = self._subs.get(subject, 0)
        if not count:
            tokens = subject.split(".")
            if ">" in tokens[:-1]:
                raise RvCodecError(f"listen {_shown(subject)}: '>' is a wildcard only as the last element")
            if "*" in tokens or tokens[-1] == ">":
                refused = bus.psubscribe(self, subject, subject, "rv")
            else:
                refused = bus.subscribe(self, subject, subject)
            if refused is not None:
                raise RvCodecError(f"listen {_shown(subject)} refused: {refused}")
        self._subs[subject] = count + 1
        if not count:
            self._listen_advisory(bus, "START", subject, reply)

    def _listen_advisory(self, bus: Bus, what: str, subject: str, reply: str) -> None:
        """`_RV.INFO.SYSTEM.LISTEN.START.<subject>` (STOP), except for the restricted
        `_RV.` and `_INBOX.` subjects, as the reference."""
        if subject.startswith(("_RV.", "_INBOX.")):
            return
        extra = {"id": self.session, "sub": subject}
        if reply:
            extra["refid"] = reply
        name = f"LISTEN.{what}.{subject}"
        bus.publish(self, INFO_SYSTEM + name, None, None, advisory(name, **extra))

    def _init(self, msg: RvMsg) -> None:
        if self._state == "init":
            self.userid = msg.text("userid", "nobody")
            self.service = msg.text("service") or DEFAULT_SERVICE
            try:
                self.bus = self.host.open_service(self.service, msg.text("network"))
            except BridgeError as exc:
                refused = Writer().subject("sub", "RVD.INITREFUSED").string("mtype", "R")
                self._close(refused.message("data", Writer().int32("error", ERR_START_FAILED).finish()).finish(),
                            RvRefused(str(exc)))
                return
            data = (Writer().ipdata("ipaddr", self.host.ipaddr).ipdata("ipport", self.host.port.to_bytes(2, "big"))
                    .int32("vmaj", 5).int32("vmin", 4).int32("vupd", 2).string("gob", self.gob).finish())
            self._send_raw(Writer().subject("sub", "RVD.INITRESP").string("mtype", "R").message("data", data).finish())
            self._state = "connect"
        elif self._state == "connect":
            session = msg.text("session")
            if session[9:] == self.gob:
                self.style, self.session = "rv6", f"{self.iphex}.DAEMON.{self.host.daemon_gob}"
            else:
                self.style, self.session = "rv5", session or f"{self.iphex}.{self.gob}"
            name = "RVD.CONNECTED"
            self._send_raw(Writer().subject("sub", INFO_SYSTEM + name).string("mtype", "D")
                           .message("data", advisory(name)).finish())
            self._state = "data"
            if self.style == "rv5":
                self._session_advisory("START")
        else:
            raise RvCodecError("init message after the session started")

    def _session_advisory(self, what: str) -> None:
        bus = self.bus
        if bus is None:
            return
        name = f"SESSION.{what}.{self.session}"
        bus.publish(self, INFO_SYSTEM + name, None, None,
                    advisory(name, id=self.session, userid=self.userid))

    # ------------------------------------------------------------ output

    def _send_raw(self, data: bytes) -> None:
        if self._write(data):
            self.msgs_out += 1

    def _head(self, subject: str) -> bytes | None:
        """The encoded `sub` and `mtype` fields of deliveries on `subject` (cached)."""
        head = self._heads.get(subject)
        if head is None:
            try:
                w = Writer().subject("sub", subject)
            except RvCodecError:
                self.protocol_errors += 1  # a subject of another protocol RV cannot carry
                return None
            head = w.string("mtype", "A" if subject.startswith(ADVISORY_HEADS) else "D").fields()
            if len(self._heads) >= HEAD_CACHE:
                self._heads.clear()
            self._heads[subject] = head
        return head

    def _again(self, sid: str, subject: str, payload: bytes) -> bool:
        """Whether this delivery is the last message again, through another subscription."""
        return payload is self._last_payload and subject == self._last_subject and sid not in self._last_sids

    def _delivered(self, sid: str, subject: str, payload: bytes) -> None:
        self._last_payload, self._last_subject = payload, subject
        sids = self._last_sids
        sids.clear()
        sids.add(sid)

    def deliver(self, sid: str, subject: str, reply: str | None, headers: bytes | None, payload: bytes) -> None:
        if self._again(sid, subject, payload):
            self._last_sids.add(sid)
            return  # the same message through another of this client's subscriptions
        if sid == ">" and subject.startswith("_INBOX."):
            return
        if headers is not None and is_no_responders(headers, payload):
            return  # a node's NATS 503 for a request with an `_INBOX.` reply: RV has none
        self._delivered(sid, subject, payload)
        head = self._head(subject)
        if head is None:
            return
        tail = return_field(reply) + data_field(payload) if reply else data_field(payload)
        self._send_raw(HEADER.pack(HEADER_LEN + len(head) + len(tail), MAGIC) + head + tail)

    def deliver_run(self, sid: str, subject: str, payloads: list[bytes]) -> None:
        """A run of one publisher's messages to this one subscription, written at once
        (once per client: a run the router hands to each matching subscription is the
        same list)."""
        if not payloads or (sid == ">" and subject.startswith("_INBOX.")):
            return
        if payloads is self._last_run and subject == self._last_subject:
            return
        self._last_run = payloads
        head = self._head(subject)
        if head is None:
            return
        parts: list[bytes] = []
        pre = self._pre
        for payload in payloads:
            key = (subject, len(payload))
            before = pre.get(key)
            if before is None or is_rvmsg(payload):
                tail = data_field(payload)
                before = HEADER.pack(HEADER_LEN + len(head) + len(tail), MAGIC) + head + tail[:len(tail) - len(payload)]
                if not is_rvmsg(payload):
                    if len(pre) >= HEAD_CACHE:
                        pre.clear()
                    pre[key] = before
            parts += (before, payload)
        self._delivered(sid, subject, payloads[-1])
        if self._write(b"".join(parts)):
            self.msgs_out += len(payloads)

    # ------------------------------------------------------------ loss

    def data_loss(self, sid: str, subject: str, lost: int, payload: bytes) -> None:
        """The router reports `lost` messages missing before `payload` on `subject`
        (told before its delivery to subscription `sid`)."""
        if self._again(sid, subject, payload):
            return  # reported already for another subscription
        self._loss[subject] = self._loss.get(subject, 0) + lost
        self.lost_in += lost
        now = self._clock()
        if now - self._loss_sent >= LOSS_INTERVAL_S:
            self._send_loss(now)
        elif not self._timer_armed and self._loss_timer is not None:
            self._timer_armed = True
            self._loss_timer(self._loss_sent + LOSS_INTERVAL_S - now)

    def flush_loss(self) -> None:
        """The glue's timer: send the losses summed since the last advisory."""
        self._timer_armed = False
        if self._loss and not self._closing:
            self._send_loss(self._clock())

    def _send_loss(self, now: float) -> None:
        loss, self._loss = self._loss, {}
        self._loss_sent = now
        name = "DATALOSS.INBOUND.BCAST"
        w = (Writer().string("ADV_CLASS", "ERROR").string("ADV_SOURCE", "SYSTEM").string("ADV_NAME", name)
             .string("ADV_DESC", "lost msgs").uint32("lost", sum(loss.values())).uint32("sub_cnt", len(loss)))
        for i, (subject, n) in enumerate(list(loss.items())[:MAX_LOSS_SUBJECTS], 1):
            w.string(f"sub{i}", subject).uint32(f"lost{i}", n)
        w.ipdata("scid", self.host.port.to_bytes(2, "big"))
        self.advisories_sent += 1
        self._send_raw(Writer().subject("sub", DATALOSS_SUBJECT).string("mtype", "A")
                       .message("data", w.finish()).finish())

    # ------------------------------------------------------------ end

    def _on_close(self) -> None:
        self._leave()

    def connection_lost(self) -> None:
        self._leave()
        self._release()

    def _leave(self) -> None:
        bus = self.bus
        if bus is None:
            return
        if self.style == "rv5" and self._state == "data":
            self._session_advisory("STOP")
        for subject in list(self._subs):
            self._listen_advisory(bus, "STOP", subject, "")
        self._subs.clear()
        bus.drop_client(self)
        self.bus = None
        self.host.closed_service(self.service)


def _shown(subject: str) -> str:
    """A subject in a log line: quoted, and cut when long."""
    return repr(subject if len(subject) <= 80 else subject[:80] + "...")


def _payload(env: Envelope) -> bytes:
    """What a `D` message publishes: a nested message whole (its header included),
    a string without its NUL, other data as its bytes."""
    if env.dtype == T_STRING and env.data.endswith(b"\x00"):
        return env.data[:-1]
    return env.data
