"""The Rai MS message frame: 8-byte header, then bridge, digest and subject fields.

Implements the manual's "Message Framing" (seed 000):

    bytes 0..3   ver(1) | type(2) | opt(5) | size(24)   big endian
    bytes 4..7   subject hash
    bytes 8..25  bridge field   (descriptor + 16-byte sender id)
    bytes 26..43 digest field   (descriptor + 16-byte MAC, value at DIGEST_OFFSET)
    bytes 44..   subject field  (descriptor + 16-bit length + bytes, padded to even)
    then         the message's other fields

`size` counts the bytes after the first 8. Decisions where the manual is vague:
- The subject hash is 32-bit MurmurHash3 of the subject bytes with seed 0, the same
  value the bloom filters use for the full subject, so a router tests a frame against
  peer filters without rehashing.
- A frame whose size does not fit 24 bits is written with size bits 0 and the 32-bit
  size in bytes 4..7 (in place of the hash, which the reader then computes from the
  subject). A real frame is never smaller than 40 bytes, so 0 is free to mean this.
- The version bit is 1; frames with version 0 are rejected.
- Subjects are bytes on the wire (Redis channels are binary); as `str` they are UTF-8
  with `surrogateescape`, so every byte string round-trips.
- `peek` is the router fast path: one struct unpack, no field decoding.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum, IntFlag
from typing import NamedTuple

import mmh3

from raims_node.wire.errors import BadHeader, FrameTooLarge, Truncated
from raims_node.wire.fields import (
    Fid,
    Fields,
    FieldType,
    Message,
    decode_fields,
    decode_message_fields,
    descriptor,
    encode_fields,
)

VERSION = 1
HEADER_SIZE = 8
FIXED_PREFIX = 48  # header + bridge + digest + subject descriptor and length
MIN_BODY = FIXED_PREFIX - HEADER_SIZE  # smallest legal `size`: an empty subject
MAX_SIZE_24 = 0xFFFFFF
MAX_SUBJECT = 0xFFFF
BRIDGE_LEN = 16
DIGEST_LEN = 16
BRIDGE_OFFSET = 10
DIGEST_OFFSET = 28
SUBJECT_OFFSET = 48
HASH_OFFSET = 4

BRIDGE_DESC = descriptor(FieldType.OPAQUE16, Fid.BRIDGE)
DIGEST_DESC = descriptor(FieldType.OPAQUE16, Fid.DIGEST)
SUBJECT_DESC = descriptor(FieldType.STRING, Fid.SUB)
_ZERO_DIGEST = bytes(DIGEST_LEN)

_PREFIX = struct.Struct(">IIH16sH16sHH")
_unpack_prefix = _PREFIX.unpack_from
_pack_prefix = _PREFIX.pack


class MsgType(IntEnum):
    MCAST = 0
    INBOX = 1
    RTR_ALERT = 2
    HEARTBEAT = 3


class Opt(IntFlag):
    ACK = 1
    TRACE = 2
    ANY = 4
    MC1 = 8
    MC2 = 16
    MC3 = 24


OPT_PATH_SHIFT = 3
OPT_MASK = 0x1F


def path_opt(path: int) -> int:
    """Option bits selecting multicast path 0..3."""
    return (path & 3) << OPT_PATH_SHIFT


def subject_hash(subject: bytes) -> int:
    """The 32-bit subject hash carried in the header (MurmurHash3, seed 0)."""
    return mmh3.hash(subject, 0, False)


class Header(NamedTuple):
    """What a router needs from a frame, read without decoding its fields."""

    msg_type: int
    opt: int
    subject_hash: int
    bridge: bytes
    digest: bytes
    subject: bytes
    frame_len: int


_new = tuple.__new__  # a NamedTuple without its generated __new__, a third of the cost


@dataclass(frozen=True, slots=True)
class Frame:
    """A fully decoded frame."""

    msg_type: MsgType
    opt: int
    subject: str
    subject_hash: int
    bridge: bytes
    digest: bytes
    fields: Fields

    @property
    def path(self) -> int:
        return (self.opt >> OPT_PATH_SHIFT) & 3

    def get(self, fid: int, default: object = None) -> object:
        """The value of fid (the last one when repeated), or default."""
        for f, v in reversed(self.fields):
            if f == fid:
                return v
        return default

    def as_dict(self) -> dict[int, object]:
        """fid -> value, the last occurrence winning (as the reference decoder does)."""
        return dict(self.fields)


def encode_frame(
    msg_type: int,
    subject: str | bytes,
    bridge: bytes,
    fields: Iterable[tuple[int, object]] = (),
    opt: int = 0,
) -> bytearray:
    """Encode a frame with a zeroed digest (crypto.mac signs it in place)."""
    sub = subject.encode("utf-8", "surrogateescape") if isinstance(subject, str) else subject
    return frame_with_body(msg_type, sub, bridge, encode_fields(fields), opt)


def frame_with_body(
    msg_type: int, sub: bytes, bridge: bytes, body: bytes | bytearray, opt: int = 0, h: int | None = None,
) -> bytearray:
    """A frame around fields already encoded (`body`); `h` is the subject's hash when
    the caller has it cached."""
    if len(bridge) != BRIDGE_LEN:
        raise BadHeader(f"bridge must be {BRIDGE_LEN} bytes, got {len(bridge)}")
    if len(sub) > MAX_SUBJECT:
        raise BadHeader(f"subject of {len(sub)} bytes exceeds {MAX_SUBJECT}")
    if not 0 <= msg_type <= 3 or not 0 <= opt <= OPT_MASK:
        raise BadHeader(f"message type {msg_type} / option {opt} out of range")
    pad = len(sub) & 1
    size = MIN_BODY + len(sub) + pad + len(body)
    if size <= MAX_SIZE_24:
        word = (VERSION << 31) | (msg_type << 29) | (opt << 24) | size
        second = mmh3.hash(sub, 0, False) if h is None else h
    elif size <= 0xFFFFFFFF:
        word = (VERSION << 31) | (msg_type << 29) | (opt << 24)
        second = size
    else:
        raise FrameTooLarge(f"frame of {size} bytes exceeds the 32-bit size")
    out = bytearray(
        _pack_prefix(word, second, BRIDGE_DESC, bridge, DIGEST_DESC, _ZERO_DIGEST, SUBJECT_DESC, len(sub))
    )
    out += sub
    if pad:
        out.append(0)
    out += body
    return out


def _prefix(buf: bytes | bytearray | memoryview) -> tuple[int, int, int, int, bytes, bytes, int, int]:
    """Validate the fixed prefix; return (type, opt, size, hash_or_0, bridge, digest, sub_len, total)."""
    if len(buf) < FIXED_PREFIX:
        raise Truncated(f"frame of {len(buf)} bytes is shorter than the {FIXED_PREFIX}-byte prefix", 0)
    word, second, bdesc, bridge, ddesc, digest, sdesc, slen = _unpack_prefix(buf, 0)
    if word >> 31 != VERSION:
        raise BadHeader("version bit is not 1", 0)
    size = word & MAX_SIZE_24
    extended = size == 0
    if extended:
        size = second
        if size <= MAX_SIZE_24:
            raise BadHeader(f"extended size {size} fits 24 bits", HASH_OFFSET)
    if size < MIN_BODY:
        raise BadHeader(f"frame size {size} is below the minimum {MIN_BODY}", 0)
    if bdesc != BRIDGE_DESC:
        raise BadHeader(f"bridge descriptor {bdesc:#06x} != {BRIDGE_DESC:#06x}", 8)
    if ddesc != DIGEST_DESC:
        raise BadHeader(f"digest descriptor {ddesc:#06x} != {DIGEST_DESC:#06x}", 26)
    if sdesc != SUBJECT_DESC:
        raise BadHeader(f"subject descriptor {sdesc:#06x} != {SUBJECT_DESC:#06x}", 44)
    total = HEADER_SIZE + size
    if SUBJECT_OFFSET + slen + (slen & 1) > total:
        raise BadHeader(f"subject of {slen} bytes overruns the frame of {total}", 46)
    return (word >> 29) & 3, (word >> 24) & OPT_MASK, total, 0 if extended else second, bridge, digest, slen, total


def peek(buf: bytes | bytearray | memoryview) -> Header:
    """Read the routing header of one frame (buf may hold more after it)."""
    if len(buf) >= FIXED_PREFIX:
        word, second, bdesc, bridge, ddesc, digest, sdesc, slen = _unpack_prefix(buf, 0)
        size = word & MAX_SIZE_24
        # common case inline: a 24-bit frame with the three standard descriptors
        if (
            word >> 31 == VERSION
            and size >= MIN_BODY
            and bdesc == BRIDGE_DESC
            and ddesc == DIGEST_DESC
            and sdesc == SUBJECT_DESC
            and SUBJECT_OFFSET + slen + (slen & 1) <= size + HEADER_SIZE <= len(buf)
        ):
            return _new(Header, (
                (word >> 29) & 3, (word >> 24) & OPT_MASK, second, bridge, digest,
                bytes(buf[SUBJECT_OFFSET : SUBJECT_OFFSET + slen]), size + HEADER_SIZE,
            ))
    mtype, opt, total, h, bridge, digest, slen, _ = _prefix(buf)
    if total > len(buf):
        raise Truncated(f"frame of {total} bytes, buffer has {len(buf)}", len(buf))
    sub = bytes(buf[SUBJECT_OFFSET : SUBJECT_OFFSET + slen])
    return Header(mtype, opt, h if h else subject_hash(sub), bridge, digest, sub, total)


def peeked_message(buf: bytes | bytearray | memoryview, head: Header) -> Message:
    """The published message in the frame `head` was peeked from (its prefix is not
    validated again)."""
    slen = len(head.subject)
    return decode_message_fields(buf, SUBJECT_OFFSET + slen + (slen & 1), head.frame_len)


def peeked_fields(buf: bytes | bytearray | memoryview, head: Header, lazy: bool = False) -> Fields:
    """The fields of the one frame in `buf` that `head` was peeked from: `decode_frame`
    without validating the prefix again or building a Frame (a router's system messages);
    `lazy`: nested messages left encoded (`Nested`)."""
    if head.frame_len != len(buf):
        raise (Truncated if head.frame_len > len(buf) else BadHeader)(
            f"frame size says {head.frame_len} bytes, buffer has {len(buf)}", min(head.frame_len, len(buf)))
    slen = len(head.subject)
    return decode_fields(buf, SUBJECT_OFFSET + slen + (slen & 1), head.frame_len, 0, lazy)


_MSG_TYPES = tuple(MsgType(t) for t in range(4))  # MsgType(t) is a slow enum call


def decode_frame(buf: bytes | bytearray | memoryview) -> Frame:
    """Decode exactly one frame; raises only WireError subclasses."""
    mtype, opt, total, h, bridge, digest, slen, _ = _prefix(buf)
    if total != len(buf):
        raise (Truncated if total > len(buf) else BadHeader)(
            f"frame size says {total} bytes, buffer has {len(buf)}", len(buf) if total > len(buf) else total
        )
    raw_sub = bytes(buf[SUBJECT_OFFSET : SUBJECT_OFFSET + slen])
    subject = raw_sub.decode("utf-8", "surrogateescape")
    fields = decode_fields(buf, SUBJECT_OFFSET + slen + (slen & 1), total)
    return Frame(_MSG_TYPES[mtype], opt, subject, h if h else subject_hash(raw_sub), bridge, digest, fields)


def frame_length(buf: bytes | bytearray | memoryview) -> int:
    """Total length of the frame starting buf (needs 8 bytes), for stream framing."""
    if len(buf) < HEADER_SIZE:
        raise Truncated("need 8 bytes for a frame header", len(buf))
    word, second = struct.unpack_from(">II", buf, 0)
    if word >> 31 != VERSION:
        raise BadHeader("version bit is not 1", 0)
    size = word & MAX_SIZE_24
    if size == 0:
        size = second
        if size <= MAX_SIZE_24:
            raise BadHeader(f"extended size {size} fits 24 bits", HASH_OFFSET)
    if size < MIN_BODY:
        raise BadHeader(f"frame size {size} is below the minimum {MIN_BODY}", 0)
    return HEADER_SIZE + size
