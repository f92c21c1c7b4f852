"""RV bridge throughput and latency through one ms_server node and across A->D, beside
the NATS bridge of the same nodes in the same run (issue 25).

100-byte messages, one publisher and one subscriber on the node's `rv` transport:
raw-socket pipelined clients (a thread writes batches of 1000 `D` messages, another
counts the delivered bytes), msgs/s from the first publish to the last delivery; p50 /
p99 latency with one message in flight. The peer is bridge_bench's raw NATS client on
the same node's NATS transport, run interleaved with the RV figures; then the same
from A to D of the manual's graph (publisher on A, subscriber on D, two links).

    .venv/bin/python bench/rv_bench.py [--quick] [--repeat N] [--no-graph]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import struct
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bridge_bench import (  # noqa: E402
    BATCH,
    PAYLOAD,
    TIMEOUT_S,
    Raw,
    free_port,
    one_in_flight,
    pipelined_rate,
    raw_latency,
    raw_rate,
)

from raims_node.bridges.rv_codec import VERSION_REC, Writer, info_rec, join  # noqa: E402
from tests.integration.harness import NodeProc, graph_config  # noqa: E402
from tests.integration.rv_client import decode, encode  # noqa: E402

from _report import report  # noqa: E402

SUBJECT = "bench.rv"
PROBE = "bench.probe"


class RvRaw(Raw):
    """A blocking RV client past its session start."""

    def __init__(self, port: int) -> None:
        super().__init__(port)
        self._exact(12)
        self.send(VERSION_REC)
        self._exact(64)
        self.send(info_rec(3))
        self._exact(64)
        init = {"mtype": "I", "userid": "bench", "service": "7500", "network": ""}
        self.send(encode(init))
        gob = decode(self.frame())["data"]["gob"]
        self.send(encode({**init, "session": f"00000000.{gob}"}))
        self.frame()  # RVD.CONNECTED

    def _exact(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def frame(self) -> bytes:
        head = self._exact(8)
        return head + self._exact(struct.unpack(">I", head[:4])[0] - 8)


def _publish(subject: str, payload: bytes) -> bytes:
    return encode({"sub": ("subject", subject), "mtype": "D", "data": payload})


def _delivered(subject: str, payload: bytes) -> bytes:
    """The bytes of one delivery, as the daemon encodes it."""
    return join(Writer().subject("sub", subject).string("mtype", "D").fields(), Writer().opaque("data", payload).fields())


def _open(port: int, sub_port: int | None = None) -> tuple[RvRaw, RvRaw]:
    sub = RvRaw(sub_port or port)
    sub.send(encode({"mtype": "L", "sub": ("subject", SUBJECT)}) + encode({"mtype": "L", "sub": ("subject", PROBE)}))
    pub = RvRaw(port)
    _settle(pub, sub)
    return pub, sub


def _settle(pub: RvRaw, sub: RvRaw) -> None:
    """Probes until the subscriber gets one, then a last one read to its end."""
    deadline = time.monotonic() + TIMEOUT_S
    sub.sock.settimeout(0.05)
    try:
        while True:
            pub.send(_publish(PROBE, b"probe"))
            try:
                sub.frame()
                break
            except TimeoutError:
                if time.monotonic() > deadline:
                    raise
    finally:
        sub.sock.settimeout(TIMEOUT_S)
    pub.send(_publish(PROBE, b"last"))
    while not sub.frame().endswith(b"last"):
        pass
    sub.buf.clear()


def rv_rate(port: int, n: int, sub_port: int | None = None) -> float:
    pub, sub = _open(port, sub_port)
    try:
        size = len(_delivered(SUBJECT, PAYLOAD))
        return pipelined_rate(pub.send, lambda: sub.read_exactly(n * size), _publish(SUBJECT, PAYLOAD) * BATCH,
                              n, "RV", timeout=TIMEOUT_S * 4)
    finally:
        pub.close()
        sub.close()


def rv_latency(port: int, samples: int, sub_port: int | None = None) -> tuple[float, float]:
    pub, sub = _open(port, sub_port)
    try:
        return one_in_flight(pub.send, sub.read_exactly, _publish(SUBJECT, PAYLOAD),
                             len(_delivered(SUBJECT, PAYLOAD)), samples)
    finally:
        pub.close()
        sub.close()


def start_node(tmp: Path) -> tuple[NodeProc, int, int]:
    cfg, _ = graph_config(tmp, "node A\n", heartbeat="10 sec", web=False)
    data = yaml.safe_load(cfg.read_text())
    rv, nats = free_port(), free_port()
    data["transports"] += [{"tport": "rv", "type": "rv", "route": {"port": rv}},
                           {"tport": "nats", "type": "nats", "route": {"port": nats, "service": "_rv_7500"}}]
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))
    node = NodeProc("A", ["-d", str(cfg), "-u", "A", "-t", "rv.listen", "nats.listen"], tmp)
    node.wait_for(re.escape(f"listening on 127.0.0.1:{nats}"))
    return node, rv, nats


def graph_rates(n: int, samples: int, repeat: int) -> dict[str, float]:
    """RV and NATS from A to D of the manual's graph (two links), interleaved."""
    from tests.integration.harness import MANUAL_GRAPH
    from tests.integration.test_bridges_net import start_network

    tmp = Path(tempfile.mkdtemp(prefix="raims-rv-bench-graph-"))
    net = start_network(tmp, MANUAL_GRAPH, extra=[{"tport": "rv", "type": "rv", "route": {"port": 0}}],
                        heartbeat="10 sec")
    try:
        rv = nats = 0.0
        a, d = net.port("A", "rv"), net.port("D", "rv")
        for _ in range(repeat):
            rv = max(rv, rv_rate(a, n, d))
            nats = max(nats, raw_rate("nats", net.port("A"), net.port("D"), n))
        rv_p50, _ = rv_latency(a, samples, d)
        nats_p50, _ = raw_latency("nats", net.port("A"), net.port("D"), samples)
    finally:
        net.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return {"rv": rv, "nats": nats, "rv_p50": rv_p50, "nats_p50": nats_p50}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a tenth of the messages, one run each")
    ap.add_argument("--repeat", type=int, default=3, help="runs per figure (best kept)")
    ap.add_argument("--no-graph", action="store_true", help="only the one-node figures")
    args = ap.parse_args()
    n, samples, repeat = (20_000, 500, 1) if args.quick else (200_000, 5000, args.repeat)
    tmp = Path(tempfile.mkdtemp(prefix="raims-rv-bench-"))
    node, rv_port, nats_port = start_node(tmp)
    try:
        rv = nats = 0.0
        for _ in range(repeat):  # interleaved, so that load on the machine hits both alike
            rv = max(rv, rv_rate(rv_port, n))
            nats = max(nats, raw_rate("nats", nats_port, nats_port, n))
        rv_p50, rv_p99 = rv_latency(rv_port, samples)
        nats_p50, nats_p99 = raw_latency("nats", nats_port, nats_port, samples)
    finally:
        node.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{n} 100-byte messages, best of {repeat}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus")
    rows: list[dict[str, object]] = [
        {"path": "one node", "client": "RV bridge (raw, pipelined)", "msgs_per_s": round(rv),
         "p50_us": round(rv_p50, 1), "p99_us": round(rv_p99, 1)},
        {"path": "one node", "client": "NATS bridge (peer)", "msgs_per_s": round(nats),
         "p50_us": round(nats_p50, 1), "p99_us": round(nats_p99, 1)},
    ]
    extra: dict[str, object] = {"messages": n, "ratio_rv_nats": round(rv / nats, 3)}
    if not args.no_graph:
        g = graph_rates(n, samples, repeat)
        rows += [{"path": "A->D", "client": "RV bridge (raw, pipelined)", "msgs_per_s": round(g["rv"]),
                  "p50_us": round(g["rv_p50"], 1), "p99_us": ""},
                 {"path": "A->D", "client": "NATS bridge (peer)", "msgs_per_s": round(g["nats"]),
                  "p50_us": round(g["nats_p50"], 1), "p99_us": ""}]
        extra["ratio_rv_nats_a_d"] = round(g["rv"] / g["nats"], 3)
    report("rv", rows, extra)


if __name__ == "__main__":
    main()
