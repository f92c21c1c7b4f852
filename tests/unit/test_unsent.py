"""A link's unsent bytes, its socket's included (raims_node/transports/unsent.py): the
pacing of a burst of announcements (router/interest.py `backlog`)."""

from __future__ import annotations

import socket
from typing import Any, cast

from raims_node.transports.unsent import PACE_BYTES, STUCK_S, LinkBacklog, kernel_unsent


class SocketTransport:
    def __init__(self, sock: socket.socket | None) -> None:
        self.sock = sock

    def get_extra_info(self, name: str) -> object:
        return self.sock if name == "socket" else None


class Link:
    def __init__(self, transport: SocketTransport | None, buffered: int = 0, bytes_out: int = 0) -> None:
        self.transport, self.buffered, self.bytes_out = transport, buffered, bytes_out


def backlogged(links: dict[int, Link]) -> bool:
    return LinkBacklog(cast(Any, links))()


def test_bytes_the_peer_has_not_taken_count_though_the_transport_holds_none() -> None:
    """asyncio's transport handed them all to the kernel, whose send buffer grows to
    megabytes: its high-water mark never saw a peer that read slower than we wrote."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        writer = socket.create_connection(server.getsockname())
        reader, _ = server.accept()
        try:
            writer.setblocking(False)
            sent = 0
            for _ in range(64):  # the peer does not read: its window, then our buffer fill
                try:
                    sent += writer.send(bytes(64 << 10))
                except BlockingIOError:
                    break
            tr = SocketTransport(writer)
            assert sent > 2 * PACE_BYTES
            assert kernel_unsent(cast(Any, tr)) > PACE_BYTES
            assert backlogged({1: Link(tr, bytes_out=sent)})
            assert not backlogged({1: Link(SocketTransport(reader))})  # nothing written there
        finally:
            writer.close()
            reader.close()
    assert kernel_unsent(cast(Any, SocketTransport(writer))) == 0  # closed meanwhile: unknown, not an error


def test_a_link_without_a_socket_counts_what_it_holds() -> None:
    assert kernel_unsent(None) == 0
    assert not backlogged({1: Link(None, PACE_BYTES)})
    assert backlogged({1: Link(None), 2: Link(None, PACE_BYTES + 1)})


def test_a_stuck_link_paces_only_until_its_peer_took_nothing_for_stuck_s() -> None:
    """A peer stopped or hung would otherwise hold our announcements back from every
    other peer until the heartbeats or the write timeout drop its link."""
    now = [100.0]
    stuck = Link(None, PACE_BYTES + 1, bytes_out=10_000)
    links: dict[int, Link] = {1: Link(None), 2: stuck}
    pace = LinkBacklog(cast(Any, links), clock=lambda: now[0])
    assert pace()
    now[0] += STUCK_S / 2
    assert pace()  # not long enough to tell
    now[0] += STUCK_S
    assert not pace()  # the peer took nothing for STUCK_S: it paces nothing
    stuck.bytes_out += 500  # ... until it takes bytes again
    assert pace()
    del links[2]
    assert not pace() and not pace._moved
