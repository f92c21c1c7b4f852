"""The server/client link protocol, sans-IO (seed 004 sections 1.3, 1.5).

Both ends open with a hello frame, `b"NBMH"`, a u32 length (little-endian) and a JSON
object: `cabal`, `node`, `number`, `type`, `role` ("server" or "client") and, from the
client, `state` (origin -> last id, `State.to_json`). After the hellos only the server
sends: message records exactly as they are in its log file (`record`), the ones the
client's state lacks, then new ones as they are logged. The client checks every record's
CRC; anything else on the stream (another record kind, a second hello, bytes from the
client) is a `ProtocolError` and the link is closed.

Keepalives: each end sends a keepalive record (kind `K`, origin 0, id 0, no data) when it
has sent nothing for a heartbeat interval, and closes a link it has heard nothing on for
`node.DEAD_HEARTBEATS` intervals, so a hung peer (stopped, not dead: its sockets stay open)
is bypassed like a dead one. Keepalives are never logged.
"""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any, Final, NamedTuple

from raims_node.msglog.errors import ProtocolError
from raims_node.msglog.record import HEAD_SIZE, MAX_DATA, Kind, encode

HELLO_MAGIC: Final = b"NBMH"
_HELLO_HEAD: Final = struct.Struct("<4sI")
MAX_HELLO: Final = 64 * 1024
_MESSAGE: Final = int(Kind.MESSAGE)
_LINK_HEAD: Final = struct.Struct("<IBBxxIQ")  # HEAD without flags and time: what a link checks


KEEPALIVE_KIND: Final = ord("K")
KEEPALIVE: Final = encode(KEEPALIVE_KIND, 0, 0, 0, b"")  # 28 bytes, links only, never logged


def encode_hello(fields: dict[str, Any]) -> bytes:
    body = json.dumps(fields, separators=(",", ":")).encode()
    return _HELLO_HEAD.pack(HELLO_MAGIC, len(body)) + body


class Hello(NamedTuple):
    fields: dict[str, Any]


RawSpan = tuple[int, int, int, int]  # origin, id, start, stop (plain tuples: one per message)


class Messages(NamedTuple):
    """Whole, checked message records: `data` is all of them, `spans` each one."""

    data: bytes
    spans: list[RawSpan]


Event = Hello | Messages


class Decoder:
    """`feed(bytes) -> events` for one end of a link; `records` is whether this end is the
    client (it receives records after the hello) or the server (it receives keepalives)."""

    def __init__(self, records: bool) -> None:
        self.records = records
        self._buf = bytearray()
        self._hello = False
        self.keepalives = 0

    def feed(self, data: bytes) -> list[Event]:
        buf = self._buf
        buf += data
        out: list[Event] = []
        if not self._hello:
            if len(buf) < _HELLO_HEAD.size:
                return out
            magic, length = _HELLO_HEAD.unpack_from(buf, 0)
            if magic != HELLO_MAGIC or length > MAX_HELLO:
                raise ProtocolError(
                    f"not a message link hello (magic {bytes(magic)!r}, {length} bytes)"
                )
            end = _HELLO_HEAD.size + length
            if len(buf) < end:
                return out
            try:
                fields = json.loads(bytes(buf[_HELLO_HEAD.size : end]))
            except ValueError as exc:
                raise ProtocolError(f"hello is not JSON: {exc}") from None
            if not isinstance(fields, dict):
                raise ProtocolError("hello is not a JSON object")
            del buf[:end]
            self._hello = True
            out.append(Hello(fields))
        while len(buf) >= HEAD_SIZE:
            if buf[4] == KEEPALIVE_KIND:
                self._keepalive()
                continue
            if not self.records:
                raise ProtocolError("a client sent a record other than a keepalive")
            msgs = self._records()
            if msgs is None:
                break
            out.append(msgs)
        return out

    def _keepalive(self) -> None:
        crc, _kind, origin, length, mid = _LINK_HEAD.unpack_from(self._buf, 0)
        if length or origin or mid or crc != zlib.crc32(self._buf[4:HEAD_SIZE]):
            raise ProtocolError("malformed keepalive")
        del self._buf[:HEAD_SIZE]
        self.keepalives += 1

    def _records(self) -> Messages | None:
        buf = self._buf
        end = len(buf)
        view = memoryview(buf)
        unpack = _LINK_HEAD.unpack_from
        crc32 = zlib.crc32
        spans: list[RawSpan] = []
        add = spans.append
        off = 0
        try:
            while end - off >= HEAD_SIZE:
                crc, kind, origin, length, mid = unpack(buf, off)
                if kind == KEEPALIVE_KIND:
                    break  # the run of messages ends here; feed() takes the keepalive
                if kind != _MESSAGE or length > MAX_DATA or not origin:
                    raise ProtocolError(
                        f"bad record on a link: kind {kind}, origin {origin}, {length} bytes"
                    )
                stop = off + HEAD_SIZE + length
                if stop > end:
                    break
                if crc32(view[off + 4 : stop]) != crc:
                    raise ProtocolError(f"record {origin}:{mid} fails its checksum")
                add((origin, mid, off, stop))
                off = stop
            data = bytes(view[:off])
        finally:
            view.release()
        if not spans:
            return None
        del buf[:off]
        return Messages(data, spans)
