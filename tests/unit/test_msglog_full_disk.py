"""A message log on a full disk at a rollover (seed 004 1.7, "once and only once"): the
next file cannot be made, so the roll-over fails as a whole and the log goes on."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from raims_node.msglog import log as log_module
from raims_node.msglog.errors import MsgLogError
from raims_node.msglog.log import MessageLog, create_log
from raims_node.msglog.reader import LogReader


def _full_for_new_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on a full tmpfs: the old file's last page still takes a footer; a new file is
    created, empty, and no page can be had for its header."""
    real_open, real_write = os.open, os.write
    new: set[int] = set()

    def open_(path: object, flags: int, *args: object) -> int:
        fd = real_open(path, flags, *args)  # type: ignore[arg-type]
        (new.add if flags & os.O_CREAT and str(path).endswith(".msg") else new.discard)(fd)
        return fd

    def write(fd: int, data: bytes) -> int:
        if fd in new:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(log_module.os, "open", open_)
    monkeypatch.setattr(log_module.os, "write", write)


def test_a_failed_rollover_loses_nothing_and_logs_after_no_footer(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Measured on a 256 KiB tmpfs: the footer went into the active file, the next file
    failed (a raw OSError), and the next smaller messages were appended after that footer,
    counted in the state and never read (6 of 1,015 lost to every reader)."""
    d = create_log(tmp_path, "c", "n", 1)
    with MessageLog.open(tmp_path, "c", "n", max_file_size=500) as log:
        ids = [log.originate(b"m" * 100) for _ in range(3)]
        with monkeypatch.context() as m:
            _full_for_new_files(m)
            with pytest.raises(MsgLogError, match="nothing of it was logged"):
                log.originate(b"m" * 100)  # over the size: the roll-over fails
            ids.append(log.originate(b"s"))  # fits the old file: logged there, before any footer
            with pytest.raises(MsgLogError):
                log.originate(b"m" * 100)
        assert not (d / "00000002.msg").exists()  # no empty or torn next file left
        ids += [log.originate(b"after %d" % i) for i in range(3)]  # space again: rolls over
    assert ids == list(range(1, 8))
    with MessageLog.open(tmp_path, "c", "n", max_file_size=500) as log:
        assert log.state[1] == 7
    assert [r.mid for r in LogReader(d).all_records()] == ids


def test_an_active_file_deleted_under_the_log_is_replaced(tmp_path: Path) -> None:
    """The active file removed under a running producer: its appends went into the
    deleted inode (24 of 260 messages unread, no word) until the next roll-over. The node's
    tick now sees it (`check_active`) and goes on in a new file that readers find."""
    d = create_log(tmp_path, "c", "n", 1)
    with MessageLog.open(tmp_path, "c", "n") as log:
        log.originate(b"kept")
        log.roll_over()
        log.originate(b"lost with its file")
        assert log.check_active()
        os.unlink(d / "00000002.msg")
        assert not log.check_active()
        assert log.check_active() and log.active_no == 3
        log.originate(b"after")
    assert [r.data for r in LogReader(d).all_records()] == [b"kept", b"after"]
    with MessageLog.open(tmp_path, "c", "n") as log:
        assert log.state[1] == 3 and log.originate(b"again") == 4


def _no_replace(monkeypatch: pytest.MonkeyPatch, module: object) -> None:
    def replace(src: object, dst: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(module.os, "replace", replace)  # type: ignore[attr-defined]


def test_a_state_only_log_on_a_full_disk_keeps_its_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The state moved before the file was written, and the failure was a raw OSError
    (a receiving link's data_received does not catch it) with `s.msg.tmp` left."""
    from raims_node.msglog.record import LogKind

    d = create_log(tmp_path, "c", "s", 0, LogKind.STATE)
    with MessageLog.open(tmp_path, "c", "s") as log:
        log.append(4, 1, b"a")
        with monkeypatch.context() as m:
            _no_replace(m, log_module)
            with pytest.raises(MsgLogError, match="No space left"):
                log.append(4, 2, b"b")
        assert log.state.as_dict() == {4: 1} and sorted(p.name for p in d.iterdir()) == ["s.msg", "~.lock"]
        log.append(4, 2, b"b")
    with MessageLog.open(tmp_path, "c", "s") as log:
        assert log.state.as_dict() == {4: 2}


def test_a_cursor_that_cannot_be_saved_is_an_error_and_leaves_no_litter(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from raims_node.msglog import cursor as cursor_module
    from raims_node.msglog.producer import Consumer

    d = create_log(tmp_path, "c", "n", 1)
    with MessageLog.open(tmp_path, "c", "n") as log:
        log.originate(b"one")
    con = Consumer(d, "r")
    with monkeypatch.context() as m:
        _no_replace(m, cursor_module)
        with pytest.raises(MsgLogError, match="cannot save the cursor"):
            con.poll()
    assert not (d / "r.cursor.tmp").exists() and not (d / "r.cursor").exists()
    con.close()
    con = Consumer(d, "r")
    assert [r.data for r in con.poll()] == [b"one"]  # read again: at least once
    con.close()
