"""The message log: create, open (with torn-tail repair), append, roll over (seed 1.1, 3.5.1).

`create_log` makes `<root>/<cabal>/<node>/` with `00000001.msg` (a header record) and the
symlink `<node>.msg -> 00000001.msg`, or for a state-only log (`LogKind.STATE`, node
number 0 only) the regular file `<node>.msg` holding just a header record.

`MessageLog.open` takes the producer lock (`~.lock`, flock: one producer per log), reads
the active file, and rebuilds the state from its header and records. Crash safety:
- Every append is one `write()` of whole records on an O_APPEND descriptor, so a killed
  process loses nothing the call returned for; a power loss can tear the last record.
- A torn last record (cut short, or failing its CRC with nothing valid after it, or a
  tail of zero bytes) is cut off on open, counted in `repaired_bytes` and noted in
  `~.opens`, which notes where the active file ended at every open (a power loss can
  also lose whole records and leave no tear: readers resync cursors saved before an
  open that point past its end: reader.py). A bad record
  followed by more data is not a torn write: `CorruptLog`, never silent loss.
- Rollover (the active file would pass `max_file_size`): footer (the state at close) on
  the old file, fsync, new file with a header (the state at start), fsync, then the
  symlink is replaced atomically (rename of a temporary link). Open finishes a rollover a
  crash interrupted: a numbered file above the symlink's target is the active one when
  its header is whole (else removed), and an active file ending in a footer gets its
  successor.

fsync policy (`FsyncPolicy`), the durability against power loss or a kernel crash:
- `every`: fdatasync after every append call (each record, when appended one at a time);
- `batch`: fdatasync once `batch_records` records or `batch_interval` seconds have been
  appended since the last one (checked on append), and on `sync()`, which a running node
  calls on a timer; at most one batch is lost on power failure;
- `none`: never; the kernel writes back when it likes.
Rollover and create always fsync (a file and its directory entry), whatever the policy.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Final

from raims_node.msglog import paths, record
from raims_node.msglog.errors import (
    BadArgument,
    CorruptLog,
    LogExists,
    LogLocked,
    LogNotFound,
    MsgLogError,
)
from raims_node.msglog.record import FileHeader, Kind, LogKind
from raims_node.msglog.state import MAX_ORIGIN, State, check_origin

DEFAULT_MAX_FILE_SIZE: Final = 64 * 1024 * 1024
DEFAULT_BATCH_RECORDS: Final = 10_000
DEFAULT_BATCH_INTERVAL: Final = 0.05  # seconds


class FsyncPolicy(StrEnum):
    EVERY = "every"
    BATCH = "batch"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class Position:
    """Where a record starts (or the next one will): numbered file and byte offset."""

    file_no: int
    offset: int


# (position of the record, its bytes, origin, id): what `MessageLog` tells listeners
Listener = Callable[[Position, bytes, int, int], None]


def check_number(number: int) -> int:
    if not 0 <= number <= MAX_ORIGIN:
        raise BadArgument(f"node number {number} is not in 0..{MAX_ORIGIN}")
    return number


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes, end: int) -> None:
    """Write all of `data` at the file's `end`, or none of it: a short write (a full disk)
    is cut back off and raised, so no torn record is left before later ones and no state
    counts what is not on disk."""
    view = memoryview(data)
    try:
        while view:
            n = os.write(fd, view)
            if n <= 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            view = view[n:]
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, end)
            os.lseek(fd, end, os.SEEK_SET)
        raise MsgLogError(f"message log write failed ({exc.strerror or exc}); nothing of it was logged") from None


def _write_new(path: Path, data: bytes) -> None:
    """A new file holding `data`, synced (file and directory entry); on failure (a full
    disk) no file is left."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    os.close(fd)
    _fsync_dir(path.parent)


def _replace_file(path: Path, data: bytes, sync: bool) -> None:
    """`path` holds `data` (write a temporary file, rename), or, on a failure such as a
    full disk, is as it was: the temporary file removed, MsgLogError raised."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            if sync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise MsgLogError(f"{path}: cannot write it ({exc.strerror or exc}); it is as it was") from None


def _point(link: Path, target: str) -> None:
    """Make `link` a symlink to `target`, atomically."""
    tmp = link.with_name(link.name + ".tmp")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    os.symlink(target, tmp)
    os.replace(tmp, link)
    _fsync_dir(link.parent)


def _holds_no_message(path: Path) -> bool:
    """Whether `path` holds at most a file header (whole or not) and nothing after it."""
    heads = [h for h in record.scan_heads(path.read_bytes()) if not isinstance(h, record.Bad)]
    return not heads or (len(heads) == 1 and heads[0].kind == Kind.HEADER)


def _clear_interrupted_create(directory: Path, named: Path) -> None:
    """Remove what a `create_log` cut short by a crash left: a state-only named file
    without its whole header, or `00000001.msg` alone (empty, a torn or a whole header)
    with no named link yet. Neither holds a message; left, the log could be neither
    opened nor created again. Numbered files with messages and no named file are no
    create's: LogExists."""
    if named.is_symlink() or not directory.is_dir():
        return
    if named.exists():
        try:
            read_file_header(named)
        except MsgLogError:
            if _holds_no_message(named):
                named.unlink()
        return
    files = paths.numbered_files(directory)
    if not files:
        return
    first = directory / paths.numbered(files[0])
    if files != [1] or not _holds_no_message(first):
        raise LogExists(f"message log {directory} has numbered files but no {named.name}: "
                        "restore the link to the newest (create would lose them)")
    first.unlink()


def create_log(
    root: str | Path,
    cabal: str,
    node: str,
    number: int,
    kind: LogKind = LogKind.CONTENT,
    now_ns: int | None = None,
) -> Path:
    """Initialize a message log (seed 3.5.1); returns its directory."""
    check_number(number)
    if kind is LogKind.STATE and number != 0:
        raise BadArgument("a state-only log is for node number 0 (a log with no server)")
    directory = paths.log_dir(root, cabal, node)
    named = paths.named_file(directory, node)
    _clear_interrupted_create(directory, named)
    if named.exists() or named.is_symlink():
        raise LogExists(f"message log {directory} already exists")
    directory.mkdir(parents=True, exist_ok=True)
    header = FileHeader(number, kind, 1, time.time_ns() if now_ns is None else now_ns, State())
    data = record.encode_header(header)
    if kind is LogKind.STATE:
        _write_new(named, data)
    else:
        _write_new(directory / paths.numbered(1), data)
        _point(named, paths.numbered(1))
    return directory


MAX_OPENS_LINES: Final = 64  # ~.opens keeps the newest ones


def _note_open(directory: Path, file_no: int, offset: int, cut: int) -> None:
    """Record that the active file `file_no` ended at `offset` when opened (`cut` torn
    bytes cut off) in paths.OPENS_FILE, synced: a consumer whose cursor was saved before
    and points past `offset` went past records a power loss lost, and the records
    logged there since are new to it."""
    path = directory / paths.OPENS_FILE
    try:
        lines = path.read_text().splitlines()[-(MAX_OPENS_LINES - 1) :]
    except FileNotFoundError:
        lines = []
    lines.append(f"{file_no} {offset} {cut} {time.time_ns()}")
    _replace_file(path, ("\n".join(lines) + "\n").encode(), True)
    _fsync_dir(directory)


def read_opens(directory: Path) -> list[tuple[int, int, int]]:
    """(file, end, time ns) of each recorded producer open; unreadable lines skipped."""
    try:
        text = (directory / paths.OPENS_FILE).read_text()
    except (FileNotFoundError, UnicodeDecodeError):
        return []
    out = []
    for line in text.splitlines():
        try:
            file_no, offset, _cut, when = (int(x) for x in line.split())
        except ValueError:
            continue
        out.append((file_no, offset, when))
    return out


def read_file_header(path: Path) -> FileHeader:
    with open(path, "rb") as f:
        head = f.read(4096)
    for item in record.scan(head):
        if isinstance(item, record.Bad):
            raise MsgLogError(f"{path}: unreadable file header ({item.why})")
        return record.decode_header(item[1], str(path))
    raise MsgLogError(f"{path}: empty message file")


def is_torn(buf: bytes, bad: record.Bad) -> bool:
    """A bad record that can only be the tail of an interrupted write: it runs to (or
    past) the end of the file, or only zero bytes follow it (space the file system
    allocated but the write never filled), and no whole record follows it (a write is
    cut short at its end: a valid record after the bad one means the bad one was
    damaged, e.g. a flipped length, not torn)."""
    if not (bad.extent >= len(buf) or not any(buf[bad.extent :]) or not any(buf[bad.offset :])):
        return False
    return not record.valid_record_after(buf, bad.offset)


def scan_file(path: Path) -> tuple[FileHeader, State, int, bool, record.Bad | None, int]:
    """Header, state after the last record, end of the last whole record, whether it ends
    with a footer, the torn tail if any, and the number of messages."""
    buf = path.read_bytes()
    header: FileHeader | None = None
    state = State()
    end = 0
    closed = False
    messages = 0
    ids = state.ids
    message = int(Kind.MESSAGE)
    for h in record.scan_heads(buf):
        if isinstance(h, record.Bad):
            if header is None or not is_torn(buf, h):
                raise CorruptLog(str(path), h.offset, h.why)
            return header, state, end, closed, h, messages
        if h.kind == message and header is not None and not closed:
            if h.mid > ids[h.origin]:
                ids[h.origin] = h.mid
            messages += 1
        elif header is None:
            data = buf[h.offset + record.HEAD_SIZE : h.stop]
            rec = record.Record(h.kind, h.origin, h.mid, h.time_ns, data)
            header = record.decode_header(rec, str(path))
            state = header.state.copy()
            ids = state.ids
        elif closed:
            raise CorruptLog(str(path), h.offset, "record after the footer")
        elif h.kind == Kind.FOOTER:
            closed = True
        else:
            raise CorruptLog(str(path), h.offset, "a second file header")
        end = h.stop
    if header is None:
        raise CorruptLog(str(path), 0, "no file header")
    return header, state, end, closed, None, messages


class MessageLog:
    """The one producer of a message log (seed 1.1, 1.2)."""

    def __init__(
        self,
        directory: Path,
        node: str,
        *,
        fsync: FsyncPolicy = FsyncPolicy.BATCH,
        max_file_size: int = DEFAULT_MAX_FILE_SIZE,
        batch_records: int = DEFAULT_BATCH_RECORDS,
        batch_interval: float = DEFAULT_BATCH_INTERVAL,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self.directory = directory
        self.node = node
        self.fsync = FsyncPolicy(fsync)
        self.max_file_size = max_file_size
        self.batch_records = batch_records
        self.batch_interval = batch_interval
        self.clock = clock
        self.listeners: list[Listener] = []
        self.repaired_bytes = 0
        self.messages = 0  # appended since open
        self._unsynced = 0
        self._first_unsynced = 0.0
        self._fd = -1
        self._lock_fd = -1
        self.state = State()
        self.kind = LogKind.CONTENT
        self.node_number = 0
        self.active_no = 0
        self.end = 0
        self._file_start = 0  # size of the active file's header record

    @classmethod
    def open(
        cls,
        root: str | Path,
        cabal: str,
        node: str,
        number: int | None = None,
        **options: object,
    ) -> MessageLog:
        """Open (and lock) a log made by `create_log`; `number`, when given, must match."""
        directory = paths.log_dir(root, cabal, node)
        named = paths.named_file(directory, node)
        if not (named.exists() or named.is_symlink()):
            raise LogNotFound(f"no message log {directory} (create it first)")
        if not named.is_symlink():
            try:
                read_file_header(named)
            except MsgLogError:  # create_log clears it
                raise LogNotFound(f"message log {directory}: its creation was cut short "
                                  "(create it again)") from None
        log = cls(directory, node, **options)  # type: ignore[arg-type]
        log._lock()
        try:
            log._load(named)
        except BaseException:
            log.close()
            raise
        if number is not None and number != log.node_number:
            log.close()
            raise BadArgument(
                f"message log {directory} is node number {log.node_number}, not {number}"
            )
        return log

    def _lock(self) -> None:
        self._lock_fd = os.open(self.directory / paths.LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self._lock_fd, 32, 0).decode(errors="replace").strip()
            os.close(self._lock_fd)
            self._lock_fd = -1
            raise LogLocked(
                f"message log {self.directory} has a producer already (pid {holder or '?'})"
            ) from None
        os.ftruncate(self._lock_fd, 0)
        os.pwrite(self._lock_fd, f"{os.getpid()}\n".encode(), 0)

    def _load(self, named: Path) -> None:
        if not named.is_symlink():
            header, state, _, _, bad, _ = scan_file(named)
            if bad is not None:
                raise CorruptLog(str(named), bad.offset, bad.why)
            self.kind, self.node_number, self.state = header.log_kind, header.node_number, state
            return
        target = paths.file_number(os.readlink(named))
        files = paths.numbered_files(self.directory)
        if target is None or not files:
            raise MsgLogError(f"{named} does not name a numbered message file")
        active = files[-1]
        if active > target:  # a rollover stopped between the new file and the symlink
            try:
                read_file_header(self.directory / paths.numbered(active))
            except MsgLogError:
                os.unlink(self.directory / paths.numbered(active))
                active = target
            _point(named, paths.numbered(active))
        path = self.directory / paths.numbered(active)
        header, state, end, closed, bad, _ = scan_file(path)
        if bad is not None:
            with open(path, "r+b") as f:
                size = f.seek(0, os.SEEK_END)
                f.truncate(end)
                f.flush()
                os.fsync(f.fileno())
            self.repaired_bytes = size - end
        _note_open(self.directory, active, end, self.repaired_bytes)
        self.kind, self.node_number, self.state = LogKind.CONTENT, header.node_number, state
        self.active_no, self.end = active, end
        self._file_start = len(record.encode_header(header))
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        if closed:
            self._start_file(self.active_no + 1)

    @property
    def position(self) -> Position:
        """Where the next record will be written."""
        return Position(self.active_no, self.end)

    # -- appending ---------------------------------------------------------------------

    def originate(self, data: bytes, time_ns: int | None = None) -> int:
        """Append a message originated here; returns its id (the state's next)."""
        if self.node_number == 0:
            raise BadArgument("node number 0 has no server and cannot originate messages")
        mid = self.state[self.node_number] + 1
        self.append(self.node_number, mid, data, time_ns)
        return mid

    def append(self, origin: int, mid: int, data: bytes, time_ns: int | None = None) -> Position:
        """Append one message; the caller has decided it is new (`State.offer`)."""
        check_origin(origin)
        t = self.clock() if time_ns is None else time_ns
        raw = record.encode_message(origin, mid, t, data)
        return self.append_records(raw, [(origin, mid)])

    def append_records(self, raw: bytes, ids: list[tuple[int, int]]) -> Position:
        """Append whole, checked message records (`ids` their (origin, id) in order) in one
        write; returns the position of the first. Listeners see each record."""
        if self.kind is LogKind.STATE:
            state = self.state.copy()  # moves once the file says so (a full disk: not at all)
            for origin, mid in ids:
                state.ids[origin] = max(state.ids[origin], mid)
            _replace_file(
                paths.named_file(self.directory, self.node),
                record.encode_header(
                    FileHeader(self.node_number, LogKind.STATE, 1, self.clock(), state)
                ),
                self.fsync is FsyncPolicy.EVERY,
            )
            self.state = state
            self.messages += len(ids)
            return Position(0, 0)
        if self.end + len(raw) > self.max_file_size and self.end > self._file_start:
            self.roll_over()
        start = Position(self.active_no, self.end)
        _write_all(self._fd, raw, self.end)
        ids_of = self.state.ids
        for origin, mid in ids:
            if mid > ids_of[origin]:
                ids_of[origin] = mid
        self.messages += len(ids)
        self.end += len(raw)
        self._after_write(len(ids))
        if self.listeners:
            self._notify(start, raw, ids)
        return start

    def _notify(self, start: Position, raw: bytes, ids: list[tuple[int, int]]) -> None:
        if len(ids) == 1:
            for listener in list(self.listeners):
                listener(start, raw, ids[0][0], ids[0][1])
            return
        offset = 0
        view = memoryview(raw)
        for origin, mid in ids:
            length = int.from_bytes(view[offset + 8 : offset + 12], "little")
            stop = offset + record.HEAD_SIZE + length
            piece = bytes(view[offset:stop])
            pos = Position(start.file_no, start.offset + offset)
            for listener in list(self.listeners):
                listener(pos, piece, origin, mid)
            offset = stop

    def _after_write(self, n: int) -> None:
        if self.fsync is FsyncPolicy.EVERY:
            os.fdatasync(self._fd)
        elif self.fsync is FsyncPolicy.BATCH:
            if not self._unsynced:
                self._first_unsynced = time.monotonic()
            self._unsynced += n
            if (
                self._unsynced >= self.batch_records
                or time.monotonic() - self._first_unsynced >= self.batch_interval
            ):
                self.sync()

    def sync(self) -> None:
        """fdatasync what has been appended (the batch policy's timer calls this)."""
        if self._fd >= 0 and self._unsynced:
            os.fdatasync(self._fd)
        self._unsynced = 0

    def check_active(self) -> bool:
        """Whether the active file is still in the directory. One deleted under the running
        log (nlink 0) took every later append into an inode no reader can open, without a
        word, until the next roll-over; now a new file is started (no footer: the deleted
        one is gone) and False returned. `serve` asks on its tick (node.py)."""
        if self._fd < 0 or os.fstat(self._fd).st_nlink:
            return True
        self._start_file(self.active_no + 1)
        return False

    def roll_over(self) -> None:
        """Close the active file with a footer and start the next one, or, when that fails
        (a full disk), neither: the footer is cut off again, no next file is left and
        MsgLogError is raised, so the active file goes on taking what fits. (A footer left
        behind with no next file had later records appended after it, counted in the
        state and never read.)"""
        footer = record.encode_footer(self.node_number, self.active_no, self.clock(), self.state)
        _write_all(self._fd, footer, self.end)
        try:
            os.fsync(self._fd)
            self._start_file(self.active_no + 1)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self.end)
            raise MsgLogError(f"message log roll-over failed ({exc.strerror or exc}); "
                              "nothing of it was logged") from None

    def _start_file(self, file_no: int) -> None:
        header = FileHeader(
            self.node_number, LogKind.CONTENT, file_no, self.clock(), self.state.copy()
        )
        data = record.encode_header(header)
        path = self.directory / paths.numbered(file_no)
        if path.exists():  # left by a crash before its header was whole (see _load)
            os.unlink(path)
        _write_new(path, data)
        try:  # the file and the named link, or (a full disk) neither
            fd = os.open(path, os.O_WRONLY | os.O_APPEND)
            try:
                _point(paths.named_file(self.directory, self.node), paths.numbered(file_no))
            except OSError:
                os.close(fd)
                raise
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(path)
            raise
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = fd
        self.active_no, self.end = file_no, len(data)
        self._file_start = len(data)
        self._unsynced = 0

    def close(self) -> None:
        """Sync (unless the policy is none) and release the producer lock."""
        if self._fd >= 0:
            if self.fsync is not FsyncPolicy.NONE:
                self.sync()
            os.close(self._fd)
            self._fd = -1
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    def __enter__(self) -> MessageLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
