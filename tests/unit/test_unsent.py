"""A link's unsent bytes, its socket's included (raims_node/transports/unsent.py): the
pacing of a burst of announcements (router/interest.py `backlog`)."""

from __future__ import annotations

import socket
from typing import Any, cast

from raims_node.transports.unsent import PACE_BYTES, kernel_unsent, links_backlogged


class SocketTransport:
    def __init__(self, sock: socket.socket | None) -> None:
        self.sock = sock

    def get_extra_info(self, name: str) -> object:
        return self.sock if name == "socket" else None


class Link:
    def __init__(self, transport: SocketTransport | None, buffered: int = 0) -> None:
        self.transport, self.buffered = transport, buffered


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
            assert links_backlogged({1: cast(Any, Link(tr))})
            assert not links_backlogged({1: cast(Any, Link(SocketTransport(reader)))})  # nothing written there
        finally:
            writer.close()
            reader.close()
    assert kernel_unsent(cast(Any, SocketTransport(writer))) == 0  # closed meanwhile: unknown, not an error


def test_a_link_without_a_socket_counts_what_it_holds() -> None:
    assert kernel_unsent(None) == 0
    assert not links_backlogged({1: cast(Any, Link(None, PACE_BYTES))})
    assert links_backlogged({1: cast(Any, Link(None)), 2: cast(Any, Link(None, PACE_BYTES + 1))})
