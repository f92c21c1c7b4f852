"""sbus_proto: the four grammars, credentials, the key <-> subject map, network
subscriptions and the flood-control outbox; the parser fuzzed with hypothesis."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from raims_node.bridges import sbus_proto as sp
from raims_node.subject import compile_pattern, subject_text

# The seed's regular expressions (POSIX: '.' matches newlines too), as the oracle.
SEED = {
    "SUB": re.compile(rb"SUB ([^\x00]*)(\x00.*)?", re.DOTALL),
    "UNSUB": re.compile(rb"UNSUB ([^\x00]*)(\x00.*)?", re.DOTALL),
    "MSG": re.compile(rb"MSG ([^\x00]*)\x00(.*)", re.DOTALL),
    "CMSG": re.compile(rb"CMSG ([^\x00]*)(\x00(.*))?", re.DOTALL),
}


def oracle(packet: bytes) -> sp.Event | None:
    for verb, rx in SEED.items():
        m = rx.fullmatch(packet)
        if m is None:
            continue
        if verb == "SUB":
            return sp.Sub(m.group(1))
        if verb == "UNSUB":
            return sp.Unsub(m.group(1))
        if verb == "MSG":
            return sp.Msg(m.group(1), m.group(2))
        return sp.Cmsg(m.group(1), m.group(3))
    return None


packets = st.one_of(
    st.binary(max_size=64),
    st.tuples(st.sampled_from([b"SUB ", b"UNSUB ", b"MSG ", b"CMSG ", b"SUB", b"MSG"]),
              st.binary(max_size=64)).map(lambda t: t[0] + t[1]),
)


@given(packets)
def test_parse_agrees_with_the_seed_grammars(packet: bytes) -> None:
    want = oracle(packet)
    if want is None:
        with pytest.raises(sp.SbusProtocolError):
            sp.parse(packet)
    else:
        assert sp.parse(packet) == want


@given(st.binary(max_size=32).filter(lambda b: b"\x00" not in b), st.binary(max_size=32))
def test_encoders_round_trip(key: bytes, payload: bytes) -> None:
    assert sp.parse(sp.encode_msg(key, payload)) == sp.Msg(key, payload)
    assert sp.parse(sp.encode_cmsg(key, payload)) == sp.Cmsg(key, payload)
    assert sp.parse(sp.encode_sub(key)) == sp.Sub(key)
    assert sp.parse(sp.encode_unsub(key)) == sp.Unsub(key)


def test_cred_pattern() -> None:
    me = sp.Creds(10, 20, 30)
    assert sp.cred_pattern(b"!/cred////x/*", me) == b"!/cred/10/20/30/x/*"
    assert sp.cred_pattern(b"!/cred/010/20//", me) == b"!/cred/10/20/30/"
    for bad in (b"!/cred/", b"!/cred/10/20/30", b"!/cred/*/20/30/x", b"!/cred/11/20/30/x", b"!/cred/a//"):
        with pytest.raises(sp.CredRefused):
            sp.cred_pattern(bad, me)
    assert sp.key_creds(b"!/cred/1/2/3/x") == sp.Creds(1, 2, 3)
    assert sp.key_creds(b"!/cred//2/3/x") is None
    assert me.key() == b"!/cred/10/20/30"
    huge = b"1" * 5000  # past int()'s digit limit: malformed, never a ValueError in the read loop
    with pytest.raises(sp.CredRefused):
        sp.cred_pattern(b"!/cred/" + huge + b"//1/x", me)
    assert sp.key_creds(b"!/cred/" + huge + b"/1/1/x") is None


keys = st.lists(st.binary(min_size=0, max_size=6), min_size=1, max_size=4).map(b"/".join)


@given(keys)
def test_key_subject_map_is_one_to_one(key: bytes) -> None:
    subject = sp.subject_of(key)
    if subject is not None:
        assert sp.key_of(subject) == key
    else:
        assert not key or b"." in key or any(s in (b"", b"!") for s in key.split(b"/"))


@given(st.text(max_size=12))
def test_subject_key_map_is_one_to_one(subject: str) -> None:
    key = sp.key_of(subject)
    if key is not None:
        assert sp.subject_of(key) == subject


seg = st.sampled_from([b"a", b"b", b"ab", b"*", b"a*", b">", b"x.y", b"", b"!"])


@given(st.lists(seg, min_size=1, max_size=4), st.booleans(), keys)
def test_network_sub_covers_every_mappable_key_the_pattern_matches(segs: list[bytes], trailing: bool,
                                                                   key: bytes) -> None:
    pattern = b"/".join(segs) + (b"/" if trailing else b"")
    try:
        compiled = compile_pattern(subject_text(pattern), "sbus")
    except Exception:
        return
    subject = sp.subject_of(key)
    if subject is None or not compiled.matches(key):
        return
    net = sp.network_sub(pattern)
    assert net is not None
    if net.wild:
        assert compile_pattern(net.text, "rv").matches(subject)
    else:
        assert net.text == subject


def test_network_sub_examples() -> None:
    assert sp.network_sub(b"") == sp.NetSub(">", True)
    assert sp.network_sub(b"a/*/c/") == sp.NetSub("a.*.c.>", True)
    assert sp.network_sub(b"a/b*") == sp.NetSub("a.*", True)
    assert sp.network_sub(b"a/b") == sp.NetSub("a.b", False)
    assert sp.network_sub(b"a.b") is None
    assert sp.network_sub(b"!/cred/1/2/3/x") is None
    assert sp.network_sub(b"a//b") is None


# ---------------------------------------------------------------- outbox

def test_outbox_modes() -> None:
    box = sp.Outbox(max_bytes=4, max_packets=3, block_cap=6)
    assert (box.soft, box.hard, box.order) == ("queue", "block", "queue")
    for i in range(3):
        assert box.offer(b"%d" % i) == "queued"
    assert not box.holding
    assert box.offer(b"3") == "queued" and box.holding  # hard/block: over the limit, held
    box.offer(b"4")
    box.offer(b"5")
    assert box.offer(b"6") == "error"  # past the block cap
    assert box.control(b"blocking/hard/discard") and not box.holding
    assert box.offer(b"7") == "discarded" and box.discarded == 1
    box.control(b"blocking/hard/error")
    assert box.offer(b"8") == "error"
    assert [box.pop() for _ in range(6)] == [b"0", b"1", b"2", b"3", b"4", b"5"] and box.pop() is None
    box.control(b"blocking/soft/block")
    assert box.offer(b"x") == "queued" and box.holding
    box.control(b"blocking/soft/discard")
    assert box.offer(b"y") == "discarded"
    box.control(b"blocking/soft/error")
    assert box.offer(b"y") == "error"
    assert not box.control(b"blocking/soft/nothing")


def test_outbox_orders_and_answers() -> None:
    box = sp.Outbox()
    for p in (b"1", b"22", b"333"):
        box.offer(p)
    box.force(b"CMSG pong")
    box.control(b"order/stack")
    first = box.pop()
    assert first == b"333"
    box.unpop(first)
    assert box.pop() == b"333"
    box.control(b"order/random")
    box.offer(b"4444")
    assert [box.pop() for _ in range(3)] == [b"4444", b"22", b"1"]
    assert box.pop() == b"CMSG pong"  # answers after the data queued before them
    box.force(b"CMSG again")
    a = box.pop()
    assert a == b"CMSG again"
    box.unpop(a)
    assert box.pop() == b"CMSG again" and box.pop() is None and box.bytes == 0


ops = st.lists(st.one_of(
    st.tuples(st.just("offer"), st.binary(min_size=1, max_size=8)),
    st.tuples(st.just("force"), st.binary(min_size=1, max_size=8)),
    st.tuples(st.just("pop"), st.booleans()),  # True: the socket refuses it (unpop)
    st.tuples(st.just("control"), st.sampled_from(sorted(sp.FLOOD_KEYS))),
), max_size=60)


@given(ops)
def test_outbox_never_loses_duplicates_or_miscounts(steps: list[tuple[str, object]]) -> None:
    box = sp.Outbox(max_bytes=40, max_packets=6, block_cap=60)
    kept: list[bytes] = []  # queued data and answers, as a multiset
    sent: list[bytes] = []
    for op, arg in steps:
        if op == "offer":
            assert isinstance(arg, bytes)
            if box.offer(b"D" + arg) == "queued":
                kept.append(b"D" + arg)
        elif op == "force":
            assert isinstance(arg, bytes)
            box.force(b"A" + arg)
            kept.append(b"A" + arg)
        elif op == "pop":
            p = box.pop()
            if p is None:
                assert not kept
            elif arg:
                box.unpop(p)
            else:
                kept.remove(p)
                sent.append(p)
        else:
            assert isinstance(arg, bytes)
            box.control(arg)
        assert len(box) == len(kept)
        assert box.bytes == sum(len(p) for p in kept if p.startswith(b"D")) <= 60
    rest = []
    while (p := box.pop()) is not None:
        rest.append(p)
    assert sorted(rest) == sorted(kept) and box.bytes == 0
