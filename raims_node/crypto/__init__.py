"""Cryptography of Rai MS: keys and signatures, the salted KDF, at-rest sealing of
private keys, per-message MACs, TCP link encryption and the
HELLO/AUTH handshake. Pure library code: bytes in, bytes and events out."""

from raims_node import RaimsError


class CryptoError(RaimsError):
    """Root of the crypto package's errors."""
