"""Peer authentication: the HELLO/HB -> AUTH -> AUTH -> AUTH_OK exchange, sans-IO.

Implements the manual's "Key Exchange" and the auth part of "Example Message Flow"
(seed 000). One `Handshake` per node: `hello()` makes the node's `_X.HELLO`/`_X.HB`
frames, `receive(now, raw)` consumes a peer's heartbeat or `_I.<bridge>.auth` frame
and returns events: `Send(frame)`, `Authenticated(...)`, `Confirmed(...)`,
`Rejected(reason)`. It never touches a socket or a router.

    A -> B  _X.HELLO  seqno, time, cnonce, pubkey (A's start-time X25519 key), user_hmac,
                      start, ...; pk_digest = MAC under the hello key
    B -> A  auth 1    B's seqno, time, cnonce, pubkey; auth_seqno/auth_time = A's HELLO;
                      auth_key = B's session key encrypted under the temporary key; pk_sig
    A -> B  auth 2    the same from A, auth_seqno/auth_time = B's auth 1
    B -> A  auth 3    AUTH_OK: auth_seqno/auth_time = A's auth 2, digest only

Decisions where the manual is vague:
- hello key = KDF("raims-hello-v1", user_hmac, start, service public key), 32 bytes;
  pk_digest is keyed BLAKE2b-128 of the frame with its digest slot and pk_digest value
  zeroed. pk_digest (HELLO) and pk_sig (AUTH) are the last field of their frame, so
  their values are the last 16 / 64 bytes.
- temporary key = KDF("raims-auth-v1", ECDH secret, static secret, sender's cnonce,
  seqno, time, matched message's cnonce, seqno, time), 48 bytes: an AES-256 key and a
  CTR counter. The ECDH secret is the manual's (both start-time keys); the static
  secret is X25519 of the sender's start-time key with the recipient's configured
  X25519 key: the key of the user it names when the service signed that user, else
  the service's. Without it, anyone holding only the salt and the service public key
  (enough for a valid HELLO) would receive a peer's session key in its auth 1; with
  it, only the holder of that user's (or the service's) private key can read it.
  So a node whose user is configured must hold that user's private key.
  auth_key (64 bytes) encrypts session key (32) || 32 zero bytes; the zero half must
  come back, which tells a bad key exchange (or salt) apart from a bad digest.
- pk_sig is Ed25519 over "raims-auth-sig-v1" || the frame with its digest slot and
  pk_sig zeroed; the frame digest (session key) is computed last, over everything,
  so an AUTH verifies with `mac.verify` like any frame. A signature verifies with the
  service key (any user name: the service admits users it never configured), else
  with the key of the named user if the service signed that user and it has not
  expired.
- The session key is one random 32-byte key per node start, sent to every peer.
- Replays: heartbeat seqnos must increase per peer bridge, auth seqnos be new within a
  window (crypto/replay.py: a peer's auths on two links arrive in any order); an auth must match
  one of our last two HELLOs (auth 1) or one of the last two auth 1 sent to that peer
  (auth 2), else it is a stale nonce. A matched auth 1 record is used once.
- Only cryptographic failures of an auth (key, digest, signature, expiry) make the
  peer ignored for 2 heartbeat intervals; a replayed or stale message is only
  rejected, so a replay cannot lock a peer out.
- Every rejection carries a short `kind` (REJECT_KINDS, for counters) and a `reason`.
- Start time: a peer bridge is one start of one node (the bridge id is random per
  start), so a HELLO whose start differs from the one first seen for its bridge is a
  forgery or a replay and is rejected.
- `forget(bridge)` (the router removed the peer) drops the session (key, trust, the
  auths in flight) but keeps the sequence floors (hb, auth, inbox seqnos) and the
  start time: a replay of anything the peer sent before stays rejected, and the
  peer, if alive, is taken back only through a new key exchange (its HELLO is
  answered with an auth 1 only the real peer can complete).
- New link, known peer: a peer sends its current HELLO on each new link, which is
  not new to us; a frame anyone could have recorded cannot prove the link. With
  `challenge=True` (the link is not up yet) such a HELLO is answered with an auth 1
  on that link; the peer's auth 2 (`Confirmed`) or its own auth 1 to our HELLO
  (`Fresh`) proves it is live there, each bound to a nonce of ours and a rising seqno.
  One HELLO is answered so at most CHALLENGES_PER_HELLO times; repeats beyond are
  counted as replays (a recorded frame sent again and again costs no key exchanges).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from raims_node import __version__
from raims_node.crypto import CryptoError
from raims_node.crypto.credentials import Credentials, Signer
from raims_node.crypto.keys import b64encode
from raims_node.crypto.mac import MacKey
from raims_node.crypto.replay import SeqWindow
from raims_node.wire import (
    DIGEST_LEN,
    DIGEST_OFFSET,
    Fid,
    Frame,
    MsgType,
    WireError,
    decode_frame,
    encode_frame,
)

HELLO_SUBJECT = "_X.HELLO"
HB_SUBJECT = "_X.HB"
AUTH_SUFFIX = ".auth"
NONCE_LEN = 16
SESSION_KEY_LEN = 32
AUTH_KEY_LEN = 64
HELLO_KEY_LEN = 32
PK_DIGEST_LEN = 16
PK_SIG_LEN = 64
TEMP_KEY_LEN = 48  # AES-256 key + 16-byte counter
HELLO_HISTORY = 2  # "the last two HELLO messages are tracked"
AUTH_HISTORY = 2
CHALLENGES_PER_HELLO = 4  # auth 1 answers to one repeated HELLO (new links at once)
IGNORE_INTERVALS = 2  # failed peers are ignored for 2 heartbeat intervals
MAX_PEERS = 4096
MAX_REJECTIONS = 256
STAGE_AUTH = 1
STAGE_REPLY = 2
STAGE_OK = 3

HELLO_LABEL = b"raims-hello-v1"
AUTH_LABEL = b"raims-auth-v1"
SIG_LABEL = b"raims-auth-sig-v1"
_ZERO_SIG = bytes(PK_SIG_LEN)
_ZERO_PKD = bytes(PK_DIGEST_LEN)
_ZERO_CHECK = bytes(AUTH_KEY_LEN - SESSION_KEY_LEN)
_U64 = struct.Struct(">Q").pack


class HandshakeError(CryptoError):
    """Bad arguments to the handshake (not a peer failure: those are Rejected events)."""


@dataclass(frozen=True, slots=True)
class Send:
    """A frame to send: to the link (dest None, a heartbeat) or to the peer bridge dest."""

    frame: bytes
    dest: bytes | None = None
    seqno: int = 0  # the inbox seqno an auth frame took (show inbox)


@dataclass(frozen=True, slots=True)
class Authenticated:
    """We hold the peer's session key and may verify its frames."""

    bridge: bytes
    user: str
    session_key: bytes = field(repr=False)
    start_ns: int
    create: str | None
    signer: Signer
    interval_s: int


@dataclass(frozen=True, slots=True)
class Confirmed:
    """The peer holds our session key (it answered our auth)."""

    bridge: bytes
    user: str


@dataclass(frozen=True, slots=True)
class Fresh:
    """A verified auth with a rising seqno, bound to a nonce of ours: the peer is live on
    the link it came from (the link may come up without a new session key)."""

    bridge: bytes
    user: str


@dataclass(frozen=True, slots=True)
class Rejected:
    bridge: bytes | None
    user: str | None
    reason: str
    ignore_until_ns: int | None = None  # set when the peer is now ignored
    kind: str = "malformed"  # one of REJECT_KINDS, for the per-reason counters


# the rejection causes (show counters reject, /metrics): undecodable or incomplete;
# HELLO digest (service key, salt, or altered); HELLO start not its bridge's; HELLO /
# auth seqno not after the last; auth answering none of our recent HELLOs / auths;
# auth for another bridge; key that does not decrypt; digest; signature or user
REJECT_KINDS = ("malformed", "hello_digest", "start_mismatch", "replayed_hello", "replayed_auth",
                "stale_nonce", "wrong_bridge", "bad_key", "bad_digest", "bad_signature")

Event = Send | Authenticated | Confirmed | Fresh | Rejected


@dataclass(slots=True)
class _Sent:
    seqno: int
    time_ns: int
    nonce: bytes


@dataclass(slots=True)
class PeerState:
    """What the handshake tracks of one peer bridge."""

    bridge: bytes
    user: str | None = None
    start_ns: int = 0
    hb_seqno: int = 0  # last heartbeat seqno received
    auth_seqno: SeqWindow = field(default_factory=SeqWindow)  # auth seqnos received
    out_seqno: int = 0  # last inbox seqno we sent to it
    auth_sent: deque[_Sent] = field(default_factory=lambda: deque(maxlen=AUTH_HISTORY))
    reply_sent: deque[_Sent] = field(default_factory=lambda: deque(maxlen=AUTH_HISTORY))
    session_key: bytes | None = None
    mac: MacKey | None = None
    trusts_us: bool = False
    ignore_until_ns: int = 0
    last_reason: str | None = None
    forgotten: bool = False  # the session was dropped (removed peer): a new key exchange is due
    challenges: int = 0  # auth 1 answers to the current HELLO (hb_seqno) repeated

    @property
    def authenticated(self) -> bool:
        return self.session_key is not None


def hello_key(creds: Credentials, user_hmac: bytes, start_ns: int) -> bytes:
    return creds.kdf.derive(HELLO_LABEL, user_hmac, _U64(start_ns), creds.svc_pub.to_bytes(), length=HELLO_KEY_LEN)


def _pk_digest(key: bytes, frame: bytes | bytearray) -> bytes:
    """Hello MAC of a frame whose last 16 bytes are pk_digest (zeroed here, as the digest slot)."""
    h = hashlib.blake2b(key=key, digest_size=PK_DIGEST_LEN)
    mv = memoryview(frame)
    h.update(mv[:DIGEST_OFFSET])
    h.update(bytes(DIGEST_LEN))
    h.update(mv[DIGEST_OFFSET + DIGEST_LEN : len(frame) - PK_DIGEST_LEN])
    h.update(_ZERO_PKD)
    return h.digest()


def _sig_message(frame: bytes | bytearray) -> bytes:
    body = bytearray(frame)
    body[DIGEST_OFFSET : DIGEST_OFFSET + DIGEST_LEN] = bytes(DIGEST_LEN)
    body[-PK_SIG_LEN:] = _ZERO_SIG
    return SIG_LABEL + bytes(body)


def _ctr(key48: bytes, data: bytes) -> bytes:
    enc = Cipher(algorithms.AES(key48[:32]), modes.CTR(key48[32:])).encryptor()
    return enc.update(data) + enc.finalize()


def _expired(expires: str | None, now_ns: int) -> bool:
    if not expires:
        return False
    try:
        return float(expires) * 1e9 < now_ns
    except ValueError:
        return True  # an unreadable expiry is not a licence


def _int(frame: Frame, fid: int) -> int | None:
    v = frame.get(fid)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _bytes(frame: Frame, fid: int, size: int) -> bytes | None:
    v = frame.get(fid)
    return v if isinstance(v, bytes) and len(v) == size else None


def _str(frame: Frame, fid: int) -> str | None:
    v = frame.get(fid)
    return v if isinstance(v, str) else None


class Handshake:
    """The authentication state of one node towards all its peers."""

    def __init__(
        self,
        creds: Credentials,
        bridge: bytes,
        start_ns: int | None = None,
        *,
        interval_s: int = 10,
        session_key: bytes | None = None,
        ecdh: X25519PrivateKey | None = None,
    ) -> None:
        if len(bridge) != 16:
            raise HandshakeError(f"bridge must be 16 bytes, got {len(bridge)}")
        if session_key is not None and len(session_key) != SESSION_KEY_LEN:
            raise HandshakeError(f"session key must be {SESSION_KEY_LEN} bytes, got {len(session_key)}")
        self.creds = creds
        self.bridge = bridge
        self.start_ns = time.time_ns() if start_ns is None else start_ns
        self.interval_s = interval_s
        self.session_key = session_key or os.urandom(SESSION_KEY_LEN)
        self.mac = MacKey(self.session_key)
        self._ecdh = ecdh or X25519PrivateKey.generate()
        self.pubkey = self._ecdh.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        self._user_hmac = creds.user_hmac
        self._hb_seqno = 0
        self._hellos: deque[_Sent] = deque(maxlen=HELLO_HISTORY)
        self._peers: dict[bytes, PeerState] = {}
        self.rejections: deque[Rejected] = deque(maxlen=MAX_REJECTIONS)
        self._inbox_subject = f"_I.{b64encode(bridge)}{AUTH_SUFFIX}"

    # ------------------------------------------------------------ queries

    def peer(self, bridge: bytes) -> PeerState | None:
        return self._peers.get(bridge)

    def peers(self) -> list[PeerState]:
        return list(self._peers.values())

    def forget(self, bridge: bytes) -> None:
        """Drop the session with `bridge`, keep its sequence floors and start time (see
        the module docstring): the router removed the peer."""
        p = self._peers.get(bridge)
        if p is None:
            return
        p.session_key = None
        p.mac = None
        p.trusts_us = False
        p.auth_sent.clear()
        p.reply_sent.clear()
        p.forgotten = True

    def next_inbox_seqno(self, bridge: bytes) -> int:
        """The next seqno of our inbox stream to bridge (shared with the router)."""
        p = self._peer(bridge)
        p.out_seqno += 1
        return p.out_seqno

    # ------------------------------------------------------------ sending

    def hello(self, now_ns: int, *, heartbeat: bool = False, extra: Iterable[tuple[int, object]] = ()) -> bytearray:
        """Our `_X.HELLO` (or `_X.HB`), with the router's extra fields (sub_seqno, ...).

        Make one per heartbeat interval and send the same frame on every link: an auth
        must answer one of the last two, so a HELLO per link would make the auths of
        the earlier links stale.
        """
        self._hb_seqno += 1
        nonce = os.urandom(NONCE_LEN)
        self._hellos.append(_Sent(self._hb_seqno, now_ns, nonce))
        fields: list[tuple[int, object]] = [
            (Fid.USER_HMAC, self._user_hmac),
            (Fid.SEQNO, self._hb_seqno),
            (Fid.TIME, now_ns),
            (Fid.UPTIME, max(0, now_ns - self.start_ns)),
            (Fid.START, self.start_ns),
            (Fid.INTERVAL, self.interval_s),
            (Fid.CNONCE, nonce),
            (Fid.PUBKEY, self.pubkey),
            *extra,
            (Fid.USER, self.creds.user),
            (Fid.CREATE, self.creds.create),
            (Fid.VERSION, __version__),
            (Fid.PK_DIGEST, _ZERO_PKD),
        ]
        frame = encode_frame(MsgType.HEARTBEAT, HB_SUBJECT if heartbeat else HELLO_SUBJECT, self.bridge, fields)
        frame[-PK_DIGEST_LEN:] = _pk_digest(hello_key(self.creds, self._user_hmac, self.start_ns), frame)
        self.mac.sign(frame)
        return frame

    def _static_pub(self, user: str) -> bytes:
        """The configured X25519 key the node running as `user` must hold."""
        known = self.creds.users.get(user)
        return known.pub.dh if known is not None else self.creds.svc_pub.dh

    def _auth_frame(self, now_ns: int, peer: PeerState, stage: int, matched: _Sent | None,
                    peer_pub: bytes | None, matched_of_peer: tuple[int, int], peer_user: str) -> bytearray:
        seqno = self.next_inbox_seqno(peer.bridge)
        subject = f"_I.{b64encode(peer.bridge)}{AUTH_SUFFIX}"
        head: list[tuple[int, object]] = [
            (Fid.USER_HMAC, self._user_hmac),
            (Fid.SEQNO, seqno),
            (Fid.TIME, now_ns),
            (Fid.UPTIME, max(0, now_ns - self.start_ns)),
            (Fid.INTERVAL, self.interval_s),
            (Fid.AUTH_SEQNO, matched_of_peer[0]),
            (Fid.AUTH_TIME, matched_of_peer[1]),
        ]
        if stage == STAGE_OK:
            fields = [*head, (Fid.AUTH_STAGE, stage), (Fid.USER, self.creds.user)]
            frame = encode_frame(MsgType.INBOX, subject, self.bridge, fields)
            self.mac.sign(frame)
            return frame
        assert matched is not None and peer_pub is not None
        nonce = os.urandom(NONCE_LEN)
        secret = self._ecdh.exchange(X25519PublicKey.from_public_bytes(peer_pub))
        static = self._ecdh.exchange(X25519PublicKey.from_public_bytes(self._static_pub(peer_user)))
        temp = self._temp_key(secret, static, _Sent(seqno, now_ns, nonce), matched)
        fields = [
            *head,
            (Fid.AUTH_KEY, _ctr(temp, self.session_key + _ZERO_CHECK)),
            (Fid.CNONCE, nonce),
            (Fid.PUBKEY, self.pubkey),
            (Fid.AUTH_STAGE, stage),
            (Fid.USER, self.creds.user),
            (Fid.CREATE, self.creds.create),
            (Fid.EXPIRES, self.creds.expires),
            (Fid.START, self.start_ns),
            (Fid.VERSION, __version__),
            (Fid.PK_SIG, _ZERO_SIG),
        ]
        frame = encode_frame(MsgType.INBOX, subject, self.bridge, fields)
        frame[-PK_SIG_LEN:] = self.creds.signing_key.sign(_sig_message(frame))
        self.mac.sign(frame)
        (peer.auth_sent if stage == STAGE_AUTH else peer.reply_sent).append(_Sent(seqno, now_ns, nonce))
        return frame

    def _temp_key(self, secret: bytes, static: bytes, sender: _Sent, matched: _Sent) -> bytes:
        return self.creds.kdf.derive(
            AUTH_LABEL, secret, static,
            sender.nonce, _U64(sender.seqno), _U64(sender.time_ns),
            matched.nonce, _U64(matched.seqno), _U64(matched.time_ns),
            length=TEMP_KEY_LEN,
        )

    # ------------------------------------------------------------ receiving

    def _peer(self, bridge: bytes) -> PeerState:
        p = self._peers.get(bridge)
        if p is None:
            if len(self._peers) >= MAX_PEERS:
                self._evict()
            p = self._peers[bridge] = PeerState(bridge)
        return p

    def _evict(self) -> None:
        victim = next((b for b, p in self._peers.items() if not p.authenticated), None)
        if victim is None:
            victim = next(iter(self._peers))
        del self._peers[victim]

    def _reject(self, bridge: bytes | None, user: str | None, kind: str, reason: str,
                now_ns: int | None = None) -> list[Event]:
        until = None
        if bridge is not None:
            p = self._peers.get(bridge)
            if p is not None:
                p.last_reason = reason
                if now_ns is not None:
                    until = now_ns + IGNORE_INTERVALS * self.interval_s * 1_000_000_000
                    p.ignore_until_ns = until
        ev = Rejected(bridge, user, reason, until, kind)
        self.rejections.append(ev)
        return [ev]

    def receive(self, now_ns: int, raw: bytes | bytearray, frame: Frame | None = None, *,
                challenge: bool = False) -> list[Event]:
        """Consume a received heartbeat or auth frame (`frame` if already decoded).
        `challenge`: it came on a link that is not up, so a known peer's current HELLO
        is answered with an auth 1 there (the link's proof of life)."""
        if frame is None:
            try:
                frame = decode_frame(raw)
            except WireError as exc:
                return self._reject(None, None, "malformed", f"malformed frame: {exc}")
        if frame.bridge == self.bridge:
            return []  # our own frame looped back
        p = self._peers.get(frame.bridge)
        if p is not None and p.ignore_until_ns > now_ns:
            return []
        if frame.msg_type == MsgType.HEARTBEAT and frame.subject in (HELLO_SUBJECT, HB_SUBJECT):
            return self._on_hello(now_ns, bytes(raw), frame, challenge)
        if frame.msg_type == MsgType.INBOX and frame.subject.endswith(AUTH_SUFFIX):
            if frame.subject != self._inbox_subject:
                return self._reject(frame.bridge, _str(frame, Fid.USER), "wrong_bridge",
                                    f"auth for another bridge: {frame.subject}")
            return self._on_auth(now_ns, bytes(raw), frame)
        return []

    def _on_hello(self, now_ns: int, raw: bytes, f: Frame, challenge: bool = False) -> list[Event]:
        user = _str(f, Fid.USER)
        seqno, t, start = _int(f, Fid.SEQNO), _int(f, Fid.TIME), _int(f, Fid.START)
        uh, nonce = _bytes(f, Fid.USER_HMAC, 16), _bytes(f, Fid.CNONCE, NONCE_LEN)
        pub, pkd = _bytes(f, Fid.PUBKEY, 32), _bytes(f, Fid.PK_DIGEST, PK_DIGEST_LEN)
        if None in (user, seqno, t, start, uh, nonce, pub, pkd) or f.fields[-1][0] != Fid.PK_DIGEST:
            return self._reject(f.bridge, user, "malformed", "hello lacks user, seqno, time, start, user_hmac, cnonce, "
                                                "pubkey or a final pk_digest")
        assert uh is not None and start is not None and seqno is not None and t is not None
        assert pkd is not None and nonce is not None and pub is not None
        if not hmac.compare_digest(_pk_digest(hello_key(self.creds, uh, start), raw), pkd):
            return self._reject(f.bridge, user, "hello_digest",
                                "hello digest does not verify: the sender's service public key or salt "
                                "is not ours, or the frame was altered")
        p = self._peer(f.bridge)
        if p.start_ns and start != p.start_ns:
            return self._reject(f.bridge, user, "start_mismatch",
                                f"hello start time {start} is not the start {p.start_ns} of that bridge")
        if seqno < p.hb_seqno:
            return self._reject(f.bridge, user, "replayed_hello", f"replayed hello: seqno {seqno} is before {p.hb_seqno}")
        if seqno == p.hb_seqno:
            # the peer's current HELLO again, sent on a new link: answered already, unless
            # the link must prove itself (challenge) or the session was forgotten; either
            # way the answer is an auth 1 that only the real peer can complete, given a
            # few times per HELLO (more is a replay flood, not new links)
            if not (p.forgotten or (challenge and p.authenticated)):
                return []
            p.challenges += 1
            if p.challenges > CHALLENGES_PER_HELLO:
                return self._reject(f.bridge, user, "replayed_hello",
                                    f"replayed hello: seqno {seqno} repeated {p.challenges} times")
        else:
            p.challenges = 0
            p.hb_seqno = seqno
            p.forgotten = False
            p.start_ns = start
            p.user = user
            if p.authenticated and p.trusts_us and not challenge:
                return []
        assert user is not None
        frame = self._auth_frame(now_ns, p, STAGE_AUTH, _Sent(seqno, t, nonce), pub, (seqno, t), user)
        return [Send(bytes(frame), f.bridge, p.out_seqno)]

    def _on_auth(self, now_ns: int, raw: bytes, f: Frame) -> list[Event]:
        user = _str(f, Fid.USER)
        seqno, t, stage = _int(f, Fid.SEQNO), _int(f, Fid.TIME), _int(f, Fid.AUTH_STAGE)
        a_seqno, a_time = _int(f, Fid.AUTH_SEQNO), _int(f, Fid.AUTH_TIME)
        if None in (user, seqno, t, stage, a_seqno, a_time) or stage not in (STAGE_AUTH, STAGE_REPLY, STAGE_OK):
            return self._reject(f.bridge, user, "malformed", "auth lacks user, seqno, time, auth_seqno, auth_time or stage")
        assert user is not None and seqno is not None and t is not None and stage is not None
        p = self._peer(f.bridge)
        if not p.auth_seqno.fresh(seqno):
            return self._reject(f.bridge, user, "replayed_auth", f"replayed auth: seqno {seqno} seen or too old (top {p.auth_seqno})")
        if stage == STAGE_OK:
            if p.mac is None or not p.mac.verify(raw):
                return self._reject(f.bridge, user, "bad_digest", "auth ok does not verify with the peer's session key", now_ns)
            if not any(s.seqno == a_seqno and s.time_ns == a_time for s in p.reply_sent):
                return self._reject(f.bridge, user, "stale_nonce", f"stale nonce: auth ok for seqno {a_seqno} matches "
                                                    "none of our last auth replies")
            p.auth_seqno.mark(seqno)
            p.trusts_us = True
            return [Confirmed(f.bridge, user)]
        # stage 1 answers one of our HELLOs, stage 2 one of our auth 1 to this peer
        history = self._hellos if stage == STAGE_AUTH else p.auth_sent
        matched = next((s for s in history if s.seqno == a_seqno and s.time_ns == a_time), None)
        if matched is None:
            what = "HELLOs" if stage == STAGE_AUTH else "auths sent to this peer"
            return self._reject(f.bridge, user, "stale_nonce", f"stale nonce: auth_seqno {a_seqno} / auth_time {a_time} "
                                                f"matches none of our last {len(history)} {what}")
        nonce, pub = _bytes(f, Fid.CNONCE, NONCE_LEN), _bytes(f, Fid.PUBKEY, 32)
        akey, sig = _bytes(f, Fid.AUTH_KEY, AUTH_KEY_LEN), _bytes(f, Fid.PK_SIG, PK_SIG_LEN)
        if None in (nonce, pub, akey, sig) or f.fields[-1][0] != Fid.PK_SIG:
            return self._reject(f.bridge, user, "malformed", "auth lacks cnonce, pubkey, auth_key or a final pk_sig")
        assert nonce is not None and pub is not None and akey is not None and sig is not None
        try:
            secret = self._ecdh.exchange(X25519PublicKey.from_public_bytes(pub))
            static = self.creds.signing_key.exchange(pub)
        except ValueError:
            return self._reject(f.bridge, user, "bad_key", "auth pubkey is not a usable X25519 key", now_ns)
        plain = _ctr(self._temp_key(secret, static, _Sent(seqno, t, nonce), matched), akey)
        key, check = plain[:SESSION_KEY_LEN], plain[SESSION_KEY_LEN:]
        if not hmac.compare_digest(check, _ZERO_CHECK):
            return self._reject(f.bridge, user, "bad_key", "auth key does not decrypt: key exchange, salt or our "
                                                "configured key mismatch", now_ns)
        mac = MacKey(key)
        if not mac.verify(raw):
            return self._reject(f.bridge, user, "bad_digest", "auth digest does not verify with its session key", now_ns)
        signer = self._check_signature(raw, sig, user, now_ns)
        if isinstance(signer, str):
            return self._reject(f.bridge, user, "bad_signature", signer, now_ns)
        start = _int(f, Fid.START) or 0
        if p.start_ns and start != p.start_ns:
            return self._reject(f.bridge, user, "start_mismatch",
                                f"auth start time {start} is not the start {p.start_ns} of that bridge")
        p.auth_seqno.mark(seqno)
        if stage == STAGE_REPLY:
            # (a stage 1 consumes nothing of ours: one HELLO may be answered by many peers)
            p.auth_sent.remove(matched)
            p.trusts_us = True
        out: list[Event] = []
        if p.session_key != key:
            p.session_key, p.mac, p.user = key, mac, user
            p.start_ns = start
            p.forgotten = False
            interval = _int(f, Fid.INTERVAL) or self.interval_s
            out.append(Authenticated(f.bridge, user, key, p.start_ns, _str(f, Fid.CREATE), signer, interval))
        else:  # the same session, proved live on this link (a new link's challenge)
            out.append(Confirmed(f.bridge, user) if stage == STAGE_REPLY else Fresh(f.bridge, user))
        reply_stage = STAGE_REPLY if stage == STAGE_AUTH else STAGE_OK
        frame = self._auth_frame(now_ns, p, reply_stage, _Sent(seqno, t, nonce), pub, (seqno, t), user)
        out.append(Send(bytes(frame), f.bridge, p.out_seqno))
        return out

    def _check_signature(self, raw: bytes, sig: bytes, user: str, now_ns: int) -> Signer | str:
        """The signer, or the reason the signature is refused."""
        message = _sig_message(raw)
        if self.creds.svc_pub.verify(sig, message):
            return Signer.SERVICE
        known = self.creds.users.get(user)
        if known is None:
            return (f"signature is not by service {self.creds.svc!r} and user {user!r} "
                    "is not signed by this service")
        if not known.pub.verify(sig, message):
            return f"signature verifies with neither service {self.creds.svc!r} nor user {user!r}"
        if _expired(known.expires, now_ns):
            return f"user {user!r} expired at {known.expires}"
        return Signer.USER
