"""Message log files: create, append, reopen, rollover, torn-tail repair, state-only logs,
readers across files and the exactly-once state rule (seed 004 sections 1.1, 1.5, 3.5.1)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from raims_node.msglog import paths, record
from raims_node.msglog.cursor import Cursor
from raims_node.msglog.errors import BadArgument, CorruptLog, LogExists, LogLocked
from raims_node.msglog.log import FsyncPolicy, MessageLog, Position, create_log
from raims_node.msglog.reader import LogReader
from raims_node.msglog.record import LogKind
from raims_node.msglog.state import State, Verdict


def test_state_offer_is_exactly_once_and_encodes() -> None:
    s = State()
    assert s.offer(3, 1) is Verdict.DELIVER
    assert s.offer(3, 1) is Verdict.DUPLICATE
    assert s.offer(3, 2) is Verdict.DELIVER
    assert s.offer(3, 5) is Verdict.GAP
    assert s.offer(3, 4) is Verdict.DUPLICATE
    s.offer(255, 7)
    back, end = State.decode(s.encode())
    assert back == s and end == len(s.encode())
    assert back.covers(State({3: 5})) and not State({3: 4}).covers(back)
    with pytest.raises(BadArgument):
        State({0: 1})


def test_create_lays_out_the_seed_files(tmp_path: Path) -> None:
    d = create_log(tmp_path, "c1", "alpha", 3)
    assert os.readlink(d / "alpha.msg") == "00000001.msg"
    with pytest.raises(LogExists):
        create_log(tmp_path, "c1", "alpha", 3)
    s = create_log(tmp_path, "c1", "spoke", 0, LogKind.STATE)
    assert (s / "spoke.msg").is_file() and not (s / "spoke.msg").is_symlink()
    with pytest.raises(BadArgument):
        create_log(tmp_path, "c1", "bad", 4, LogKind.STATE)
    with pytest.raises(BadArgument):
        create_log(tmp_path, "c1", "../x", 4)


def test_append_reopen_and_read_back(tmp_path: Path) -> None:
    create_log(tmp_path, "c", "n", 2)
    with MessageLog.open(tmp_path, "c", "n", 2, fsync=FsyncPolicy.EVERY) as log:
        assert [log.originate(f"m{i}".encode()) for i in range(3)] == [1, 2, 3]
        log.append(7, 1, b"from seven")
        with pytest.raises(LogLocked):
            MessageLog.open(tmp_path, "c", "n")
    with MessageLog.open(tmp_path, "c", "n") as log:
        assert log.state.as_dict() == {2: 3, 7: 1}
        assert log.originate(b"m3") == 4
    recs = LogReader(paths.log_dir(tmp_path, "c", "n")).all_records()
    assert [(r.origin, r.mid, r.data) for r in recs] == [
        (2, 1, b"m0"),
        (2, 2, b"m1"),
        (2, 3, b"m2"),
        (7, 1, b"from seven"),
        (2, 4, b"m3"),
    ]
    with pytest.raises(BadArgument):
        MessageLog.open(tmp_path, "c", "n", 5)


def test_rollover_writes_footer_and_header_with_state(tmp_path: Path) -> None:
    d = create_log(tmp_path, "c", "n", 1)
    with MessageLog.open(tmp_path, "c", "n", max_file_size=400, fsync=FsyncPolicy.NONE) as log:
        for i in range(40):
            log.originate(b"x" * 20 + str(i).encode())
        assert log.active_no > 3
        active = log.active_no
    assert os.readlink(d / "n.msg") == paths.numbered(active)
    reader = LogReader(d)
    assert reader.header(2).state[1] > 0
    assert [r.mid for r in reader.all_records()] == list(range(1, 41))
    # a client that has the first 10 starts at the last file whose header it covers
    start = reader.start_for(State({1: 10}))
    assert start.file_no > 1 and reader.header(start.file_no).state[1] <= 10
    assert reader.header(start.file_no + 1).state[1] > 10


def test_torn_last_record_is_cut_on_open(tmp_path: Path) -> None:
    d = create_log(tmp_path, "c", "n", 1)
    with MessageLog.open(tmp_path, "c", "n") as log:
        for i in range(5):
            log.originate(b"payload %d" % i)
    f = d / "00000001.msg"
    size = f.stat().st_size
    with open(f, "r+b") as fh:
        fh.truncate(size - 3)  # the last record lost its tail
    with MessageLog.open(tmp_path, "c", "n") as log:
        assert log.repaired_bytes == record.HEAD_SIZE + len(b"payload 4") - 3
        assert log.state[1] == 4
        assert log.originate(b"again") == 5
    assert [r.data for r in LogReader(d).all_records()][-1] == b"again"
    # a flipped byte in the last record (checksum), or zeros after it, is torn too
    with open(f, "r+b") as fh:
        fh.seek(-2, os.SEEK_END)
        fh.write(b"\xff\xff")
        fh.seek(0, os.SEEK_END)
        fh.write(b"\0" * 50)
    with MessageLog.open(tmp_path, "c", "n") as log:
        assert log.state[1] == 4


def test_bad_record_in_the_middle_is_corruption_not_a_tear(tmp_path: Path) -> None:
    d = create_log(tmp_path, "c", "n", 1)
    with MessageLog.open(tmp_path, "c", "n") as log:
        first = log.position.offset
        for i in range(5):
            log.originate(b"payload %d" % i)
    with open(d / "00000001.msg", "r+b") as fh:
        fh.seek(first + record.HEAD_SIZE)
        fh.write(b"X")
    with pytest.raises(CorruptLog, match="checksum"):
        MessageLog.open(tmp_path, "c", "n")


def test_a_flipped_length_in_the_middle_is_corruption_not_a_torn_tail(tmp_path: Path) -> None:
    """A length that points past the end looks like a torn last record; the whole records
    after it say otherwise (it cut 991 of 1,000 messages silently)."""
    d = create_log(tmp_path, "c", "n", 1)
    with MessageLog.open(tmp_path, "c", "n") as log:
        first = log.position.offset
        for i in range(100):
            log.originate(b"payload %03d" % i)
    size = record.HEAD_SIZE + len(b"payload 000")
    with open(d / "00000001.msg", "r+b") as fh:
        fh.seek(first + 10 * size + 8 + 2)  # record 10's length field, its third byte
        fh.write(b"\x40")
    with pytest.raises(CorruptLog):
        MessageLog.open(tmp_path, "c", "n")


def test_a_damaged_record_in_a_closed_file_is_an_error_to_readers_not_a_wait(tmp_path: Path) -> None:
    """A reader took a record running past the end of a rolled-over file for one still
    being written and returned nothing more, ever (feeds and consumers stalled)."""
    create_log(tmp_path, "c", "n", 1)
    with MessageLog.open(tmp_path, "c", "n", max_file_size=4096) as log:
        for i in range(300):
            log.originate(b"m%04d" % i)
    d = paths.log_dir(tmp_path, "c", "n")
    f = d / "00000002.msg"
    buf = bytearray(f.read_bytes())
    first = record.HEAD_SIZE + int.from_bytes(buf[8:12], "little")  # after the file header
    buf[first + 5 * (record.HEAD_SIZE + 5) + 8 + 1] = 0x10  # the 6th message's length: 4 KiB more
    f.write_bytes(bytes(buf))
    with pytest.raises(CorruptLog, match="closed file"):
        LogReader(d).all_records()


def test_a_full_disk_logs_nothing_of_a_write_and_the_log_stays_whole(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A short write (ENOSPC part way) is cut back off and raised: no torn record before
    later ones, no state for what is not on disk, and the log reopens and goes on."""
    from raims_node.msglog import log as log_module
    from raims_node.msglog.errors import MsgLogError

    d = create_log(tmp_path, "c", "n", 1)
    real_write = os.write
    with MessageLog.open(tmp_path, "c", "n") as log:
        log.originate(b"before")
        end = log.position

        def half(fd: int, data: bytes) -> int:
            if len(data) > 20:
                return real_write(fd, bytes(data)[:10])  # then the disk is full
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(log_module.os, "write", half)
        with pytest.raises(MsgLogError, match="nothing of it was logged"):
            log.originate(b"lost on a full disk")
        monkeypatch.setattr(log_module.os, "write", real_write)
        assert log.state[1] == 1 and (d / "00000001.msg").stat().st_size == end.offset
        assert log.originate(b"after") == 2
    with MessageLog.open(tmp_path, "c", "n") as log:
        assert log.state[1] == 2
    assert [r.data for r in LogReader(d).all_records()][-2:] == [b"before", b"after"]


def test_state_only_log_keeps_just_the_state(tmp_path: Path) -> None:
    d = create_log(tmp_path, "c", "s", 0, LogKind.STATE)
    with MessageLog.open(tmp_path, "c", "s") as log:
        log.append(4, 1, b"a")
        log.append(4, 2, b"b")
        with pytest.raises(BadArgument):
            log.originate(b"no server")
    with MessageLog.open(tmp_path, "c", "s") as log:
        assert log.state.as_dict() == {4: 2}
    assert (d / "s.msg").stat().st_size < 100 and not list(d.glob("0*.msg"))


def test_interrupted_rollover_is_finished_on_open(tmp_path: Path) -> None:
    d = create_log(tmp_path, "c", "n", 1)
    with MessageLog.open(tmp_path, "c", "n") as log:
        log.originate(b"one")
        os.write(log._fd, record.encode_footer(1, 1, 0, log.state))  # crash after the footer
    with MessageLog.open(tmp_path, "c", "n") as log:
        assert log.active_no == 2 and log.originate(b"two") == 2
    (d / "00000003.msg").write_bytes(b"H\x01")  # crash inside the next file's header
    with MessageLog.open(tmp_path, "c", "n") as log:
        assert log.active_no == 2 and not (d / "00000003.msg").exists()
    assert [r.data for r in LogReader(d).all_records()] == [b"one", b"two"]


def test_reader_sees_appends_and_cursor_round_trips(tmp_path: Path) -> None:
    d = create_log(tmp_path, "c", "n", 1)
    reader = LogReader(d)
    with MessageLog.open(tmp_path, "c", "n", max_file_size=300) as log:
        assert reader.records() == []
        log.originate(b"a")
        got = reader.records()
        assert [r.data for _, r in got] == [b"a"]
        for i in range(20):
            log.originate(b"b%d" % i)
        rest = reader.all_records()
        assert len(rest) == 20
    cur = Cursor(d, "con1")
    assert cur.load() is None
    cur.save(Position(3, 128))
    assert cur.load() == Position(3, 128)
