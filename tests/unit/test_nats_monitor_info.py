"""nats_monitor_info: Go's texts, nats-server's close reasons and /connz sorts."""

from __future__ import annotations

import pytest

from raims_node.bridges.nats_monitor_info import (
    Conn,
    QueryError,
    close_reason,
    go_bool,
    go_duration,
    go_int,
    go_json,
    go_rtt,
    go_time,
    go_uptime,
    matches,
    sort_conns,
)
from raims_node.bridges.nats_session import NatsConfig, NatsSession
from tests.unit.test_nats_redis_bus import MemoryBus


@pytest.mark.parametrize(("ns", "text"), [
    (0, "0s"), (1, "1ns"), (999, "999ns"), (1500, "1.5µs"), (687_000, "687µs"), (1_000_000, "1ms"),
    (6_081_959, "6.081959ms"), (1_000_000_000, "1s"), (62_500_000_000, "1m2.5s"),
    (3_723_000_000_001, "1h2m3.000000001s"), (60_000_000_000, "1m0s")])
def test_go_duration(ns: int, text: str) -> None:
    assert go_duration(ns) == text


def test_rtt_uptime_time_and_json_as_nats_server() -> None:
    assert go_rtt(687_123) == "687µs" and go_rtt(6_081_959) == "6.081959ms"
    assert [go_uptime(s * 1_000_000_000) for s in (0, 61, 3_661, 90_061, 366 * 86_400)] == [
        "0s", "1m1s", "1h1m1s", "1d1h1m1s", "1y1d0h0m0s"]
    assert go_time(1_796_142_299_236_578_058) == "2026-12-01T16:24:59.236578058Z"
    assert go_time(1_796_142_299_000_000_000) == "2026-12-01T16:24:59Z"
    assert go_time(1_796_142_299_230_000_000) == "2026-12-01T16:24:59.23Z"
    assert go_json({"s": ">", "f": 0.0, "g": 0.625}) == b'{\n  "s": "\\u003e",\n  "f": 0,\n  "g": 0.625\n}'


def test_query_decoding_texts() -> None:
    assert go_bool({"subs": "T"}, "subs") and not go_bool({}, "subs") and go_int({"o": "-3"}, "o") == -3
    with pytest.raises(QueryError, match=r"^Error decoding boolean for 'subs': strconv.ParseBool: parsing \"yes\""):
        go_bool({"subs": "yes"}, "subs")
    with pytest.raises(QueryError, match=r"^Error decoding uint64 for 'cid': strconv.ParseUint: parsing \"-1\""):
        go_int({"cid": "-1"}, "cid", unsigned=True)


def _refused(connect: bytes) -> NatsSession:
    s = NatsSession(MemoryBus(), 1, NatsConfig(server_id="T"))  # type: ignore[arg-type]
    s.data_received(connect)
    assert s.closing
    return s


def test_close_reasons_of_the_sessions_refusals() -> None:
    """The two refusals told apart by nats_session's texts, and the others by type."""
    assert close_reason(_refused(b'CONNECT {"protocol":2}\r\n').close_error) == "Bad Client Protocol Version"
    assert close_reason(_refused(b'CONNECT {"no_responders":true}\r\n').close_error) == \
        "No Responders Requires Headers"
    assert close_reason(_refused(b"CONNECT {}\r\nFOO\r\n").close_error) == "Protocol Violation"
    assert close_reason(_refused(b'CONNECT {"verbose":false}\r\nPUB x 2000000\r\n').close_error) == \
        "Maximum Message Payload Exceeded"
    assert close_reason(_refused(b"-ERR 'x'\r\n").close_error) == "Parse Error"
    assert close_reason(None) == "Client Closed" and close_reason(None, shut_down=True) == "Server Shutdown"


def test_a_session_late_with_its_connect_is_told_and_closed_as_nats_server_does() -> None:
    """The glue's deadline (nats.py AUTH_TIMEOUT_S) on a session that requires credentials:
    `-ERR 'Authentication Timeout'`, /connz reason "Authentication Timeout"; one that
    CONNECTed, or needs no credentials, is established and stays."""
    late = NatsSession(MemoryBus(), 1, NatsConfig(server_id="T", user="u", password="p"))  # type: ignore[arg-type]
    late.pending_output()  # its INFO
    assert not late.established and late.expire_handshake("no CONNECT within auth_timeout 2 s")
    assert late.pending_output() == b"-ERR 'Authentication Timeout'\r\n" and late.closing
    assert close_reason(late.close_error) == "Authentication Timeout"
    done = NatsSession(MemoryBus(), 2, NatsConfig(server_id="T", user="u", password="p"))  # type: ignore[arg-type]
    done.data_received(b'CONNECT {"user":"u","pass":"p"}\r\n')
    free = NatsSession(MemoryBus(), 3, NatsConfig(server_id="T"))  # type: ignore[arg-type]
    for s in (done, free):
        assert s.established and not s.expire_handshake("late") and not s.closing


def test_a_closed_session_keeps_its_subscriptions_for_the_ring() -> None:
    s = NatsSession(MemoryBus(), 7, NatsConfig(server_id="T"))  # type: ignore[arg-type]
    s.data_received(b'CONNECT {"verbose":false,"name":"n"}\r\nSUB a.* q 1\r\nSUB b 2\r\nUNSUB 2 3\r\n')
    assert s.rtt_ns > 0 and s.last_ns >= s.started_ns
    s.connection_lost()
    conn = Conn.of(s, ("127.0.0.1", 5), 0)
    assert conn.subs == [("a.*", "q", "1", 0, 0), ("b", None, "2", 0, 3)]
    info = conn.info(s.started_ns, subs=False, detail=True, auth=False)
    assert info["subscriptions"] == 2 and info["subscriptions_list_detail"][1] == {
        "subject": "b", "sid": "2", "msgs": 0, "max": 3, "cid": 7}


def test_sorts_as_nats_server() -> None:
    def conn(cid: int, start: int, last: int, stop: int | None = None, reason: str = "") -> Conn:
        return Conn(cid, "", 0, start, last, 0, 0, 0, 0, 0, 0, "", "", "", "", [], stop, reason)

    conns = [conn(1, 0, 50), conn(2, 10, 20), conn(3, 30, 100)]
    for sort, cids in (("uptime", [3, 2, 1]), ("last", [3, 1, 2]), ("idle", [3, 1, 2]), ("cid", [1, 2, 3])):
        sort_conns(conns, sort, 200)
        assert [c.cid for c in conns] == cids, sort
    closed = [conn(1, 0, 1, 40, "b"), conn(2, 0, 1, 30, "a"), conn(3, 0, 1, 50, "c")]
    sort_conns(closed, "stop", 200)
    assert [c.cid for c in closed] == [3, 1, 2]
    sort_conns(closed, "reason", 200)
    assert [c.reason for c in closed] == ["a", "b", "c"]


def test_test_subject_matching() -> None:
    assert matches("foo.*", "foo.bar") and matches(">", "a") and matches("a.>", "a.b.c")
    assert not matches("a.>", "a") and not matches("foo.*", "foo.bar.baz") and not matches("foo", "foo.bar")


def test_the_closed_ring_bounds_the_connections_and_the_subscriptions_it_lists() -> None:
    """At most MAX_CLOSED connections, and CLOSED_SUBS_KEPT subscriptions listed in all:
    the oldest lists are let go first, their counts kept (a client closing with many
    subscriptions again and again must not make the ring hold them all)."""
    from raims_node.bridges import nats_monitor
    from raims_node.bridges.nats_monitor import NatsMonitor

    mon = NatsMonitor(None)  # type: ignore[arg-type]
    per = nats_monitor.CLOSED_SUBS_KEPT // 4
    subs = [("s", None, "1", 0, 0)] * per
    for cid in range(1, nats_monitor.MAX_CLOSED + 11):
        many = cid <= 6
        mon._keep_closed(Conn(cid, "", 0, 0, 0, 0, 0, 0, 0, 0, 0, "", "", "", "", list(subs) if many else [], 1, "x"))
    ring = list(mon.closed_conns)
    assert len(ring) == nats_monitor.MAX_CLOSED and ring[0].cid == 11  # the first ten went out of the ring
    assert mon._listed == 0 and not mon._listing  # the listing ones left with them
    mon._keep_closed(Conn(99_999, "", 0, 0, 0, 0, 0, 0, 0, 0, 0, "", "", "", "", list(subs) * 5, 1, "x"))
    assert mon._listed == 0  # one list over the bound is not kept ...
    assert mon.closed_conns[-1].nsubs == per * 5  # ... but its count is
    mon2 = NatsMonitor(None)  # type: ignore[arg-type]
    for cid in range(1, 7):
        mon2._keep_closed(Conn(cid, "", 0, 0, 0, 0, 0, 0, 0, 0, 0, "", "", "", "", list(subs), 1, "x"))
    kept = [c.cid for c in mon2.closed_conns if c.subs]
    assert kept == [3, 4, 5, 6] and mon2._listed == nats_monitor.CLOSED_SUBS_KEPT
    assert [c.nsubs for c in mon2.closed_conns] == [per] * 6
