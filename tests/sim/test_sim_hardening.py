"""Replayed heartbeats and heartbeat negotiation in the simulator (issue 18)."""

from __future__ import annotations

from collections.abc import Callable

from raims_node.crypto.credentials import Credentials
from raims_node.router.actions import Send
from raims_node.router.node import NS
from raims_node.router.sim import MS
from raims_node.wire import Fid, decode_frame
from tests.sim.test_sim_basic import build

HB = NS
ROGUE_CONN = 9_999  # a socket the simulator knows nothing of: the attacker's


def _rogue(net, name: str) -> tuple[object, int]:  # type: ignore[no-untyped-def]
    node = net.nodes[name].node
    tport = node.tports[0].tport_id
    node.on_connect(ROGUE_CONN, tport, net.now)
    return node, ROGUE_CONN


def test_replayed_heartbeat_of_a_removed_peer_is_rejected(creds: Callable[[str], Credentials]) -> None:
    net = build(creds)
    b = net.nodes["B"].node
    captured = [b.links.hello]
    net.run_for(2 * HB)
    captured.append(b.links.hello)  # B's newest heartbeat, as a recorder on a link saw it
    assert all(c is not None for c in captured)
    net.kill("B")
    net.run_until(lambda: b.bridge not in net.nodes["A"].node.peers, timeout_ns=10 * HB)
    a, conn = _rogue(net, "A")
    before = a.counters.rejects.get("replayed_hello", 0)
    out = a.on_frame(conn, captured[0], net.now)  # an old one: below the floor A kept
    assert not any(isinstance(x, Send) and x.conn_id == conn for x in out)
    assert a.counters.rejects["replayed_hello"] == before + 1
    # the newest one is B's current HELLO as far as A knows: answered with an auth 1
    # (a key exchange only the real B could complete), a few times, then counted
    challenges = 0
    for _ in range(10):
        out = a.on_frame(conn, captured[-1], net.now)
        challenges += sum(1 for x in out if isinstance(x, Send) and x.conn_id == conn and b".auth" in x.data[:80])
    assert challenges == 4
    assert a.counters.rejects["replayed_hello"] == before + 1 + 6
    net.run_for(3 * HB)
    assert b.bridge not in a.peers and not a.conns[conn].active


def test_replayed_heartbeat_of_a_live_peer_gets_a_challenge_only(creds: Callable[[str], Credentials]) -> None:
    net = build(creds)
    b = net.nodes["B"].node
    frame = b.links.hello
    assert frame is not None
    a, conn = _rogue(net, "A")
    out = a.on_frame(conn, frame, net.now)
    # the current HELLO of a known peer on a new socket: answered with an auth 1 there,
    # which only the real B could answer
    assert [x.conn_id for x in out if isinstance(x, Send) and b".auth" in x.data[:80]] == [conn]
    net.run_for(3 * HB)
    a.on_frame(conn, frame, net.now)
    assert not a.conns[conn].active and a.conns[conn].peer is None
    assert a.counters.rejects.get("replayed_hello", 0) >= 1  # the old one, now below the floor


def test_second_link_comes_up_at_once_and_a_removed_peer_rekeys(creds: Callable[[str], Credentials]) -> None:
    net = build(creds)
    t0 = net.now
    net.add_link("link_ab2", "A", "B", (50,) * 4)
    net.run_until(lambda: all(c.active for c in net.nodes["A"].node.conns.values()), timeout_ns=5 * HB)
    assert net.now - t0 < HB // 2  # the challenge, not the next heartbeat, proves the new link
    # B cut off from A and removed there, then back: a new key exchange brings it back
    for link in ("link_ab", "link_ab2", "link_bc", "link_bd"):
        net.set_link(link, False)
    bb = net.nodes["B"].node.bridge
    net.run_until(lambda: bb not in net.nodes["A"].node.peers, timeout_ns=10 * HB)
    for link in ("link_ab", "link_ab2", "link_bc", "link_bd"):
        net.set_link(link, True)
    net.run_until(net.converged, timeout_ns=10 * HB)
    assert bb in net.nodes["A"].node.peers


def test_each_side_supervises_with_the_interval_the_peer_announces(creds: Callable[[str], Credentials]) -> None:
    net = build(creds)
    b = net.nodes["B"].node
    b.set_heartbeat(3 * HB)  # only B: A keeps 1 s, and must wait 4.5 s for B's heartbeats
    a = net.nodes["A"].node
    downs = len(net.nodes["A"].logs)
    net.run_for(3 * 3 * HB + 500 * MS)
    conn = next(c for c in a.conns.values() if c.peer == b.bridge)
    assert conn.active and conn.peer_hb_ns == 3 * HB
    assert not any("remove auth" in t for _, t in net.nodes["A"].logs[downs:])
    hb = decode_frame(b.links.hello or b"")
    assert hb.get(Fid.INTERVAL) == 3


def test_signed_inbox_frame_with_a_non_utf8_subject_is_a_bad_frame(creds: Callable[[str], Credentials]) -> None:
    """Found by bench/fuzz.py (router_signed): a peer's inbox frame whose subject is not
    UTF-8 escaped the decoders as UnicodeDecodeError (an internal error)."""
    from raims_node.crypto.mac import MacKey
    from raims_node.wire import peek

    net = build(creds)
    a, b = net.nodes["A"].node, net.nodes["B"].node
    frame = bytearray(a.remote(b.bridge, "show peers", object(), net.now)[0].data)  # type: ignore[union-attr]
    head = peek(frame)
    at = bytes(frame).index(head.subject) + 5  # in the destination bridge
    frame[at] = 0xFF
    MacKey(a.session_key).sign(frame)
    conn = net.links["link_ab"].conn_b if net.links["link_ab"].a == "A" else net.links["link_ab"].conn_a
    bad, internal = b.counters.bad_frames, b.counters.internal_errors
    b.on_frame(conn, bytes(frame), net.now)
    assert b.counters.internal_errors == internal and b.counters.bad_frames == bad + 1
