"""A loopback TCP proxy that records, delays, cuts, truncates and corrupts bytes.

Runs an asyncio loop in a daemon thread so that the synchronous integration tests
can drive it: `FaultProxy(target_port).start()` returns the port to dial instead of
the target; the test sets `faults` at any time and calls `cut()` / `stop()`. Every
fault is counted (`stats`), and `recorded` keeps the first bytes each direction
carried (for a test that replays them).

Faults, applied per chunk read (the kernel's segments, up to 64 KiB):
- delay_s: the chunk is held this long before it is written (order is kept);
- corrupt_p: with this probability one byte of the chunk is flipped;
- truncate_p: with this probability the chunk loses a random tail and the
  connection is cut after the rest is written (a half-written frame);
- cut(): every open connection is closed at once (as a TCP reset would).
"""

from __future__ import annotations

import asyncio
import random
import threading
from dataclasses import dataclass, field

RECORD_LIMIT = 1 << 20


@dataclass
class Faults:
    delay_s: float = 0.0
    corrupt_p: float = 0.0
    truncate_p: float = 0.0


@dataclass
class Stats:
    connections: int = 0
    bytes: int = 0
    corrupted: int = 0
    truncated: int = 0
    cuts: int = 0


@dataclass
class _Pair:
    writers: list[asyncio.StreamWriter] = field(default_factory=list)


class FaultProxy:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1", seed: int = 18) -> None:
        self.target = (target_host, target_port)
        self.faults = Faults()
        self.stats = Stats()
        self.recorded: dict[str, bytearray] = {"up": bytearray(), "down": bytearray()}  # up: client -> target
        self.port = 0
        self._rng = random.Random(seed)
        self._loop = asyncio.new_event_loop()
        self._pairs: list[_Pair] = []
        self._server: asyncio.Server | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    # ------------------------------------------------------------------ control (any thread)

    def start(self) -> int:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(5)
        return self.port

    def cut(self) -> None:
        """Close every open connection (both sides see a reset)."""
        asyncio.run_coroutine_threadsafe(self._cut(), self._loop).result(5)

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    # ------------------------------------------------------------------ the loop

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _cut(self) -> None:
        pairs, self._pairs = self._pairs, []
        for pair in pairs:
            self.stats.cuts += 1
            for w in pair.writers:
                w.transport.abort()

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        await self._cut()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self.stats.connections += 1
        pair = _Pair([writer, up_writer])
        self._pairs.append(pair)
        await asyncio.gather(self._pump(reader, up_writer, pair, "up"), self._pump(up_reader, writer, pair, "down"),
                             return_exceptions=True)
        if pair in self._pairs:
            self._pairs.remove(pair)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, pair: _Pair,
                    direction: str) -> None:
        rec = self.recorded[direction]
        try:
            while True:
                chunk = await reader.read(65536)
                if not chunk:
                    break
                if len(rec) < RECORD_LIMIT:
                    rec += chunk[: RECORD_LIMIT - len(rec)]
                f = self.faults
                cut_after = False
                if f.corrupt_p and self._rng.random() < f.corrupt_p:
                    data = bytearray(chunk)
                    data[self._rng.randrange(len(data))] ^= 1 << self._rng.randrange(8)
                    chunk = bytes(data)
                    self.stats.corrupted += 1
                if f.truncate_p and self._rng.random() < f.truncate_p:
                    chunk = chunk[: self._rng.randrange(len(chunk))]
                    self.stats.truncated += 1
                    cut_after = True
                if f.delay_s:
                    await asyncio.sleep(f.delay_s)
                self.stats.bytes += len(chunk)
                writer.write(chunk)
                await writer.drain()
                if cut_after:
                    break
        except (ConnectionError, OSError):
            pass
        finally:
            for w in pair.writers:  # one side gone or cut: close both, as a proxy must
                w.transport.abort()
