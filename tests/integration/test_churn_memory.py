"""Client churn leaves nothing behind in the node (2026-11-27, branch churn-memory;
DESIGN-NOTES "Client churn: leak or allocator"). Rounds of clients that connect, subscribe,
publish a little and close, on each client edge; the node's live objects counted after
each round through its leak snapshot (raims_node/diag.py, SIGUSR1 with $RAIMS_DIAG_DUMP),
not its RSS. Real ms_server, raw sockets and aiohttp's client; the web port's
`header_timeout` at its default (20 s), so a round finishes well inside it."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from raims_node.diag import ENV
from tests.integration.harness import TELNET_TPORT, diag_snapshot, poll
from tests.integration.rv_client import RvClient
from tests.integration.test_bridges_net import WEB, BridgeNet, start_network

RV = {"tport": "rv", "type": "rv", "route": {"port": 0}}
ROUNDS = 3
CLIENTS = 40  # a round's clients per kind
HANDLER = "aiohttp.web_protocol.RequestHandler"
BOUNDED = (  # may grow a round, bounded by design (DESIGN-NOTES "State under churn")
    "raims_node.router.batch.FloodBatcher._seen",  # flood dedup, 65,536 keys at most
    "raims_node.router.state.NodeState._bcast_seen",  # broadcast dedup, 16,384
    "raims_node.router.batch.FloodBatcher._own",  # own floods waiting for their batch (ms)
    "raims_node.bridges.redis_stats.CmdStat.hist",  # latency buckets, 8 an octave
    # compiled patterns, subject.pattern.COMPILE_CACHE_SIZE (4,096): each RV client
    # listens on its own inbox, `_INBOX.<session>.>`
    "raims_node.subject.pattern.Pattern", "raims_node.subject.segments.Segments",
    "raims_node.subject.globmatch.GlobMatcher",
)


class Net:
    def __init__(self, net: BridgeNet, dump: Path, bus: Path) -> None:
        self.net, self.dump, self.bus = net, dump, bus
        self.node = net.nodes["A"]

    def snapshot(self) -> dict[str, Any]:
        return diag_snapshot(self.node, self.dump)

    def fds(self) -> int:
        return len(list(Path(f"/proc/{self.node.proc.pid}/fd").iterdir()))


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Net]:
    tmp = tmp_path_factory.mktemp("churn_memory")
    dump = tmp / "diag.json"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(ENV, str(dump))
        bus = {"tport": "bus", "type": "ipc", "route": {"path": str(tmp / "bus.sock"), "service": "churn"}}
        n = start_network(tmp, "node A\n", extra=[RV, bus, TELNET_TPORT, WEB])
    yield Net(n, dump, tmp / "bus.sock")
    n.stop()


def _rounds(net: Net, one_round: Any) -> list[dict[str, Any]]:
    """ROUNDS rounds of `one_round()`; the snapshot after each, once the node has closed
    the round's connections (its descriptors back to where they were)."""
    fds = net.fds()
    snaps = []
    for _ in range(ROUNDS):
        asyncio.run(one_round())
        assert poll(lambda: net.fds() <= fds, 10), "the round's connections were not all closed"
        snaps.append(net.snapshot())
    return snaps


def test_the_web_port_holds_no_handler_of_a_connection_that_went(net: Net) -> None:
    """Websockets (a sub, a psub, a pub), plain requests and connections that send nothing,
    each closed by the client. Before, each connection's header deadline (a loop timer of
    `header_timeout`, 20 s) held its aiohttp handler, served or not: 120 handlers a round,
    all still alive at the third round's end (a websocket's ~10 KB, measured at 1,000 a
    round: +10 MB each round). Now a request served or a connection lost cancels it."""
    port = net.net.port("A", "web")

    async def one_round() -> None:
        async with aiohttp.ClientSession() as http:
            for i in range(CLIENTS):
                async with http.ws_connect(f"http://127.0.0.1:{port}/ws") as ws:
                    await ws.send_json({"sub": f"churn.ws.{i % 4}"})
                    assert (await ws.receive_json(timeout=5)) == {"ok": True}
                    await ws.send_json({"psub": "churn.ws.*", "syntax": "glob"})
                    await ws.receive_json(timeout=5)
                    await ws.send_json({"pub": f"churn.ws.{i % 4}", "data": "hi"})
        for _ in range(CLIENTS):  # a request each, on a connection of its own
            async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/healthz") as r:
                assert r.status == 200
        for _ in range(CLIENTS):  # a port check: connect, close
            _, w = await asyncio.open_connection("127.0.0.1", port)
            w.close()
            await w.wait_closed()

    snaps = _rounds(net, one_round)
    handlers = [s["types"].get(HANDLER, 0) for s in snaps]
    assert handlers[-1] <= 2, f"aiohttp handlers alive after each round: {handlers}"
    timers = [s["timers"] for s in snaps]
    assert timers[-1] - timers[0] < CLIENTS, f"timers alive after each round: {timers}"


def _raims_types(snap: dict[str, Any]) -> dict[str, int]:
    return {t: n for t, n in snap["types"].items() if t.startswith("raims_node.")}


def _grown(first: dict[str, int], last: dict[str, int], least: int) -> dict[str, int]:
    return {k: last.get(k, 0) - first.get(k, 0) for k in last.keys() | first.keys()
            if last.get(k, 0) - first.get(k, 0) >= least}


def test_nats_redis_rv_telnet_and_sbus_churn_leave_no_object_per_client(net: Net) -> None:
    """The other edges, measured with 1,000-client rounds (bench/churn_bench.py): no object
    or table of the node grows with the clients that came and went, beyond the bounded
    caches (subjects on shared names here, so none of those fill). A guard: each kind's
    objects and tables after its third round against its first, none up by CLIENTS/2."""
    ports = net.net.ports["A"]

    async def nats(i: int) -> None:
        r, w = await asyncio.open_connection("127.0.0.1", ports["nats"])
        await r.readline()
        s = f"churn.n.{i % 4}"
        w.write(f"CONNECT {{}}\r\nSUB {s} 1\r\nSUB churn.n.* 2\r\nPUB {s} 2\r\nhi\r\nPING\r\n".encode())
        while (await r.readline()) not in (b"PONG\r\n", b""):
            pass
        w.close()

    async def redis(i: int) -> None:
        r, w = await asyncio.open_connection("127.0.0.1", ports["redis"])
        s = f"churn.r.{i % 4}"
        w.write(f"SET churn:k{i % 4} v\r\nGET churn:k{i % 4}\r\nINCR churn:n\r\nPUBLISH {s} hi\r\n"
                f"SUBSCRIBE {s}\r\nPSUBSCRIBE churn.r.*\r\n".encode())
        got = b""
        while got.count(b"subscribe\r\n") < 2:
            chunk = await r.read(65536)
            assert chunk, "closed"
            got += chunk
        w.close()

    async def rv(i: int) -> None:
        c = await RvClient.connect(ports["rv"])
        await c.listen(f"churn.v.{i % 4}")
        await c.publish(f"churn.v.{i % 4}", b"hi")
        await c.close()

    async def telnet(i: int) -> None:
        r, w = await asyncio.open_connection("127.0.0.1", ports["tel"])
        w.write(f"sub churn.t.{i % 4}\r\npub churn.t.{i % 4} hi\r\nshow ports\r\n".encode())
        got = b""
        while b"tel" not in got:
            chunk = await r.read(65536)
            assert chunk, "closed"
            got += chunk
        w.close()

    def sbus_one(i: int) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.settimeout(10)
        s.connect(str(net.bus))
        subject = b"churn/s/%d" % (i % 4)
        for packet in (b"SUB " + subject, b"MSG " + subject + b"\x00hi", b"CMSG raims/ping\x00x"):
            s.send(packet)
        while (p := s.recv(1 << 16)) and p != b"CMSG raims/ping\x00x":
            pass
        s.close()

    async def sbus(i: int) -> None:
        await asyncio.to_thread(sbus_one, i)

    grown = {}
    for kind, client in (("nats", nats), ("redis", redis), ("rv", rv), ("telnet", telnet), ("sbus", sbus)):
        async def one_round(client: Any = client) -> None:
            await asyncio.gather(*(client(i) for i in range(CLIENTS)))

        snaps = _rounds(net, one_round)
        types = _grown(_raims_types(snaps[0]), _raims_types(snaps[-1]), CLIENTS // 2)
        tables = _grown(snaps[0]["tables"], snaps[-1]["tables"], CLIENTS // 2)
        for bounded in BOUNDED:
            types.pop(bounded, None)
            tables.pop(bounded, None)
        if types or tables:
            grown[kind] = (types, tables)
    assert not grown, f"grew with the clients that came and went: {grown}"


def test_the_snapshot_is_off_without_the_variable() -> None:
    """No handler without $RAIMS_DIAG_DUMP: SIGUSR1 keeps its default (the node's own test
    of it would end the node; here, the install is checked on a loop of our own)."""
    from raims_node import diag

    async def run() -> None:
        loop = asyncio.get_running_loop()
        saved = os.environ.pop(ENV, None)
        try:
            diag.install(loop)
            assert not loop.remove_signal_handler(signal.SIGUSR1)
        finally:
            if saved is not None:
                os.environ[ENV] = saved

    asyncio.run(run())
