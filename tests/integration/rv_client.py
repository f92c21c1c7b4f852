"""A small TIBCO Rendezvous client for the tests (issue 25), asyncio.

Written from the protocol facts (raitechnology/sassrv's client side: version and info
records, the two `I` messages, `L` / `C` / `D`), with its own rvmsg encoding rather
than raims_node.bridges.rv_codec, so that a mistake in the daemon's codec is not
mirrored here and hidden.

    c = await RvClient.connect(port, service="7500", style="rv6")
    await c.listen("A.>"); await c.publish("A.B", b"x"); m = await c.next(5)
    reply = await c.request("svc.echo", b"ping", 5)   # on an inbox of the session

`style` "rv6" answers INITRESP with the session `<ipaddr hex>.<gob>` (the daemon's
session, RV6+ clients); "rv5" makes its own session name, as RV5 clients do.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import struct
from dataclasses import dataclass
from typing import Any

MAGIC = 0x9955EEAA


# ------------------------------------------------------------------ encoding


def _subject(s: str) -> bytes:
    segs = s.encode().split(b".")
    return bytes([len(segs)]) + b"".join(bytes([len(g) + 2]) + g + b"\0" for g in segs)


def _field(name: str, ftype: int, data: bytes) -> bytes:
    head = bytes([len(name) + 1]) + name.encode() + b"\0" + bytes([ftype])
    if ftype == 1:  # a nested message: its own size leads
        return head + b"\x7a" + data
    if ftype in (9, 10, 11, 12, 13):
        return head + bytes([len(data)]) + data
    if len(data) < 120:
        return head + bytes([len(data)]) + data
    if len(data) < 30000:
        return head + b"\x79" + struct.pack(">H", len(data) + 2) + data
    return head + b"\x7a" + struct.pack(">I", len(data) + 4) + data


def encode(fields: dict[str, Any]) -> bytes:
    """str -> string, bytes -> opaque, int -> int32, ("subject", s), dict -> message."""
    body = b""
    for name, value in fields.items():
        if isinstance(value, tuple) and value[0] == "subject":
            body += _field(name, 2, _subject(value[1]))
        elif isinstance(value, str):
            body += _field(name, 8, value.encode() + b"\0")
        elif isinstance(value, bytes):
            body += _field(name, 7, value)
        elif isinstance(value, int):
            body += _field(name, 11, struct.pack(">i", value))
        elif isinstance(value, dict):
            body += _field(name, 1, encode(value))
        else:
            raise TypeError(value)
    return struct.pack(">II", len(body) + 8, MAGIC) + body


def decode(buf: bytes) -> dict[str, Any]:
    size, magic = struct.unpack_from(">II", buf)
    assert magic == MAGIC and size == len(buf), (size, magic, len(buf))
    out: dict[str, Any] = {}
    i = 8
    while i < size:
        n = buf[i]
        name = buf[i + 1:i + n].rstrip(b"\0").decode()
        i += 1 + n
        ftype = buf[i]
        i += 1
        if ftype == 1:
            assert buf[i] == 0x7A
            i += 1
            length = struct.unpack_from(">I", buf, i)[0]
        elif ftype in (9, 10, 11, 12, 13, 3):
            length = buf[i]
            i += 1
        else:
            length = buf[i]
            i += 1
            if length == 0x79:
                length = struct.unpack_from(">H", buf, i)[0] - 2
                i += 2
            elif length == 0x7A:
                length = struct.unpack_from(">I", buf, i)[0] - 4
                i += 4
        data = buf[i:i + length]
        i += length
        value: Any = data
        if ftype == 8:
            value = data.rstrip(b"\0").decode()
        elif ftype == 2:
            segs, j, parts = data[0], 1, []
            for _ in range(segs):
                parts.append(data[j + 1:j + data[j] - 1].decode())
                j += data[j]
            value = ".".join(parts)
        elif ftype == 11:
            value = int.from_bytes(data, "big", signed=True)
        elif ftype == 12:
            value = int.from_bytes(data, "big")
        elif ftype == 1:
            value = decode(data)
        out[name] = value
    return out


# ------------------------------------------------------------------ the client


@dataclass
class RvMessage:
    subject: str
    mtype: str
    reply: str | None
    data: Any  # bytes (opaque) or a dict (a nested message)


class RvClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.session = ""
        self.gob = ""
        self.ipaddr = b""
        self.queue: asyncio.Queue[RvMessage] = asyncio.Queue()
        self._inbox_n = itertools.count(2)
        self._task: asyncio.Task[None] | None = None

    @classmethod
    async def connect(cls, port: int, service: str = "7500", network: str = "", style: str = "rv6",
                      host: str = "127.0.0.1", timeout: float = 10.0) -> RvClient:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        c = cls(reader, writer)
        await asyncio.wait_for(c._start(service, network, style), timeout)
        c._task = asyncio.create_task(c._read())
        return c

    async def _frame(self) -> dict[str, Any]:
        head = await self.reader.readexactly(8)
        size = struct.unpack(">I", head[:4])[0]
        return decode(head + await self.reader.readexactly(size - 8))

    async def _start(self, service: str, network: str, style: str) -> None:
        assert await self.reader.readexactly(12) == struct.pack(">III", 0, 4, 0)
        self.writer.write(struct.pack(">III", 0, 4, 0))
        assert struct.unpack(">I", (await self.reader.readexactly(64))[:4])[0] == 2  # request
        self.writer.write(struct.pack(">7I", 3, 2, 0, 1, 0, 4 << 24, 4 << 24) + bytes(36))
        assert struct.unpack(">I", (await self.reader.readexactly(64))[:4])[0] == 1  # agreement
        init = {"mtype": "I", "userid": "tester", "service": service, "network": network,
                "vmaj": 5, "vmin": 4, "vupd": 2}
        self.writer.write(encode(init))
        resp = await self._frame()
        if resp["sub"] != "RVD.INITRESP":
            raise ConnectionRefusedError(f"{resp['sub']}: {resp.get('data')}")
        data = resp["data"]
        self.ipaddr, self.gob = data["ipaddr"], data["gob"]
        if style == "rv6":
            self.session = f"{self.ipaddr.hex().upper()}.{self.gob}"
        else:
            self.session = f"{self.ipaddr.hex().upper()}.{os.getpid():X}{os.urandom(6).hex().upper()}"
        self.writer.write(encode({**init, "session": self.session, "control": f"_INBOX.{self.session}.1"}))
        conn = await self._frame()
        assert conn["sub"] == "_RV.INFO.SYSTEM.RVD.CONNECTED", conn
        self.writer.write(encode({"mtype": "L", "sub": ("subject", f"_INBOX.{self.session}.>")}))
        await self.writer.drain()

    async def _read(self) -> None:
        try:
            while True:
                m = await self._frame()
                await self.queue.put(RvMessage(m.get("sub", ""), m.get("mtype", ""), m.get("return"),
                                               m.get("data")))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass

    async def listen(self, subject: str, reply: str | None = None) -> None:
        msg: dict[str, Any] = {"mtype": "L", "sub": ("subject", subject)}
        if reply:
            msg["return"] = reply
        self.writer.write(encode(msg))
        await self.writer.drain()

    async def cancel(self, subject: str) -> None:
        self.writer.write(encode({"mtype": "C", "sub": ("subject", subject)}))
        await self.writer.drain()

    async def publish(self, subject: str, data: bytes | dict[str, Any], reply: str | None = None) -> None:
        msg: dict[str, Any] = {"sub": ("subject", subject), "mtype": "D"}
        if reply:
            msg["return"] = reply
        msg["data"] = data
        self.writer.write(encode(msg))
        await self.writer.drain()

    def inbox(self) -> str:
        return f"_INBOX.{self.session}.{next(self._inbox_n)}"

    async def next(self, timeout: float = 10.0, subject_prefix: str = "") -> RvMessage:
        """The next message (whose subject starts with `subject_prefix`)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            m = await asyncio.wait_for(self.queue.get(), max(0.01, deadline - loop.time()))
            if m.subject.startswith(subject_prefix):
                return m

    async def request(self, subject: str, data: bytes, timeout: float = 10.0) -> RvMessage:
        inbox = self.inbox()
        await self.publish(subject, data, reply=inbox)
        return await self.next(timeout, inbox)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except (ConnectionError, OSError):
            pass
