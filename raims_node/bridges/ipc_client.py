"""One client of the sbus bus (bridges/ipc.py): its socket, credentials, patterns,
pending deliveries and flood-control outbox; reading in batches and sending in batches
(the speed notes of ipc.py's docstring).
"""

from __future__ import annotations

import errno
import logging
import socket
import struct
from typing import TYPE_CHECKING, Protocol

from raims_node.bridges import mmsg
from raims_node.bridges import sbus_proto as sp

if TYPE_CHECKING:
    import asyncio

    from raims_node.bridges.gate import BridgeSession
    from raims_node.bridges.glue import HubView

log = logging.getLogger("raims.bridge.ipc")

READ_BURST = 1024  # packets per readable wakeup at most
READ_BATCH = 128  # packets per recvmmsg
SEND_BATCH = 256  # packets per sendmmsg
_PEERCRED = struct.Struct("3i")  # pid, uid, gid
CTL_ERROR = b"raims/error"
MAX_KEY_SHOWN = 256  # of a dropped message's routing key, in its raims/error
SLOW_CONSUMER = b"Slow Consumer"  # nats-server's words (-ERR 'Slow Consumer')
SERVER_SHUTDOWN = b"Server Shutdown"  # nats-server's closed reason: the bus stops (console `shutdown`, exit)
CUT_LINGER_S = 1.0  # a cut client's last word waits this long for room in its socket (NATS: 1 s)


class Matcher(Protocol):
    """A compiled sbus pattern (subject.Pattern, or ipc_shard.ShardMatch for `_SHARD/`)."""

    def matches(self, subject: str) -> bool: ...


class QueueLimits(Protocol):
    @property
    def max_queue_bytes(self) -> int: ...

    @property
    def max_queue_packets(self) -> int: ...

    @property
    def max_packet(self) -> int: ...


class ClientServer(Protocol):
    """What a client sees of its server (ipc.IpcServer)."""

    name: str
    hub: HubView
    loop: asyncio.AbstractEventLoop
    rx: mmsg.Receiver | None
    tx: mmsg.Sender | None
    rbuf: bytearray
    rview: memoryview
    counters: dict[str, int]
    slow_consumers: int
    lingering: set[IpcClient]  # cut clients whose last packet waits for room (IpcClient.close)

    @property
    def limits(self) -> QueueLimits: ...

    def packets(self, client: IpcClient, packets: list[bytes | None]) -> None: ...

    def flush(self) -> None: ...

    def dirty(self, client: IpcClient) -> None: ...

    def dropped(self, client: IpcClient) -> None: ...


class IpcClient:
    """One connected sbus client: its socket, credentials, patterns and outbox (a
    gate.GateConn of the hub's FlowGate)."""

    session: BridgeSession | None = None  # no bridge session: the outbox has its own limits

    def __init__(self, server: ClientServer, sock: socket.socket, client_id: int) -> None:
        self.server = server
        self.sock = sock
        self.fd = sock.fileno()
        self.client_id = client_id
        pid, uid, gid = _PEERCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))
        self.creds = sp.Creds(gid, uid, pid)
        self.patterns: list[tuple[bytes, Matcher]] = []  # as the client wrote them (UNSUB), compiled
        s = server.limits
        self.outbox = sp.Outbox(s.max_queue_bytes, s.max_queue_packets)
        self.msgs_in = self.msgs_out = self.bytes_in = self.bytes_out = 0
        self.wr_peak = 0  # the most the outbox held (show buffers wmax)
        self.pending: list[bytes] = []  # deliveries sent at the server's next flush
        self.closed = False
        self._reading = False
        self._writing = False
        self._holding = False
        self._last = b""  # a cut's notice, written before the close (`close`)
        self._linger: asyncio.TimerHandle | None = None

    # ------------------------------------------------------------ reading

    def update_reading(self) -> None:
        """Read unless a blocked receiver holds the publishers or a consumer it feeds stalls it (FlowGate)."""
        gate = self.server.hub.gate
        want = not self.closed and not gate.closed and not gate.stalled(self)
        if want != self._reading:
            self._reading = want
            loop = self.server.loop
            if want:
                loop.add_reader(self.fd, self._readable)
            else:
                loop.remove_reader(self.fd)

    def _readable(self) -> None:
        """Take every pending packet (up to READ_BURST), hand them to the server in
        batches, and send what they delivered once per batch (module docstring)."""
        server = self.server
        rx = server.rx
        for _ in range(READ_BURST // READ_BATCH):
            if not self._reading:
                break
            try:
                packets = self._recv_batch(rx) if rx is not None else self._recv_plain()
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                self.close()
                break
            gate = server.hub.gate
            gate.producer = self  # a NATS / Redis consumer it buries stalls it (gate.py)
            try:
                server.packets(self, packets)
            finally:
                gate.producer = None
            server.flush()
            if len(packets) < READ_BATCH:
                break
        server.hub.gate.flush()

    def _recv_batch(self, rx: mmsg.Receiver) -> list[bytes | None]:
        """The pending packets (None: too large), through recvmmsg; stops at end-of-file."""
        sizes = rx.recv(self.fd)
        mem, slot, limit = rx.mem, rx.slot, self.server.limits.max_packet
        packets: list[bytes | None] = []
        off = 0
        for n in sizes:
            if n == 0:
                packets.append(b"")
                break
            packets.append(mem[off:off + n] if n <= limit else None)
            self.bytes_in += n
            off += slot
        self.msgs_in += len(packets) - (packets[-1] == b"" if packets else 0)
        return packets

    def _recv_plain(self) -> list[bytes | None]:
        """`_recv_batch` one `recv_into` at a time (no recvmmsg on this platform)."""
        server = self.server
        buf, view, limit = server.rbuf, server.rview, server.limits.max_packet
        packets: list[bytes | None] = []
        for _ in range(READ_BATCH):
            try:
                n = self.sock.recv_into(buf)
            except (BlockingIOError, InterruptedError):
                if packets:
                    break
                raise
            if n == 0:
                packets.append(b"")
                break
            self.msgs_in += 1
            self.bytes_in += n
            packets.append(bytes(view[:n]) if n <= limit else None)
        return packets

    @property
    def buffered(self) -> int:
        """Bytes held for this client: deliveries pending and queued in the outbox."""
        return self.outbox.bytes + sum(map(len, self.pending))

    # ------------------------------------------------------------ writing

    def send(self, packet: bytes) -> None:
        """Deliver `packet`: into the batch the server sends at its next `flush`, or into
        the outbox behind the packets already waiting there."""
        if self._writing or self.closed:  # the outbox holds packets (or nothing goes)
            if not self.closed:
                self._queue(packet, False)
            return
        if not self.pending:
            self.server.dirty(self)
        self.pending.append(packet)

    def send_many(self, packets: list[bytes]) -> None:
        """`send` each of `packets`, in order."""
        if self._writing or self.closed:
            if not self.closed:
                self._queue_all(packets)
            return
        if not self.pending:
            self.server.dirty(self)
        self.pending.extend(packets)

    def answer(self, packet: bytes) -> None:
        """A reply to the client's own control message: after what was delivered before
        it, and queued whatever the flood modes."""
        if self.closed:
            return
        if self.pending:
            self.flush()
        if not self.outbox:
            try:
                self.sock.send(packet)
                self.msgs_out += 1
                self.bytes_out += len(packet)
                return
            except (BlockingIOError, InterruptedError):
                pass
            except OSError as exc:
                self._send_failed(exc)
                return
        self._queue(packet, True)

    def flush(self) -> None:
        """Send the pending batch: what the socket takes now goes, the rest is queued."""
        pending, self.pending = self.pending, []
        if self.closed or not pending:
            return
        done, total = 0, len(pending)
        if not self.outbox:
            tx = self.server.tx
            while done < total:
                try:
                    if tx is not None:
                        k = tx.send(self.fd, pending[done:] if done else pending)
                    else:
                        self.sock.send(pending[done])
                        k = 1
                except (BlockingIOError, InterruptedError):
                    break
                except OSError as exc:
                    self._send_failed(exc, pending[done])
                    if self.closed:
                        return
                    done += 1  # EMSGSIZE: that packet is dropped (counted), the next tried
                    continue
                if k == 0:
                    break
                self.msgs_out += k
                self.bytes_out += sum(map(len, pending[done:done + k])) if k < total else sum(map(len, pending))
                done += k
        if done < total:
            self._queue_all(pending[done:] if done else pending)

    def _queue_all(self, packets: list[bytes]) -> None:
        """`_queue` each of `packets` (data, in order)."""
        box = self.outbox
        before = box.packets + box.discarded
        verdict = box.offer_all(packets)
        self._offered(verdict, len(packets) - (box.packets + box.discarded - before))

    def _misbehaving(self, refused: int) -> None:
        """Cut as a slow consumer: the queued deliveries and the `refused` ones are
        dropped, and the client told so (`CMSG raims/error\0Slow Consumer\0N`, N the
        messages dropped) behind what its socket already holds, before the close."""
        self.server.slow_consumers += 1
        lost = self.outbox.packets + refused + len(self.pending)
        log.info("%s client %d closed: cannot deliver (blocking/%s/%s), %d messages dropped", self.server.name,
                 self.client_id, self.outbox.soft, self.outbox.hard, lost)
        self.close(sp.encode_cmsg(CTL_ERROR, b"%s\x00%d" % (SLOW_CONSUMER, lost)))

    def _queue(self, packet: bytes, answer: bool) -> None:
        """Into the outbox (the socket refused it or packets wait there before it)."""
        if answer:
            self.outbox.force(packet)
            verdict: sp.Verdict = "queued"
        else:
            verdict = self.outbox.offer(packet)
        self._offered(verdict, 1)

    def _offered(self, verdict: sp.Verdict, refused: int) -> None:
        """After the outbox took (or refused) packets: write when writable, or close
        (`refused`: the packets offered that it neither took nor discarded)."""
        if verdict == "error":
            self._misbehaving(refused)
            return
        if self.outbox.bytes > self.wr_peak:
            self.wr_peak = self.outbox.bytes
        if verdict == "queued" and not self._writing:
            self._writing = True
            self.server.loop.add_writer(self.fd, self._writable)
        self._update_holding()

    def _send_failed(self, exc: OSError, packet: bytes | None = None) -> None:
        """EMSGSIZE: `packet` is dropped, counted, and (a delivery) the client told in
        its place: `CMSG raims/error\0Message Too Large\0KEY\0SIZE` (a message from the
        network larger than its socket takes: a NATS client may publish 1 MiB); any
        other error closes the client."""
        if exc.errno != errno.EMSGSIZE:
            self.close()
            return
        self.server.counters["too_large"] += 1
        if packet is not None and packet.startswith(sp.VERB_MSG):
            key = packet[4:packet.find(sp.NUL, 4)][:MAX_KEY_SHOWN]
            self.answer(sp.encode_cmsg(CTL_ERROR, b"Message Too Large\x00%s\x00%d" % (key, len(packet))))

    def _writable(self) -> None:
        outbox, tx = self.outbox, self.server.tx
        while outbox:
            batch = outbox.pop_batch(SEND_BATCH if tx is not None else 1)
            try:
                if tx is not None:
                    k = tx.send(self.fd, batch)
                else:
                    self.sock.send(batch[0])
                    k = 1
            except (BlockingIOError, InterruptedError):
                k = 0
            except OSError as exc:
                outbox.unpop_batch(batch[1:])
                self._send_failed(exc, batch[0])  # EMSGSIZE: the first is dropped (counted), else closed
                if self.closed:
                    return
                continue
            self.msgs_out += k
            self.bytes_out += sum(map(len, batch[:k]))
            if k < len(batch):
                outbox.unpop_batch(batch[k:])
                break
        if not outbox and self._writing:
            self._writing = False
            self.server.loop.remove_writer(self.fd)
        self._update_holding()

    def _update_holding(self) -> None:
        holding = self.outbox.holding
        if holding != self._holding:
            self._holding = holding
            self.server.hub.gate.congested(self, holding)

    def control(self, key: bytes) -> bool:
        changed = self.outbox.control(key)
        if changed:
            self._update_holding()
        return changed

    # ------------------------------------------------------------ end

    def close(self, last: bytes | None = None) -> None:
        """Leave the bus now; `last` (a cut's notice) is written first if the socket
        takes it within CUT_LINGER_S, the client's unread packets before it."""
        if self.closed:
            return
        self.closed = True
        loop = self.server.loop
        if self._reading:
            loop.remove_reader(self.fd)
            self._reading = False
        if self._writing:
            loop.remove_writer(self.fd)
            self._writing = False
        self.pending = []
        self.server.dropped(self)
        if last is not None:
            self.outbox = sp.Outbox(self.outbox.max_bytes, self.outbox.max_packets)  # the backlog's memory goes now
            self._last = last
            if not self._send_last():
                self.server.lingering.add(self)
                loop.add_writer(self.fd, self._send_last)
                self._linger = loop.call_later(CUT_LINGER_S, self.end)
                return
        self.sock.close()

    def _send_last(self) -> bool:
        """Write the last packet; False while the socket has no room (EAGAIN)."""
        try:
            self.sock.send(self._last)
            self.msgs_out += 1
            self.bytes_out += len(self._last)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            pass
        if self in self.server.lingering:
            self.end()
        return True

    def end(self) -> None:
        """Close the socket of a client that lingered after its cut."""
        if self.sock.fileno() < 0:
            return
        self.server.lingering.discard(self)
        self.server.loop.remove_writer(self.fd)
        if self._linger is not None:
            self._linger.cancel()
        self.sock.close()
