"""NATS sessions on an in-memory bus: transcripts checked against nats-server, routing,
flags, auth, limits, slow consumers."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raims_node.bridges import (
    AuthorizationViolation,
    FlowLimits,
    NatsConfig,
    NatsSession,
    SlowConsumer,
    StaleConnection,
)
from raims_node.bridges.nats_proto import ControlLineTooLong, PayloadTooLarge, UnknownOperation
from raims_node.router.no_responders import STATUS_503
from tests.unit.test_nats_redis_bus import MemoryBus, nats


def fresh(bus: MemoryBus | None = None, client_id: int = 1, **config: object) -> NatsSession:
    """A session with its INFO already taken."""
    s = NatsSession(bus or MemoryBus(), client_id, NatsConfig(server_id="TEST", **config))  # type: ignore[arg-type]
    s.pending_output()
    return s


def run(data: bytes, **config: object) -> bytes:
    s = fresh(**config)
    s.data_received(data)
    return s.pending_output()


# Replies of nats-server 2.9.10 to the same bytes (its INFO line removed).
NATS_SERVER_TRANSCRIPTS = [
    (b"PING\r\nSUB foo 1\r\nPUB foo 2\r\nhi\r\nUNSUB 1\r\nUNSUB 9\r\nPING\r\n",
     b"PONG\r\n+OK\r\n+OK\r\nMSG foo 1 2\r\nhi\r\n+OK\r\n+OK\r\nPONG\r\n"),
    (b"CONNECT {}\r\nSUB foo 1\r\nPUB foo r 2\r\nhi\r\nPING\r\n",
     b"+OK\r\n+OK\r\n+OK\r\nMSG foo 1 r 2\r\nhi\r\nPONG\r\n"),
    (b"CONNECT {}\r\nPUB foo.* 1\r\nx\r\nPING\r\n",
     b"+OK\r\n-ERR 'Invalid Publish Subject'\r\n+OK\r\nPONG\r\n"),
    (b'CONNECT {"verbose":false}\r\nPUB foo.* 1\r\nx\r\nPUB foo.> 1\r\nx\r\nPING\r\n',
     b"-ERR 'Invalid Publish Subject'\r\n-ERR 'Invalid Publish Subject'\r\nPONG\r\n"),
    (b'CONNECT {"verbose":false,"pedantic":false}\r\nPUB foo..x 1\r\nx\r\nPING\r\n', b"PONG\r\n"),
    (b'CONNECT {"verbose":false}\r\nSUB foo..bar 1\r\nSUB foo.>.bar 2\r\nSUB . 3\r\nSUB foo.> 4\r\n'
     b"SUB * 5\r\nSUB foo* 6\r\nPING\r\n",
     b"-ERR 'Invalid Subject'\r\n-ERR 'Invalid Subject'\r\n-ERR 'Invalid Subject'\r\nPONG\r\n"),
    (b'CONNECT {"verbose":false}\r\nSUB a 1\r\nUNSUB 1 2\r\nPUB a 1\r\nx\r\nPUB a 1\r\ny\r\n'
     b"PUB a 1\r\nz\r\nPING\r\n", b"MSG a 1 1\r\nx\r\nMSG a 1 1\r\ny\r\nPONG\r\n"),
    (b'CONNECT {"verbose":false}\r\nSUB a 1\r\nUNSUB 1 x\r\nPUB a 1\r\nx\r\nPING\r\n', b"PONG\r\n"),
    (b"FOO\r\n", b"-ERR 'Unknown Protocol Operation'\r\n"),
    (b"PUB foo 2\r\nabc\r\n", b"-ERR 'Unknown Protocol Operation'\r\n"),
    (b"PUB foo 2000000\r\n", b"-ERR 'Maximum Payload Violation'\r\n"),
    (b'CONNECT {"protocol":2}\r\n', b"-ERR 'invalid client protocol'\r\n"),
    (b'CONNECT {"no_responders":true}\r\n', b"-ERR 'no responders requires headers support'\r\n"),
    (b'CONNECT {"echo":false,"verbose":false}\r\nSUB a 1\r\nPUB a 1\r\nx\r\nPING\r\n', b"PONG\r\n"),
    (b"sub a 1\npub a 2\nhi\r\nping\n", b"+OK\r\n+OK\r\nMSG a 1 2\r\nhi\r\nPONG\r\n"),
    (b"SUB\ta\t1\r\nPUB\ta  2\r\nhi\r\nPING\r\n", b"+OK\r\n+OK\r\nMSG a 1 2\r\nhi\r\nPONG\r\n"),
    (b"\r\n", b"-ERR 'Unknown Protocol Operation'\r\n"),
    (b"PINGX\r\nPONG\r\n", b"PONG\r\n"),
    (b'CONNECT{"verbose":false}\r\nPING\r\n', b"PONG\r\n"),
    (b'CONNECT {"verbose":false,"headers":true}\r\nSUB a 1\r\nHPUB a r 12 14\r\nNATS/1.0\r\n\r\nhi\r\n'
     b"HPUB a 0 2\r\nhi\r\nPING\r\n",
     b"HMSG a 1 r 12 14\r\nNATS/1.0\r\n\r\nhi\r\nMSG a 1 2\r\nhi\r\nPONG\r\n"),
    (b"UNSUB\r\n", b"-ERR 'Unknown Protocol Operation'\r\n"),
    (b"MSG a 1 2\r\nhi\r\n", b"-ERR 'Unknown Protocol Operation'\r\n"),
    (b"INFO {}\r\nPING\r\n", b"PONG\r\n"),
    (b"+OK\r\nPING\r\n", b"PONG\r\n"),
    (b'CONNECT {"verbose":false}\r\nSUB a q 1\r\nSUB a 1\r\nPUB a 1\r\nx\r\nPING\r\n',
     b"MSG a 1 1\r\nx\r\nPONG\r\n"),
    (b"PUB a 1\r\nxx\r\n", b"-ERR 'Unknown Protocol Operation'\r\n"),
    (b"PUB a 01\r\nx\r\nPING\r\n", b"+OK\r\nPONG\r\n"),
    # found by tests/integration/test_nats_differential.py (2026-11-27)
    (b" SUB a 1\r\n", b"-ERR 'Unknown Protocol Operation'\r\n"),
    (b'CONNECT {"VERBOSE":false,"Headers":true}\r\nSUB a 1\r\nHPUB a 12 14\r\nNATS/1.0\r\n\r\nhi\r\nPING\r\n',
     b"HMSG a 1 12 14\r\nNATS/1.0\r\n\r\nhi\r\nPONG\r\n"),
    (b'CONNECT {"verbose":false,"Verbose":true}\r\nPING\r\n', b"+OK\r\nPONG\r\n"),
    (b'CONNECT {"verbose":null,"echo":null,"headers":null,"name":null,"protocol":null}\r\nPING\r\n',
     b"+OK\r\nPONG\r\n"),
    (b'CONNECT {"verbose":false,"name":"\xff","\xfe":1}\r\nPING\r\n', b"PONG\r\n"),
    (b'CONNECT {"verbose":false,"headers":true}\r\nSUB a 1\r\nCONNECT {}\r\n'
     b"HPUB a 12 14\r\nNATS/1.0\r\n\r\nhi\r\nPING\r\n", b"HMSG a 1 12 14\r\nNATS/1.0\r\n\r\nhi\r\nPONG\r\n"),
    (b'CONNECT {"verbose":false}\r\nSUB a 1\r\nUNSUB 1 1000000000\r\nPUB a 1\r\nx\r\nPING\r\n', b"PONG\r\n"),
    # nats-server closes these silently; raims says why (nats_proto.py)
    (b'CONNECT {"verbose":false}\r\nSUB a 1\r\nHPUB a 0 1\r\nx\r\n', b"-ERR 'Unknown Protocol Operation'\r\n"),
    (b'CONNECT {"verbose":false,"x":NaN}\r\nPING\r\n', b"-ERR 'Unknown Protocol Operation'\r\n"),
    (b"PUB a 0000000001\r\nx\r\n", b"-ERR 'Unknown Protocol Operation'\r\n"),
    (b'CONNECT {"protocol":99999999999999999999}\r\n', b"-ERR 'Unknown Protocol Operation'\r\n"),
]


@pytest.mark.parametrize(("data", "reply"), NATS_SERVER_TRANSCRIPTS)
def test_replies_match_nats_server(data: bytes, reply: bytes) -> None:
    assert run(data) == reply


@settings(max_examples=60, deadline=None)
@given(case=st.sampled_from(NATS_SERVER_TRANSCRIPTS), split=st.integers(1, 7))
def test_replies_do_not_depend_on_read_boundaries(case: tuple[bytes, bytes], split: int) -> None:
    data, reply = case
    s = fresh()
    out = b""
    for i in range(0, len(data), split):
        s.data_received(data[i:i + split])
        out += s.pending_output()
    assert out == reply


# ---------------------------------------------------------------- INFO and CONNECT

def test_info_advertises_the_server() -> None:
    s = NatsSession(MemoryBus(), 42, NatsConfig(server_id="NODE", max_payload=1000, port=4999),
                    client_ip="10.0.0.1")
    line = s.pending_output()
    assert line.startswith(b"INFO {") and line.endswith(b"} \r\n")
    info = json.loads(line[5:])
    assert info["server_id"] == "NODE" and info["version"].startswith("2.") and info["proto"] == 1
    assert info["headers"] is True and info["max_payload"] == 1000 and info["client_id"] == 42
    assert info["port"] == 4999 and info["client_ip"] == "10.0.0.1" and "auth_required" not in info
    auth = NatsSession(MemoryBus(), 1, NatsConfig(server_id="N", token="t")).pending_output()
    assert json.loads(auth[5:])["auth_required"] is True


def test_connect_sets_the_client_flags() -> None:
    s = fresh()
    s.data_received(b'CONNECT {"verbose":false,"pedantic":false,"echo":false,"headers":true,'
                    b'"no_responders":true,"name":"app","lang":"python3","version":"2.1"}\r\n')
    assert s.pending_output() == b""
    assert (s.verbose, s.pedantic, s.echo, s.headers, s.no_responders) == (False, False, False, True, True)
    assert (s.name, s.lang, s.version, s.connected) == ("app", "python3", "2.1", True)


@pytest.mark.parametrize("options", [b'{"verbose":"yes"}', b'{"name":5}', b'{"protocol":"1"}',
                                     b'{"protocol":true}'])
def test_connect_with_badly_typed_options_closes(options: bytes) -> None:
    s = fresh()
    s.data_received(b"CONNECT %s\r\nPING\r\n" % options)
    assert s.pending_output() == b"-ERR 'Unknown Protocol Operation'\r\n"
    assert s.closing and isinstance(s.close_error, UnknownOperation)


# ---------------------------------------------------------------- auth

@pytest.mark.parametrize(("config", "connect", "ok"), [
    ({"user": "u", "password": "p"}, b'{"user":"u","pass":"p","verbose":false}', True),
    ({"user": "u", "password": "p"}, b'{"user":"u","pass":"x"}', False),
    ({"user": "u", "password": "p"}, b'{"user":"u"}', False),
    ({"user": "u", "password": "p"}, b"{}", False),
    ({"token": "tok"}, b'{"auth_token":"tok","verbose":false}', True),
    ({"token": "tok"}, b'{"auth_token":"bad"}', False),
    ({"token": "tok"}, b'{"user":"tok"}', False),
])
def test_credentials(config: dict[str, str], connect: bytes, ok: bool) -> None:
    bus = MemoryBus()
    s = fresh(bus, **config)
    s.data_received(b"CONNECT %s\r\nSUB a 1\r\nPING\r\n" % connect)
    if ok:
        assert s.pending_output() == b"PONG\r\n" and len(bus.entries) == 1
    else:
        assert s.pending_output() == b"-ERR 'Authorization Violation'\r\n"
        assert isinstance(s.close_error, AuthorizationViolation) and not bus.entries


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                    max_leaves=6)
OPTION = st.sampled_from(["verbose", "pedantic", "echo", "headers", "no_responders", "name", "lang",
                          "version", "user", "pass", "auth_token", "protocol", "other"])


@settings(max_examples=200, deadline=None)
@given(options=st.dictionaries(OPTION, JSON | st.sampled_from(["u", "p", "\udc80"]), max_size=6),
       auth=st.booleans())
def test_any_connect_options_are_answered_not_raised(options: dict[str, object], auth: bool) -> None:
    bus = MemoryBus()
    s = fresh(bus, **({"user": "u", "password": "p"} if auth else {}))
    s.data_received(b"CONNECT %s\r\nSUB a 1\r\nPING\r\n" % json.dumps(options).encode())
    out = s.pending_output()
    assert out.endswith(b"PONG\r\n") or (s.closing and out.startswith(b"-ERR '"))
    assert s.connected is (not s.closing)


@pytest.mark.parametrize("first", [b"PING\r\n", b"SUB a 1\r\n", b"PUB a 1\r\nx\r\n",
                                   b"INFO {}\r\n", b"+OK\r\n", b"XYZ\r\n", b"\r\n"])  # nats-server's first byte check
def test_nothing_but_connect_before_authenticating(first: bytes) -> None:
    bus = MemoryBus()
    s = fresh(bus, user="u", password="p")
    s.data_received(first + b'CONNECT {"user":"u","pass":"p"}\r\n')
    assert s.pending_output() == b"-ERR 'Authorization Violation'\r\n"
    assert s.closing and not bus.entries and not bus.published


def test_a_later_connect_is_checked_with_the_credentials_so_far() -> None:
    """As nats-server: a second CONNECT keeps the credentials it does not name."""
    s = fresh(user="u", password="p")
    s.data_received(b'CONNECT {"user":"u","pass":"p","verbose":false}\r\nCONNECT {"echo":false}\r\nPING\r\n')
    assert s.pending_output() == b"PONG\r\n"
    s.data_received(b'CONNECT {"pass":"x"}\r\n')
    assert s.pending_output() == b"-ERR 'Authorization Violation'\r\n" and s.closing


# ---------------------------------------------------------------- routing through the bus

def test_literal_and_wildcard_subscriptions_reach_the_bus_with_their_syntax() -> None:
    bus = MemoryBus()
    s = nats(bus, 1)
    s.data_received(b"SUB a.b 1\r\nSUB a.* 2\r\nSUB a.> q 3\r\nSUB a*.b 4\r\n")
    got = {sid: (e.subject, e.syntax, e.queue) for (_, sid), e in bus.entries.items()}
    assert got == {"1": ("a.b", None, None), "2": ("a.*", "rv", None), "3": ("a.>", "rv", "q"),
                   "4": ("a*.b", None, None)}
    s.data_received(b"UNSUB 2\r\nUNSUB 3\r\n")
    assert set(sid for _, sid in bus.entries) == {"1", "4"}


def test_wildcard_delivery_carries_the_published_subject() -> None:
    bus = MemoryBus()
    sub, pub = nats(bus, 1), nats(bus, 2)
    sub.data_received(b"SUB orders.> 5\r\n")
    pub.data_received(b"PUB orders.eu.fr _INBOX.abc.1 3\r\nbuy\r\n")
    assert sub.pending_output() == b"MSG orders.eu.fr 5 _INBOX.abc.1 3\r\nbuy\r\n"
    assert sub.msgs_out == 1 and pub.msgs_in == 1


@pytest.mark.parametrize(("subject", "reply"), [
    ("X 1 5\r\nEVIL!\r\nMSG Y", None),  # an RV or Redis subject: would forge a second MSG
    ("orders.eu", "R 2\r\nPING"), ("orders.a\tb", None), ("orders.\x00", None),
])
def test_a_subject_nats_cannot_frame_is_skipped_not_written(subject: str, reply: str | None) -> None:
    """Subjects from other protocols reach NATS wildcards; one with spaces, CR LF or
    controls is skipped and counted (the RV probe forged messages in nats-py with one)."""
    s = fresh()
    s.data_received(b"SUB > 5\r\n")
    s.pending_output()
    s.deliver("5", subject, reply, None, b"real")
    s.deliver("5", "orders.ok", None, None, b"fine")
    assert s.pending_output() == b"MSG orders.ok 5 4\r\nfine\r\n"
    assert (s.unframable, s.msgs_out) == (1, 1)


def test_queue_group_members_share_the_messages_and_plain_subscribers_get_all() -> None:
    bus = MemoryBus()
    members = [nats(bus, i) for i in (1, 2, 3)]
    for m in members:
        m.data_received(b"SUB work workers 1\r\n")
    watcher = nats(bus, 4)
    watcher.data_received(b"SUB work 1\r\n")
    pub = nats(bus, 5)
    for i in range(30):
        pub.data_received(b"PUB work 2\r\n%02d\r\n" % i)
    counts = [m.pending_output().count(b"MSG work 1 2\r\n") for m in members]
    assert sum(counts) == 30 and all(c > 0 for c in counts)
    assert watcher.pending_output().count(b"MSG work 1 2\r\n") == 30


def test_unsubscribe_after_max_messages_leaves_the_bus() -> None:
    bus = MemoryBus()
    sub, pub = nats(bus, 1), nats(bus, 2)
    sub.data_received(b"SUB a 9\r\nUNSUB 9 3\r\n")
    for i in range(5):
        pub.data_received(b"PUB a 1\r\n%d\r\n" % i)
    assert sub.pending_output() == b"MSG a 9 1\r\n0\r\nMSG a 9 1\r\n1\r\nMSG a 9 1\r\n2\r\n"
    assert not bus.entries and sub.subscriptions == 0


@pytest.mark.parametrize("first", [b"", b"UNSUB 9 5\r\n"])
def test_unsub_max_already_reached_unsubscribes_at_once(first: bytes) -> None:
    bus = MemoryBus()
    sub, pub = nats(bus, 1), nats(bus, 2)
    sub.data_received(b"SUB a 9\r\n" + first)
    pub.data_received(b"PUB a 1\r\nx\r\nPUB a 1\r\ny\r\nPUB a 1\r\nz\r\n")
    sub.data_received(b"UNSUB 9 2\r\n")
    assert not bus.entries and sub.pending_output().count(b"MSG a 9 1") == 3


def test_echo() -> None:
    bus = MemoryBus()
    loud = nats(bus, 1)
    loud.data_received(b"SUB me 1\r\nPUB me 2\r\nhi\r\n")
    assert loud.pending_output() == b"MSG me 1 2\r\nhi\r\n"
    quiet = fresh(bus, client_id=2)
    quiet.data_received(b'CONNECT {"echo":false,"verbose":false}\r\nSUB me 2\r\nPUB me 2\r\nhi\r\n')
    assert quiet.pending_output() == b""
    assert loud.pending_output() == b"MSG me 1 2\r\nhi\r\n"  # others still get it


def test_headers_only_for_clients_that_negotiated_them() -> None:
    bus = MemoryBus()
    with_h = nats(bus, 1)
    without = fresh(bus, client_id=2)
    without.data_received(b'CONNECT {"verbose":false}\r\n')
    for s in (with_h, without):
        s.data_received(b"SUB h 1\r\n")
    bus.publish(None, "h", "r", b"NATS/1.0\r\na: b\r\n\r\n", b"body")
    assert with_h.pending_output() == b"HMSG h 1 r 18 22\r\nNATS/1.0\r\na: b\r\n\r\nbody\r\n"
    assert without.pending_output() == b"MSG h 1 r 4\r\nbody\r\n"


def test_hpub_without_negotiated_headers_closes() -> None:
    bus = MemoryBus()
    s = fresh(bus)
    s.data_received(b'CONNECT {"verbose":false}\r\nHPUB a 12 12\r\nNATS/1.0\r\n\r\n\r\n')
    assert s.pending_output() == b"-ERR 'Unknown Protocol Operation'\r\n" and not bus.published


def test_pedantic_refuses_wildcard_publish_and_others_route_it_literally() -> None:
    bus = MemoryBus()
    strict = fresh(bus)
    strict.data_received(b'CONNECT {"verbose":false}\r\nPUB a.* 1\r\nx\r\n')
    assert strict.pending_output() == b"-ERR 'Invalid Publish Subject'\r\n" and not bus.published
    lax = nats(bus, 2)
    lax.data_received(b"PUB a.* 1\r\nx\r\n")
    assert bus.published == [("a.*", None, None, b"x")]


def test_invalid_subscription_keeps_the_connection() -> None:
    bus = MemoryBus()
    s = nats(bus, 1)
    s.data_received(b"SUB a..b 1\r\nSUB ok 2\r\nPING\r\n")
    assert s.pending_output() == b"-ERR 'Invalid Subject'\r\nPONG\r\n"
    assert not s.closing and [sid for _, sid in bus.entries] == ["2"]


def test_reused_sid_is_ignored() -> None:
    bus = MemoryBus()
    s = nats(bus, 1)
    s.data_received(b"SUB a 1\r\nSUB b 1\r\n")
    assert [e.subject for e in bus.entries.values()] == ["a"]


def test_a_subject_with_an_empty_token_reaches_nobody() -> None:
    """As nats-server (non-pedantic): dropped without an error, alone, in runs or with a reply."""
    bus = MemoryBus()
    sub, pub = nats(bus, 1), nats(bus, 2)
    sub.data_received(b"SUB > 1\r\n")
    for subject in (b"a..b", b".a", b"a."):
        pub.data_received(b"PUB %s 1\r\nx\r\n" % subject)
        pub.data_received(b"PUB %s 1\r\ny\r\n" % subject)  # the lone path: the line repeats
        pub.data_received(b"PUB %s 1\r\nz\r\nPUB %s 1\r\nz\r\n" % (subject, subject))
        pub.data_received(b"PUB %s r 1\r\nw\r\n" % subject)
    pub.data_received(b"PUB a.b 1\r\nk\r\n")
    assert sub.pending_output() == b"MSG a.b 1 1\r\nk\r\n" and pub.pending_output() == b""


# ---------------------------------------------------------------- no responders

def test_no_responders_status_goes_to_the_inbox_subscription() -> None:
    bus = MemoryBus()
    s = nats(bus, 1)
    s.data_received(b"SUB _INBOX.k.* 4\r\nPUB svc _INBOX.k.7 2\r\nhi\r\n")
    assert s.pending_output() == (b"HMSG _INBOX.k.7 4 35 35\r\nNATS/1.0 503\r\n"
                                  b"Nats-Subject: svc\r\n\r\n\r\n")
    assert not bus.published  # nobody to route it to


@pytest.mark.parametrize(("connect", "seen"), [
    (b'{"headers":true,"no_responders":true}', b"HMSG _INBOX.k.7 4 16 16\r\nNATS/1.0 503\r\n\r\n\r\n"),
    (b'{"headers":true}', b""), (b"{}", b"")])
def test_another_nodes_503_reaches_only_a_client_that_asked_for_it(connect: bytes, seen: bytes) -> None:
    """A node whose filter still showed a subject answers a request nobody there takes
    with a 503 (router/no_responders.py); nats-server sends none to a client that did
    not ask for no-responders, so that client never sees it (a plain MSG, empty)."""
    s = fresh()
    s.data_received(b"CONNECT " + connect + b"\r\nSUB _INBOX.k.* 4\r\n")
    s.pending_output()
    s.deliver("4", "_INBOX.k.7", None, STATUS_503, b"")
    assert s.pending_output() == seen


def test_with_echo_off_the_clients_own_subscription_is_no_responder() -> None:
    bus = MemoryBus()
    s = nats(bus, 1)
    s.data_received(b'CONNECT {"echo":false,"headers":true,"no_responders":true}\r\n'
                    b"SUB svc 1\r\nSUB _INBOX.k.* 4\r\nPUB svc _INBOX.k.7 2\r\nhi\r\n")
    assert s.pending_output() == (b"HMSG _INBOX.k.7 4 35 35\r\nNATS/1.0 503\r\n"
                                  b"Nats-Subject: svc\r\n\r\n\r\n")


def test_a_responder_anywhere_means_no_status() -> None:
    bus = MemoryBus()
    s, responder = nats(bus, 1), nats(bus, 2)
    responder.data_received(b"SUB svc.* 1\r\n")
    s.data_received(b"SUB _INBOX.k.* 4\r\nPUB svc.x _INBOX.k.7 2\r\nhi\r\n")
    assert s.pending_output() == b""
    assert responder.pending_output() == b"MSG svc.x 1 _INBOX.k.7 2\r\nhi\r\n"


def test_no_status_without_the_flag_or_a_matching_plain_subscription() -> None:
    bus = MemoryBus()
    plain = fresh(bus)
    plain.data_received(b'CONNECT {"verbose":false,"headers":true}\r\nSUB _INBOX.k.* 4\r\n'
                        b"PUB svc _INBOX.k.7 0\r\n\r\n")
    assert plain.pending_output() == b"" and bus.published == [("svc", "_INBOX.k.7", None, b"")]
    queued = nats(bus, 2)
    queued.data_received(b"SUB _INBOX.q.* g 4\r\nPUB svc _INBOX.q.1 0\r\n\r\n")
    assert queued.pending_output() == b""


# ---------------------------------------------------------------- limits and errors

def test_max_payload_is_configurable_and_closes() -> None:
    bus = MemoryBus()
    s = fresh(bus, max_payload=8)
    s.data_received(b"PUB a 8\r\n12345678\r\nPUB a 9\r\n")
    assert s.pending_output() == b"+OK\r\n-ERR 'Maximum Payload Violation'\r\n"
    assert isinstance(s.close_error, PayloadTooLarge) and len(bus.published) == 1


def test_control_line_limit_closes() -> None:
    s = fresh(max_control_line=32)
    s.data_received(b"SUB " + b"x" * 40)
    assert s.pending_output() == b"-ERR 'maximum control line exceeded'\r\n"
    assert isinstance(s.close_error, ControlLineTooLong)


def test_operations_before_a_protocol_error_are_executed() -> None:
    bus = MemoryBus()
    s = nats(bus, 1)
    s.data_received(b"PUB a 1\r\nx\r\nSUB b 1\r\nNOPE\r\nPUB c 1\r\ny\r\n")
    assert s.pending_output() == b"-ERR 'Unknown Protocol Operation'\r\n"
    assert bus.published == [("a", None, None, b"x")]
    assert s.closing and not bus.entries  # closing released the subscription


def test_a_closed_session_ignores_input_and_deliveries() -> None:
    bus = MemoryBus()
    s = nats(bus, 1)
    s.data_received(b"SUB a 1\r\nBAD\r\n")
    s.pending_output()
    s.data_received(b"PING\r\n")
    s.deliver("1", "a", None, None, b"late")
    assert s.pending_output() == b""
    s.connection_lost()
    s.connection_lost()
    assert not bus.entries


def test_connection_lost_releases_subscriptions_once() -> None:
    bus = MemoryBus()
    s = nats(bus, 1)
    s.data_received(b"SUB a 1\r\nSUB b.* 2\r\n")
    drops: list[int] = []
    real_drop = bus.drop_client
    bus.drop_client = lambda c: (drops.append(c.client_id), real_drop(c))  # type: ignore[method-assign]
    s.connection_lost()
    s.connection_lost()
    assert drops == [1] and not bus.entries and s.closing and s.close_error is None


def test_pings_from_the_server_and_stale_connections() -> None:
    s = nats(MemoryBus(), 1)
    s.ping()
    s.ping()
    assert s.pending_output() == b"PING\r\nPING\r\n"
    s.data_received(b"PONG\r\n")
    s.ping()
    s.ping()
    s.ping()
    assert s.pending_output() == b"PING\r\nPING\r\n-ERR 'Stale Connection'\r\n"
    assert isinstance(s.close_error, StaleConnection)


# ---------------------------------------------------------------- flow control

def test_slow_consumer_is_cut_off_with_the_nats_error() -> None:
    bus = MemoryBus()
    wakes: list[int] = []
    s = NatsSession(bus, 1, NatsConfig(server_id="T", limits=FlowLimits(100, 50, 400)),
                    wakeup=lambda: wakes.append(len(s.pending_output(0))))
    s.data_received(b'CONNECT {"verbose":false}\r\nSUB a 1\r\n')
    assert wakes == []  # the INFO is there from the start, the glue flushes after construction
    s.pending_output()
    pub = nats(bus, 2)
    msg = b"PUB a 40\r\n" + b"x" * 40 + b"\r\n"  # delivers 54 bytes
    pub.data_received(msg)
    assert len(wakes) == 1 and not s.paused  # empty -> non-empty
    pub.data_received(msg)
    assert s.paused and len(wakes) == 2  # crossed the high-water mark
    for _ in range(6):  # 7 deliveries fit in 400 bytes, the 8th does not
        pub.data_received(msg)
    # what it did not read is dropped when it is cut (as nats-server does): the error is left
    assert s.pending_output() == b"-ERR 'Slow Consumer'\r\n"
    assert s.closing and isinstance(s.close_error, SlowConsumer) and "exceeds the hard limit 400" in str(s.close_error)
    assert len(wakes) == 3 and not bus.entries


def test_partial_drains_release_the_pause_at_the_low_water_mark() -> None:
    bus = MemoryBus()
    s = NatsSession(bus, 1, NatsConfig(server_id="T", limits=FlowLimits(100, 50, 10_000)))
    s.data_received(b'CONNECT {"verbose":false}\r\nSUB a 1\r\n')
    s.pending_output()
    before = s.bytes_out
    for _ in range(3):
        bus.publish(None, "a", None, None, b"y" * 40)
    assert s.paused and s.buffered == 162
    first = s.pending_output(60)
    assert len(first) == 60 and s.paused  # 102 left, above low water
    rest = s.pending_output(60)
    assert s.buffered == 42 and not s.paused
    assert first + rest + s.pending_output() == b"MSG a 1 40\r\n" + b"y" * 40 + b"\r\n" + (
        b"MSG a 1 40\r\n" + b"y" * 40 + b"\r\n") * 2
    assert s.bytes_out - before == 162


def test_bad_limits_are_refused() -> None:
    from raims_node.bridges import BadLimits
    with pytest.raises(BadLimits, match=r"low_water \(60\) <= high_water \(50\)"):
        FlowLimits(high_water=50, low_water=60, hard_limit=100)


def test_info_stays_one_line_whatever_the_names() -> None:
    line = NatsSession(MemoryBus(), 1, NatsConfig(server_id="a\nb", server_name="c\r\nd")).pending_output()
    assert re.fullmatch(rb"INFO \{[^\r\n]*\} \r\n", line)
    assert json.loads(line[5:])["server_name"] == "c\r\nd"


def test_runs_of_pubs_keep_their_place_among_other_operations() -> None:
    """Consecutive PUBs on one subject go to the bus as a run; a SUB between them takes
    effect between, exactly as if each PUB were published alone."""
    bus = MemoryBus()
    s = fresh(bus)
    s.data_received(b'CONNECT {"verbose":false,"pedantic":false}\r\nSUB b 1\r\n'
                    b"PUB a 1\r\n1\r\nPUB a 1\r\n2\r\nPUB b 1\r\n3\r\nSUB a 2\r\nPUB a 1\r\n4\r\nPUB a 1\r\n5\r\n"
                    b"PING\r\n")
    assert [(subject, payload) for subject, _, _, payload in bus.published] == [
        ("a", b"1"), ("a", b"2"), ("b", b"3"), ("a", b"4"), ("a", b"5")]
    assert s.pending_output() == b"MSG b 1 1\r\n3\r\nMSG a 2 1\r\n4\r\nMSG a 2 1\r\n5\r\nPONG\r\n"
    assert s.msgs_in == 5


def test_a_delivered_run_is_what_single_deliveries_write() -> None:
    one, many = fresh(), fresh()
    payloads = [b"x" * (i % 4) for i in range(9)]
    for s in (one, many):
        s.data_received(b'CONNECT {"verbose":false}\r\nSUB a 7\r\nSUB b 8\r\nUNSUB 8 4\r\n')
        s.pending_output()
    for sid, subject in (("7", "a"), ("8", "b")):
        for payload in payloads:
            one.deliver(sid, subject, None, None, payload)
        many.deliver_run(sid, subject, payloads)  # sid 8 has an UNSUB max: one by one, up to 4
    expected = b"".join(b"MSG a 7 %d\r\n%s\r\n" % (len(p), p) for p in payloads) \
        + b"".join(b"MSG b 8 %d\r\n%s\r\n" % (len(p), p) for p in payloads[:4])
    assert one.pending_output() == expected
    assert many.pending_output() == expected
    assert many.msgs_out == one.msgs_out == 13


def test_a_packed_run_is_what_single_deliveries_write() -> None:
    """A stream kept inside its batch frame (wire/batch.PackedRun) is written as the same
    MSG lines; a subscription with an UNSUB max still counts them one by one."""
    from raims_node.wire import MsgType, frame_with_body, peek
    from raims_node.wire.batch import PackedRun, decode_batch_run, encode_batch_fields
    from raims_node.wire.frame import SUBJECT_OFFSET

    one, many = fresh(), fresh()
    payloads = [b"%05d" % i for i in range(40)]
    frame = bytes(frame_with_body(MsgType.MCAST, b"a", bytes(16), encode_batch_fields(1, 0, payloads)))
    got = decode_batch_run(frame, SUBJECT_OFFSET + 2, peek(frame).frame_len)
    assert got is not None and isinstance(got[2], PackedRun)
    for s in (one, many):
        s.data_received(b'CONNECT {"verbose":false}\r\nSUB a 7\r\nSUB a 8\r\nUNSUB 8 4\r\n')
        s.pending_output()
    for sid in ("7", "8"):
        one.deliver_run(sid, "a", payloads)
        many.deliver_packed(sid, "a", got[2])
    assert many.pending_output() == one.pending_output()
    assert many.msgs_out == one.msgs_out == 44


def test_the_output_ledger_counts_every_byte_queued_and_taken() -> None:
    """Sessions sharing a ledger: the greeting, deliveries and a slow consumer's error all
    count, what is taken or dropped is released, so the total returns to zero."""
    from raims_node.bridges.flow import OutputLedger

    bus = MemoryBus()
    over: list[int] = []
    ledger = OutputLedger(budget=1000, on_over=lambda: over.append(ledger.total))
    s = NatsSession(bus, 1, NatsConfig(server_id="T", limits=FlowLimits(100, 50, 400)))
    s.share_ledger(ledger)
    assert ledger.total == s.buffered > 0  # the INFO
    s.data_received(b'CONNECT {"verbose":false}\r\nSUB a 1\r\n')
    s.pending_output()
    assert ledger.total == 0
    pub = nats(bus, 2)
    for _ in range(10):
        pub.data_received(b"PUB a 40\r\n" + b"x" * 40 + b"\r\n")
    assert s.closing and ledger.total == s.buffered == len(b"-ERR 'Slow Consumer'\r\n")
    s.pending_output()
    s.connection_lost()
    assert ledger.total == 0 and over == []


def test_a_pub_read_alone_is_published_as_by_the_parser() -> None:
    """A PUB repeating the last line, read alone, skips the parser (bus.publish_lone when
    the bus has it, else publish_run): the same deliveries, flags and counters."""
    lone: list[tuple[str, bytes]] = []

    class LoneBus(MemoryBus):
        def publish_lone(self, client: object, subject: str, payload: bytes) -> int:
            lone.append((subject, payload))
            return self.publish_run(client, subject, [payload])  # type: ignore[arg-type]

    for bus in (MemoryBus(), LoneBus()):
        s = fresh(bus)
        s.data_received(b'CONNECT {"verbose":false,"pedantic":false}\r\nSUB a.b 1\r\nPUB a.b 2\r\nhi\r\n')
        for i in range(3):
            s.data_received(b"PUB a.b 2\r\n%02d\r\n" % i)
        assert s.pending_output() == b"".join(b"MSG a.b 1 2\r\n%s\r\n" % p for p in (b"hi", b"00", b"01", b"02"))
        assert s.msgs_in == 4
    assert lone == [("a.b", b"00"), ("a.b", b"01"), ("a.b", b"02")]
    verbose = fresh(LoneBus())  # verbose (the default) answers +OK: never the lone path
    verbose.data_received(b"SUB a.b 1\r\nPUB a.b 2\r\nhi\r\n")
    verbose.data_received(b"PUB a.b 2\r\nho\r\n")
    assert verbose.pending_output().endswith(b"+OK\r\nMSG a.b 1 2\r\nho\r\n") and len(lone) == 3
    pedantic = fresh(LoneBus())  # a wildcard publish is refused, read alone or not
    pedantic.data_received(b'CONNECT {"verbose":false}\r\nPUB a.* 2\r\nhi\r\n')
    pedantic.data_received(b"PUB a.* 2\r\nho\r\n")
    assert pedantic.pending_output().count(b"Invalid Publish Subject") == 2 and len(lone) == 3
