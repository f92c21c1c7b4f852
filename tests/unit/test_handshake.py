"""The HELLO -> AUTH -> AUTH -> AUTH_OK exchange between in-memory peers, and its failures."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

import pytest

from raims_node.config import tree
from raims_node.config.gen_key import export_user_config, new_network_config
from raims_node.config.keyset import ServiceKeys, credentials
from raims_node.crypto.credentials import Credentials, Signer
from raims_node.crypto.handshake import (
    HB_SUBJECT,
    HELLO_SUBJECT,
    Authenticated,
    Confirmed,
    Event,
    Handshake,
    Rejected,
    Send,
)
from raims_node.crypto.kdf import SALT_LEN, Kdf
from raims_node.crypto.keys import KeyPair
from raims_node.crypto.mac import MacKey, sign
from raims_node.wire import DIGEST_OFFSET, Fid, MsgType, decode_frame, encode_frame

SEC = 1_000_000_000
NOW = 1_700_000_000 * SEC


@pytest.fixture(scope="module")
def net() -> dict[str, Any]:
    return new_network_config("test", ["A", "B", "C"])


@pytest.fixture(scope="module")
def keys(net: dict[str, Any]) -> ServiceKeys:
    return ServiceKeys.from_tree(tree.from_dict(net))


def node(net: dict[str, Any], user: str, exported: bool = True) -> Handshake:
    """A node as deployed: from its own exported configuration."""
    cfg = export_user_config(net, user) if exported else net
    return Handshake(credentials(tree.from_dict(cfg), user), os.urandom(16), NOW - 5 * SEC)


class Wire:
    """Delivers Send events between handshakes, collecting every other event."""

    def __init__(self, *nodes: Handshake) -> None:
        self.nodes = {n.bridge: n for n in nodes}
        self.events: dict[bytes, list[Event]] = {n.bridge: [] for n in nodes}
        self.sent: list[tuple[bytes, bytes, bytes]] = []  # (src, dst, frame)

    def deliver(self, src: Handshake, dst: Handshake, frame: bytes, now: int = NOW) -> list[Event]:
        queue = [(src.bridge, dst.bridge, frame)]
        out: list[Event] = []
        while queue:
            s, d, f = queue.pop(0)
            self.sent.append((s, d, f))
            evs = self.nodes[d].receive(now, f)
            for ev in evs:
                if isinstance(ev, Send):
                    assert ev.dest == s
                    queue.append((d, s, ev.frame))
                else:
                    self.events[d].append(ev)
                    out.append(ev)
        return out

    def of(self, n: Handshake, kind: type) -> list[Any]:
        return [e for e in self.events[n.bridge] if isinstance(e, kind)]


def test_two_peers_agree_on_session_keys(net: dict[str, Any]) -> None:
    a, b = node(net, "A"), node(net, "B")
    w = Wire(a, b)
    w.deliver(a, b, bytes(a.hello(NOW)))
    [auth_b] = w.of(a, Authenticated)
    [auth_a] = w.of(b, Authenticated)
    assert auth_b.session_key == b.session_key and auth_b.user == "B" and auth_b.signer is Signer.USER
    assert auth_a.session_key == a.session_key and auth_a.user == "A"
    assert auth_b.start_ns == b.start_ns and auth_b.interval_s == 10
    assert [c.user for c in w.of(a, Confirmed)] == ["B"]
    assert not w.of(a, Rejected) and not w.of(b, Rejected)
    # the manual's four messages: HELLO, auth 1, auth 2, auth 3 (AUTH_OK)
    stages = [decode_frame(f).get(Fid.AUTH_STAGE) for _, _, f in w.sent]
    assert stages == [None, 1, 2, 3]
    subjects = [decode_frame(f).subject for _, _, f in w.sent]
    assert subjects[0] == HELLO_SUBJECT and subjects[1].endswith(".auth") and subjects[1].startswith("_I.")
    # every frame of the exchange carries its sender's session-key digest
    for src, _, f in w.sent:
        assert MacKey(w.nodes[src].session_key).verify(f)
    # both peers now verify each other's data frames, and a flipped bit fails
    data = encode_frame(MsgType.MCAST, "X.Y", a.bridge, [(Fid.SEQNO, 1), (Fid.DATA, b"payload")])
    sign(data, a.session_key)
    pb = b.peer(a.bridge)
    assert pb is not None and pb.mac is not None and pb.mac.verify(data)
    data[60] ^= 0x10
    assert not pb.mac.verify(data)
    # heartbeats after authentication start nothing new
    assert w.deliver(a, b, bytes(a.hello(NOW + SEC, heartbeat=True))) == []
    assert decode_frame(w.sent[-1][2]).subject == HB_SUBJECT


def test_three_peers_with_simultaneous_hellos(net: dict[str, Any]) -> None:
    a, b, c = node(net, "A"), node(net, "B"), node(net, "C")
    w = Wire(a, b, c)
    for x, y in ((a, b), (b, c), (a, c)):
        hx, hy = bytes(x.hello(NOW)), bytes(y.hello(NOW))
        w.deliver(x, y, hx)
        w.deliver(y, x, hy)
    for n in (a, b, c):
        others = [m for m in (a, b, c) if m is not n]
        for m in others:
            p = n.peer(m.bridge)
            assert p is not None and p.session_key == m.session_key and p.trusts_us
        # one Authenticated per peer even though the exchange ran both ways
        assert sorted(e.user for e in w.of(n, Authenticated)) == sorted(o.creds.user for o in others)
        assert not w.of(n, Rejected)


def test_node_with_only_the_service_key_signs_as_service(net: dict[str, Any]) -> None:
    t = tree.from_dict(net)
    only_svc = Handshake(credentials(t, "newnode"), os.urandom(16), NOW)
    assert only_svc.creds.signer is Signer.SERVICE
    a = node(net, "A")
    w = Wire(a, only_svc)
    w.deliver(only_svc, a, bytes(only_svc.hello(NOW)))
    [auth] = w.of(a, Authenticated)
    assert auth.user == "newnode" and auth.signer is Signer.SERVICE
    assert w.of(only_svc, Authenticated)[0].signer is Signer.USER


def _attacker(keys: ServiceKeys, user: str, pair: KeyPair) -> Handshake:
    """Knows the salt and the service public key, but not a key the service signed."""
    good = keys.credentials("A")
    creds = Credentials(good.kdf, good.svc, good.svc_pub, user, "1.0", None, Signer.USER, pair, good.users)
    return Handshake(creds, os.urandom(16), NOW)


def test_user_signed_by_another_service_is_rejected_and_ignored(net: dict[str, Any], keys: ServiceKeys) -> None:
    other = ServiceKeys.create_new("test")
    m = other.add_user("M")
    assert m.pair is not None
    evil = _attacker(keys, "M", m.pair)
    a = node(net, "A")
    w = Wire(a, evil)
    # evil starts: a's auth 1 is encrypted to the service's key, which evil cannot read
    w.deliver(evil, a, bytes(evil.hello(NOW)))
    assert not w.of(evil, Authenticated) and not w.of(a, Authenticated)
    [failed] = w.of(evil, Rejected)
    assert "auth key does not decrypt" in failed.reason
    # a starts: evil's auth 1 reaches a, whose signature check refuses it
    evil = _attacker(keys, "M", m.pair)  # (the first one now ignores a)
    w = Wire(a, evil)
    w.deliver(a, evil, bytes(a.hello(NOW)))
    [rej] = w.of(a, Rejected)
    assert rej.user == "M" and "not signed by this service" in rej.reason
    assert rej.ignore_until_ns == NOW + 20 * SEC
    p = a.peer(evil.bridge)
    assert p is not None and p.last_reason == rej.reason and not p.authenticated
    assert list(a.rejections) == [rej]
    # ignored for two heartbeat intervals, then heard again
    assert a.receive(NOW + 19 * SEC, bytes(evil.hello(NOW + 19 * SEC))) == []
    again = a.receive(NOW + 21 * SEC, bytes(evil.hello(NOW + 21 * SEC)))
    assert [type(e) for e in again] == [Send]


def test_claiming_a_configured_user_with_another_key_is_rejected(net: dict[str, Any], keys: ServiceKeys) -> None:
    evil = _attacker(keys, "B", KeyPair.generate())
    a = node(net, "A")
    w = Wire(a, evil)
    w.deliver(a, evil, bytes(a.hello(NOW)))
    [rej] = w.of(a, Rejected)
    assert "verifies with neither service 'test' nor user 'B'" in rej.reason


def _first_auth(a: Handshake, b: Handshake) -> bytes:
    """b's auth 1 answering a's HELLO."""
    [ev] = b.receive(NOW, bytes(a.hello(NOW)))
    assert isinstance(ev, Send)
    return ev.frame


def test_tampered_signature_is_rejected(net: dict[str, Any]) -> None:
    a, b = node(net, "A"), node(net, "B")
    auth = bytearray(_first_auth(a, b))
    auth[-5] ^= 0x01  # inside pk_sig, the last field
    sign(auth, b.session_key)  # an attacker able to fix the digest still fails the signature
    [rej] = a.receive(NOW, bytes(auth))
    assert isinstance(rej, Rejected) and "signature verifies with neither" in rej.reason
    assert a.peer(b.bridge).session_key is None  # type: ignore[union-attr]


def test_flipped_bit_fails_the_digest(net: dict[str, Any]) -> None:
    a, b = node(net, "A"), node(net, "B")
    auth = bytearray(_first_auth(a, b))
    auth[-5] ^= 0x01
    [rej] = a.receive(NOW, bytes(auth))
    assert isinstance(rej, Rejected) and "digest does not verify" in rej.reason
    assert rej.ignore_until_ns is not None


def test_replayed_hello_is_rejected(net: dict[str, Any]) -> None:
    a, b = node(net, "A"), node(net, "B")
    old = bytes(a.hello(NOW))
    current = bytes(a.hello(NOW + 1))
    assert isinstance(b.receive(NOW, current)[0], Send)
    [rej] = b.receive(NOW, old)
    assert isinstance(rej, Rejected) and rej.reason.startswith("replayed hello")
    assert rej.ignore_until_ns is None  # a replay does not lock the real peer out


def test_the_current_hello_again_is_not_a_replay(net: dict[str, Any]) -> None:
    """A node sends its current HELLO on every new link (an AUTH must answer one of its
    last two): seen again on a second link it asks nothing, and refuses nothing."""
    a, b = node(net, "A"), node(net, "B")
    hello = bytes(a.hello(NOW))
    assert isinstance(b.receive(NOW, hello)[0], Send)
    assert b.receive(NOW, hello) == []
    assert not b.rejections


def test_replayed_auth_is_rejected(net: dict[str, Any]) -> None:
    a, b = node(net, "A"), node(net, "B")
    auth = _first_auth(a, b)
    first = a.receive(NOW, auth)
    assert [type(e) for e in first] == [Authenticated, Send]
    [rej] = a.receive(NOW, auth)
    assert isinstance(rej, Rejected) and rej.reason.startswith("replayed auth")
    # a replayed auth 2 to b is refused as well
    reply = first[1]
    assert isinstance(reply, Send)
    assert [type(e) for e in b.receive(NOW, reply.frame)] == [Authenticated, Send]
    [rej2] = b.receive(NOW, reply.frame)
    assert isinstance(rej2, Rejected) and rej2.reason.startswith("replayed auth")


def test_an_auth_overtaken_by_a_later_one_on_another_link_is_not_a_replay(net: dict[str, Any]) -> None:
    """Both peers say HELLO at once (two links): b's auth 1 (seqno 1) and then its auth 2
    (seqno 2) reach a in the opposite order. Before: the auth 1 was refused as a replay
    ("seqno 1 is not after 2"); now each is taken once, and a repeat is still refused."""
    a, b = node(net, "A"), node(net, "B")
    [b_auth1] = b.receive(NOW, bytes(a.hello(NOW)))
    [a_auth1] = a.receive(NOW, bytes(b.hello(NOW)))
    assert isinstance(b_auth1, Send) and isinstance(a_auth1, Send)
    b_auth2 = b.receive(NOW, a_auth1.frame)[-1]
    assert isinstance(b_auth2, Send)
    assert [type(e) for e in a.receive(NOW, b_auth2.frame)] == [Authenticated, Send]
    late = a.receive(NOW, b_auth1.frame)
    assert not any(isinstance(e, Rejected) for e in late) and isinstance(late[-1], Send), late
    for frame in (b_auth1.frame, b_auth2.frame):
        [rej] = a.receive(NOW, frame)
        assert isinstance(rej, Rejected) and rej.kind == "replayed_auth"


def test_stale_nonce_is_rejected(net: dict[str, Any]) -> None:
    a, b = node(net, "A"), node(net, "B")
    [ev] = b.receive(NOW, bytes(a.hello(NOW)))
    assert isinstance(ev, Send)
    a.hello(NOW + 10 * SEC)
    a.hello(NOW + 20 * SEC)  # a now remembers only its last two HELLOs
    [rej] = a.receive(NOW + 20 * SEC, ev.frame)
    assert isinstance(rej, Rejected) and rej.reason.startswith("stale nonce")
    assert rej.ignore_until_ns is None


def test_wrong_salt_is_rejected(net: dict[str, Any]) -> None:
    a, b = node(net, "A"), node(net, "B")
    b.creds = replace(b.creds, kdf=Kdf(os.urandom(SALT_LEN)))
    [rej] = b.receive(NOW, bytes(a.hello(NOW)))
    assert isinstance(rej, Rejected) and "salt" in rej.reason and rej.kind == "hello_digest"
    assert b.peer(a.bridge) is None


def test_other_service_key_is_rejected(net: dict[str, Any]) -> None:
    a = node(net, "A")
    other = new_network_config("test", ["B"])
    b = Handshake(credentials(tree.from_dict(other), "B"), os.urandom(16), NOW)
    [rej] = b.receive(NOW, bytes(a.hello(NOW)))
    assert isinstance(rej, Rejected) and "salt" in rej.reason and rej.kind == "hello_digest"


def test_expired_user_is_rejected(keys: ServiceKeys) -> None:
    ks = ServiceKeys(keys.svc, keys.create, keys.pub, keys.secrets, keys.pair)
    old = ks.add_user("old", expires=str((NOW - SEC) // SEC))
    ks.add_user("fresh")
    assert old.pair is not None
    old_node = Handshake(ks.credentials("old"), os.urandom(16), NOW)
    fresh = Handshake(ks.credentials("fresh"), os.urandom(16), NOW)
    w = Wire(old_node, fresh)
    w.deliver(old_node, fresh, bytes(old_node.hello(NOW)))
    [rej] = w.of(fresh, Rejected)
    assert "expired" in rej.reason


def test_auth_for_another_bridge_and_garbage(net: dict[str, Any]) -> None:
    a, b, c = node(net, "A"), node(net, "B"), node(net, "C")
    auth_for_a = _first_auth(a, b)
    [rej] = c.receive(NOW, auth_for_a)
    assert isinstance(rej, Rejected) and "another bridge" in rej.reason
    [bad] = c.receive(NOW, b"\x80garbage")
    assert isinstance(bad, Rejected) and bad.reason.startswith("malformed frame")
    # a frame that is neither heartbeat nor auth is not the handshake's business
    other = encode_frame(MsgType.MCAST, "X", a.bridge, [])
    assert c.receive(NOW, bytes(other)) == []
    # our own HELLO looped back is ignored
    assert a.receive(NOW, bytes(a.hello(NOW))) == []


def test_hello_digest_covers_the_frame(net: dict[str, Any]) -> None:
    a, b = node(net, "A"), node(net, "B")
    hello = bytearray(a.hello(NOW))
    hello[DIGEST_OFFSET + 40] ^= 1  # somewhere in the fields
    [rej] = b.receive(NOW, bytes(hello))
    assert isinstance(rej, Rejected) and "hello" in rej.reason


def test_master_config_node_and_exported_node_interoperate(net: dict[str, Any]) -> None:
    a = node(net, "A", exported=False)
    c = node(net, "C")
    w = Wire(a, c)
    w.deliver(c, a, bytes(c.hello(NOW)))
    assert a.peer(c.bridge).session_key == c.session_key  # type: ignore[union-attr]
    assert c.peer(a.bridge).session_key == a.session_key  # type: ignore[union-attr]
