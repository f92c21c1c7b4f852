"""The latency floor of extra hops for a Python node: one message at a time through a
chain of relay processes on the daemons' own event loop (uvloop, asyncio Protocols, the
`idle_busy` policy of raims_node/transports/idle_busy.py), each relay only reading and
writing, no parsing, routing or crypto. bridge_bench.py sets raims beside it, as beside
the C relays of hopfloor.c: the p50 that B and D add to one node's against what two more
such relays add, so the gap left is raims's own work per hop, and the rest is what any
Python process pays to be woken and to move the bytes.

    python bench/pyrelay.py OUT_PORT IDLE_BUSY   (a relay: prints its port, relays to OUT_PORT)
"""

from __future__ import annotations

import asyncio
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT_S = 10.0
WARMUP = 200  # samples left out: the first messages warm every process up


def _nodelay(sock: socket.socket) -> None:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


async def _relay(out_port: int, idle_busy: int) -> None:
    from raims_node.transports.idle_busy import IdleBusy

    idle = IdleBusy(idle_busy)
    loop = asyncio.get_running_loop()
    out, _ = await loop.create_connection(asyncio.Protocol, "127.0.0.1", out_port)
    _nodelay(out.get_extra_info("socket"))

    class Relay(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            _nodelay(transport.get_extra_info("socket"))

        def data_received(self, data: bytes) -> None:
            idle.activity()
            out.write(data)

        def connection_lost(self, exc: Exception | None) -> None:
            done.set()

    done = asyncio.Event()
    server = await loop.create_server(Relay, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await done.wait()


def hop_floor(relays: int, samples: int, size: int, idle_busy: int) -> tuple[float, float]:
    """(p50, p99) in microseconds of `size` bytes sent and read back, one at a time,
    through `relays` Python relay processes joined by loopback TCP."""
    sink = socket.create_server(("127.0.0.1", 0))
    procs: list[subprocess.Popen[str]] = []
    try:
        port = sink.getsockname()[1]
        out: socket.socket | None = None
        for _ in range(relays):  # the last relay first: each connects on to the one after it
            proc = subprocess.Popen([sys.executable, __file__, str(port), str(idle_busy)], stdout=subprocess.PIPE,
                                    text=True, cwd=ROOT)
            procs.append(proc)
            assert proc.stdout is not None
            if out is None:
                sink.settimeout(TIMEOUT_S)
                out, _ = sink.accept()
                _nodelay(out)
            port = int(proc.stdout.readline())
        assert out is not None
        out.settimeout(TIMEOUT_S)
        with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as into:
            _nodelay(into)
            msg = bytes(size)
            lat: list[float] = []
            for _ in range(samples + WARMUP):
                start = time.perf_counter_ns()
                into.sendall(msg)
                got = 0
                while got < size:
                    chunk = out.recv(size - got)
                    assert chunk, "a relay closed"
                    got += len(chunk)
                lat.append((time.perf_counter_ns() - start) / 1000)
        lat = sorted(lat[WARMUP:])
        out.close()
        return statistics.median(lat), lat[int(len(lat) * 0.99)]
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
        sink.close()


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    import uvloop

    uvloop.run(_relay(int(sys.argv[1]), int(sys.argv[2])))
