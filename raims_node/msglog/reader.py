"""Reading a message log from a position on, across its numbered files (seed 1.1-1.3).

Readers never write and take no lock, so any number of them (consumers, a server's
feeds, `export`, the Spark archive) read a log while its producer appends. A read
returns whole records only: a record still being written (short, or failing its CRC
where the file ends) is left for the next read. A footer moves the reader to the next
numbered file; a file pruned under the reader's feet moves it to the oldest file left
(the messages in between are gone: `skipped_files` counts it).

Torn tails and power loss (the producer cuts a torn tail only when it opens the log):
- In the newest file a bad record that can only be a torn write (`log.is_torn`: it runs
  to the end, or only zeros follow, and no whole record follows) is waited at like a
  record still being written: never returned, never raised. Elsewhere it is `CorruptLog`.
- A position given from outside (a consumer's cursor) is checked once, on the first
  read: when it is not a record boundary (inside a record, in a torn tail, or past the
  end: a power loss cut the log back under a cursor that reached the disk), or points
  past where the active file ended when the producer opened it after the cursor was
  saved (`~.opens`: a power loss lost records it had gone past), the reader
  resyncs back to the boundary where the log was cut, or else the start of the record
  holding it (that record was logged after the cut, so the consumer never saw it:
  going back redelivers nothing it had, going forward would lose it). `resyncs` and
  `resynced_bytes` count it and it is logged (a warning on `raims.msglog`).
- A reader with nothing new checks that the file it holds open is still the one of its
  name: the producer's open removes a next file a crash left without a whole header and
  makes it again, and a reader waiting in the removed one waited for ever.

`start_for(state)` is where a server starts for a client's state: the latest file whose
header state the client's state covers (everything before it the client has), else the
oldest file.
"""

from __future__ import annotations

import logging
import os
import zlib
from pathlib import Path
from typing import Final, NamedTuple

from raims_node.msglog import paths, record
from raims_node.msglog.errors import CorruptLog, LogNotFound, MsgLogError
from raims_node.msglog.log import Position, is_torn, read_file_header, read_opens
from raims_node.msglog.record import HEAD, HEAD_SIZE, MAX_DATA, Kind, Record
from raims_node.msglog.state import State

READ_SIZE: Final = 1 << 20
_MESSAGE: Final = int(Kind.MESSAGE)
_FOOTER: Final = int(Kind.FOOTER)
_HEADER: Final = int(Kind.HEADER)
log = logging.getLogger("raims.msglog")


class Span(NamedTuple):
    """One message record inside a raw chunk."""

    origin: int
    mid: int
    start: int
    stop: int


class Chunk(NamedTuple):
    """Raw bytes read at `pos` and the message records among them; `next` follows them."""

    pos: Position
    data: bytes
    spans: list[Span]
    next: Position


class LogReader:
    def __init__(
        self,
        directory: Path,
        pos: Position | None = None,
        verify: bool = True,
        saved_ns: int | None = None,
    ) -> None:
        """`pos` from outside (a cursor, saved at `saved_ns`) is checked on the first read."""
        if not directory.is_dir():
            raise LogNotFound(f"no message log {directory}")
        self.directory = directory
        self.verify = verify
        self.skipped_files = 0
        self.resyncs = 0
        self.resynced_bytes = 0
        self.torn = False  # waiting at a torn tail the producer has not cut yet
        self._torn_at: tuple[int, int, int] | None = None  # (file, offset, file size) judged torn
        self._saved_ns = saved_ns
        self._check = pos is not None and pos.offset > 0
        self._fd = -1
        self._fd_no = 0
        files = self.files()
        self.pos = pos if pos is not None else Position(files[0] if files else 1, 0)

    def files(self) -> list[int]:
        return paths.numbered_files(self.directory)

    def header(self, file_no: int) -> record.FileHeader:
        return read_file_header(self.directory / paths.numbered(file_no))

    def start_for(self, state: State) -> Position:
        files = self.files()
        for file_no in reversed(files):
            try:
                if state.covers(self.header(file_no).state):
                    return Position(file_no, 0)
            except FileNotFoundError:  # pruned meanwhile
                break
            except MsgLogError:
                if file_no != files[-1]:
                    raise
                # a rollover a crash cut before the header was whole: the producer
                # removes the file on open; read it as it stands (it waits at the tear)
        return Position(files[0] if files else 1, 0)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _open(self, file_no: int) -> bool:
        if self._fd >= 0 and self._fd_no == file_no:
            return True
        self.close()
        try:
            self._fd = os.open(self.directory / paths.numbered(file_no), os.O_RDONLY)
        except FileNotFoundError:
            later = [n for n in self.files() if n > file_no]
            if later:
                self.skipped_files += 1
                self.pos = Position(later[0], 0)
                return self._open(later[0])
            return False
        self._fd_no = file_no
        return True

    def read(self, max_bytes: int = READ_SIZE) -> Chunk | None:
        """The next whole records (at most about `max_bytes`, at least one), or None when
        there is nothing new yet. Stops after a footer (the next read starts the next file)."""
        reopened = False
        while True:
            pos = self.pos
            if not self._open(pos.file_no):
                return None
            if self._check:
                self._check = False
                self._resync()
            pos = self.pos
            data = os.pread(self._fd, max_bytes, pos.offset)
            if not data:
                self._check_closed(pos)
                if not reopened and self._replaced(pos.file_no):
                    reopened = True
                    continue
                return None
            spans, used, footer, need = self._parse(data, pos)
            if used == 0 and not footer:
                if need > len(data) and len(data) == max_bytes:
                    max_bytes = need  # one record bigger than the read size
                    continue
                if any(n > pos.file_no for n in paths.numbered_files(self.directory)):  # not being written
                    raise CorruptLog(str(self.directory / paths.numbered(pos.file_no)), pos.offset,
                                     "a record runs past the end of a closed file")
                if not reopened and self._replaced(pos.file_no):
                    reopened = True
                    continue
                return None
            nxt = (
                Position(pos.file_no + 1, 0) if footer else Position(pos.file_no, pos.offset + used)
            )
            self.pos = nxt
            return Chunk(pos, data[:used], spans, nxt)

    def _replaced(self, file_no: int) -> bool:
        """Whether the file held open is no longer the one of its name (the producer's
        open removed a file a crash left with a torn header and made it again); if so it
        is closed, to be opened again by name."""
        try:
            same = os.stat(self.directory / paths.numbered(file_no)).st_ino == os.fstat(self._fd).st_ino
        except FileNotFoundError:
            same = False
        if not same:
            self.close()
        return not same

    def _resync(self) -> None:
        """Move a position from outside back to a record boundary (see the module doc)."""
        pos = self.pos
        target = pos.offset
        if self._saved_ns is not None:
            for file_no, offset, when in read_opens(self.directory):
                if file_no == pos.file_no and offset < target and when > self._saved_ns:
                    target = offset
        boundary = 0
        for h in record.scan_heads(os.pread(self._fd, min(target, os.fstat(self._fd).st_size), 0)):
            if isinstance(h, record.Bad):  # the record holding `target`, or a tear before it
                break
            boundary = h.stop
        if boundary == pos.offset:
            return
        self.resyncs += 1
        self.resynced_bytes += abs(pos.offset - boundary)
        self.pos = Position(pos.file_no, boundary)
        log.warning("message log %s: position %d of file %d is not a record boundary the log "
                    "still has (a power loss cut it back); reading again from offset %d",
                    self.directory, pos.offset, pos.file_no, boundary)

    def _torn_or_corrupt(self, pos: Position, off: int, extent: int, why: str) -> int:
        """0 (wait) for a torn tail of the newest file, else CorruptLog."""
        at = pos.offset + off
        if not any(n > pos.file_no for n in paths.numbered_files(self.directory)):
            size = os.fstat(self._fd).st_size
            seen = (pos.file_no, at, size)
            if seen == self._torn_at:  # judged so already (is_torn scans up to 1 MiB)
                self.torn = True
                return 0
            if is_torn(os.pread(self._fd, max(0, size - at), at), record.Bad(0, why, extent)):
                self.torn = True
                self._torn_at = seen
                return 0
        raise CorruptLog(str(self.directory / paths.numbered(pos.file_no)), at, why)

    def _check_closed(self, pos: Position) -> None:
        """At the end of a file: a later file means this one was closed, so it must have
        ended with its footer (read again: the footer is written before the next file is
        made); CorruptLog, else the reader waited at the end of an empty or cut file for ever."""
        if os.path.exists(self.directory / paths.numbered(pos.file_no + 1)) and \
                not os.pread(self._fd, HEAD_SIZE, pos.offset):
            raise CorruptLog(str(self.directory / paths.numbered(pos.file_no)), pos.offset,
                             "the file ends without its footer and a later file exists")

    def _parse(self, data: bytes, pos: Position) -> tuple[list[Span], int, bool, int]:
        spans: list[Span] = []
        off = 0
        end = len(data)
        unpack = HEAD.unpack_from
        crc32 = zlib.crc32
        verify = self.verify
        view = memoryview(data)
        self.torn = False
        while end - off >= HEAD_SIZE:
            crc, kind, origin, _f, length, mid, _t = unpack(data, off)
            if length > MAX_DATA:  # never read that much for it
                return spans, off, False, self._torn_or_corrupt(pos, off, HEAD_SIZE + length,
                                                                f"record length {length}")
            stop = off + HEAD_SIZE + length
            if stop > end:
                return spans, off, False, stop - off
            if verify and crc32(view[off + 4 : stop]) != crc:
                if stop == end:  # maybe a write still in progress: look again later
                    return spans, off, False, stop - off
                return spans, off, False, self._torn_or_corrupt(pos, off, stop - off, "checksum mismatch")
            if kind == _MESSAGE:
                spans.append(Span(origin, mid, off, stop))
            elif kind == _FOOTER:
                return spans, stop, True, 0
            elif kind != _HEADER:
                return spans, off, False, self._torn_or_corrupt(pos, off, stop - off,
                                                                f"bad record kind {kind}")
            off = stop
        return spans, off, False, HEAD_SIZE

    def records(self, max_bytes: int = READ_SIZE) -> list[tuple[Position, Record]]:
        """The next message records, decoded ([] when there is nothing new yet)."""
        out: list[tuple[Position, Record]] = []
        while not out:
            chunk = self.read(max_bytes)
            if chunk is None:
                return out
            for s in chunk.spans:
                head = HEAD.unpack_from(chunk.data, s.start)
                out.append(
                    (
                        Position(chunk.pos.file_no, chunk.pos.offset + s.start),
                        Record(
                            head[1],
                            s.origin,
                            s.mid,
                            head[6],
                            chunk.data[s.start + HEAD_SIZE : s.stop],
                        ),
                    )
                )
        return out

    def all_records(self) -> list[Record]:
        """Every message from the position to the current end (tests, export, archive)."""
        out: list[Record] = []
        while True:
            got = self.records()
            if not got:
                return out
            out.extend(r for _, r in got)
