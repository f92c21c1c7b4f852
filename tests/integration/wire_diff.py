"""Raw-socket differential testing, shared by nats_diff.py and redis_diff.py: the same
bytes to a reference server and a raims node, what comes back compared byte for byte.

`exchange` sends a script over a raw socket (whole, or cut into given pieces) and
collects what comes back until the server closes, or `done(reply)` holds and a short
quiet time passes, or a bounded quiet time passes without it. `Pair.run` does it on
both servers and normalizes each reply with the protocol's `normalize`.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

WAIT_S = 10.0
QUIET_S = 0.3  # no reply within this after the script: nothing more is coming
DONE_QUIET_S = 0.05  # after the expected end of the reply
MAX_REPLY = 4 << 20  # a reply larger than this is cut: the scripts are small

Done = Callable[[bytes], bool]


def exchange(port: int, script: bytes, cuts: list[int] | None = None, *, done: Done | None = None,
             quiet: float = QUIET_S) -> tuple[bytes, bool]:
    """(reply, closed by the server): `script` sent at once, or in the pieces that `cuts`
    (offsets) make, each sent after the server had time to read the one before."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # each piece its own segment
    buf = bytearray()
    closed = False
    with sock:
        pieces = [script[a:b] for a, b in zip([0, *(cuts or [])], [*(cuts or []), len(script)], strict=True)]
        try:
            for i, piece in enumerate(pieces):
                sock.sendall(piece)
                if i + 1 < len(pieces):
                    time.sleep(0.002)  # its own read on the other side (a read boundary)
                    closed = _drain(sock, buf)  # what came back before a close resets the socket
                    if closed:
                        break
        except OSError:
            closed = True
        deadline = time.monotonic() + WAIT_S
        while not closed and len(buf) < MAX_REPLY and time.monotonic() < deadline:
            sock.settimeout(DONE_QUIET_S if done is not None and done(bytes(buf)) else quiet)
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            except OSError:
                closed = True
                break
            if not chunk:
                closed = True
            buf += chunk
    return bytes(buf), closed


def _drain(sock: socket.socket, buf: bytearray) -> bool:
    """Whatever has arrived, without waiting, into `buf`; whether the server closed."""
    sock.settimeout(0)
    try:
        while True:
            try:
                chunk = sock.recv(65536)
            except BlockingIOError:
                return False
            except OSError:
                return True
            if not chunk:
                return True
            buf += chunk
    finally:
        sock.settimeout(WAIT_S)


Reply = tuple[bytes, bool]


class Pair:
    """A reference server and a raims node; `run` the same script on both."""

    def __init__(self, ref_port: int, raims_port: int, normalize: Callable[[bytes], bytes],
                 done: Callable[[bytes], Done | None] = lambda script: None) -> None:
        self.ref_port = ref_port
        self.raims_port = raims_port
        self.normalize = normalize
        self.done = done  # script -> when its reply is complete

    def run(self, script: bytes, cuts: list[int] | None = None) -> tuple[Reply, Reply]:
        done = self.done(script)
        a, ca = exchange(self.ref_port, script, cuts, done=done)
        b, cb = exchange(self.raims_port, script, cuts, done=done)
        return (self.normalize(a), ca), (self.normalize(b), cb)
