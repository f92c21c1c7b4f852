"""The sbus client's first words with its node (client/sync.py's connect)."""

from __future__ import annotations

import contextlib
import errno
import json
import socket
import struct

from raims_node.bridges import sbus_proto as sp

CTL_PING = b"raims/ping"
CTL_INFO = b"raims/info"
INFO_TIMEOUT_S = 5.0
RECV_MAX = 1 << 20
_PEERCRED = struct.Struct("3i")  # pid, uid, gid


def node_pid(s: socket.socket) -> int | None:
    """The process of the node at the other end (SO_PEERCRED): a connection it closed
    while it lives on was cut (client/errors.py)."""
    with contextlib.suppress(OSError):
        pid: int = _PEERCRED.unpack(s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))[0]
        return pid
    return None


def ask_info(s: socket.socket) -> int | None:
    """The node's max_packet (`CMSG raims/info`, then a ping: a node that does not know
    the question answers only the ping, and the client goes on without the limit)."""
    s.settimeout(INFO_TIMEOUT_S)
    s.send(sp.encode_cmsg(CTL_INFO))
    s.send(sp.encode_cmsg(CTL_PING, b"info"))
    limit = None
    for _ in range(16):  # only the two answers can come: nothing is subscribed yet
        packet = s.recv(RECV_MAX)
        if not packet:
            raise OSError(errno.ECONNRESET, "closed")
        if packet.startswith(b"CMSG raims/info\x00"):
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                limit = int(json.loads(packet[len(b"CMSG raims/info\x00"):])["max_packet"])
        elif packet == sp.encode_cmsg(CTL_PING, b"info"):
            break
    s.settimeout(None)
    return limit
