"""The name protocol (transports/name.py): `_X.NAME` advertisements, malformed input,
device resolution, `type: name` settings, client network formats, and two name
services exchanging advertisements over multicast on the loopback interface."""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import random
import socket
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raims_node.bridges.glue import BadNetwork, ClientNetwork, parse_network
from raims_node.config.tree import TransportConfig
from raims_node.transports.name import (
    DEFAULT_GROUP,
    DEFAULT_PORT,
    ROLES,
    Advert,
    DeviceNotFound,
    Interface,
    NameConfig,
    NameService,
    NameServiceError,
    decode_advert,
    encode_advert,
    resolve_device,
)
from raims_node.wire import Fid, MsgType, WireError, encode_frame
from raims_node.wire.subjects import X_NAME

BRIDGE = bytes(range(16))
names = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40)
u64 = st.integers(0, (1 << 64) - 1)


BASE = Advert(BRIDGE, "A", "test", "mesh", "mesh", "mesh", "127.0.0.1:5000", 1_700_000_000_123_456_789, 7,
              1_700_000_001_000_000_000)


def advert(**kw: Any) -> Advert:
    return dataclasses.replace(BASE, **kw)


@st.composite
def adverts(draw: st.DrawFn) -> Advert:
    role = draw(st.sampled_from(ROLES))
    host = draw(st.sampled_from(["127.0.0.1", "10.88.0.2", "host.example", "[::1]"]))
    url = f"{host}:{draw(st.integers(1, 0xFFFF))}" if role in ("listen", "mesh") or draw(st.booleans()) else ""
    return Advert(draw(st.binary(min_size=16, max_size=16)), draw(names), draw(names), draw(names), draw(names),
                  role, url, draw(u64), draw(u64), draw(u64))


@given(adverts())
@settings(max_examples=200, deadline=None)
def test_advert_round_trip(ad: Advert) -> None:
    data = encode_advert(ad)
    assert decode_advert(data) == ad
    assert data[8:26][2:] == ad.bridge  # the bridge field of the frame header


def test_advert_is_an_x_name_heartbeat_frame_with_the_role_field() -> None:
    from raims_node.wire import decode_frame

    frame = decode_frame(encode_advert(advert(role="listen", tport_type="tcp")))
    assert frame.subject == X_NAME and frame.msg_type == MsgType.HEARTBEAT
    assert frame.get(Fid.TPORT_ROLE) == "listen" and frame.get(Fid.MESH_URL) == "127.0.0.1:5000"
    assert frame.get(Fid.START) == 1_700_000_000_123_456_789 and frame.get(Fid.SEQNO) == 7
    assert decode_advert(encode_advert(advert(role="connect", url=""))).url == ""
    assert advert(url="[::1]:80").address == ("::1", 80)


def _frame(fields: list[tuple[int, object]], subject: str = X_NAME) -> bytes:
    return bytes(encode_frame(MsgType.HEARTBEAT, subject, BRIDGE, fields))


GOOD_FIELDS: list[tuple[int, object]] = [
    (Fid.USER, "A"), (Fid.SERVICE, "test"), (Fid.TPORT, "mesh"), (Fid.TPORT_TYPE, "mesh"),
    (Fid.TPORT_ROLE, "mesh"), (Fid.MESH_URL, "127.0.0.1:5000"), (Fid.START, 1), (Fid.SEQNO, 2), (Fid.STAMP, 3),
]


def _with_u16(fields: list[tuple[int, object]], fid: int, value: int) -> bytes:
    """A frame of `fields` plus fid as a u16 field, whatever type the fid table gives it."""
    raw = bytearray(_frame(fields))
    raw += bytes([0xC1, fid]) + value.to_bytes(2, "big")  # fixed | primitive | u16
    raw[1:4] = (int.from_bytes(raw[1:4], "big") + 4).to_bytes(3, "big")
    return bytes(raw)


DROP = object()


@pytest.mark.parametrize(("change", "message"), [
    ({Fid.TPORT_ROLE: "leader"}, "role 'leader'"),
    ({Fid.MESH_URL: "127.0.0.1"}, "not host:port"),
    ({Fid.MESH_URL: "127.0.0.1:0"}, "not host:port"),
    ({Fid.MESH_URL: "127.0.0.1:70000"}, "not host:port"),
    ({Fid.MESH_URL: DROP}, "not host:port"),  # a mesh member must say where it is
    ({Fid.USER: None}, "user: expected a string"),
    ({Fid.TPORT: DROP}, "tport: expected a string"),
    ({Fid.SEQNO: DROP}, "seqno: expected an integer"),
    ({Fid.START: DROP}, "start: expected an integer"),
])
def test_malformed_fields_raise_the_wire_error(change: dict[int, object], message: str) -> None:
    fields = [(f, change.get(f, v)) for f, v in GOOD_FIELDS]
    with pytest.raises(WireError, match=message):
        decode_advert(_frame([(f, v) for f, v in fields if v is not DROP]))


def test_fields_of_the_wrong_type_raise_the_wire_error() -> None:
    without_tport = [(f, v) for f, v in GOOD_FIELDS if f != Fid.TPORT]
    assert decode_advert(_frame(GOOD_FIELDS)).tport == "mesh"
    with pytest.raises(WireError, match="tport: expected a string, got 12"):
        decode_advert(_with_u16(without_tport, Fid.TPORT, 12))
    with pytest.raises(WireError, match="seqno: expected an integer"):
        decode_advert(_frame([(f, v) for f, v in GOOD_FIELDS if f != Fid.SEQNO] + [(Fid.SEQNO, True)]))


def test_other_subjects_and_oversized_datagrams_are_refused() -> None:
    with pytest.raises(WireError, match="is not _X.NAME"):
        decode_advert(_frame(GOOD_FIELDS, "_X.HB"))
    with pytest.raises(WireError, match="exceeds"):
        decode_advert(_frame(GOOD_FIELDS + [(Fid.DATA, bytes(5000))]))
    with pytest.raises(WireError):
        encode_advert(advert(role="mesh", url="nowhere"))


@given(st.data())
@settings(max_examples=300, deadline=None)
def test_mutated_and_random_datagrams_only_raise_the_wire_error(data: st.DataObject) -> None:
    good = bytearray(encode_advert(data.draw(adverts())))
    how = data.draw(st.sampled_from(["flip", "cut", "random"]))
    if how == "flip":
        for _ in range(data.draw(st.integers(1, 8))):
            i = data.draw(st.integers(0, len(good) - 1))
            good[i] = data.draw(st.integers(0, 255))
        raw = bytes(good)
    elif how == "cut":
        raw = bytes(good[: data.draw(st.integers(0, len(good) - 1))])
    else:
        raw = data.draw(st.binary(max_size=300))
    try:
        ad = decode_advert(raw)
    except WireError:
        return
    assert isinstance(ad, Advert) and ad.role in ROLES  # what decodes is a valid advertisement


# ---------------------------------------------------------------- devices

IFACES = [
    Interface("lo", ipaddress.IPv4Address("127.0.0.1"), ipaddress.IPv4Network("127.0.0.0/8")),
    Interface("eth0", ipaddress.IPv4Address("192.168.1.5"), ipaddress.IPv4Network("192.168.1.0/24")),
]


def _no_dns(name: str) -> str:
    raise socket.gaierror(-2, "Name or service not known")


def test_devices_of_this_host_resolve() -> None:
    assert resolve_device("lo") == "127.0.0.1"
    assert resolve_device("127.0.0.1") == "127.0.0.1"
    assert resolve_device("127.0.0.0") == "127.0.0.1"  # a network: the interface in it
    with pytest.raises(DeviceNotFound, match="'nosuchdev0' is not an interface"):
        resolve_device("nosuchdev0", resolve=_no_dns)


def test_device_forms_against_given_interfaces() -> None:
    assert resolve_device("eth0", IFACES) == "192.168.1.5"
    assert resolve_device("192.168.1.0", IFACES) == "192.168.1.5"
    assert resolve_device("192.168.1.5", IFACES) == "192.168.1.5"
    assert resolve_device("myhost", IFACES, resolve=lambda _: "192.168.1.77") == "192.168.1.5"
    assert resolve_device("", IFACES, resolve=lambda name: "127.0.1.1") == "127.0.0.1"  # the host name
    with pytest.raises(DeviceNotFound, match=r"'10.1.2.3' \(10.1.2.3\) is neither .* eth0 192.168.1.5/24"):
        resolve_device("10.1.2.3", IFACES)
    with pytest.raises(DeviceNotFound, match="'far' .* neither"):
        resolve_device("far", IFACES, resolve=lambda _: "10.9.9.9")
    assert resolve_device("10.1.2.3", []) == "10.1.2.3"  # interfaces unknown: the address as given


def test_name_transport_records_override_the_defaults() -> None:
    assert NameConfig.of("eth0") == NameConfig("eth0", DEFAULT_GROUP, DEFAULT_PORT)
    rec = TransportConfig("lo", "name", {"connect": "lo;239.1.2.3", "port": 9999})
    assert NameConfig.of("lo", rec) == NameConfig("lo", "239.1.2.3", 9999)
    rec = TransportConfig("127.0.0.1", "name", {"listen": "127.0.0.1"})
    assert NameConfig.of("127.0.0.1", rec) == NameConfig("127.0.0.1", DEFAULT_GROUP, DEFAULT_PORT)
    assert NameConfig.of("x", TransportConfig("x", "name", {"port": 1234})) == NameConfig("x", DEFAULT_GROUP, 1234)
    with pytest.raises(NameServiceError, match="'10.0.0.1' is not an IPv4 multicast group"):
        NameConfig.of("lo", TransportConfig("lo", "name", {"connect": "lo;10.0.0.1"}))


@pytest.mark.parametrize(("text", "expected"), [
    (None, None), ("", None), ("  ", None),
    ("eth0;mesh", ClientNetwork("eth0", "mesh")),
    ("eth0;tcp.listen", ClientNetwork("eth0", "tcp.listen")),
    ("eth0;tcp.connect", ClientNetwork("eth0", "tcp.connect")),
    ("eth0;any", ClientNetwork("eth0", "any")),
    ("eth0", ClientNetwork("eth0", "any")),
    (";tcp.listen", ClientNetwork("", "tcp.listen")),
    ("192.168.1.0;tcp", ClientNetwork("192.168.1.0", "tcp.listen")),
])
def test_client_network_formats(text: str | None, expected: ClientNetwork | None) -> None:
    assert parse_network(text) == expected


def test_client_network_roles() -> None:
    assert [(n.tport_type, n.listen, n.role) for n in map(parse_network, ["d;mesh", "d;tcp.listen",
                                                                          "d;tcp.connect", "d;any"]) if n] == [
        ("mesh", True, "mesh"), ("tcp", True, "listen"), ("tcp", False, "connect"), ("tcp", False, "any")]


@pytest.mark.parametrize(("text", "group"), [
    ("eth0;239.1.2.3", "239.1.2.3"),
    ("239.1.2.3", "239.1.2.3"),
    ("eth0;239.1.2.3;239.1.2.4", "239.1.2.3;239.1.2.4"),
])
def test_multicast_networks_are_pgm_networks(text: str, group: str) -> None:
    network = parse_network(text)
    assert network is not None and (network.kind, network.tport_type, network.group) == ("pgm", "pgm", group)


def test_unknown_network_protocols_are_refused() -> None:
    with pytest.raises(BadNetwork, match="'bus' is not mesh, tcp.listen"):
        parse_network("eth0;bus")


# ---------------------------------------------------------------- two services on lo


class Heard:
    def __init__(self) -> None:
        self.adverts: list[Advert] = []
        self.event = asyncio.Event()

    def __call__(self, ad: Advert) -> None:
        self.adverts.append(ad)
        self.event.set()


def _service(port: int, bridge: bytes, heard: Heard, service: str = "test") -> NameService:
    return NameService("lo", NameConfig("lo", "239.23.22.217", port), "127.0.0.1", bridge=bridge,
                       user=f"u{bridge[0]}", service=service, start_ns=bridge[0], interval_s=30.0,
                       on_advert=heard)


async def test_services_on_one_host_hear_each_other_and_count_what_they_drop() -> None:
    port = random.randrange(20000, 60000)
    heard_a, heard_b, heard_c = Heard(), Heard(), Heard()
    a = _service(port, b"\x01" * 16, heard_a)
    b = _service(port, b"\x02" * 16, heard_b)
    c = _service(port, b"\x03" * 16, heard_c, service="other")
    for svc in (a, b, c):
        await svc.start()
    try:
        assert a.address == f"name://127.0.0.1:{a.send_port};239.23.22.217:{port}" and a.send_port
        a.advertise("mesh", "mesh", "mesh", "127.0.0.1:4000")
        await asyncio.wait_for(heard_b.event.wait(), 5)
        got = heard_b.adverts[0]
        assert (got.bridge, got.user, got.tport, got.role, got.url) == (a.bridge, "u1", "mesh", "mesh", "127.0.0.1:4000")
        b.advertise("tcp", "tcp", "connect")
        await asyncio.wait_for(heard_a.event.wait(), 5)
        assert {ad.tport for ad in heard_a.adverts} == {"tcp"}
        assert not heard_c.adverts and c.counters.ignored >= 2  # another service: counted, not reported
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
            s.sendto(b"\x80garbage" * 10, ("239.23.22.217", port))
        for _ in range(50):
            if a.counters.bad and b.counters.bad:
                break
            await asyncio.sleep(0.02)
        assert a.counters.bad == b.counters.bad == 1
        assert all(ad.bridge != a.bridge for ad in heard_a.adverts)  # its own are not reported
        row = a.port_row()
        assert row["type"] == "name" and row["ms"] == a.counters.sent >= 2 and row["bad"] == 1
        assert row["mr"] == a.counters.recv and row["heard"] == 1  # b is the node heard
    finally:
        for svc in (a, b, c):
            svc.close()


async def test_a_device_that_cannot_join_is_a_clear_error() -> None:
    svc = NameService("x", NameConfig("x", "239.23.22.217", 8327), "192.0.2.254", bridge=BRIDGE, user="u",
                      service="s", start_ns=1, interval_s=1.0, on_advert=Heard())
    with pytest.raises(NameServiceError, match="name x: cannot join 239.23.22.217:8327 on 192.0.2.254"):
        await svc.start()
