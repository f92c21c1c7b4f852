"""Service and user key pairs, and the service's signature over each user's keys.

Implements the keys of the manual's "Authentication" and "Key Configuration" sections
(seed 000): the service and every user own an Ed25519 key pair (the manual's
"ECDSA ... ED25519") for signatures and an X25519 key pair (its "EC25519" ECDH) for
key exchange; the service signs each user's public keys, and the signatures are what
`svc_<svc>.yaml` lists under `users:`.

Decisions where the manual is vague:
- A public key is 64 bytes, Ed25519 public || X25519 public; a private key is 64
  bytes, Ed25519 seed || X25519 private. Both are written in base64.
- The service signs the statement "raims-user-v1" || svc || user || create ||
  expires || public key, each part length-prefixed, so a signature cannot be moved
  to another user, service or key, or outlive a changed expiry.
- Base64 is the standard alphabet without padding, as the manual's dumps show;
  decoding accepts padding too.
- The handshake (handshake.py) exchanges a fresh X25519 key per start as the manual
  says, and also mixes in the recipient's configured X25519 key, so that an auth's
  session key can only be read by the holder of the named user's private key.
"""

from __future__ import annotations

import base64
import binascii
import struct
from dataclasses import dataclass, field

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)

from raims_node.crypto import CryptoError

KEY_LEN = 32
PUB_LEN = 2 * KEY_LEN
PRI_LEN = 2 * KEY_LEN
SIG_LEN = 64
USER_STATEMENT = b"raims-user-v1"

_LEN = struct.Struct(">I").pack


class KeyFormatError(CryptoError):
    """A key or signature has the wrong size or encoding."""


def b64encode(data: bytes) -> str:
    return base64.b64encode(data).decode().rstrip("=")


def b64decode(text: str, size: int | None = None, what: str = "value") -> bytes:
    """Decode base64 with or without padding; `size` checks the decoded length."""
    s = text.strip()
    try:
        raw = base64.b64decode(s + "=" * (-len(s) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise KeyFormatError(f"{what} is not base64: {text[:24]!r}...") from None
    if size is not None and len(raw) != size:
        raise KeyFormatError(f"{what} must be {size} bytes, got {len(raw)}")
    return raw


def _raw_public(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(Encoding.Raw, PublicFormat.Raw)


@dataclass(frozen=True)
class PublicKeys:
    """A service's or user's public keys: Ed25519 (verify) and X25519 (exchange)."""

    sign: bytes
    dh: bytes
    _verifier: Ed25519PublicKey = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.sign) != KEY_LEN or len(self.dh) != KEY_LEN:
            raise KeyFormatError(f"public keys must be {KEY_LEN} bytes each")
        object.__setattr__(self, "_verifier", Ed25519PublicKey.from_public_bytes(self.sign))

    @classmethod
    def from_bytes(cls, raw: bytes) -> PublicKeys:
        if len(raw) != PUB_LEN:
            raise KeyFormatError(f"public key must be {PUB_LEN} bytes, got {len(raw)}")
        return cls(raw[:KEY_LEN], raw[KEY_LEN:])

    @classmethod
    def from_b64(cls, text: str) -> PublicKeys:
        return cls.from_bytes(b64decode(text, PUB_LEN, "public key"))

    def to_bytes(self) -> bytes:
        return self.sign + self.dh

    def to_b64(self) -> str:
        return b64encode(self.to_bytes())

    def verify(self, signature: bytes, message: bytes) -> bool:
        if len(signature) != SIG_LEN:
            return False
        try:
            self._verifier.verify(signature, message)
        except InvalidSignature:
            return False
        return True


class KeyPair:
    """Private keys of a service or user (Ed25519 signing + X25519 exchange)."""

    __slots__ = ("_sign", "_dh", "public")

    def __init__(self, sign: Ed25519PrivateKey, dh: X25519PrivateKey) -> None:
        self._sign = sign
        self._dh = dh
        self.public = PublicKeys(
            _raw_public(sign.public_key()), dh.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        )

    @classmethod
    def generate(cls) -> KeyPair:
        return cls(Ed25519PrivateKey.generate(), X25519PrivateKey.generate())

    @classmethod
    def from_bytes(cls, raw: bytes) -> KeyPair:
        if len(raw) != PRI_LEN:
            raise KeyFormatError(f"private key must be {PRI_LEN} bytes, got {len(raw)}")
        return cls(
            Ed25519PrivateKey.from_private_bytes(raw[:KEY_LEN]),
            X25519PrivateKey.from_private_bytes(raw[KEY_LEN:]),
        )

    def to_bytes(self) -> bytes:
        raw = Encoding.Raw, PrivateFormat.Raw, NoEncryption()
        return self._sign.private_bytes(*raw) + self._dh.private_bytes(*raw)

    def sign(self, message: bytes) -> bytes:
        return self._sign.sign(message)

    def exchange(self, peer_dh_public: bytes) -> bytes:
        return self._dh.exchange(X25519PublicKey.from_public_bytes(peer_dh_public))

    def __repr__(self) -> str:
        return f"KeyPair(public={self.public.to_b64()})"


def user_statement(svc: str, user: str, create: str, expires: str | None, pub: PublicKeys) -> bytes:
    """What the service signs to admit a user."""
    out = bytearray(USER_STATEMENT)
    for part in (svc.encode(), user.encode(), create.encode(), (expires or "").encode(), pub.to_bytes()):
        out += _LEN(len(part))
        out += part
    return bytes(out)


def sign_user(service: KeyPair, svc: str, user: str, create: str, expires: str | None, pub: PublicKeys) -> bytes:
    return service.sign(user_statement(svc, user, create, expires, pub))


def verify_user(
    service: PublicKeys, svc: str, user: str, create: str, expires: str | None, pub: PublicKeys, sig: bytes
) -> bool:
    return service.verify(sig, user_statement(svc, user, create, expires, pub))
