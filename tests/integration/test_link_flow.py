"""Link flow control on real loopback sockets: the high-water mark reports congestion
(the daemon then pauses its other links), draining clears it, and a link whose output
stays above the mark past tcp_write_timeout is dropped."""

from __future__ import annotations

import asyncio
import socket
import time

from raims_node.transports.tcp import LinkProtocol


class Owner:
    def __init__(self) -> None:
        self.events: list[tuple[int, bool]] = []
        self.lost: list[str] = []
        self.full: list[bool] = []
        self.changed = asyncio.Event()

    def link_made(self, link: LinkProtocol) -> int:
        return 7

    def link_frames(self, conn_id: int, frames: list[bytes]) -> None:
        pass

    def link_lost(self, conn_id: int, reason: str) -> None:
        self.lost.append(reason)
        self.changed.set()

    def link_congested(self, conn_id: int, congested: bool) -> None:
        self.events.append((conn_id, congested))
        self.changed.set()

    def link_full(self, conn_id: int, full: bool) -> None:
        self.full.append(full)


async def _link_to_idle_peer(write_timeout_s: float) -> tuple[Owner, LinkProtocol, socket.socket]:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    owner = Owner()
    loop = asyncio.get_running_loop()
    _, link = await loop.create_connection(
        lambda: LinkProtocol(owner, 0, None, highwater=64 * 1024, write_timeout_s=write_timeout_s),
        "127.0.0.1", port)
    peer, _ = listener.accept()
    listener.close()
    peer.setblocking(False)
    return owner, link, peer  # type: ignore[return-value]


async def _fill(link: LinkProtocol, owner: Owner) -> None:
    chunk = bytes(32 * 1024)
    for _ in range(2000):  # the peer reads nothing: the kernel buffers fill, then ours
        link.send(chunk)
        if owner.events:
            return
        await asyncio.sleep(0)


def test_congestion_is_reported_and_cleared_when_the_peer_drains() -> None:
    async def run() -> None:
        owner, link, peer = await _link_to_idle_peer(write_timeout_s=30)
        await _fill(link, owner)
        assert owner.events == [(7, True)] and not link.writable
        owner.changed.clear()
        loop = asyncio.get_running_loop()
        for _ in range(2000):  # drain from the peer until the link reports it
            try:
                await loop.sock_recv(peer, 1 << 20)
            except BlockingIOError:
                pass
            if owner.events[-1] == (7, False):
                break
        assert owner.events == [(7, True), (7, False)] and link.writable
        link.close("done")
        peer.close()

    asyncio.run(run())


def test_a_link_stuck_above_the_mark_is_dropped_after_the_write_timeout() -> None:
    async def run() -> None:
        owner, link, peer = await _link_to_idle_peer(write_timeout_s=0.2)
        await _fill(link, owner)
        assert owner.events == [(7, True)]
        link.check_write_timeout(time.monotonic())  # not yet
        assert link.closed_reason is None
        await asyncio.sleep(0.3)  # the timeout itself is what is tested
        link.check_write_timeout(time.monotonic())
        assert link.closed_reason is not None and "write timeout" in link.closed_reason
        assert link.write_drops == 1
        peer.close()

    asyncio.run(run())


def test_control_frames_overtake_queued_data_and_a_full_queue_is_reported() -> None:
    """Above the mark the link queues what it is sent: a heartbeat-type frame sent after
    queued data is written before it, and a queue past 4 x the mark reports the link
    full until it drains."""
    async def run() -> None:
        owner, link, peer = await _link_to_idle_peer(write_timeout_s=30)
        await _fill(link, owner)
        base = link.queued  # the filler sent after the mark was passed
        data = b"\x80" + b"d" * 1023  # version bit, type 0: multicast data
        for _ in range(300):  # 300 KiB queued: past 4 x the 64 KiB mark
            link.send(data)
        ctl = b"\xe0" + b"h" * 63  # type 3: a heartbeat
        link.send(ctl)
        assert link.queued == base + 300 * len(data) + len(ctl) and owner.full == [True]
        loop = asyncio.get_running_loop()
        got = bytearray()
        for _ in range(5000):
            try:
                got += await loop.sock_recv(peer, 1 << 20)
            except BlockingIOError:
                pass
            if got.count(data) == 300:
                break
        assert got.count(data) == 300 and got.find(ctl) < got.find(data)
        assert owner.full == [True, False] and link.queued == 0
        link.close("done")
        peer.close()

    asyncio.run(run())
