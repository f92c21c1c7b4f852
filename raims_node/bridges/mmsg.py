"""Batched packet syscalls for the sbus bus: Linux `recvmmsg(2)` / `sendmmsg(2)` through
ctypes, one syscall for many SOCK_SEQPACKET packets (each packet still one message).

Why: a packet per message is sbus' rule (seed 001), and with one `recv` and one `send`
per packet the server spent most of its time in syscalls and in waking the reader once
per packet. `Receiver.recv(fd)` takes every pending packet up to `batch` at once into
slots of one anonymous mmap (pages are touched only as far as packets reach, so the
`batch x slot` reservation costs nothing until used); `Sender.send(fd, packets)` hands a
list of packets to the kernel at once and says how many it took (the rest are the
caller's, e.g. an outbox, on EAGAIN).

`available()` is False where libc lacks the calls (not Linux), or when the environment
sets RAIMS_NO_MMSG=1 (to compare, or to test the fallback): callers then use
`recv_into` / `send` per packet. Both classes are not thread-safe (one per event loop).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import mmap
import os
import struct
import sys

MSG_DONTWAIT = 0x40


class _Iovec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


class _Msghdr(ctypes.Structure):
    _fields_ = [("msg_name", ctypes.c_void_p), ("msg_namelen", ctypes.c_uint32),
                ("msg_iov", ctypes.POINTER(_Iovec)), ("msg_iovlen", ctypes.c_size_t),
                ("msg_control", ctypes.c_void_p), ("msg_controllen", ctypes.c_size_t),
                ("msg_flags", ctypes.c_int)]


class _Mmsghdr(ctypes.Structure):
    _fields_ = [("msg_hdr", _Msghdr), ("msg_len", ctypes.c_uint)]


_HDR = ctypes.sizeof(_Mmsghdr)
_LEN_AT = _Mmsghdr.msg_len.offset
_libc: ctypes.CDLL | None = None
if sys.platform.startswith("linux") and os.environ.get("RAIMS_NO_MMSG", "") in ("", "0"):
    try:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        _libc.recvmmsg.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int, ctypes.c_void_p]
        _libc.recvmmsg.restype = ctypes.c_int
        _libc.sendmmsg.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int]
        _libc.sendmmsg.restype = ctypes.c_int
    except (OSError, AttributeError):
        _libc = None


def _bytes_data_offset() -> int:
    """Where CPython keeps a bytes object's data, from its id (checked on two objects)."""
    offs = set()
    for probe in (b"probe-one", bytes(range(40))):
        offs.add(ctypes.cast(ctypes.c_char_p(probe), ctypes.c_void_p).value - id(probe))  # type: ignore[operator]
    if len(offs) != 1:
        raise OSError("bytes layout unknown")
    return offs.pop()


try:
    _BYTES_DATA = _bytes_data_offset()
except OSError:
    _libc = None


def available() -> bool:
    return _libc is not None


def _raise(code: int) -> None:
    if code in (errno.EAGAIN, errno.EWOULDBLOCK):
        raise BlockingIOError(code, os.strerror(code))
    if code == errno.EINTR:
        raise InterruptedError(code, os.strerror(code))
    raise OSError(code, os.strerror(code))


class Receiver:
    """Up to `batch` packets of at most `slot` bytes each per `recv` call."""

    def __init__(self, batch: int, slot: int) -> None:
        assert _libc is not None
        self.batch, self.slot = batch, slot
        self.mem = mmap.mmap(-1, batch * slot)  # packet i at mem[i * slot:], sliced as bytes
        base = ctypes.addressof(ctypes.c_char.from_buffer(self.mem))
        self._iov = (_Iovec * batch)()
        self._hdrs = (_Mmsghdr * batch)()
        for i in range(batch):
            self._iov[i].iov_base = base + i * slot
            self._iov[i].iov_len = slot
            self._hdrs[i].msg_hdr.msg_iov = ctypes.pointer(self._iov[i])
            self._hdrs[i].msg_hdr.msg_iovlen = 1
        self._hdr_view = memoryview(self._hdrs).cast("B")
        self._len = struct.Struct(f"{_LEN_AT}xI{_HDR - _LEN_AT - 4}x")
        self._addr = ctypes.addressof(self._hdrs)
        self._call = _libc.recvmmsg

    def recv(self, fd: int) -> list[int]:
        """The sizes of the packets read (packet i at `mem[i * slot:]`); raises
        BlockingIOError when none is pending, OSError on a socket error. A size of 0 is
        end-of-file (SOCK_SEQPACKET); a size of `slot` may be a truncated packet."""
        n = self._call(fd, self._addr, self.batch, MSG_DONTWAIT, None)
        if n < 0:
            _raise(ctypes.get_errno())
        return [size for (size,) in self._len.iter_unpack(self._hdr_view[:n * _HDR])]


class Sender:
    """`send(fd, packets)`: as many of `packets` as the socket takes without blocking,
    at most `batch` per syscall."""

    def __init__(self, batch: int) -> None:
        assert _libc is not None
        self.batch = batch
        self._iov = (_Iovec * batch)()
        self._iov_view = memoryview(self._iov).cast("B")
        self._hdrs = (_Mmsghdr * batch)()
        for i in range(batch):
            self._hdrs[i].msg_hdr.msg_iov = ctypes.pointer(self._iov[i])
            self._hdrs[i].msg_hdr.msg_iovlen = 1
        self._addr = ctypes.addressof(self._hdrs)
        self._call = _libc.sendmmsg
        self._packers: dict[int, struct.Struct] = {}

    def send(self, fd: int, packets: list[bytes]) -> int:
        """How many of `packets` (from the first) the kernel took; 0 when the socket
        would block; OSError on a socket error before any was taken (an error after some
        were taken shows on the next call, which starts at the failing packet)."""
        done, total = 0, len(packets)
        iov, call, batch = self._iov_view, self._call, self.batch
        while done < total:
            k = min(batch, total - done)
            packer = self._packers.get(k)
            if packer is None:
                packer = self._packers[k] = struct.Struct(f"{2 * k}N")
            chunk = packets[done:done + k] if done or k < total else packets
            if not all(type(p) is bytes for p in chunk):  # the address trick below is for bytes only
                chunk = [bytes(p) for p in chunk]
            # iovec {base, len} of each: a bytes object's data sits _BYTES_DATA past its id
            packer.pack_into(iov, 0, *[x for p in chunk for x in (id(p) + _BYTES_DATA, len(p))])
            n = call(fd, self._addr, k, MSG_DONTWAIT)
            if n < 0:
                code = ctypes.get_errno()
                if code in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EINTR) or done:
                    return done
                _raise(code)
            done += n
            if n < k:
                break
        return done
