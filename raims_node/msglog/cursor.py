"""Cursor files: a consumer's position in a message log (seed 1.1 `name.cursor`, 1.2).

A cursor file holds one line, `<file number> <offset>`, the position of the next record
the consumer has not yet processed. It is replaced atomically (write a temporary file,
rename), so a crash leaves the old or the new position, never half of one. A consumer
that crashes after processing a record and before saving its cursor processes that
record again on restart: consumers get at-least-once from a cursor; exactly-once
needs the state (`State.offer`), which servers and clients use.

A power loss can leave a cursor ahead of the log: the cursor reached the disk, the
records it went past did not, and the producer cut the torn tail on open and logs new
records there. Such a cursor is past the end of the active file or inside a record; the
reader resyncs it (`LogReader`, using `saved_ns` and the producer's `~.opens` notes).
Without `sync` a power loss can also leave the cursor file empty (the rename reached the
disk, its data did not): the consumer reads the log again from its start (`lost`,
logged), at least once, rather than refusing to start until someone removes it.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

from raims_node.msglog import paths
from raims_node.msglog.errors import MsgLogError
from raims_node.msglog.log import Position

log = logging.getLogger("raims.msglog")


class Cursor:
    def __init__(self, directory: Path, name: str, sync: bool = False) -> None:
        self.path = paths.cursor_file(directory, name)
        self.sync = sync
        self.saved_ns: int | None = None  # when the loaded cursor was written (its mtime)
        self.lost = False  # the loaded cursor was empty (load read the log from its start)

    def load(self) -> Position | None:
        """The saved position, or None when the consumer has none yet. MsgLogError for
        a cursor that is no position in this log: not two numbers, negative or beyond
        what a file holds, in a file after the newest, or past the end of its file (a
        consumer there waited for ever, printing nothing) unless that file is the active
        one, which a power loss cuts back (the reader resyncs)."""
        try:
            text = self.path.read_text()
            self.saved_ns = self.path.stat().st_mtime_ns
        except FileNotFoundError:
            return None
        if not text.strip("\0 \n"):
            # what a power loss can leave of an unsynced replace (the rename reached the
            # disk, the data did not): the position is unknown; at-least-once reads the
            # log again from its start rather than refusing to run
            log.warning("%s: empty cursor (a power loss?): reading the log from its start", self.path)
            self.lost = True
            return None
        try:
            file_no, offset = (int(x) for x in text.split())
        except ValueError:
            raise MsgLogError(
                f"{self.path}: not a cursor ('<file> <offset>'): {text[:40]!r}"
            ) from None
        if not (0 < file_no < 1 << 31 and 0 <= offset < 1 << 62):
            raise MsgLogError(f"{self.path}: cursor {file_no} {offset} is no position in a log")
        newest = max(paths.numbered_files(self.path.parent), default=None)
        if newest is not None and file_no > newest:
            raise MsgLogError(f"{self.path}: cursor {file_no} {offset} is past the log's newest file {newest}: "
                              "remove it to read the log from its start")
        try:
            size = (self.path.parent / paths.numbered(file_no)).stat().st_size
        except FileNotFoundError:
            size = None  # pruned: the reader goes on from the next file
        if size is not None and offset > size and file_no != newest:  # the active one: resynced
            raise MsgLogError(f"{self.path}: cursor {file_no} {offset} is past the end of that file "
                              f"({size} bytes): remove it to read the log from its start")
        return Position(file_no, offset)

    def save(self, pos: Position) -> None:
        """Replace the cursor; on a failure (a full disk) it stays as it was, no
        temporary file is left, and MsgLogError says so (the records read since are
        read again next time: at least once)."""
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            with open(tmp, "w") as f:
                f.write(f"{pos.file_no} {pos.offset}\n")
                if self.sync:
                    f.flush()
                    os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise MsgLogError(f"{self.path}: cannot save the cursor ({exc.strerror or exc})") from None
