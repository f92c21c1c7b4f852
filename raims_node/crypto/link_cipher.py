"""TCP link encryption: the 56-byte key exchange, then AES-128-CTR in each direction.

Implements the manual's "TCP Encryption" (seed 000). Each side first sends

    [ 8-byte checksum ][ 32-byte X25519 public key ][ 16-byte nonce ]

where the checksum is the CRC-32 of public key || nonce as a big-endian 64-bit value,
so its first 4 bytes are zero. Both compute the X25519 secret; each direction's
64 bytes are KDF(secret || sender's nonce), folded by XOR into a 16-byte AES key and
a 16-byte initial counter; bytes after the exchange are AES-128-CTR streams.

A peer that does not encrypt starts with a frame header, whose first bit (the frame
version) is 1, so the zero bytes the checksum must start with catch it on the first
4 bytes; `check_plaintext_start` gives the plaintext side the same clear error when
an encrypting peer connects to it.

Decisions where the manual is vague:
- CRC-32 is zlib's (IEEE 802.3). The KDF label is "raims-link-v1".
- Folding: key = b[0:16] ^ b[16:32], counter = b[32:48] ^ b[48:64].
- A hello whose public key is our own is refused (a reflected exchange).
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Callable

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers import Cipher, CipherContext, algorithms, modes
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from raims_node.crypto import CryptoError
from raims_node.crypto.kdf import Kdf

CHECKSUM_LEN = 8
PUBKEY_LEN = 32
NONCE_LEN = 16
HELLO_LEN = CHECKSUM_LEN + PUBKEY_LEN + NONCE_LEN
AES_KEY_LEN = 16
KDF_OUT_LEN = 64
LINK_LABEL = b"raims-link-v1"
_ZERO4 = bytes(4)
_Q = struct.Struct(">Q")


class LinkCipherError(CryptoError):
    """The link's key exchange failed; the connection must be closed."""


def checksum(pubkey: bytes, nonce: bytes) -> bytes:
    return _Q.pack(zlib.crc32(pubkey + nonce))


def fold(block: bytes) -> tuple[bytes, bytes]:
    """64 KDF bytes -> (16-byte AES key, 16-byte counter)."""
    if len(block) != KDF_OUT_LEN:
        raise LinkCipherError(f"fold needs {KDF_OUT_LEN} bytes, got {len(block)}")
    w = [int.from_bytes(block[i : i + 16], "big") for i in range(0, 64, 16)]
    return (w[0] ^ w[1]).to_bytes(16, "big"), (w[2] ^ w[3]).to_bytes(16, "big")


def check_plaintext_start(data: bytes | bytearray | memoryview) -> None:
    """For a link without encryption: refuse a peer whose first bytes are a key exchange."""
    if len(data) >= 4 and bytes(data[:4]) == _ZERO4:
        raise LinkCipherError(
            "peer sent an encryption key exchange (first 4 bytes zero) to a link without "
            "encryption: set noencrypt the same on both sides"
        )


class LinkCipher:
    """One side of an encrypted link: feed received bytes, encrypt bytes to send."""

    def __init__(self, kdf: Kdf, private: X25519PrivateKey | None = None, nonce: bytes | None = None) -> None:
        self._kdf = kdf
        self._private = private or X25519PrivateKey.generate()
        self.nonce = nonce if nonce is not None else os.urandom(NONCE_LEN)
        if len(self.nonce) != NONCE_LEN:
            raise LinkCipherError(f"nonce must be {NONCE_LEN} bytes, got {len(self.nonce)}")
        self.pubkey = self._private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        self.hello = checksum(self.pubkey, self.nonce) + self.pubkey + self.nonce
        self._pending = bytearray()
        self._send: CipherContext | None = None
        self._recv: CipherContext | None = None

    @property
    def ready(self) -> bool:
        """True once the peer's key exchange arrived: encrypt() may be used."""
        return self._send is not None

    def _stream(self, secret: bytes, nonce: bytes) -> CipherContext:
        key, counter = fold(self._kdf.derive(LINK_LABEL, secret + nonce, length=KDF_OUT_LEN))
        return Cipher(algorithms.AES(key), modes.CTR(counter)).encryptor()

    def _accept(self, hello: bytes) -> None:
        if hello[:4] != _ZERO4:
            raise LinkCipherError(
                f"peer's first bytes {hello[:4].hex()} are not a link key exchange (which starts with "
                "4 zero bytes): the peer does not encrypt; set noencrypt the same on both sides"
            )
        pub, nonce = hello[CHECKSUM_LEN : CHECKSUM_LEN + PUBKEY_LEN], hello[CHECKSUM_LEN + PUBKEY_LEN :]
        if hello[:CHECKSUM_LEN] != checksum(pub, nonce):
            raise LinkCipherError(f"link key exchange checksum {hello[:CHECKSUM_LEN].hex()} does not match "
                                  f"{checksum(pub, nonce).hex()}")
        if pub == self.pubkey:
            raise LinkCipherError("peer's link key exchange echoes our own public key")
        try:
            secret = self._private.exchange(X25519PublicKey.from_public_bytes(pub))
        except ValueError as exc:  # low-order point: all-zero secret
            raise LinkCipherError(f"peer's link public key is unusable: {exc}") from None
        self._send = self._stream(secret, self.nonce)
        self._recv = self._stream(secret, nonce)

    def feed(self, data: bytes | bytearray | memoryview) -> bytes:
        """Decrypt received bytes; the peer's key exchange is consumed first."""
        if self._recv is not None:
            return self._recv.update(data)
        self._pending += data
        if len(self._pending) >= 4 and self._pending[:4] != _ZERO4:
            self._accept(bytes(self._pending[:HELLO_LEN]))  # raises the plaintext-peer error
        if len(self._pending) < HELLO_LEN:
            return b""
        self._accept(bytes(self._pending[:HELLO_LEN]))
        assert self._recv is not None
        rest = bytes(self._pending[HELLO_LEN:])
        self._pending.clear()
        return self._recv.update(rest) if rest else b""

    @property
    def decryptor(self) -> Callable[[bytes], bytes]:
        """The receiving stream's update, for a reader that calls it per read once the
        key exchange is done (`feed` without its checks)."""
        if self._recv is None:
            raise LinkCipherError("no receiving stream before the peer's key exchange arrived")
        return self._recv.update

    def encrypt(self, data: bytes | bytearray | memoryview) -> bytes:
        if self._send is None:
            raise LinkCipherError("cannot encrypt before the peer's key exchange arrived")
        return self._send.update(data)
