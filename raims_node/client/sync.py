"""The blocking Python client of a host's node, over its sbus socket (bridges/ipc.py).

    from raims_node.client import connect
    with connect() as c:                      # the host's node (client/endpoints.py)
        with c.subscribe("rows/*") as sub:     # sbus patterns: '*', trailing '/'
            c.wait_visible("rows/x")           # someone in the network listens
            c.publish("rows/x", b"payload")
            msg = sub.next(timeout=5)          # or: for msg in sub: ...
        c.subscribe("jobs/", callback=handle)  # callbacks run on the reader thread
        reply = c.request("svc/echo", b"hi", timeout=2)

Subjects are sbus routing keys (`a/b/c`, which NATS and Redis clients of the bus's
service see as `a.b.c`); str or bytes. Decisions:
- One reader thread per client reads the socket and hands each message to every local
  subscription whose pattern matches (the server sends one copy per client). The
  server's flood control (`flood=` modes, sent on connect and after every reconnect)
  governs what reaches the client; callbacks run on the reader thread, so a slow
  callback holds the socket and the server's flood control takes over.
- Pending limits (client/pending.py), as the NATS clients have them: an iterator
  subscription queues at most `pending_msgs_limit` messages and `pending_bytes_limit`
  payload bytes (defaults nats-py's, 512 Ki messages and 128 MiB; per client in
  `connect()`, per subscription in `subscribe()`; <= 0 switches one off). A message
  that does not fit is dropped, counted in the subscription's `dropped` and the
  client's `dropped`; one that fits is never dropped, and the queue keeps the order.
  The bytes are given back when the application takes a message out (`next`, iterating).
  Bytes are payload bytes, as in the NATS clients (subjects and objects come on top);
  the limits bound each subscription, not the client. Dropping rather than blocking the
  reader: a blocked reader would stall the client's other subscriptions and its control
  answers (flush, request) for the sake of one subscription nobody reads.
- Slow consumer: the first drop of an episode calls `error_cb(SlowConsumer)` (on the
  reader thread, like callbacks) or, without one, logs a warning on `raims.client`, at
  most one every SLOW_LOG_EVERY_S per client (episodes in between are counted in the
  next line). The episode ends once the application has taken the queue down to half
  of both limits (the low-water mark, client/pending.py); the next overflow is a new
  episode and a new notice.
  nats-py calls its error callback on every drop; nats.go once per episode, as here.
- `request`: sbus has no reply keys (seed: "should be implemented at application
  level"), so the client wraps a request's payload as `REQUEST_MAGIC + reply key + NUL +
  payload`; a client's subscription unwraps it into `Message.reply`, and
  `Message.respond()` publishes to it. Reply keys are `_INBOX/<random>/<n>`.
- `flush()`: `CMSG raims/ping`, answered once the server has handled everything sent
  before. `subscribe()` flushes before it returns (not on the reader thread): a publish
  by any client of the node after it returns is delivered (before, one that another
  client had queued behind its earlier packets was handled first and missed it).
  `wait_visible(subject)`: `CMSG raims/visible` until the node answers 1 (an sbus
  subscriber on the node, or one the network's bloom filters know of).
- Packet size: on connect the client asks the node's ipc `max_packet` (`CMSG
  raims/info`, as a NATS client reads max_payload from INFO), and `publish` (request,
  respond) raises MaxPayload ("Maximum Payload Violation") at once for a larger packet;
  the connection stays usable. A packet the node drops as too large all the same (a
  node that does not say) is reported by the node (`CMSG raims/error`) and goes to
  `error_cb` as MaxPayload, or is logged as a warning. Before, such a packet vanished
  without a word (counted on the node only).
- Reconnect: when the node goes away the reader re-reads the endpoints file and
  reconnects (backoff up to `reconnect_s`), then restores the subscriptions and flood
  modes, and reports the loss once to `error_cb` (else a warning): `SlowConsumerCut`
  when the node cut this client as a slow consumer (with the count it dropped when it
  said so; counted in `cuts`, `cut_dropped`), else `ConnectionLost` (client/errors.py).
  Before, a cut's lost messages went unreported. Calls made meanwhile wait for it; after `reconnect_s` they raise NoNode, and
  once the reader has given up every call raises NoNode at once. `close()` (also in a
  callback) makes calls of other threads that wait for the node raise ClientError.
  Calls that wait for the node's answer (flush, wait_visible, request) raise ClientError
  at once in a callback: the answer would come to the reader thread the callback holds.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from raims_node.bridges import sbus_proto as sp
from raims_node.client.endpoints import Endpoints, NoNode, find
from raims_node.client.errors import (
    SERVER_SHUTDOWN,
    SLOW_CONSUMER,
    ClientError,
    ConnectionLost,
    MaxPayload,
    SlowConsumer,
    SlowConsumerCut,
    node_error,
)
from raims_node.client.hello import RECV_MAX, ask_info, node_pid
from raims_node.client.pending import (
    DEFAULT_PENDING_BYTES_LIMIT,
    DEFAULT_PENDING_MSGS_LIMIT,
    Limited,
    Pending,
)
from raims_node.subject import Pattern, compile_pattern, subject_text

REQUEST_MAGIC = b"\x00raims-req\x00"
CTL_PING = b"raims/ping"
CTL_VISIBLE = b"raims/visible"
CTL_ERROR = b"raims/error"
DEFAULT_RECONNECT_S = 30.0
SLOW_LOG_EVERY_S = 10.0

log = logging.getLogger("raims.client")


def _b(text: str | bytes) -> bytes:
    return text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text


@dataclass(frozen=True, slots=True)
class Message:
    subject: str
    payload: bytes
    reply: str | None = None
    client: Client | None = None

    def respond(self, payload: bytes) -> None:
        if self.reply is None or self.client is None:
            raise ClientError("message has no reply subject")
        self.client.publish(self.reply, payload)


def _own_cred_fields(pattern: bytes) -> bytes:
    """A secret-key pattern with its empty fields filled with this process's credentials,
    as the server fills them (seed 001: empty fields "match the client's credentials"), so
    that the messages it delivers match here too; any other pattern as it is."""
    if not pattern.startswith(sp.CRED_PREFIX):
        return pattern
    try:
        return sp.cred_pattern(pattern, sp.Creds(os.getgid(), os.getuid(), os.getpid()))
    except sp.CredRefused:
        return pattern


class Subscription(Limited):
    def __init__(self, client: Client, pattern: bytes, callback: Callable[[Message], Any] | None,
                 pending: Pending | None = None) -> None:
        self.client = client
        self.pattern = pattern
        self.compiled: Pattern = compile_pattern(subject_text(_own_cred_fields(pattern)), "sbus")
        self.callback = callback
        # holds at most pending.msgs_limit messages, and the None that ends the iteration
        self.queue: queue.SimpleQueue[Message | None] = queue.SimpleQueue()
        self.pending = pending or Pending()
        self.active = True
        self.on_end: Callable[[], None] | None = None  # the reader stopped for good (client/aio.py)

    def _offer(self, msg: Message) -> None:
        """The reader thread's delivery: queued if it fits, else dropped and counted."""
        if self._admit(msg, self.client):
            self.queue.put(msg)

    def next(self, timeout: float | None = None) -> Message:
        """The next message; ClientError on timeout or once unsubscribed."""
        try:
            msg = self._take(self.queue.get(timeout=timeout))
        except queue.Empty:
            raise ClientError(f"no message on {self.pattern!r} within {timeout} s") from None
        if msg is None:
            self.queue.put(None)  # the end stays for the next call
            raise ClientError("subscription closed")
        return msg

    def __iter__(self) -> Iterator[Message]:
        while True:
            msg = self._take(self.queue.get())
            if msg is None:
                self.queue.put(None)  # the end stays for the next call
                return
            yield msg

    def unsubscribe(self) -> None:
        self.client._unsubscribe(self)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.unsubscribe()


class Client:
    def __init__(self, node: str | None = None, path: str | None = None, flood: tuple[str, ...] = (),
                 reconnect_s: float = DEFAULT_RECONNECT_S, *,
                 pending_msgs_limit: int = DEFAULT_PENDING_MSGS_LIMIT,
                 pending_bytes_limit: int = DEFAULT_PENDING_BYTES_LIMIT,
                 error_cb: Callable[[ClientError], Any] | None = None) -> None:
        self._node, self._path = node, path
        self.flood = tuple(flood)  # e.g. ("blocking/hard/block",): sent on every connect
        self.reconnect_s = reconnect_s
        self.pending_msgs_limit, self.pending_bytes_limit = pending_msgs_limit, pending_bytes_limit
        self.error_cb = error_cb
        self.dropped = 0  # by all the client's subscriptions, since it started
        self.cuts = self.cut_dropped = 0  # slow-consumer cuts by the node, messages it said it dropped
        self._cut_dropped: int | None = None  # the node's notice of a cut, until the report
        self._shutdown_said = False  # the node's notice that its bus stops, until the report
        self._node_pid: int | None = None  # the node's process (SO_PEERCRED) on the connection
        self._slow_logged_at: float | None = None
        self._slow_unlogged = 0
        self.endpoints: Endpoints | None = None
        self.max_packet: int | None = None  # the node's, asked on connect (None: it did not say)
        self._subs: list[Subscription] = []
        self._lock = threading.Lock()
        self._connected = threading.Event()
        self._closed = False
        self._gone = False  # the reader gave up reconnecting: calls fail at once
        # control answers awaited, by key NUL answer; None put in: reconnected, ask again
        self._waiters: dict[bytes, list[queue.SimpleQueue[bytes | None]]] = {}
        self._inbox = b"_INBOX/%s" % os.urandom(8).hex().encode()
        self._seq = 0
        self._sock = self._open()
        self._connected.set()
        self._reader = threading.Thread(target=self._read_loop, name="raims-client", daemon=True)
        self._reader.start()

    # ------------------------------------------------------------ connection

    def _open(self) -> socket.socket:
        path = self._path
        if path is None:
            self.endpoints = find(self._node)
            if not self.endpoints.sbus:
                raise NoNode(f"node {self.endpoints.node!r} runs no sbus (type: ipc) transport")
            path = self.endpoints.sbus[0]
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            s.connect(path)
        except OSError as exc:
            s.close()
            raise NoNode(f"cannot connect to the node's sbus {path}: {exc.strerror or exc}") from None
        self._node_pid = node_pid(s)
        try:
            self.max_packet = ask_info(s)
        except OSError as exc:
            s.close()
            raise NoNode(f"the node's sbus {path} did not answer: {exc.strerror or exc}") from None
        for mode in self.flood:
            s.send(sp.encode_cmsg(_b(mode)))
        for sub in list(self._subs):
            s.send(sp.encode_sub(sub.pattern))
        return s

    def _reconnect(self) -> bool:
        deadline = time.monotonic() + self.reconnect_s
        delay = 0.05
        while not self._closed and time.monotonic() < deadline:
            try:
                self._sock = self._open()
                self._connected.set()
                self._wake_waiters()  # their questions went to the node that is gone
                return True
            except (NoNode, OSError):
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
        return False

    def _read_loop(self) -> None:
        while not self._closed:
            try:
                packet = self._sock.recv(max(RECV_MAX, (self.max_packet or 0) + 1))
            except OSError:
                packet = b""
            if packet:
                self._dispatch(packet)
                continue
            self._connected.clear()
            if self._closed:
                break
            node_pid = self._node_pid
            back = self._reconnect()
            if not self._closed:
                self._lost(node_pid, back)
            if not back:
                break
        self._connected.clear()
        self._gone = True
        self._wake_waiters()
        with self._lock:
            subs = list(self._subs)
        for sub in subs:
            sub.queue.put(None)
            if sub.on_end is not None:
                try:
                    sub.on_end()
                except Exception:
                    log.exception("end of %r", sub.pattern)

    def _wake_waiters(self) -> None:
        """Every control question waiting for an answer asks again (None), which raises
        once the client is closed or its connection is gone."""
        with self._lock:
            waiting = [w for lst in self._waiters.values() for w in lst]
        for w in waiting:
            w.put(None)

    def _dispatch(self, packet: bytes) -> None:
        try:
            event = sp.parse(packet)
        except sp.SbusProtocolError:
            return
        if isinstance(event, sp.Cmsg):
            if event.key == CTL_ERROR:
                self._node_error(event.payload or b"")
                return
            key = event.key + b"\x00" + (event.payload or b"")
            with self._lock:
                waiters = self._waiters.pop(key, None)
            for w in waiters or ():
                w.put(event.payload or b"")
            return
        if not isinstance(event, sp.Msg):
            return
        payload, reply = event.payload, None
        if payload.startswith(REQUEST_MAGIC):
            rest = payload[len(REQUEST_MAGIC):]
            key, _, payload = rest.partition(b"\x00")
            reply = subject_text(key)
        text = subject_text(event.key)
        msg = Message(text, payload, reply, self)
        with self._lock:
            subs = [s for s in self._subs if s.compiled.matches(text)]
        for sub in subs:
            if sub.callback is not None:
                try:
                    sub.callback(msg)
                except Exception:  # a callback's bug must not stop the reader
                    log.exception("callback on %r failed", sub.pattern)
            else:
                sub._offer(msg)

    def _dropped(self, owner: object, pattern: bytes, subject: str, pending: Pending, notice: bool) -> None:
        """A subscription dropped a message (reader thread); the first of an episode is
        reported to error_cb, else logged at most every SLOW_LOG_EVERY_S."""
        with self._lock:
            self.dropped += 1
        if not notice:
            return
        err = SlowConsumer(owner, pattern, subject, pending)
        if self._to_error_cb(err):
            return
        now = time.monotonic()
        if self._slow_logged_at is not None and now - self._slow_logged_at < SLOW_LOG_EVERY_S:
            self._slow_unlogged += 1
            return
        more = f" ({self._slow_unlogged} more slow-consumer episodes not logged)" if self._slow_unlogged else ""
        self._slow_logged_at, self._slow_unlogged = now, 0
        log.warning("%s%s", err, more)

    def _node_error(self, payload: bytes) -> None:
        """The node's `raims/error` (reader thread): to error_cb, else a warning; a
        slow-consumer cut's is kept for the report after the close (`_lost`)."""
        what, _, rest = payload.partition(b"\x00")
        if what == SLOW_CONSUMER:
            with contextlib.suppress(ValueError):
                self._cut_dropped = int(rest)
            return
        if what == SERVER_SHUTDOWN:  # its bus stops: the close that follows is no cut
            self._shutdown_said = True
            return
        err = node_error(payload)
        if not self._to_error_cb(err):
            log.warning("%s", err)

    def _lost(self, node_pid: int | None, reconnected: bool) -> None:
        """Report a lost connection once (errors.py): a cut when the node said so or is
        still the one we reconnected to, else the node's going away."""
        dropped, self._cut_dropped = self._cut_dropped, None
        shutdown, self._shutdown_said = self._shutdown_said, False
        err: ConnectionLost
        if shutdown:
            err = ConnectionLost("the node stopped its bus (Server Shutdown)", reconnected)
        elif dropped is not None or (reconnected and node_pid is not None and node_pid == self._node_pid):
            err = SlowConsumerCut(reconnected, dropped)
            with self._lock:
                self.cuts += 1
                self.cut_dropped += dropped or 0
        else:
            err = ConnectionLost("the connection to the node was lost (the node went away)", reconnected)
        if not self._to_error_cb(err):
            log.warning("%s", err)

    def _to_error_cb(self, err: ClientError) -> bool:
        """`err` to error_cb (reader thread); False when there is none."""
        if self.error_cb is None:
            return False
        try:
            self.error_cb(err)
        except Exception:
            log.exception("error callback failed")
        return True

    def _check_open(self) -> None:
        if self._closed:
            raise ClientError("client is closed")
        if self._gone:
            raise NoNode(f"connection to the node lost and not back within reconnect_s ({self.reconnect_s} s)")

    def _wait_connected(self) -> None:
        """Wait for the connection (a reconnect under way) up to reconnect_s; raise at
        once when the client is closed or the reader gives up meanwhile."""
        deadline = time.monotonic() + self.reconnect_s
        while not self._connected.wait(min(0.1, max(0.0, deadline - time.monotonic()))):
            self._check_open()
            if time.monotonic() >= deadline:
                raise NoNode(f"no node for {self.reconnect_s} s")
        self._check_open()

    def _send(self, packet: bytes) -> None:
        self._check_open()
        if self.max_packet is not None and len(packet) > self.max_packet:
            raise MaxPayload(f"Maximum Payload Violation: a packet of {len(packet)} bytes is larger than "
                             f"the node's max_packet ({self.max_packet} bytes)")
        for _ in range(2):
            self._wait_connected()
            try:
                self._sock.send(packet)
                return
            except OSError as exc:
                self._check_open()  # closed by another thread meanwhile
                if exc.errno == errno.EMSGSIZE:  # the connection is fine: the packet is not
                    raise ClientError(f"a packet of {len(packet)} bytes is larger than the sbus socket "
                                      f"takes (the node's max_packet, default 192 KiB)") from None
                self._connected.clear()
                time.sleep(0.01)
        raise NoNode("connection to the node lost")

    # ------------------------------------------------------------ API

    def publish(self, subject: str | bytes, payload: bytes = b"") -> None:
        self._send(sp.encode_msg(_b(subject), payload))

    def subscribe(self, pattern: str | bytes, callback: Callable[[Message], Any] | None = None, *,
                  pending_msgs_limit: int | None = None, pending_bytes_limit: int | None = None,
                  confirm: bool = True, timeout: float = 10.0) -> Subscription:
        """Messages on `pattern` queued for `next()` / iteration (within the pending limits,
        the client's unless given), or handed to `callback` on the reader thread.

        Returns once the node has the subscription (a `flush`, ClientError after
        `timeout`): whatever any publisher on this node sends after it returns is
        delivered. Not so from the reader thread (a callback), which cannot wait for the
        node's answer it reads itself, nor with `confirm=False`. Publishers on other nodes
        learn of it later: `wait_visible` there."""
        sub = Subscription(self, _b(pattern), callback, self._pending(pending_msgs_limit, pending_bytes_limit))
        with self._lock:
            self._subs.append(sub)
        self._send(sp.encode_sub(sub.pattern))
        if confirm and threading.current_thread() is not self._reader:
            self.flush(timeout)
        return sub

    def _pending(self, msgs_limit: int | None, bytes_limit: int | None) -> Pending:
        return Pending(self.pending_msgs_limit if msgs_limit is None else msgs_limit,
                       self.pending_bytes_limit if bytes_limit is None else bytes_limit)

    def _unsubscribe(self, sub: Subscription) -> None:
        if not sub.active:
            return
        sub.active = False
        with self._lock:
            self._subs.remove(sub)
        sub.queue.put(None)
        if not self._closed:
            with contextlib.suppress(NoNode):
                self._send(sp.encode_unsub(sub.pattern))

    def _control(self, key: bytes, payload: bytes, answer: bytes, timeout: float) -> bytes:
        """Ask the node and wait for `answer`; asked again after a reconnect (the node
        that had the question is gone: a flush or subscribe across a restart returns)."""
        self._not_in_callback("flush" if key == CTL_PING else key.decode())
        w: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        wkey = key + b"\x00" + answer
        with self._lock:
            self._waiters.setdefault(wkey, []).append(w)
        deadline = time.monotonic() + timeout
        try:
            for _ in range(1000):  # reconnects within one call
                self._send(sp.encode_cmsg(key, payload))
                got = w.get(timeout=max(0.0, deadline - time.monotonic()))
                if got is not None:
                    return got
            raise queue.Empty
        except queue.Empty:
            raise ClientError(f"no answer to {key.decode()} within {timeout} s") from None
        finally:
            self._forget_waiter(wkey, w)

    def _not_in_callback(self, what: str) -> None:
        if threading.current_thread() is self._reader:
            raise ClientError(f"{what} in a callback: the answer would come to the reader thread the "
                              "callback holds (publish from the callback, or wait in another thread)")

    def _forget_waiter(self, wkey: bytes, w: queue.SimpleQueue[bytes | None]) -> None:
        with self._lock:
            lst = self._waiters.get(wkey)
            if lst is not None and w in lst:
                lst.remove(w)
                if not lst:
                    del self._waiters[wkey]

    def flush(self, timeout: float = 10.0) -> None:
        """Return once the node has handled everything this client sent before."""
        with self._lock:
            self._seq += 1
            token = b"%d" % self._seq
        self._control(CTL_PING, token, token, timeout)

    def visible(self, subject: str | bytes, timeout: float = 10.0) -> bool:
        """Whether a message on `subject` would reach a subscriber now."""
        key = _b(subject)
        try:
            self._control(CTL_VISIBLE, key, key + b"\x001", min(timeout, 1.0))
            return True
        except ClientError:
            return False

    def wait_visible(self, subject: str | bytes, timeout: float = 30.0) -> None:
        """Return once the network knows of a subscriber for `subject` (so a stage does
        not publish into the void); ClientError after `timeout`."""
        self._not_in_callback("wait_visible")
        key = _b(subject)
        deadline = time.monotonic() + timeout
        delay = 0.02
        while True:
            w: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
            yes, no = CTL_VISIBLE + b"\x00" + key + b"\x001", CTL_VISIBLE + b"\x00" + key + b"\x000"
            with self._lock:
                self._waiters.setdefault(yes, []).append(w)
                self._waiters.setdefault(no, []).append(w)
            self._send(sp.encode_cmsg(CTL_VISIBLE, key))
            try:
                answer = w.get(timeout=max(0.01, deadline - time.monotonic())) or b""  # None: ask again
            except queue.Empty:
                answer = b""
            for k in (yes, no):
                self._forget_waiter(k, w)
            if answer.endswith(b"\x001"):
                return
            if time.monotonic() >= deadline:
                raise ClientError(f"no subscriber for {subject!r} within {timeout} s")
            time.sleep(delay)
            delay = min(delay * 2, 0.5)

    def request(self, subject: str | bytes, payload: bytes = b"", timeout: float = 10.0) -> Message:
        """Publish a request and wait for the first reply (module docstring)."""
        self._not_in_callback("request")
        with self._lock:
            self._seq += 1
            reply = self._inbox + b"/%d" % self._seq
        with self.subscribe(reply, timeout=timeout) as sub:  # in place before the request goes
            self._send(sp.encode_msg(_b(subject), REQUEST_MAGIC + reply + b"\x00" + payload))
            return sub.next(timeout)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        self._wake_waiters()  # a flush or request of another thread raises now, not at its timeout
        if threading.current_thread() is not self._reader:  # close() in a callback: the reader ends after it
            self._reader.join(2)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(node: str | None = None, path: str | None = None, flood: tuple[str, ...] = (),
            reconnect_s: float = DEFAULT_RECONNECT_S, *,
            pending_msgs_limit: int = DEFAULT_PENDING_MSGS_LIMIT,
            pending_bytes_limit: int = DEFAULT_PENDING_BYTES_LIMIT,
            error_cb: Callable[[ClientError], Any] | None = None) -> Client:
    """A client of this host's node (`node` or `path` pick one; endpoints.find); the
    pending limits are its subscriptions' defaults, `error_cb` hears of slow consumers."""
    return Client(node, path, flood, reconnect_s, pending_msgs_limit=pending_msgs_limit,
                  pending_bytes_limit=pending_bytes_limit, error_cb=error_cb)
