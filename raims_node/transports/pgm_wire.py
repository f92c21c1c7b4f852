"""The datagrams of the PGM transport: pure encode/decode (transports/pgm_core.py uses them).

The packet types and their roles follow RFC 3208 (PGM); the bytes are our own, UDP
encapsulated (as the manual's "Open PGM" section says the transport is), not the RFC's
IP-protocol-113 layout. Every datagram starts with one header:

    magic b"Pg" | type u8 | flags u8 | tsi 8 bytes | inbox ipv4 4 bytes | inbox port u16

`tsi` is the sender's transport session id (RFC 3208 TSI: a random 8 bytes per start);
`inbox` is the sender's unicast UDP endpoint (where NAKs and point-to-point streams go),
carried in every packet so that any packet introduces its sender. `flags` bit 0 marks a
unicast stream (the point-to-point inbox protocol) rather than the group session.

Bodies (big endian; `sid` names the stream: 0 for the group session, a random non-zero
id for each unicast stream, so a stream opened again is not mistaken for the old one):
- SPM (0x00):   sid u32 | spm_sqn u32 | trail u32 | lead u32 | glead u32
- ODATA (0x04), RDATA (0x05): sid u32 | sqn u32 | trail u32 | glead u32 | first u16 | payload
- NAK (0x08):   source tsi 8 | sid u32 | count u16 | count x sqn u32   (RFC: OPT_NAK_LIST)
- NCF (0x0A):   sid u32 | count u16 | count x sqn u32

`glead` is the sender's group-session lead when the packet was first sent (a receiver
starts its window of the group session after the `glead` of the first point-to-point
packet it gets, see pgm_core). `first` is the offset in `payload` where the first record
starts (NO_RECORD: none starts here; RFC 3208 OPT_FRAGMENT serves the same end): the
payloads of one stream, in sequence order, are a byte stream of records

    length u32 | ndest u8 | ndest x tsi 8 | frame (length bytes)

`ndest` lists the receivers of a group record (a multicast frame sent once for several
peers); unicast records have none.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

from raims_node import RaimsError

MAGIC = b"Pg"
SPM, ODATA, RDATA, NAK, NCF = 0x00, 0x04, 0x05, 0x08, 0x0A
TYPES = {SPM: "SPM", ODATA: "ODATA", RDATA: "RDATA", NAK: "NAK", NCF: "NCF"}
F_UNICAST = 0x01
NO_RECORD = 0xFFFF
TSI_LEN = 8

_HDR = struct.Struct("!2sBB8s4sH")
_SPM = struct.Struct("!IIIII")
_DATA = struct.Struct("!IIIIH")
_NAK = struct.Struct("!8sIH")
_NCF = struct.Struct("!IH")
_REC = struct.Struct("!IB")
HDR_LEN = _HDR.size
DATA_OVERHEAD = _HDR.size + _DATA.size  # bytes before a data packet's payload
REC_HEAD = _REC.size
MAX_SQNS = 1024  # sqns in one NAK or NCF


class PgmWireError(RaimsError, ValueError):
    """A datagram that is not a well-formed PGM packet of ours."""


@dataclass(frozen=True, slots=True)
class Packet:
    type: int
    unicast: bool
    tsi: bytes
    inbox: tuple[str, int]
    sid: int = 0
    sqn: int = 0  # data: the sequence number; SPM: the SPM's own sequence number
    trail: int = 0
    lead: int = 0  # SPM only
    glead: int = 0
    first: int = NO_RECORD  # data only
    payload: bytes = b""  # data only
    source: bytes = b""  # NAK: the tsi of the source asked for repairs
    sqns: tuple[int, ...] = ()  # NAK, NCF


def _head(ptype: int, unicast: bool, tsi: bytes, inbox: tuple[str, int]) -> bytes:
    return _HDR.pack(MAGIC, ptype, F_UNICAST if unicast else 0, tsi, socket.inet_aton(inbox[0]), inbox[1])


def encode_spm(tsi: bytes, inbox: tuple[str, int], unicast: bool, sid: int, spm_sqn: int, trail: int, lead: int,
               glead: int) -> bytes:
    return _head(SPM, unicast, tsi, inbox) + _SPM.pack(sid, spm_sqn, trail, lead, glead)


def encode_data(tsi: bytes, inbox: tuple[str, int], unicast: bool, sid: int, sqn: int, trail: int, glead: int,
                first: int, payload: bytes, ptype: int = ODATA) -> bytes:
    return _head(ptype, unicast, tsi, inbox) + _DATA.pack(sid, sqn, trail, glead, first) + payload


def as_rdata(odata: bytes) -> bytes:
    """The repair of a sent data packet: the same bytes, typed RDATA (RFC 3208 8.3)."""
    return odata[:2] + bytes((RDATA,)) + odata[3:]


def _sqn_list(sqns: tuple[int, ...] | list[int]) -> bytes:
    if len(sqns) > MAX_SQNS:
        raise PgmWireError(f"{len(sqns)} sqns in one list (at most {MAX_SQNS})")
    return struct.pack(f"!{len(sqns)}I", *sqns)


def encode_nak(tsi: bytes, inbox: tuple[str, int], unicast: bool, source: bytes, sid: int,
               sqns: list[int]) -> bytes:
    return _head(NAK, unicast, tsi, inbox) + _NAK.pack(source, sid, len(sqns)) + _sqn_list(sqns)


def encode_ncf(tsi: bytes, inbox: tuple[str, int], sid: int, sqns: list[int]) -> bytes:
    return _head(NCF, False, tsi, inbox) + _NCF.pack(sid, len(sqns)) + _sqn_list(sqns)


def encode_record(dests: list[bytes], frame: bytes) -> bytes:
    if len(dests) > 255:
        raise PgmWireError(f"{len(dests)} receivers in one record (at most 255)")
    return _REC.pack(len(frame), len(dests)) + b"".join(dests) + frame


def record_size(ndest: int, frame_len: int) -> int:
    return REC_HEAD + ndest * TSI_LEN + frame_len


def decode(data: bytes) -> Packet:
    """One datagram; PgmWireError when it is not a packet of ours."""
    if len(data) < HDR_LEN:
        raise PgmWireError(f"{len(data)} bytes: shorter than the {HDR_LEN}-byte header")
    magic, ptype, flags, tsi, ip4, port = _HDR.unpack_from(data)
    if magic != MAGIC:
        raise PgmWireError(f"bad magic {magic!r}")
    inbox = (socket.inet_ntoa(ip4), port)
    unicast = bool(flags & F_UNICAST)
    off = HDR_LEN
    try:
        if ptype == SPM:
            sid, spm_sqn, trail, lead, glead = _SPM.unpack_from(data, off)
            if len(data) != off + _SPM.size:
                raise PgmWireError("SPM with trailing bytes")
            return Packet(SPM, unicast, tsi, inbox, sid, spm_sqn, trail, lead, glead)
        if ptype in (ODATA, RDATA):
            sid, sqn, trail, glead, first = _DATA.unpack_from(data, off)
            payload = data[off + _DATA.size:]
            if first != NO_RECORD and first >= len(payload):
                raise PgmWireError(f"first record at {first} of a {len(payload)}-byte payload")
            return Packet(ptype, unicast, tsi, inbox, sid, sqn, trail, 0, glead, first, bytes(payload))
        if ptype == NAK:
            source, sid, count = _NAK.unpack_from(data, off)
            return Packet(NAK, unicast, tsi, inbox, sid, source=source,
                          sqns=_sqns(data, off + _NAK.size, count))
        if ptype == NCF:
            sid, count = _NCF.unpack_from(data, off)
            return Packet(NCF, unicast, tsi, inbox, sid, sqns=_sqns(data, off + _NCF.size, count))
    except struct.error:
        raise PgmWireError(f"truncated {TYPES.get(ptype, ptype)} packet ({len(data)} bytes)") from None
    raise PgmWireError(f"unknown packet type {ptype:#x}")


def _sqns(data: bytes, off: int, count: int) -> tuple[int, ...]:
    if count > MAX_SQNS or len(data) != off + 4 * count:
        raise PgmWireError(f"sqn list of {count} does not match {len(data) - off} bytes")
    return struct.unpack_from(f"!{count}I", data, off)


class RecordReader:
    """The records of one stream's payloads, fed in sequence order; `lose()` after a
    gap that will not be repaired: what was partly read is dropped and reading starts
    again at the next packet where a record starts."""

    def __init__(self, max_record: int) -> None:
        self.max_record = max_record
        self.buf = bytearray()
        self.synced = False
        self.bad = 0  # records refused (too large): the stream is read again from a record start

    def lose(self) -> None:
        self.buf.clear()
        self.synced = False

    def feed(self, payload: bytes, first: int) -> list[tuple[list[bytes], bytes]]:
        if not self.synced:
            if first == NO_RECORD:
                return []
            self.synced = True
            self.buf += payload[first:]
        else:
            self.buf += payload
        out: list[tuple[list[bytes], bytes]] = []
        buf = self.buf
        pos = 0
        while len(buf) - pos >= REC_HEAD:
            length, ndest = _REC.unpack_from(buf, pos)
            if length > self.max_record:
                self.bad += 1
                self.lose()
                return out
            end = pos + REC_HEAD + ndest * TSI_LEN + length
            if end > len(buf):
                break
            d0 = pos + REC_HEAD
            dests = [bytes(buf[d0 + i * TSI_LEN:d0 + (i + 1) * TSI_LEN]) for i in range(ndest)]
            out.append((dests, bytes(buf[d0 + ndest * TSI_LEN:end])))
            pos = end
        if pos:
            del buf[:pos]
        return out
