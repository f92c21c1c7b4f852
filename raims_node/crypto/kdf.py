"""The key derivation function: SHA-512, mixed with the service's 640-byte salt.

Implements the KDF of the manual's "Key Exchange", "TCP Encryption" and "System
Compromise" sections (seed 000): every key derived while running (hello keys,
temporary auth keys, link keys, the at-rest key of the private keys) is mixed with
the pre-shared salt from `.salt` / `salt_data`, so that two services with different
salts derive different keys from the same secrets and cannot talk.

Construction (the manual names SHA-512 but not the construction): HKDF (RFC 5869)
with HMAC-SHA-512, the salt as HKDF salt, and as input keying material a label
followed by each part prefixed with its 4-byte big-endian length, so that no two
different part lists derive the same bytes. The expand step uses the label as info.
"""

from __future__ import annotations

import hashlib
import hmac
import struct

from raims_node.crypto import CryptoError

SALT_LEN = 640
HASH_LEN = 64  # SHA-512
MAX_DERIVE = 255 * HASH_LEN  # HKDF limit

_LEN = struct.Struct(">I").pack


class KdfError(CryptoError):
    """Bad salt or an impossible derive request."""


class Kdf:
    """Derive keys from secrets and context, mixed with a salt."""

    __slots__ = ("_extract",)

    def __init__(self, salt: bytes) -> None:
        if len(salt) != SALT_LEN:
            raise KdfError(f"salt must be {SALT_LEN} bytes, got {len(salt)}")
        # keyed HMAC state reused for every extract: hashing the 640-byte key once
        self._extract = hmac.new(salt, digestmod=hashlib.sha512)

    def derive(self, label: bytes, *parts: bytes, length: int = HASH_LEN) -> bytes:
        """`length` bytes bound to the salt, the label and every part (in order)."""
        if not 0 < length <= MAX_DERIVE:
            raise KdfError(f"cannot derive {length} bytes (1..{MAX_DERIVE})")
        h = self._extract.copy()
        h.update(_LEN(len(label)))
        h.update(label)
        for part in parts:
            h.update(_LEN(len(part)))
            h.update(part)
        prk = h.digest()
        out = bytearray()
        block = b""
        counter = 1
        while len(out) < length:
            block = hmac.digest(prk, block + label + bytes((counter,)), hashlib.sha512)
            out += block
            counter += 1
        return bytes(out[:length])
