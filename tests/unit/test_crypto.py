"""KDF, keys, at-rest sealing, message MAC and TCP link encryption."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raims_node import RaimsError
from raims_node.crypto import CryptoError
from raims_node.crypto import mac as macmod
from raims_node.crypto.kdf import SALT_LEN, Kdf, KdfError
from raims_node.crypto.keys import (
    KeyFormatError,
    KeyPair,
    PublicKeys,
    b64decode,
    b64encode,
    sign_user,
    verify_user,
)
from raims_node.crypto.link_cipher import (
    HELLO_LEN,
    LinkCipher,
    LinkCipherError,
    check_plaintext_start,
    checksum,
    fold,
)
from raims_node.crypto.sealed import Sealer, SealError, owner
from raims_node.wire import DIGEST_OFFSET, Fid, MsgType, encode_frame

SALT = bytes(range(256)) * 2 + bytes(range(128))
SEC = 1_000_000_000


# ---------------------------------------------------------------- KDF


def test_kdf_is_salted_labelled_and_unambiguous() -> None:
    k1, k2 = Kdf(SALT), Kdf(bytes(SALT_LEN))
    assert k1.derive(b"x", b"secret") == Kdf(SALT).derive(b"x", b"secret")
    assert k1.derive(b"x", b"secret") != k2.derive(b"x", b"secret")  # different salt
    assert k1.derive(b"x", b"secret") != k1.derive(b"y", b"secret")  # different label
    assert k1.derive(b"x", b"ab", b"c") != k1.derive(b"x", b"a", b"bc")  # parts are length-prefixed
    long = k1.derive(b"x", b"s", length=200)
    assert len(long) == 200 and long[:64] == k1.derive(b"x", b"s", length=64)
    with pytest.raises(KdfError, match="640"):
        Kdf(b"short")
    with pytest.raises(KdfError):
        k1.derive(b"x", length=0)
    assert issubclass(KdfError, RaimsError)


# ---------------------------------------------------------------- keys


@pytest.fixture(scope="module")
def svc() -> KeyPair:
    return KeyPair.generate()


@pytest.fixture(scope="module")
def usr() -> KeyPair:
    return KeyPair.generate()


def test_keypair_round_trip_and_exchange(usr: KeyPair) -> None:
    again = KeyPair.from_bytes(usr.to_bytes())
    assert again.public == usr.public
    assert PublicKeys.from_b64(usr.public.to_b64()) == usr.public
    other = KeyPair.generate()
    assert usr.exchange(other.public.dh) == other.exchange(usr.public.dh)
    sig = usr.sign(b"msg")
    assert usr.public.verify(sig, b"msg")
    assert not usr.public.verify(sig, b"msh")
    assert not usr.public.verify(sig[:10], b"msg")
    with pytest.raises(KeyFormatError):
        KeyPair.from_bytes(b"x" * 10)


def test_service_signature_binds_user_service_and_keys(svc: KeyPair, usr: KeyPair) -> None:
    sig = sign_user(svc, "test", "A", "1.5", None, usr.public)
    assert verify_user(svc.public, "test", "A", "1.5", None, usr.public, sig)
    other = KeyPair.generate()
    assert not verify_user(svc.public, "test", "B", "1.5", None, usr.public, sig)
    assert not verify_user(svc.public, "prod", "A", "1.5", None, usr.public, sig)
    assert not verify_user(svc.public, "test", "A", "1.6", None, usr.public, sig)
    assert not verify_user(svc.public, "test", "A", "1.5", "99", usr.public, sig)
    assert not verify_user(svc.public, "test", "A", "1.5", None, other.public, sig)
    assert not verify_user(other.public, "test", "A", "1.5", None, usr.public, sig)


@settings(max_examples=50, deadline=None)
@given(st.binary(max_size=100))
def test_b64_round_trip(data: bytes) -> None:
    text = b64encode(data)
    assert "=" not in text
    assert b64decode(text) == data
    assert b64decode(text + "=" * (-len(text) % 4)) == data


def test_b64_errors() -> None:
    with pytest.raises(KeyFormatError, match="not base64"):
        b64decode("@@@@")
    with pytest.raises(KeyFormatError, match="must be 64 bytes"):
        b64decode(b64encode(b"x" * 10), 64)


# ---------------------------------------------------------------- sealing


def test_sealed_keys_need_password_salt_and_owner(usr: KeyPair) -> None:
    kdf = Kdf(SALT)
    sealer = Sealer(kdf, b"password")
    aad = owner("user", "A", "test")
    blob = sealer.seal(usr.to_bytes(), aad)
    assert usr.to_bytes() not in blob
    assert sealer.open(blob, aad) == usr.to_bytes()
    assert Sealer(kdf, b"password").open(blob, aad) == usr.to_bytes()
    for bad_sealer, bad_aad in [
        (Sealer(kdf, b"other"), aad),
        (Sealer(Kdf(bytes(SALT_LEN)), b"password"), aad),
        (sealer, owner("user", "B", "test")),
    ]:
        with pytest.raises(SealError, match=r"\.pass.*\.salt"):
            bad_sealer.open(blob, bad_aad)
    flipped = bytearray(blob)
    flipped[20] ^= 1
    with pytest.raises(SealError):
        sealer.open(bytes(flipped), aad)
    with pytest.raises(SealError, match="too short"):
        sealer.open(b"abc", aad)


# ---------------------------------------------------------------- MAC


def _frame(payload: bytes = b"x" * 30) -> bytearray:
    return encode_frame(MsgType.MCAST, "TEST.SUB", os.urandom(16), [(Fid.SEQNO, 7), (Fid.DATA, payload)])


def test_mac_sign_verify_and_every_flipped_bit_fails() -> None:
    key = os.urandom(32)
    frame = _frame()
    macmod.sign(frame, key)
    assert frame[DIGEST_OFFSET : DIGEST_OFFSET + 16] != bytes(16)
    assert macmod.verify(frame, key)
    assert macmod.verify(bytes(frame), macmod.MacKey(key))
    assert not macmod.verify(frame, os.urandom(32))
    for bit in range(len(frame) * 8):
        bad = bytearray(frame)
        bad[bit // 8] ^= 1 << (bit % 8)
        assert not macmod.verify(bad, key), bit
    assert not macmod.verify(frame + b"\x00\x00", key)
    assert not macmod.verify(frame[:30], key)


def test_mac_is_keyed_blake2b_of_frame_with_zeroed_slot() -> None:
    import hashlib

    key = os.urandom(32)
    frame = _frame()
    expected = hashlib.blake2b(bytes(frame), key=key, digest_size=16).digest()  # slot is zero before signing
    macmod.sign(frame, key)
    assert bytes(frame[DIGEST_OFFSET : DIGEST_OFFSET + 16]) == expected


def test_mac_key_limits() -> None:
    with pytest.raises(macmod.MacError):
        macmod.MacKey(b"")
    with pytest.raises(macmod.MacError):
        macmod.MacKey(bytes(65))
    with pytest.raises(macmod.MacError, match="no digest slot"):
        macmod.MacKey(bytes(32)).digest(b"short")


# ---------------------------------------------------------------- link cipher


def _pair(kdf_a: Kdf | None = None, kdf_b: Kdf | None = None) -> tuple[LinkCipher, LinkCipher]:
    return LinkCipher(kdf_a or Kdf(SALT)), LinkCipher(kdf_b or Kdf(SALT))


def test_link_exchange_layout() -> None:
    a, _ = _pair()
    assert len(a.hello) == HELLO_LEN == 56
    assert a.hello[:4] == bytes(4)
    assert a.hello[:8] == checksum(a.pubkey, a.nonce)
    assert a.hello[8:40] == a.pubkey and a.hello[40:] == a.nonce
    key, ctr = fold(bytes(range(64)))
    assert key == bytes(i ^ (i + 16) for i in range(16))
    assert ctr == bytes((i + 32) ^ (i + 48) for i in range(16))


def test_link_streams_both_ways_in_pieces() -> None:
    a, b = _pair()
    assert not a.ready
    with pytest.raises(LinkCipherError):
        a.encrypt(b"early")
    # b receives a's exchange in pieces, followed by data in the same read
    assert b.feed(a.hello[:10]) == b""
    assert a.feed(b.hello) == b""
    msg = os.urandom(5000)
    wire = a.encrypt(msg)
    assert wire != msg
    assert b.feed(a.hello[10:] + wire[:100]) == msg[:100]
    assert b.feed(wire[100:]) == msg[100:]
    back = b.encrypt(b"reply" * 100)
    assert a.feed(back) == b"reply" * 100
    # the two directions use different keys
    assert a.encrypt(b"same") != b.encrypt(b"same")


def test_link_with_wrong_salt_decrypts_garbage() -> None:
    a, b = _pair(Kdf(SALT), Kdf(bytes(SALT_LEN)))
    a.feed(b.hello)
    b.feed(a.hello)
    assert b.feed(a.encrypt(b"hello there")) != b"hello there"


def test_plaintext_peer_fails_on_the_first_bytes() -> None:
    a, _ = _pair()
    frame = bytes(_frame())
    with pytest.raises(LinkCipherError, match="does not encrypt"):
        a.feed(frame[:4])
    # and the plaintext side refuses an encrypting peer
    with pytest.raises(LinkCipherError, match="noencrypt"):
        check_plaintext_start(a.hello)
    check_plaintext_start(frame)


def test_link_checksum_and_reflection() -> None:
    a, b = _pair()
    bad = bytearray(b.hello)
    bad[50] ^= 1
    with pytest.raises(LinkCipherError, match="checksum"):
        a.feed(bytes(bad))
    with pytest.raises(LinkCipherError, match="echoes"):
        a2 = LinkCipher(Kdf(SALT))
        a2.feed(a2.hello)
    assert issubclass(LinkCipherError, CryptoError)
