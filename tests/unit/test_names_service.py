"""The name service's `_NAMES.*` requests, sans-IO (one node, then two wired by hand)."""

from __future__ import annotations

import json

from raims_node.names.replication import Flood, Unicast
from raims_node.names.service import NameService, Publish, node_address

ME, B = b"A" * 16, b"B" * 16


def answers(outs: list[object]) -> list[tuple[str, object]]:
    return [(o.subject, json.loads(o.payload)) for o in outs if isinstance(o, Publish)]


def req(svc: NameService, verb: str, body: object, reply: str | None = "r", owner: object = "c1",
        now: int = 0) -> list[object]:
    return list(svc.request(owner, "_nats.", verb, reply, None, json.dumps(body).encode(), now))


def test_bind_lookup_unbind_with_errors() -> None:
    svc = NameService(ME, "A", 0)
    out = req(svc, "BIND", {"type": 17, "lower": 0, "upper": 9, "inbox": "ibx.1"})
    assert answers(out) == [("_nats.r", {"port": 1, "key": 2, "node": "A"})]
    assert any(isinstance(o, Flood) for o in out)  # replicated
    # the same inbox is the same port; a repeat changes nothing
    assert answers(req(svc, "BIND", {"type": 17, "lower": 0, "upper": 9, "inbox": "ibx.1"}))[0][1]["key"] == 2
    assert answers(req(svc, "LOOKUP", {"type": 17, "instance": 4}))[0][1] == {"port": 1, "node": "A", "lower": 0,
                                                                           "upper": 9}
    assert "error" in answers(req(svc, "LOOKUP", {"type": 17, "instance": 10}))[0][1]
    assert "error" in answers(req(svc, "BIND", {"type": 17, "lower": 5, "upper": 12, "inbox": "i"}))[0][1]
    for bad in ({"type": 0, "instance": 1, "inbox": "i"}, {"type": 17, "instance": -1, "inbox": "i"},
                {"type": 17, "instance": 1}, {"type": 17, "instance": 1, "inbox": "a b"},
                {"type": 17, "instance": 1, "inbox": "a..b"}, {"type": 17, "instance": 1, "inbox": "x.\u0000.y"},
                {"type": "x", "instance": 1, "inbox": "i"}, {"type": 1, "instance": 1, "inbox": "i", "scope": 9}):
        assert "error" in answers(req(svc, "BIND", bad))[0][1], bad
    assert "error" in answers(list(svc.request("c", "_nats.", "BIND", "r", None, b"{nope", 0)))[0][1]
    assert "error" in answers(req(svc, "FROB", {}))[0][1]
    assert svc.errors == 11
    assert answers(req(svc, "UNBIND", {"port": 1}))[0][1] == {"withdrawn": 1}
    assert "error" in answers(req(svc, "LOOKUP", {"type": 17, "instance": 4}))[0][1]


def test_only_the_client_that_bound_a_name_withdraws_it() -> None:
    """As in TIPC: a binding belongs to its socket (here the client); ports are small
    numbers, so naming one must not be enough to withdraw another client's names."""
    svc = NameService(ME, "A", 0)
    req(svc, "BIND", {"type": 17, "instance": 3, "inbox": "victim"}, owner="c1")
    port = answers(req(svc, "LOOKUP", {"type": 17, "instance": 3}))[0][1]["port"]
    assert "another client" in answers(req(svc, "UNBIND", {"port": port}, owner="c2"))[0][1]["error"]
    assert answers(req(svc, "LOOKUP", {"type": 17, "instance": 3}))[0][1]["port"] == port  # still bound
    assert answers(req(svc, "UNBIND", {"port": port}, owner="c1"))[0][1] == {"withdrawn": 1}


def test_binding_again_with_another_scope_moves_the_name_to_it() -> None:
    """Node scope, then cluster: it was answered as bound and kept node scope (never
    replicated); now it is withdrawn and published again, replicated."""
    svc = NameService(ME, "A", 0)
    out = req(svc, "BIND", {"type": 17, "instance": 3, "inbox": "ibx", "scope": "node"})
    assert not any(isinstance(o, Flood) for o in out)  # node scope stays here
    out = req(svc, "BIND", {"type": 17, "instance": 3, "inbox": "ibx", "scope": "cluster"})
    assert answers(out)[0][1]["key"] != 2 and any(isinstance(o, Flood) for o in out)
    assert [p.scope.name for p in svc.table.of_node(ME) if p.type == 17] == ["CLUSTER"]


def test_redis_style_reply_in_the_body() -> None:
    svc = NameService(ME, "A", 0)
    out = req(svc, "BIND", {"type": 5, "instance": 1, "inbox": "i", "reply": "back"}, reply=None)
    assert answers(out)[0][0] == "_nats.back"


def test_to_and_mcast_send_to_ports_keeping_the_reply() -> None:
    svc = NameService(ME, "A", 0)
    req(svc, "BIND", {"type": 17, "lower": 0, "upper": 9, "inbox": "p1"})
    req(svc, "BIND", {"type": 17, "lower": 10, "upper": 19, "inbox": "p2"})
    req(svc, "BIND", {"type": 17, "lower": 20, "upper": 29, "inbox": "p3"})
    out = svc.request("c", "_nats.", "TO.17.7", "_INBOX.x", None, b"msg", 0)
    assert [(o.subject, o.payload, o.reply) for o in out if isinstance(o, Publish)] == [("_nats.p1", b"msg", "_INBOX.x")]
    out = svc.request("c", "_nats.", "MCAST.17.7.13", None, None, b"m", 0)
    assert sorted(o.subject for o in out if isinstance(o, Publish)) == ["_nats.p1", "_nats.p2"]
    out = svc.request("c", "_nats.", "TO.17.99", "rr", None, b"m", 0)
    assert "error" in answers(out)[0][1] and svc.unmatched == 1
    assert "error" in answers(svc.request("c", "_nats.", "TO.x.1", "rr", None, b"m", 0))[0][1]


def test_subscription_events_and_client_gone() -> None:
    svc = NameService(ME, "A", 0)
    out = req(svc, "SUBSCRIBE", {"type": 17, "lower": 7, "upper": 13, "timeout_ms": 1000, "inbox": "ev"},
              owner="s")
    assert answers(out) == [("_nats.r", {"sub": 1})]
    out = req(svc, "BIND", {"type": 17, "lower": 10, "upper": 19, "inbox": "p"}, owner="b")
    ev = [a for a in answers(out) if a[0] == "_nats.ev"]
    assert ev[0][1]["event"] == "published" and (ev[0][1]["found_lower"], ev[0][1]["found_upper"]) == (10, 13)
    assert answers(req(svc, "UNSUBSCRIBE", {"sub": 1}, owner="other"))[0][1] == {"cancelled": False}  # not its own
    out = svc.client_gone("b")  # binding client left: withdrawn
    assert [a[1]["event"] for a in answers(out)] == ["withdrawn"]
    assert any(isinstance(o, Flood) for o in out)
    assert [a[1]["event"] for a in answers(svc.tick(2 * 10**9))] == ["timeout"]


def test_inquiry_answers_on_bind() -> None:
    svc = NameService(ME, "A", 0)
    assert answers(req(svc, "INQUIRE", {"type": 17, "instance": 5, "timeout_ms": 2000}, reply="q")) == []
    out = req(svc, "BIND", {"type": 17, "lower": 0, "upper": 9, "inbox": "p"})
    inq = [a[1] for a in answers(out) if a[0] == "_nats.q"]
    assert inq and inq[0]["found"] is True
    out = req(svc, "INQUIRE", {"type": 18, "instance": 5, "timeout_ms": 0}, reply="q")
    assert answers(out)[0][1]["found"] is False


def test_two_services_replicate_and_withdraw_on_peer_down() -> None:
    a, b = NameService(ME, "A", 0), NameService(B, "B", 0)

    def carry(src: NameService, dst: NameService, outs: list[object]) -> None:
        for o in outs:
            if isinstance(o, (Flood, Unicast)):
                carry(dst, src, list(dst.node_event("names", src.node, src.user, o.data, 0)))

    carry(a, b, list(a.node_event("peer_up", B, "B", b"", 0)))
    carry(b, a, list(b.node_event("peer_up", ME, "A", b"", 0)))
    assert {p.type for p in a.table} == {0} and len(a.table) == 2  # both nodes' type 0
    assert any(p.lower == node_address(B) for p in a.table)
    carry(b, a, req(b, "BIND", {"type": 17, "instance": 3, "inbox": "p"}))
    carry(b, a, req(b, "BIND", {"type": 18, "instance": 3, "inbox": "p", "scope": "node"}))
    assert {(p.type, p.node) for p in a.table} == {(0, ME), (0, B), (17, B)}  # node scope stays on B
    assert answers(req(a, "LOOKUP", {"type": 17, "instance": 3, "domain": "B"}))[0][1]["node"] == "B"
    assert "error" in answers(req(a, "LOOKUP", {"type": 17, "instance": 3, "domain": "node"}))[0][1]
    out = list(a.node_event("peer_down", B, "B", b"", 0))
    assert out == [] and {(p.type, p.node) for p in a.table} == {(0, ME)}


def test_one_client_takes_only_its_share_of_the_nodes_limits(monkeypatch: object) -> None:
    """A client that binds (or subscribes) without end is refused at its share, a
    quarter of the node's limit: the others can still bind and subscribe."""
    import raims_node.names.service as service
    import raims_node.names.topology as topology

    monkeypatch.setattr(service, "MAX_CLIENT_PUBLICATIONS", 3)  # type: ignore[attr-defined]
    monkeypatch.setattr(topology, "MAX_CLIENT_SUBSCRIPTIONS", 2)  # type: ignore[attr-defined]
    svc = NameService(ME, "A", 0)
    for i in range(3):
        assert "port" in answers(req(svc, "BIND", {"type": 5, "instance": i, "inbox": "h"}, owner="hog"))[0][1]
    assert "share" in answers(req(svc, "BIND", {"type": 5, "instance": 9, "inbox": "h"}, owner="hog"))[0][1]["error"]
    assert "port" in answers(req(svc, "BIND", {"type": 5, "instance": 9, "inbox": "o"}, owner="other"))[0][1]
    sub = {"type": 7, "lower": 0, "upper": 9, "timeout_ms": 60_000, "inbox": "ev"}
    for _ in range(2):
        assert "sub" in answers(req(svc, "SUBSCRIBE", sub, owner="hog"))[0][1]
    assert "share" in answers(req(svc, "SUBSCRIBE", sub, owner="hog"))[0][1]["error"]
    assert "sub" in answers(req(svc, "SUBSCRIBE", sub, owner="other"))[0][1]


def test_limits_refuse_with_an_error_and_a_full_table_drops_remote_names(monkeypatch: object) -> None:
    import raims_node.names.service as service
    import raims_node.names.table as table

    svc = NameService(ME, "A", 0)
    assert "error" in answers(req(svc, "BIND", {"type": 5, "instance": 1, "inbox": "x" * 300}))[0][1]
    monkeypatch.setattr(service, "MAX_LOCAL_PUBLICATIONS", 2)  # type: ignore[attr-defined]
    for i in range(2):
        assert "port" in answers(req(svc, "BIND", {"type": 5, "instance": i, "inbox": "p"}))[0][1]
    assert "limit" in answers(req(svc, "BIND", {"type": 5, "instance": 9, "inbox": "p"}))[0][1]["error"]
    req(svc, "UNBIND", {"port": 1, "type": 5, "instance": 0})
    assert "port" in answers(req(svc, "BIND", {"type": 5, "instance": 9, "inbox": "p"}))[0][1]
    monkeypatch.setattr(table, "MAX_PUBLICATIONS", 4)  # type: ignore[attr-defined]
    svc.node_event("peer_up", B, "B", b"", 0)
    dump = {"o": "d", "s": 3, "p": [[6, i, i, 2, 1, i, "q"] for i in range(3)]}
    svc.node_event("names", B, "B", json.dumps(dump).encode(), 0)
    assert len(svc.table) == 4 and svc.dropped == 2


def test_hostile_requests_and_frames_are_answered_or_dropped_never_raised() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    svc = NameService(ME, "A", 0)
    verbs = st.sampled_from(["BIND", "UNBIND", "LOOKUP", "INQUIRE", "SUBSCRIBE", "UNSUBSCRIBE", "TO.1.2",
                             "MCAST.1.2.3", "TO.x", "MCAST.1.5.2", "TO.", ""])
    scalars = st.one_of(st.none(), st.booleans(), st.integers(-2, 2**33), st.text(max_size=5), st.floats())
    bodies = st.one_of(st.binary(max_size=64), st.dictionaries(
        st.sampled_from(["type", "lower", "upper", "instance", "scope", "inbox", "port", "sub", "domain",
                         "timeout_ms", "reply"]), scalars, max_size=6).map(lambda d: json.dumps(d).encode()))

    @settings(max_examples=200, deadline=None)
    @given(verbs, bodies, st.booleans())
    def run(verb: str, body: bytes, frame: bool) -> None:
        if frame:
            svc.node_event("names", B, "B", body, 0)
        else:
            svc.request("c", "_nats.", verb, "r", None, body, 0)

    run()
    deep = b"[" * 50_000
    assert "error" in answers(list(svc.request("c", "_nats.", "BIND", "r", None, deep, 0)))[0][1]
    svc.node_event("names", B, "B", deep, 0)
    assert svc.repl.bad_frames > 0
