"""The server end of one link: what a client's state lacks, then live (seed 1.2, 1.3).

A feed reads its log from `LogReader.start_for(client state)` and sends the message
records the client lacks (id above what it has sent or the client had; never the client's
own origin: it logged those before anyone could send them back). When its reader
reaches the end of the log it goes live: each record the producer appends is sent at
once, as long as it follows the reader's position exactly. When the connection's write
buffer passes its high-water mark the feed stops (`pause`) and falls back to the log:
on `resume` it reads from where it stopped. This is the seed's producer/consumer
decoupling inside one process: either side may run at its own speed.

Bulk catch-up: when the client lacks every record from the reader's position to the end
of the file's messages (known without reading them: per origin, the ids there run from
what the feed has seen + 1 to the footer's or the log's state), that run is sent as raw
bytes, unparsed; the client checks and deduplicates every record anyway, so the client's
own messages in the run cost it a duplicate check, nothing more. This halves the work
per message of a large catch-up.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Final

from raims_node.msglog import paths, record
from raims_node.msglog.errors import MsgLogError
from raims_node.msglog.log import MessageLog, Position
from raims_node.msglog.reader import LogReader
from raims_node.msglog.state import State

log = logging.getLogger("raims.msglog")

READ_BYTES: Final = 128 * 1024
MIN_BULK: Final = 16 * 1024


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
        self.seen = self._header_state(self.reader.pos.file_no)  # ids logged before pos
        self.paused = False
        self.live = False
        self.records_sent = 0
        self.bulk_bytes = 0
        self.closed = False
        self._bulk_end = 0  # while > reader offset: raw bytes still to send
        log.listeners.append(self._on_append)

    def _header_state(self, file_no: int) -> State:
        try:
            return self.reader.header(file_no).state.copy()
        except (OSError, MsgLogError):
            return State()

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
            if self._bulk_end or self._start_bulk():
                self._send_bulk()
                continue
            chunk = self.reader.read(READ_BYTES)
            if chunk is None:
                self.live = self.reader.pos == self.log.position
                return
            if chunk.next.file_no != chunk.pos.file_no:  # past a footer
                self.seen = self._header_state(chunk.next.file_no)
            sent = self.sent.ids
            seen = self.seen.ids
            me = self.client_number
            keep = []
            for s in chunk.spans:
                seen[s.origin] = s.mid
                if s.mid > sent[s.origin] and s.origin != me:
                    sent[s.origin] = s.mid
                    keep.append(s)
            if not keep:
                continue
            if len(keep) == len(chunk.spans) and all(
                a.stop == b.start for a, b in zip(keep, keep[1:], strict=False)
            ):
                out = chunk.data[keep[0].start : keep[-1].stop]
            else:
                out = b"".join(chunk.data[s.start : s.stop] for s in keep)
            self.records_sent += len(keep)
            self.write(out)

    def _start_bulk(self) -> bool:
        pos = self.reader.pos
        if pos.offset == 0:  # step over the file's header (its state is what was seen)
            try:
                header = self.reader.header(pos.file_no)
            except (OSError, MsgLogError):
                return False
            pos = Position(pos.file_no, len(record.encode_header(header)))
            self.reader.pos = pos
            self.seen = header.state.copy()
        if pos.file_no == self.log.active_no:
            end, end_state = self.log.end, self.log.state
        else:
            bounds = self._closed_bounds(pos.file_no)
            if bounds is None:
                return False
            end, end_state = bounds
        if end - pos.offset < MIN_BULK:
            return False  # not worth it
        sent, seen = self.sent.ids, self.seen.ids
        for origin, last in end_state.items():
            if last > seen[origin] and seen[origin] < sent[origin] and origin != self.client_number:
                return False  # the client has some of this origin's records in the run
        for origin, last in end_state.items():
            seen[origin] = max(seen[origin], last)
            if origin != self.client_number:
                sent[origin] = max(sent[origin], last)
        self._bulk_end = end
        return True

    def _closed_bounds(self, file_no: int) -> tuple[int, State] | None:
        """Where a closed file's footer starts and its state."""
        try:
            end_state = self.reader.header(file_no + 1).state
            size = os.stat(self.log.directory / paths.numbered(file_no)).st_size
        except (OSError, MsgLogError):
            return None
        return size - len(record.encode_footer(0, 0, 0, end_state)), end_state

    def _send_bulk(self) -> None:
        pos = self.reader.pos
        fd = os.open(self.log.directory / paths.numbered(pos.file_no), os.O_RDONLY)
        try:
            while not self.paused and not self.closed and pos.offset < self._bulk_end:
                data = os.pread(fd, min(READ_BYTES, self._bulk_end - pos.offset), pos.offset)
                if not data:  # the file ends before the log said: end this feed, never spin on it
                    log.error("feed: %s ends at %d, before %d", paths.numbered(pos.file_no), pos.offset,
                              self._bulk_end)
                    self._bulk_end = 0
                    self.close()
                    break
                pos = Position(pos.file_no, pos.offset + len(data))
                self.reader.pos = pos
                self.bulk_bytes += len(data)
                self.write(data)
        finally:
            os.close(fd)
        if pos.offset >= self._bulk_end:
            self._bulk_end = 0

    def _on_append(self, pos: Position, raw: bytes, origin: int, mid: int) -> None:
        if not self.live or self.paused:
            return
        if pos != self.reader.pos:  # a new file began: read on from the log
            self.live = False
            self.pump()
            return
        self.reader.pos = Position(pos.file_no, pos.offset + len(raw))
        self.seen.ids[origin] = mid
        if mid > self.sent.ids[origin] and origin != self.client_number:
            self.sent.ids[origin] = mid
            self.records_sent += 1
            self.write(raw)
