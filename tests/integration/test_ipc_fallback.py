"""The sbus server without recvmmsg/sendmmsg (RAIMS_NO_MMSG=1: the path of platforms
that lack them): one recv_into / send per packet through the same batching, order kept
across a reader that stops, the flood-control queue and the ping answer after it."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.integration.harness import NodeProc, graph_config
from tests.integration.test_ipc_bus import Raw, msgs


@pytest.fixture
def plain_bus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    cfg, _ = graph_config(tmp_path, "node A\n", web=False)
    data = yaml.safe_load(cfg.read_text())
    path = str(tmp_path / "bus.sock")
    data["transports"].append({"tport": "bus", "type": "ipc", "route": {"path": path, "sndbuf": 0}})
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))
    monkeypatch.setenv("RAIMS_NO_MMSG", "1")
    node = NodeProc("A", ["-d", str(cfg), "-u", "A", "-t", "bus.listen"], tmp_path)
    try:
        node.wait_for(re.escape(f"listening on {path}"))
        yield path
    finally:
        node.stop()


def test_per_packet_path_keeps_order_through_the_queue(plain_bus: str) -> None:
    assert os.environ["RAIMS_NO_MMSG"] == "1"
    r, p = Raw(plain_bus), Raw(plain_bus)
    r.sub(b"fb/*")
    r.sync()  # then stops reading: the kernel holds a few hundred, the outbox the rest
    n = 3000
    for i in range(n):
        p.pub(b"fb/x", b"%06d" % i)
    p.sync()
    got = msgs(r.drain())  # the ping's answer comes after every packet queued before it
    assert [int(payload) for _, payload in got] == list(range(n))
    assert {key for key, _ in got} == {b"fb/x"}
    r.send(b"CMSG !/cred/whoami")
    assert r.recv().startswith(b"CMSG !/cred/whoami\x00!/cred/")
    r.close()
    p.close()
