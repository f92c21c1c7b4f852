"""RV sessions (raims_node/bridges/rv_session.py) on an in-memory bus: the session
start, RV5 and RV6 styles, listens, deliveries, loss advisories and their throttle."""

from __future__ import annotations

import struct

from raims_node.bridges.bus import Bus
from raims_node.bridges.rv_codec import VERSION_REC, Writer, decode, info_kind, info_rec
from raims_node.bridges.rv_session import DATALOSS_SUBJECT, RvConfig, RvRefused, RvSession
from tests.integration.rv_client import encode
from tests.unit.test_nats_redis_bus import MemoryBus

IP = bytes([10, 0, 0, 7])


class Host:
    ipaddr = IP
    port = 7500
    daemon_gob = "DGOB"

    def __init__(self, bus: MemoryBus, refuse: bool = False) -> None:
        self.bus = bus
        self.refuse = refuse
        self.opened: list[tuple[str, str]] = []
        self.closed: list[str] = []

    def open_service(self, service: str, network: str) -> Bus:
        if self.refuse:
            raise RvRefused("no such network")
        self.opened.append((service, network))
        return self.bus

    def closed_service(self, service: str) -> None:
        self.closed.append(service)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def frames(data: bytes) -> list[dict[str, object]]:
    out = []
    while data:
        size = struct.unpack(">I", data[:4])[0]
        out.append(decode(data[:size]).to_dict())
        data = data[size:]
    return out


def started(bus: MemoryBus | None = None, style: str = "rv6", **kw: object) -> tuple[RvSession, Host]:
    host = Host(bus or MemoryBus())
    timers: list[float] = []
    s = RvSession(host, 1, RvConfig(), loss_timer=timers.append, **kw)  # type: ignore[arg-type]
    s.timers = timers  # type: ignore[attr-defined]
    assert s.pending_output() == VERSION_REC
    s.data_received(VERSION_REC)
    assert info_kind(s.pending_output()) == 2
    s.data_received(info_rec(3))
    assert info_kind(s.pending_output()) == 1
    init = {"mtype": "I", "userid": "me", "service": "7600", "network": ";mesh"}
    s.data_received(encode(init))
    [resp] = frames(s.pending_output())
    assert resp["sub"] == "RVD.INITRESP" and resp["mtype"] == "R"
    data = resp["data"]
    assert isinstance(data, dict) and data["ipaddr"] == IP and data["ipport"] == b"\x1d\x4c"
    session = f"{IP.hex().upper()}.{data['gob']}" if style == "rv6" else "0A000007.MYOWN"
    s.data_received(encode({**init, "session": session, "control": f"_INBOX.{session}.1"}))
    [conn] = frames(s.pending_output())
    assert conn["sub"] == "_RV.INFO.SYSTEM.RVD.CONNECTED"
    assert host.opened == [("7600", ";mesh")]
    return s, host


def test_rv6_uses_the_daemon_session() -> None:
    bus = MemoryBus()
    s, _ = started(bus, "rv6")
    assert s.style == "rv6" and s.session == "0A000007.DAEMON.DGOB"
    assert not [p for p in bus.published if "SESSION" in p[0]]


def test_rv5_session_start_and_stop() -> None:
    bus = MemoryBus()
    s, host = started(bus, "rv5")
    assert s.style == "rv5" and s.session == "0A000007.MYOWN"
    assert [p[0] for p in bus.published] == ["_RV.INFO.SYSTEM.SESSION.START.0A000007.MYOWN"]
    s.connection_lost()
    assert bus.published[-1][0] == "_RV.INFO.SYSTEM.SESSION.STOP.0A000007.MYOWN"
    assert host.closed == ["7600"]


def test_listen_publish_deliver_once_per_message() -> None:
    bus = MemoryBus()
    s, _ = started(bus)
    for sub in ("A.*", "A.>", "A.B"):
        s.data_received(encode({"mtype": "L", "sub": ("subject", sub)}))
    assert [p[0] for p in bus.published] == [f"_RV.INFO.SYSTEM.LISTEN.START.{x}" for x in ("A.*", "A.>", "A.B")]
    s.data_received(encode({"mtype": "D", "sub": ("subject", "A.B"), "return": "_INBOX.x.2", "data": b"xy"}))
    s.data_received(encode({"mtype": "D", "sub": ("subject", "A.C.D"), "data": {"f": 1}}))
    got = frames(s.pending_output())
    assert got == [{"sub": "A.B", "mtype": "D", "return": "_INBOX.x.2", "data": b"xy"},
                   {"sub": "A.C.D", "mtype": "D", "data": {"f": 1}}]
    # C cancels a listen once per L
    s.data_received(encode({"mtype": "L", "sub": ("subject", "A.B")}))
    s.data_received(encode({"mtype": "C", "sub": ("subject", "A.B")}))
    assert any(e.subject == "A.B" for e in bus.entries.values())
    s.data_received(encode({"mtype": "C", "sub": ("subject", "A.B")}))
    assert not any(e.subject == "A.B" for e in bus.entries.values())


def test_equal_tiny_payloads_come_once_per_message_not_per_subscription() -> None:
    bus = MemoryBus()
    s, _ = started(bus)
    for sub in ("A.*", "A.>", "A.B"):
        s.data_received(encode({"mtype": "L", "sub": ("subject", sub)}))
    s.pending_output()
    for data in (b"x", b"x", b"", b"", b"x"):  # one shared object per value in Python
        s.data_received(encode({"mtype": "D", "sub": ("subject", "A.B"), "data": data}))
    assert [f["data"] for f in frames(s.pending_output())] == [b"x", b"x", b"", b"", b"x"]
    for sid in ("A.*", "A.>"):  # a loss told for each subscription of one message: counted once
        s.data_loss(sid, "A.B", 2, b"x")
        s.deliver(sid, "A.B", None, None, b"x")
    assert s.lost_in == 2 and len(frames(s.pending_output())) == 2  # the advisory and the message


def test_a_string_is_published_without_its_nul_and_advisories_are_mtype_a() -> None:
    bus = MemoryBus()
    s, _ = started(bus)
    s.data_received(encode({"mtype": "L", "sub": ("subject", "_RV.INFO.SYSTEM.>")}))
    s.data_received(encode({"mtype": "D", "sub": ("subject", "S"), "data": "text"}))
    assert bus.published[-1] == ("S", None, None, b"text")
    s.data_received(encode({"mtype": "L", "sub": ("subject", "T")}))
    [adv] = frames(s.pending_output())
    assert adv["mtype"] == "A" and adv["sub"] == "_RV.INFO.SYSTEM.LISTEN.START.T"


def test_loss_advisory_at_once_then_one_a_second() -> None:
    clock = Clock()
    s, _ = started(clock=clock)
    s.data_loss("sid", "X", 3, b"payload-1")
    [adv] = frames(s.pending_output())
    assert adv["sub"] == DATALOSS_SUBJECT and adv["mtype"] == "A"
    data = adv["data"]
    assert isinstance(data, dict)
    assert (data["ADV_NAME"], data["lost"], data["sub_cnt"], data["sub1"], data["lost1"]) == (
        "DATALOSS.INBOUND.BCAST", 3, 1, "X", 3)
    assert data["scid"] == (7500).to_bytes(2, "big")
    clock.now += 0.2
    s.data_loss("sid", "X", 2, b"payload-2")
    clock.now += 0.3
    s.data_loss("sid", "Y", 4, b"payload-3")
    assert s.pending_output() == b"" and [round(t, 6) for t in s.timers] == [0.8]  # type: ignore[attr-defined]
    clock.now += 0.5
    s.flush_loss()
    [adv] = frames(s.pending_output())
    data = adv["data"]
    assert isinstance(data, dict)
    assert (data["lost"], data["sub_cnt"], data["sub1"], data["lost1"], data["sub2"], data["lost2"]) == (
        6, 2, "X", 2, "Y", 4)
    s.flush_loss()
    assert s.pending_output() == b"" and s.advisories_sent == 2


def test_refused_network_answers_initrefused_and_closes() -> None:
    host = Host(MemoryBus(), refuse=True)
    s = RvSession(host, 1, RvConfig())
    s.pending_output()
    s.data_received(VERSION_REC + info_rec(3) + encode({"mtype": "I", "network": "eth0;239.1.1.1"}))
    out = s.pending_output()
    assert s.closing and isinstance(s.close_error, RvRefused)
    assert frames(out[128:])[0]["sub"] == "RVD.INITREFUSED"


def test_bad_bytes_close_the_session() -> None:
    s, _ = started()
    s.data_received(b"\x00\x00\x00\x10\x12\x34\x56\x78" + bytes(8))
    assert s.closing and s.protocol_errors == 1
    s2, _ = started()
    s2.data_received(encode({"mtype": "Q"}))
    assert s2.closing


def test_what_is_not_an_rv_client_is_closed_at_its_first_record() -> None:
    http = RvSession(Host(MemoryBus()), 1, RvConfig())
    http.data_received(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert http.closing and "version record" in str(http.close_error)
    wrong_info = RvSession(Host(MemoryBus()), 2, RvConfig())
    wrong_info.data_received(VERSION_REC + info_rec(2))  # the daemon's request sent back
    assert wrong_info.closing and "info record of kind 2" in str(wrong_info.close_error)


def test_runs_are_published_in_order_before_a_bad_header_closes() -> None:
    bus = MemoryBus()
    s, _ = started(bus)
    bus.published.clear()
    d = [encode({"sub": ("subject", subj), "mtype": "D", "data": body})
         for subj, body in (("R", b"1"), ("R", b"2"), ("R", b"3"), ("Q", b"4"))]
    s.data_received(b"".join(d) + b"\x00\x00\x00\x10garbage!")
    assert [(p[0], p[3]) for p in bus.published] == [("R", b"1"), ("R", b"2"), ("R", b"3"), ("Q", b"4")]
    assert s.closing and s.protocol_errors == 1


def test_deliver_run_writes_every_message() -> None:
    s, _ = started()
    s.deliver_run("A", "A", [b"one", b"two", Writer().int32("n", 1).finish()])
    got = frames(s.pending_output())
    assert [m["data"] for m in got] == [b"one", b"two", {"n": 1}] and s.msgs_out >= 3
    run = [b"x1", b"x2"]
    s.deliver_run("A.>", "A.B", run)
    s.deliver_run("A.*", "A.B", run)  # the same run through a second listen: sent once
    assert [m["data"] for m in frames(s.pending_output())] == [b"x1", b"x2"]


def test_messages_laid_out_alike_take_the_fast_path_with_the_same_result() -> None:
    bus = MemoryBus()
    s, _ = started(bus)
    bus.published.clear()
    nested = {"f": 1}
    msgs = [encode({"sub": ("subject", "F"), "mtype": "D", "data": body}) for body in (b"ab", b"cd", b"ef")]
    msgs += [encode({"sub": ("subject", "F"), "mtype": "D", "data": "st"}) for _ in range(2)]
    msgs += [encode({"sub": ("subject", "F"), "mtype": "D", "data": nested}) for _ in range(2)]
    msgs += [encode({"sub": ("subject", "G"), "mtype": "D", "data": b"gh"})]  # same length, other subject
    msgs += [encode({"sub": ("subject", "G"), "mtype": "D", "return": "_INBOX.r", "data": b"gh"})]
    s.data_received(b"".join(msgs))
    inner = encode(nested)
    assert [(p[0], p[1], p[3]) for p in bus.published] == [
        ("F", None, b"ab"), ("F", None, b"cd"), ("F", None, b"ef"), ("F", None, b"st"), ("F", None, b"st"),
        ("F", None, inner), ("F", None, inner), ("G", None, b"gh"), ("G", "_INBOX.r", b"gh")]
    assert not s.closing


def test_another_nodes_nats_503_status_is_no_reply_to_an_rv_request() -> None:
    """A node answers 503 (router/no_responders.py) to an `_INBOX.` reply, an RV
    client's too; RV has no such status: the request waits for its timeout, as with
    rvd. Before, the client got an empty message as the request's reply."""
    from raims_node.router.no_responders import STATUS_503

    s, _ = started()
    s.data_received(encode({"mtype": "L", "sub": ("subject", "_INBOX.x.>")}))
    s.pending_output()
    s.deliver("_INBOX.x.>", "_INBOX.x.2", None, STATUS_503, b"")
    assert s.pending_output() == b""
    s.deliver("_INBOX.x.>", "_INBOX.x.2", None, None, b"answer")
    assert [f["data"] for f in frames(s.pending_output())] == [b"answer"]
