"""The per-message digest: keyed BLAKE2b-128 of a frame under the sender's session key.

Implements the manual's "Message Authentication" (seed 000) with the substitution
the design makes (../shared/DESIGN.md, "Crypto"): the 16-byte digest at
frame[DIGEST_OFFSET:DIGEST_OFFSET + 16] is BLAKE2b keyed with the sender's session
key, digest size 16, computed over the whole frame with that slot zeroed. It replaces
the manual's AES construction for the same reason the manual gives for AES: it is
the fastest keyed MAC available (here, in CPython's C code).

A `MacKey` keeps the keyed BLAKE2b state, so each sign/verify pays a state copy
instead of the key setup; the module functions accept a MacKey or raw key bytes.
Verification compares with `hmac.compare_digest` (constant time).
"""

from __future__ import annotations

import hashlib
import hmac

from raims_node.crypto import CryptoError
from raims_node.wire import DIGEST_LEN, DIGEST_OFFSET

MAX_KEY_LEN = 64  # BLAKE2b key limit
_ZERO = bytes(DIGEST_LEN)
_END = DIGEST_OFFSET + DIGEST_LEN

Buffer = bytes | bytearray | memoryview


class MacError(CryptoError):
    """Bad key, or a frame too short to hold a digest."""


class MacKey:
    """A session key, ready to sign and verify frames."""

    __slots__ = ("_state", "key")

    def __init__(self, key: bytes) -> None:
        if not 0 < len(key) <= MAX_KEY_LEN:
            raise MacError(f"MAC key must be 1..{MAX_KEY_LEN} bytes, got {len(key)}")
        self.key = bytes(key)
        self._state = hashlib.blake2b(key=self.key, digest_size=DIGEST_LEN)

    def digest(self, frame: Buffer) -> bytes:
        """The digest of frame as if its digest slot were zero."""
        if len(frame) < _END:
            raise MacError(f"frame of {len(frame)} bytes has no digest slot (needs {_END})")
        h = self._state.copy()
        h.update(frame[:DIGEST_OFFSET])  # slices of a ~200-byte frame cost less than a memoryview
        h.update(_ZERO)
        h.update(frame[_END:])
        return h.digest()

    def sign(self, frame: bytearray) -> None:
        frame[DIGEST_OFFSET:_END] = self.digest(frame)

    def verify(self, frame: Buffer) -> bool:
        if len(frame) < _END:
            return False
        # digest() inlined: this is the per-message hot path
        h = self._state.copy()
        h.update(frame[:DIGEST_OFFSET])
        h.update(_ZERO)
        h.update(frame[_END:])
        return hmac.compare_digest(h.digest(), frame[DIGEST_OFFSET:_END])


def _key(key: MacKey | bytes) -> MacKey:
    return key if isinstance(key, MacKey) else MacKey(key)


def sign(frame: bytearray, key: MacKey | bytes) -> None:
    """Write the digest of frame (computed with the slot zeroed) into its slot."""
    _key(key).sign(frame)


def verify(frame: Buffer, key: MacKey | bytes) -> bool:
    """True when frame's digest slot holds its digest under key (constant-time compare)."""
    return _key(key).verify(frame)
