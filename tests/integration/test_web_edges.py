"""Hostile websocket clients on the web port (2026-11-27, branch edge-measure; DESIGN-NOTES
"Client edges", "Measured later the same day"): a `pub` over `max_payload`, frames that
claim more than the message limit, a ping flood whose peer leaves. Real ms_server, raw
sockets speaking RFC 6455 (client frames masked with a zero key)."""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Iterator

import pytest

from tests.integration.test_bridges_net import WEB, BridgeNet, start_network
from tests.integration.test_flow_control import _connect


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BridgeNet]:
    n = start_network(tmp_path_factory.mktemp("web_edges"), "node A\n", extra=[WEB])
    yield n
    n.stop()


def _ws(port: int, rcvbuf: int = 0) -> socket.socket:
    s = _connect(port, rcvbuf)
    s.settimeout(10)
    s.sendall(f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n".encode())
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        head += s.recv(1)
    assert head.startswith(b"HTTP/1.1 101"), head
    return s


def _frame(opcode: int, payload: bytes, length: int | None = None) -> bytes:
    n = len(payload) if length is None else length
    if n < 126:
        head = bytes([0x80 | opcode, 0x80 | n])
    elif n < 1 << 16:
        head = bytes([0x80 | opcode, 0x80 | 126]) + struct.pack(">H", n)
    else:
        head = bytes([0x80 | opcode, 0x80 | 127]) + struct.pack(">Q", n)
    return head + bytes(4) + payload  # a zero mask: the payload as it is


def _next_frame(s: socket.socket) -> tuple[int, bytes]:
    def exactly(n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            data = s.recv(n - len(buf))
            if not data:
                raise ConnectionError(f"closed after {buf!r}")
            buf += data
        return buf

    b0, b1 = exactly(2)
    n = b1 & 0x7F
    if n == 126:
        n = struct.unpack(">H", exactly(2))[0]
    elif n == 127:
        n = struct.unpack(">Q", exactly(8))[0]
    return b0 & 0x0F, exactly(n)


def _request(s: socket.socket, req: dict[str, object]) -> dict[str, object]:
    s.sendall(_frame(1, json.dumps(req).encode()))
    op, data = _next_frame(s)
    assert op == 1, (op, data)
    return json.loads(data)  # type: ignore[no-any-return]


def test_a_websocket_pub_over_max_payload_is_refused_and_the_connection_kept(net: BridgeNet) -> None:
    """A NATS or Redis client may not publish more than `max_payload` (1 MB); a websocket
    published up to aiohttp's 4 MB message limit (its subscribers elsewhere then got what
    no other client could send). Now refused as a Redis PUBLISH over it: an error reply,
    the connection kept."""
    s = _ws(net.port("A", "web"))
    try:
        reply = _request(s, {"pub": "EDGE.BIG", "data": "x" * (1024 * 1024 + 1)})
        assert "exceeds max_payload" in str(reply.get("error")), reply
        assert _request(s, {"pub": "EDGE.BIG", "data": "x" * 1000}) == {"ok": True}
    finally:
        s.close()


@pytest.mark.parametrize("claimed", [5 << 20, (1 << 63) - 1])
def test_a_frame_over_the_message_limit_is_closed_1009_before_its_payload(net: BridgeNet, claimed: int) -> None:
    """Held (no change), as a user expects: a header that claims more than the limit (a
    5 MB frame, 2^63 bytes) is answered at once with close 1009 "message too big"."""
    s = _ws(net.port("A", "web"))
    try:
        s.sendall(_frame(1, b"", length=claimed))
        op, data = _next_frame(s)
        assert op == 8 and struct.unpack(">H", data[:2])[0] == 1009, (op, data)
    finally:
        s.close()


def test_a_websocket_that_leaves_under_a_ping_flood_logs_no_traceback(net: BridgeNet) -> None:
    """Pings sent without reading the pongs: the node stops reading the websocket (its
    pongs wait for the peer), and the peer's reset then failed the pending pong with a
    traceback in the node's log ("Error handling request ... Connection lost"). Now the
    connection is closed quietly."""
    node = net.nodes["A"]
    port = net.port("A", "web")
    s = _ws(port, rcvbuf=4096)
    s.settimeout(1)
    ping = _frame(9, b"p" * 125) * 1000
    try:
        for _ in range(10_000):  # until the node stops reading (bounded)
            s.send(ping)
    except TimeoutError:
        pass
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()  # a reset under the waiting pongs
    mark = len(node.lines)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as bad:  # a log line after it
        bad.sendall(b"GET /" + b"x" * 9000 + b" HTTP/1.1\r\n\r\n")
        assert b" 400 " in bad.recv(100)
    node.wait_for(r"web: bad request refused", after=mark)
    assert node.new_traceback() is None
