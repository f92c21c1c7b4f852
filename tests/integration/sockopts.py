"""A server's socket options read from outside it: the node's end of a client connection,
duplicated into the test with pidfd_getfd(2) (Linux 5.6; the caller may ptrace the
process: the same user, its parent), then getsockopt."""

from __future__ import annotations

import ctypes
import os
import socket
from dataclasses import dataclass

SYS_PIDFD_GETFD = 438  # the same number on every architecture


@dataclass(frozen=True, slots=True)
class Keepalive:
    on: bool
    idle: int
    interval: int
    probes: int


class NoAccess(Exception):
    """This process may not take the other's descriptors (no pidfd_getfd, or no ptrace right)."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def server_keepalive(pid: int, client: socket.socket) -> Keepalive | None:
    """The keepalive options of process `pid`'s end of `client`'s connection (its socket
    whose peer is `client`'s address); None when it has no such socket (not accepted yet)."""
    libc = _libc()
    want = client.getsockname()[:2]
    pidfd = os.pidfd_open(pid)
    try:
        for name in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{name}")
            except FileNotFoundError:  # closed since the listing (the node's other work goes on)
                continue
            if not target.startswith("socket:"):
                continue
            fd = libc.syscall(SYS_PIDFD_GETFD, pidfd, int(name), 0)
            if fd < 0:
                err = ctypes.get_errno()
                if err in (1, 38):  # EPERM, ENOSYS
                    raise NoAccess(os.strerror(err))
                continue  # closed meanwhile
            sock = socket.socket(fileno=fd)
            try:
                if sock.family not in (socket.AF_INET, socket.AF_INET6) or sock.type != socket.SOCK_STREAM:
                    continue
                try:
                    peer = sock.getpeername()[:2]
                except OSError:  # a listener
                    continue
                if peer != want:
                    continue
                return Keepalive(bool(sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE)),
                                 sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
                                 sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
                                 sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT))
            finally:
                sock.close()  # our duplicate only
    finally:
        os.close(pidfd)
    return None
