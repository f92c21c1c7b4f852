"""Frames per second forwarded by one node (a real ms_server process) between two TCP
links, with link encryption on and off; 100-byte payloads.

A (publisher) and C (subscriber) are daemons in this process; B, between them, is the
node measured. A sends pre-built, signed frames as fast as the link takes them; C counts
the frames arriving on its link without processing them further, so the figure is B's.
Targets: >= 150,000 frames/s unencrypted, >= 100,000 encrypted. The peer measured in
the same run is a plain TCP relay (read from one socket, write to the other, no
processing) in a process of its own: the ceiling of a Python process moving these bytes.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent))
from raims_node.config.tree import load  # noqa: E402
from raims_node.daemon import Daemon  # noqa: E402
from raims_node.router.actions import Send  # noqa: E402
from tests.integration.harness import PYTHON, NodeProc, graph_config  # noqa: E402

from _report import report  # noqa: E402

FRAMES = 200_000
BATCH = 2_000
PAYLOAD = bytes(100)
GRAPH = "node A B C\ntcp_link_ab A B : 100\ntcp_link_bc B C : 100\n"

RELAY = """
import socket, sys
ls = socket.socket(); ls.bind(("127.0.0.1", 0)); ls.listen(2)
print(ls.getsockname()[1], flush=True)
a, _ = ls.accept(); c, _ = ls.accept()
n = 0
while True:
    b = a.recv(1 << 20)
    if not b: break
    c.sendall(b)
"""


async def _run_chain(cfg: Path, tmp: Path) -> float:
    tree = load(cfg)
    b = NodeProc("B", ["-d", str(cfg), "-u", "B", "-t", "link_ab.listen", "link_bc.listen"], tmp)
    try:
        b.listening()
        a, c = Daemon(tree, "A"), Daemon(tree, "C")
        await a.start([], ["link_ab"])
        await c.start([], ["link_bc"])
        c.subscribe(c, "bench", "bench.subject")
        deadline = time.monotonic() + 30
        while not (a.node.converged and c.node.converged and len(a.node.peers) == 2
                   and a.node.interest("bench.subject")[1] == 1):
            if time.monotonic() > deadline:
                raise TimeoutError("chain did not converge")
            await asyncio.sleep(0.05)
        frames: list[bytes] = []
        for i in range(FRAMES):
            frames += [act.data for act in a.node.publish("bench.subject", PAYLOAD, time.time_ns())
                       if isinstance(act, Send)]
            if i % 5000 == 0:
                await asyncio.sleep(0)  # keep heartbeats flowing while the frames are built
        (link_a,) = a.links.values()
        (link_c,) = c.links.values()
        counted = {"n": 0}
        c.link_frames = lambda conn_id, fs: counted.__setitem__("n", counted["n"] + len(fs))  # type: ignore[method-assign]
        t0 = time.perf_counter()
        for i in range(0, len(frames), BATCH):
            link_a.send(b"".join(frames[i : i + BATCH]))
            while link_a.transport is not None and link_a.transport.get_write_buffer_size() > 4 << 20:
                await asyncio.sleep(0.001)
        while counted["n"] < FRAMES and time.perf_counter() - t0 < 60:
            await asyncio.sleep(0.005)
        rate = counted["n"] / (time.perf_counter() - t0)
        await a.stop()
        await c.stop()
        del link_c
        return rate
    finally:
        b.stop()


def _relay_rate(frame_len: int) -> float:
    proc = subprocess.Popen([PYTHON, "-c", RELAY], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        a = socket.create_connection(("127.0.0.1", port))
        c = socket.create_connection(("127.0.0.1", port))
        blob = bytes(frame_len * BATCH)
        total = frame_len * FRAMES
        t0 = time.perf_counter()
        import threading

        def pump() -> None:
            for _ in range(FRAMES // BATCH):
                a.sendall(blob)
            a.close()

        threading.Thread(target=pump, daemon=True).start()
        got = 0
        while got < total:
            chunk = c.recv(1 << 20)
            if not chunk:
                break
            got += len(chunk)
        return (got / frame_len) / (time.perf_counter() - t0)
    finally:
        proc.kill()
        proc.wait()


def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        cfg, _ = graph_config(tmp, GRAPH, heartbeat="10 secs", web=False)
        frame_len = 0
        for encrypt in (False, True):
            data = yaml.safe_load(cfg.read_text())
            data["parameters"]["tcp_noencrypt"] = not encrypt
            c2 = tmp / f"fwd_{encrypt}.yaml"
            c2.write_text(yaml.safe_dump(data))
            rate = asyncio.run(_run_chain(c2, tmp))
            rows.append({"link": "encrypted" if encrypt else "plain", "frames_per_s": rate,
                         "target": 100_000 if encrypt else 150_000})
        frame_len = 209
        relay = _relay_rate(frame_len)
        for r in rows:
            r["meets_target"] = r["frames_per_s"] >= r["target"]  # type: ignore[operator]
            r["relay_peer_per_s"] = relay
            r["ratio_vs_relay"] = round(r["frames_per_s"] / relay, 3)  # type: ignore[operator]
    report("forward", rows)


if __name__ == "__main__":
    main()
