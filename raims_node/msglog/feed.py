"""The server end of one link: what a client's state lacks, then live (seed 1.2, 1.3).

A feed reads its log from `LogReader.start_for(client state)` and sends the message
records the client lacks (id above what it has sent or the client had; never the client's
own origin: it logged those before anyone could send them back). When its reader
reaches the end of the log it goes live: each record the producer appends is sent at
once, as long as it follows the reader's position exactly. When the connection's write
buffer passes its high-water mark the feed stops (`pause`) and falls back to the log:
on `resume` it reads from where it stopped. This is the seed's producer/consumer
decoupling inside one process: either side may run at its own speed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from raims_node.msglog.log import MessageLog, Position
from raims_node.msglog.reader import LogReader
from raims_node.msglog.state import State

READ_BYTES: Final = 256 * 1024


class Feed:
    def __init__(
        self,
        log: MessageLog,
        client_state: State,
        client_number: int,
        write: Callable[[bytes], None],
    ) -> None:
        self.log = log
        self.sent = client_state.copy()
        self.client_number = client_number
        self.write = write
        self.reader = LogReader(log.directory, verify=False)
        self.reader.pos = self.reader.start_for(client_state)
        self.paused = False
        self.live = False
        self.records_sent = 0
        self.closed = False
        log.listeners.append(self._on_append)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self._on_append in self.log.listeners:
                self.log.listeners.remove(self._on_append)
            self.reader.close()

    def pause(self) -> None:
        self.paused = True
        self.live = False

    def resume(self) -> None:
        self.paused = False
        self.pump()

    def pump(self) -> None:
        """Send from the log until the end (then go live) or until the link pushes back."""
        while not self.paused and not self.closed:
            chunk = self.reader.read(READ_BYTES)
            if chunk is None:
                self.live = self.reader.pos == self.log.position
                return
            sent = self.sent.ids
            me = self.client_number
            keep = [s for s in chunk.spans if s.mid > sent[s.origin] and s.origin != me]
            if not keep:
                continue
            for s in keep:
                sent[s.origin] = s.mid
            if len(keep) == len(chunk.spans) and keep[0].start == 0 and keep[-1].stop == len(chunk.data):
                out = chunk.data
            elif len(keep) == len(chunk.spans) and all(
                a.stop == b.start for a, b in zip(keep, keep[1:], strict=False)
            ):
                out = chunk.data[keep[0].start : keep[-1].stop]
            else:
                out = b"".join(chunk.data[s.start : s.stop] for s in keep)
            self.records_sent += len(keep)
            self.write(out)

    def _on_append(self, pos: Position, raw: bytes, origin: int, mid: int) -> None:
        if not self.live or self.paused:
            return
        if pos != self.reader.pos:  # a new file began: read on from the log
            self.live = False
            self.pump()
            return
        self.reader.pos = Position(pos.file_no, pos.offset + len(raw))
        if mid > self.sent.ids[origin] and origin != self.client_number:
            self.sent.ids[origin] = mid
            self.records_sent += 1
            self.write(raw)
