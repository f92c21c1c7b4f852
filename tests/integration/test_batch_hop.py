"""A pipelined NATS burst across the manual's A-D network (real ms_server processes):
every message reaches D once and in order, carried in batch frames (wire/batch.py), with
a single publish and a second subject interleaved."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.harness import MANUAL_GRAPH
from tests.integration.test_bridges_net import BridgeNet, start_network
from tests.integration.test_flow_control import _nats, _settle

COUNT = 60_000


@pytest.fixture
def abcd(tmp_path: Path) -> Iterator[BridgeNet]:
    net = start_network(tmp_path, MANUAL_GRAPH, heartbeat="10 sec")
    yield net
    net.stop()


def test_a_pipelined_burst_crosses_a_to_d_whole_and_in_order(abcd: BridgeNet) -> None:
    sub = _nats(abcd.port("D"), b"SUB burst.* 1\r\n")
    pub = _nats(abcd.port("A"))
    try:
        _settle(pub, sub, b"burst.x")
        want = bytearray()
        out = bytearray()
        for i in range(COUNT):
            subject = b"burst.y" if i % 5000 == 4999 else b"burst.x"  # a subject change ends a run
            body = b"%08d" % i
            out += b"PUB %s %d\r\n%s\r\n" % (subject, len(body), body)
            want += b"MSG %s 1 %d\r\n%s\r\n" % (subject, len(body), body)
        got = bytearray()
        sub.settimeout(30)

        def read() -> None:
            deadline = time.monotonic() + 60
            while len(got) < len(want) and time.monotonic() < deadline:
                chunk = sub.recv(1 << 20)
                if not chunk:
                    break
                got.extend(chunk)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        pub.sendall(bytes(out))
        reader.join(70)
        assert bytes(got) == bytes(want)
    finally:
        pub.close()
        sub.close()
    lines = abcd.nodes["B"].lines
    assert not [line for line in lines if "hb_timeout" in line or "closing link" in line]
