"""The producer's live stream to consumers, and consumers (seed 004 section 1.2).

A `Producer` binds the datagram socket `~.socket` in the log directory. A consumer binds
`<name>.socket` and sends a request (`b"NBMQ" + name`); from then on each record the
producer logs is sent to it as one numbered packet:

    b"NBMP", u64 packet number (per consumer, from 1), u32 file number, u64 offset of the
    record, u64 offset of the next record, then the record bytes (empty when the record
    is too big for a datagram: the consumer reads it from the log)

A consumer that is slow (its socket queue full) misses packets; the producer never
waits for it. The consumer notices a missed packet by its number, or a record that does
not start where its cursor is, and reads the log from its cursor instead, then takes
packets again once they line up (the seed's "the UDP packets are numbered to enable the
detection of a missed packet and include the offset within the message log where the
next message will be stored"). Either side runs without the other: a consumer without
a producer polls the log (`poll`), a producer without consumers just logs. Consumers
repeat their request every `REQUEST_EVERY` seconds, which also re-registers them with a
restarted producer; a consumer whose socket is gone is forgotten on the next send.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import socket
import struct
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from raims_node.msglog import paths
from raims_node.msglog.cursor import Cursor
from raims_node.msglog.errors import MsgLogError
from raims_node.msglog.log import MessageLog, Position
from raims_node.msglog.reader import LogReader
from raims_node.msglog.record import HEAD, HEAD_SIZE, Record

REQUEST: Final = b"NBMQ"
PACKET: Final = struct.Struct("<4sQIQQ")
PACKET_MAGIC: Final = b"NBMP"
MAX_DATAGRAM: Final = 64 * 1024
REQUEST_EVERY: Final = 1.0


class Producer:
    """Sends each record its log appends to the consumers that asked (seed `~.socket`)."""

    def __init__(self, log: MessageLog) -> None:
        self.log = log
        self.path = log.directory / paths.PRODUCER_SOCKET
        self.consumers: dict[str, list[int]] = {}  # name -> [next packet number]
        self.sent = 0
        self.missed = 0
        self.bad_requests = 0  # datagrams on ~.socket that are no request of a plain name
        self._sock: socket.socket | None = None

    async def start(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.setblocking(False)
        sock.bind(str(self.path))
        self._sock = sock
        asyncio.get_running_loop().add_reader(sock.fileno(), self._on_request)
        self.log.listeners.append(self._on_append)

    def _on_request(self) -> None:
        assert self._sock is not None
        while True:
            try:
                data = self._sock.recv(512)
            except BlockingIOError:
                return
            if data.startswith(REQUEST):
                try:
                    name = paths.check_name("consumer name", data[4:].decode())
                except (UnicodeDecodeError, MsgLogError):  # anyone may write to the socket
                    self.bad_requests += 1
                    continue
                self.consumers.setdefault(name, [1])

    def _on_append(self, pos: Position, raw: bytes, origin: int, mid: int) -> None:
        if not self.consumers or self._sock is None:
            return
        body = raw if len(raw) + PACKET.size <= MAX_DATAGRAM else b""
        for name, seq in list(self.consumers.items()):
            packet = (
                PACKET.pack(PACKET_MAGIC, seq[0], pos.file_no, pos.offset, pos.offset + len(raw))
                + body
            )
            seq[0] += 1
            try:
                self._sock.sendto(packet, str(paths.consumer_socket(self.log.directory, name)))
                self.sent += 1
            except BlockingIOError:
                self.missed += 1  # the consumer is behind: it will notice and read the log
            except OSError:
                del self.consumers[name]  # gone; it re-requests when it comes back

    def close(self) -> None:
        if self._on_append in self.log.listeners:
            self.log.listeners.remove(self._on_append)
        if self._sock is not None:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(self._sock.fileno())
            self._sock.close()
            self._sock = None
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)


class Consumer:
    """Reads a log from its cursor on, by polling or from the producer's live stream."""

    def __init__(self, directory: Path, name: str, sync_cursor: bool = False) -> None:
        self.directory = directory
        self.name = paths.check_name("consumer name", name)
        # the name identifies one consumer (seed 3.1.2): a second one of the name is refused
        # (both read every message and shared, and overwrote, one cursor)
        self._lock = os.open(paths.consumer_lock(directory, name), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self.cursor = Cursor(directory, name, sync=sync_cursor)
            self.reader = LogReader(directory, self.cursor.load(), saved_ns=self.cursor.saved_ns)
        except BlockingIOError:
            os.close(self._lock)
            raise MsgLogError(f"consumer {name!r} of {directory} is running already") from None
        except BaseException:
            os.close(self._lock)
            raise
        self.from_packets = 0
        self.from_log = 0
        self.gaps = 0

    def poll(self, limit: int | None = None) -> list[Record]:
        """Every record after the cursor (at most `limit`), now; the cursor moves past
        them and no further (`consume --count N` took everything before)."""
        out: list[Record] = []
        while limit is None or len(out) < limit:
            got = self.reader.records()
            if not got:
                break
            if limit is not None and len(out) + len(got) > limit:
                keep = limit - len(out)
                out.extend(r for _, r in got[:keep])
                self.reader.pos = got[keep][0]  # the first record not taken is read next
                break
            out.extend(r for _, r in got)
        if out:
            self.from_log += len(out)
            self.cursor.save(self.reader.pos)
        return out

    async def stream(
        self, deliver: Callable[[Record], None], count: int | None = None, idle: float | None = None
    ) -> int:
        """Deliver records as the producer logs them until `count` were delivered (or
        `idle` seconds pass with none); returns how many were delivered."""
        sock_path = paths.consumer_socket(self.directory, self.name)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(sock_path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.setblocking(False)
        sock.bind(str(sock_path))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        loop = asyncio.get_running_loop()
        producer = str(self.directory / paths.PRODUCER_SOCKET)
        n = 0
        expected = 0
        last_request = 0.0
        last_message = time.monotonic()
        try:
            while count is None or n < count:
                now = time.monotonic()
                if now - last_request >= REQUEST_EVERY:
                    last_request = now
                    with contextlib.suppress(OSError):
                        sock.sendto(REQUEST + self.name.encode(), producer)
                    for rec in self.poll(None if count is None else count - n):  # catch up (and cover a silent producer)
                        deliver(rec)
                        n += 1
                        last_message = now
                if idle is not None and now - last_message > idle:
                    break
                try:
                    packet = await asyncio.wait_for(
                        loop.sock_recv(sock, MAX_DATAGRAM), REQUEST_EVERY / 4
                    )
                except TimeoutError:
                    continue
                if len(packet) < PACKET.size:  # not the producer's (anyone may write to the socket)
                    continue
                magic, seq, file_no, offset, nxt = PACKET.unpack_from(packet, 0)
                if magic != PACKET_MAGIC:
                    continue
                body = packet[PACKET.size :]
                here = (self.reader.pos.file_no, self.reader.pos.offset)
                missed = expected and seq != expected
                expected = seq + 1
                if (file_no, offset) < here and not missed:
                    continue  # already read from the log
                if (file_no, offset) == here and len(body) >= HEAD_SIZE and not missed:
                    head = HEAD.unpack_from(body, 0)
                    deliver(Record(head[1], head[2], head[5], head[6], body[HEAD_SIZE:]))
                    self.reader.pos = Position(file_no, nxt)
                    self.cursor.save(self.reader.pos)
                    self.from_packets += 1
                    n += 1
                else:
                    self.gaps += 1
                    for rec in self.poll(None if count is None else count - n):
                        deliver(rec)
                        n += 1
                last_message = time.monotonic()
        finally:
            sock.close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(sock_path)
        return n

    def close(self) -> None:
        self.reader.close()
        if self._lock >= 0:
            os.close(self._lock)  # and its flock with it
            self._lock = -1
