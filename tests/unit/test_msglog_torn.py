"""Power loss under readers and consumers (seed 004 sections 1.1, 1.2): a torn tail the
reader did not repair, cut at every byte of the last record, and a consumer cursor that
reached the disk while the records it went past did not (left past the end or inside a
record once the producer cut the tear and logged new records)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from raims_node.msglog import paths, record
from raims_node.msglog.cli import main
from raims_node.msglog.cursor import Cursor
from raims_node.msglog.errors import LogExists, LogNotFound, MsgLogError
from raims_node.msglog.log import MessageLog, Position, create_log
from raims_node.msglog.producer import Consumer
from raims_node.msglog.reader import LogReader
from raims_node.msglog.record import LogKind

FILE = "00000001.msg"


def _log(tmp_path: Path, payloads: list[bytes]) -> tuple[Path, list[int]]:
    """A log of `payloads`; returns its directory and each record's start offset."""
    d = create_log(tmp_path, "c", "n", 1)
    starts = []
    with MessageLog.open(tmp_path, "c", "n") as log:
        for p in payloads:
            starts.append(log.position.offset)
            log.originate(p)
    return d, starts


def _data(reader: LogReader) -> list[bytes]:
    return [r.data for r in reader.all_records()]


def test_readers_return_whole_records_only_at_every_cut_of_the_last_record(tmp_path: Path) -> None:
    """Cut at every byte of the last record, then also with zeros (or garbage) where the
    rest was: readers return the records before it, never part of it, never raise, and
    a reader waiting at the tear reads what the producer logs after cutting it."""
    payloads = [b"m%d" % i * (i + 1) for i in range(4)] + [b"last" * 9]
    d, starts = _log(tmp_path, payloads)
    f = d / FILE
    full = f.read_bytes()
    last = starts[-1]
    assert len(full) - last == record.HEAD_SIZE + len(payloads[-1])
    fills = (b"", b"zeros", b"junk")
    for cut in range(last, len(full)):
        for fill in fills:
            rest = len(full) - cut
            tail = {b"": b"", b"zeros": b"\0" * rest, b"junk": (b"\xa5" * rest)}[fill]
            f.write_bytes(full[:cut] + tail + (b"\0" * 64 if fill == b"zeros" else b""))
            reader = LogReader(d)
            assert _data(reader) == payloads[:-1], (cut, fill)
            assert reader.records() == []  # waiting at the tear, again and again
            waiting = Consumer(d, "w")
            assert [r.data for r in waiting.poll()] == payloads[:-1]
            waiting.close()
            with MessageLog.open(tmp_path, "c", "n") as log:  # the producer cuts the tear
                assert log.end == last
                log.originate(b"after")
            assert _data(reader) == [b"after"], (cut, fill)
            reader.close()
            (d / "w.cursor").unlink()
    f.write_bytes(full)


def test_consume_command_on_a_torn_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    payloads = [b"one", b"two", b"three"]
    d, starts = _log(tmp_path, payloads)
    f = d / FILE
    full = f.read_bytes()
    f.write_bytes(full[: starts[-1] + 5] + b"\0" * 100)  # torn, zero-filled: it raised
    root = str(tmp_path)
    assert main(["consume", root, "c", "n", "r1"]) == 0
    assert capsys.readouterr().out.split("\n") == ['1 1 data="one"', '1 2 data="two"', ""]
    # a lone empty numbered file (a crash right after create): an empty log, no error
    d2 = tmp_path / "c" / "e"
    d2.mkdir()
    (d2 / FILE).write_bytes(b"")
    assert main(["consume", root, "c", "e", "r1"]) == 0
    assert capsys.readouterr().out == ""


def _power_loss(tmp_path: Path, d: Path, cut: int, new: list[bytes]) -> None:
    """The file loses everything from `cut` on but a few torn bytes; the producer
    reopens (cutting the tear) and logs `new`."""
    f = d / FILE
    full = f.read_bytes()
    f.write_bytes(full[: cut + 7])
    with MessageLog.open(tmp_path, "c", "n") as log:
        assert log.end == cut and log.repaired_bytes == 7
        for p in new:
            log.originate(p)


def test_a_cursor_left_inside_a_record_by_a_power_loss_resyncs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The cursor reached the disk at the end of ten records; the log kept six. The
    producer logs new records of other sizes, so the cursor is inside one of them: the
    consumer resumes where the log was cut (the `~.opens` note is newer than the
    cursor), reads every new record, reports it, and goes on normally."""
    payloads = [b"x" * 40 for _ in range(10)]
    d, starts = _log(tmp_path, payloads)
    con = Consumer(d, "c1")
    assert len(con.poll()) == 10
    end = con.reader.pos.offset
    con.close()
    new = [b"n%d" % i + b"y" * 57 for i in range(10)]
    _power_loss(tmp_path, d, starts[6], new)
    boundaries = {starts[6] + i * (record.HEAD_SIZE + 59) for i in range(11)}
    assert end not in boundaries  # inside a new record
    with caplog.at_level(logging.WARNING, logger="raims.msglog"):
        con = Consumer(d, "c1")
        got = [r.data for r in con.poll()]
    assert got == new  # before: [] for ever (it waited inside a record)
    assert con.reader.resyncs == 1 and con.reader.resynced_bytes == end - starts[6]
    assert "not a record boundary" in caplog.text
    assert Cursor(d, "c1").load() == Position(1, starts[6] + 10 * (record.HEAD_SIZE + 59))
    con.close()
    con = Consumer(d, "c1")  # the cursor saved since is trusted
    assert con.poll() == [] and con.reader.resyncs == 0
    con.close()


def test_without_a_repair_note_the_record_holding_the_cursor_is_read(tmp_path: Path) -> None:
    """No `~.opens` (a log cut by an older producer, or the note lost): the record
    holding the cursor was logged after the cut, so it is new to the consumer: the
    reader goes back to its start rather than waiting for ever (or skipping it)."""
    d, starts = _log(tmp_path, [b"x" * 40 for _ in range(10)])
    con = Consumer(d, "c1")
    con.poll()
    end = con.reader.pos.offset
    con.close()
    new = [b"n%d" % i + b"y" * 57 for i in range(10)]
    _power_loss(tmp_path, d, starts[6], new)
    (d / paths.OPENS_FILE).unlink()
    size = record.HEAD_SIZE + 59
    holder = starts[6] + (end - starts[6]) // size * size
    con = Consumer(d, "c1")
    got = [r.data for r in con.poll()]
    assert got == new[(holder - starts[6]) // size :]
    assert con.reader.resyncs == 1 and con.reader.resynced_bytes == end - holder
    con.close()


def test_a_cursor_past_the_cut_end_resumes_there(tmp_path: Path) -> None:
    """Nothing logged since the cut: the cursor is past the end of the active file. It
    was an error ('remove it'); now the consumer resumes at the cut and reads what the
    producer logs next. A cursor past the end of a closed file is still an error."""
    d, starts = _log(tmp_path, [b"x" * 40 for _ in range(10)])
    con = Consumer(d, "c1")
    con.poll()
    con.close()
    _power_loss(tmp_path, d, starts[4], [])
    con = Consumer(d, "c1")
    assert con.poll() == []
    assert con.reader.pos == Position(1, starts[4]) and con.reader.resyncs == 1
    with MessageLog.open(tmp_path, "c", "n") as log:
        log.originate(b"next")
    assert [r.data for r in con.poll()] == [b"next"]
    con.close()


def test_a_reader_given_a_position_inside_a_torn_tail_waits_at_the_tear(tmp_path: Path) -> None:
    """Before the producer reopens: a cursor inside the torn tail goes back to where the
    tear starts (where the producer will cut) and waits there, then reads the new ones."""
    d, starts = _log(tmp_path, [b"x" * 40 for _ in range(5)])
    f = d / FILE
    full = f.read_bytes()
    f.write_bytes(full[: starts[3] + 30] + b"\0" * 200)
    Cursor(d, "c1").save(Position(1, starts[3] + 68 + 20))
    con = Consumer(d, "c1")
    assert con.poll() == [] and con.reader.pos == Position(1, starts[3])
    with MessageLog.open(tmp_path, "c", "n") as log:
        log.originate(b"new")
    assert [r.data for r in con.poll()] == [b"new"]
    con.close()


@pytest.mark.parametrize("left", [b"", b"H\x01", "whole header"])
def test_a_create_cut_short_by_a_crash_can_be_created_again(tmp_path: Path, left: bytes | str) -> None:
    """A crash inside `create` leaves `00000001.msg` (empty, a torn header, or a whole
    one) and no named link, or a state-only named file without its header: open said
    'create it first' and create failed (FileExistsError, LogExists) for ever."""
    d = create_log(tmp_path, "c", "n", 1)
    (d / "n.msg").unlink()
    if isinstance(left, bytes):
        (d / FILE).write_bytes(left)
    with pytest.raises(LogNotFound):
        MessageLog.open(tmp_path, "c", "n")
    assert main(["create", str(tmp_path), "c", "n", "1"]) == 0
    with MessageLog.open(tmp_path, "c", "n") as log:
        assert log.originate(b"x") == 1
    s = create_log(tmp_path, "c", "s", 0, LogKind.STATE)
    (s / "s.msg").write_bytes((s / "s.msg").read_bytes()[:9])
    with pytest.raises(LogNotFound, match="cut short"):
        MessageLog.open(tmp_path, "c", "s")
    create_log(tmp_path, "c", "s", 0, LogKind.STATE)
    MessageLog.open(tmp_path, "c", "s").close()


def test_numbered_files_with_messages_and_no_named_link_are_not_recreated(tmp_path: Path) -> None:
    d, _ = _log(tmp_path, [b"keep me"])
    (d / "n.msg").unlink()
    with pytest.raises(LogExists, match="restore the link"):
        create_log(tmp_path, "c", "n", 1)
    assert [r.data for r in LogReader(d).all_records()] == [b"keep me"]


def test_a_cursor_file_emptied_by_a_power_loss_reads_the_log_again(tmp_path: Path) -> None:
    """An unsynced cursor replace whose data never reached the disk leaves an empty (or
    zero-filled) file: the consumer refused to start ('not a cursor') until someone
    removed it; now it reads the log from its start (at least once) and says so."""
    d, _ = _log(tmp_path, [b"a", b"b"])
    for junk in (b"", b"\0" * 12):
        (d / "c1.cursor").write_bytes(junk)
        con = Consumer(d, "c1")
        assert con.cursor.lost and [r.data for r in con.poll()] == [b"a", b"b"]
        con.close()
    (d / "c1.cursor").write_text("x")
    with pytest.raises(MsgLogError, match="not a cursor"):  # written by someone: still an error
        Consumer(d, "c1")


@pytest.mark.parametrize("new_size", [40, 59])
def test_a_power_loss_that_lost_whole_records_resyncs_the_cursor_to_the_end_at_open(
    tmp_path: Path, new_size: int
) -> None:
    """No tear at all: the file lost its last four whole records (its size reached the
    disk at a record boundary). New records of the old size put the cursor on a
    boundary (it skipped them silently), of another size inside one (it went back only
    to that record's start): either way the consumer resumes where the file ended when
    the producer opened it (`~.opens`) and reads every new record."""
    d, starts = _log(tmp_path, [b"x" * 40 for _ in range(10)])
    con = Consumer(d, "c1")
    con.poll()
    con.close()
    f = d / FILE
    f.write_bytes(f.read_bytes()[: starts[6]])
    new = [b"%02d" % i + b"y" * (new_size - 2) for i in range(8)]
    with MessageLog.open(tmp_path, "c", "n") as log:
        assert log.repaired_bytes == 0
        for p in new:
            log.originate(p)
    con = Consumer(d, "c1")
    assert [r.data for r in con.poll()] == new
    assert con.reader.resyncs == 1
    con.close()


def test_a_reader_waiting_in_a_file_the_producer_replaces_follows_the_new_one(tmp_path: Path) -> None:
    """A crash cut a rollover inside the next file's header: the reader waits in that
    file (it holds it open). The producer's open removes it and makes the file again:
    the reader held the removed one and waited for ever."""
    d = create_log(tmp_path, "c", "n", 1)
    with MessageLog.open(tmp_path, "c", "n") as log:
        log.originate(b"one")
        log.roll_over()
        log.originate(b"two")
        os.write(log._fd, record.encode_footer(1, 2, 0, log.state))  # a crash after the footer
    (d / "00000003.msg").write_bytes(b"H\x01")  # ... and inside the next file's header
    reader = LogReader(d)
    assert _data(reader) == [b"one", b"two"] and reader.pos == Position(3, 0)
    with MessageLog.open(tmp_path, "c", "n") as log:
        assert log.active_no == 3
        log.originate(b"three")
    assert _data(reader) == [b"three"]
    reader.close()


def test_a_cursor_far_past_the_end_of_the_active_file(tmp_path: Path) -> None:
    """(The check read `offset` bytes: a cursor at 2**40 asked for a terabyte.)"""
    d, starts = _log(tmp_path, [b"a"])
    Cursor(d, "c1").save(Position(1, 1 << 40))
    con = Consumer(d, "c1")
    assert con.poll() == [] and con.reader.pos == Position(1, starts[0] + record.HEAD_SIZE + 1)
    con.close()


def test_waiting_at_a_torn_tail_judges_it_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A consumer following a log whose producer is down polls the tear ten times a
    second; judging it scans up to 1 MiB in Python each time: once per tear and size."""
    from raims_node.msglog import reader as reader_mod

    d, starts = _log(tmp_path, [b"a", b"b"])
    f = d / FILE
    f.write_bytes(f.read_bytes()[: starts[1] + 3] + b"\0" * 4096)
    calls = []
    real = reader_mod.is_torn
    monkeypatch.setattr(reader_mod, "is_torn", lambda buf, bad: calls.append(1) or real(buf, bad))
    r = LogReader(d)
    assert _data(r) == [b"a"]
    for _ in range(5):
        assert r.records() == [] and r.torn
    assert len(calls) == 1
    with open(f, "ab") as fh:  # the file changed: judged again
        fh.write(b"\0")
    assert r.records() == [] and len(calls) == 2
    r.close()
