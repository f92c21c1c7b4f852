"""At-rest sealing of private keys with a key derived from `.pass` and `.salt`.

Implements the manual's "Key Configuration" and "System Compromise" rule (seed 000):
the private keys in the configuration are encrypted with the password and the salt,
and both are needed to read them; removing either file after startup leaves the keys
unreadable.

Decisions where the manual is vague:
- The sealing key is KDF(salt)("raims-at-rest-v1", password), 32 bytes; the AEAD is
  AES-256-GCM from `cryptography` with a random 12-byte nonce. A sealed value is
  nonce || ciphertext || tag, written in base64 (what the `pri:` fields hold).
- The associated data names the owner ("user", name, service or "svc", name), so a
  sealed key copied to another user's record fails to open.
"""

from __future__ import annotations

import os
import struct

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from raims_node.crypto import CryptoError
from raims_node.crypto.kdf import Kdf

SEAL_KEY_LEN = 32
NONCE_LEN = 12
TAG_LEN = 16
SEAL_LABEL = b"raims-at-rest-v1"

_LEN = struct.Struct(">I").pack


class SealError(CryptoError):
    """A sealed value does not open: wrong password or salt, or altered data."""


def owner(kind: str, name: str, svc: str) -> bytes:
    """The associated data binding a sealed key to its owner."""
    out = bytearray()
    for part in (kind.encode(), name.encode(), svc.encode()):
        out += _LEN(len(part))
        out += part
    return bytes(out)


class Sealer:
    """Seal and open private keys under one password and salt."""

    __slots__ = ("_aead",)

    def __init__(self, kdf: Kdf, password: bytes) -> None:
        if not password:
            raise SealError("empty password")
        self._aead = AESGCM(kdf.derive(SEAL_LABEL, password, length=SEAL_KEY_LEN))

    def seal(self, plaintext: bytes, aad: bytes) -> bytes:
        nonce = os.urandom(NONCE_LEN)
        return nonce + self._aead.encrypt(nonce, plaintext, aad)

    def open(self, sealed: bytes, aad: bytes) -> bytes:
        if len(sealed) < NONCE_LEN + TAG_LEN:
            raise SealError(f"sealed value of {len(sealed)} bytes is too short")
        try:
            return self._aead.decrypt(sealed[:NONCE_LEN], sealed[NONCE_LEN:], aad)
        except InvalidTag:
            raise SealError("cannot decrypt: the password (.pass) or salt (.salt) is wrong, "
                            "or the key was altered") from None
