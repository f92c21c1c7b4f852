"""`ms_msglog` create / export / prune / append in the seed's argument order (seed 004
section 3.5), exit codes and error lines; the console's command table; consumers by
polling and by the producer's live stream with fall-back to the log (section 1.2)."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from raims_node.msglog import commands, paths
from raims_node.msglog.cli import main
from raims_node.msglog.errors import BadArgument, CorruptLog, LogNotFound, MsgLogError
from raims_node.msglog.log import MessageLog, create_log
from raims_node.msglog.producer import Consumer, Producer


def run(cwd: Path, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "raims_node.msglog", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        timeout=30,
        env={**os.environ},
    )


def test_commands_as_a_script_uses_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    r = run(tmp_path, "create", "c1", "alpha", "3")
    assert r.returncode == 0 and (tmp_path / "message/c1/alpha/alpha.msg").is_symlink()
    r = run(tmp_path, "append", "c1", "alpha", "3", stdin=b"one\ntwo\n\xff\n")
    assert r.returncode == 0 and b"ids 1..3" in r.stdout
    r = run(tmp_path, "export", "c1", "alpha", "3", "alpha.msg")
    lines = r.stdout.decode().splitlines()
    assert r.returncode == 0 and lines[1].startswith("header offset=0 node=3 file=1 kind=content")
    assert [ln.split()[-1] for ln in lines[2:]] == ['data="one"', 'data="two"', "hex=ff"]
    assert "origin=3 id=2" in lines[3]
    for bad, why in (
        (["export", "c1", "alpha", "4", "alpha.msg"], b"not 4"),
        (["create", "c1", "alpha", "3"], b"already exists"),
        (["create", "c1", "beta", "300"], b"0..255"),
        (["prune", "c1", "alpha", "3", "3w"], b"retention"),
        (["append", "c1", "nobody", "1"], b"no message log"),
        (["create", "c1", "gamma", "2", "state"], b"node number 0"),
        (["export", "c1", "alpha"], b"usage"),
    ):
        monkeypatch.chdir(tmp_path)
        capsys.readouterr()
        assert main(bad) == 1, bad
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and why in err[0].encode(), err


def test_prune_retires_old_closed_files_only(tmp_path: Path) -> None:
    root = str(tmp_path / "m")
    assert main(["create", root, "c", "n", "1"]) == 0
    with MessageLog.open(root, "c", "n", max_file_size=200) as log:
        for i in range(30):
            log.originate(b"message %d" % i)
        active = log.active_no
    d = paths.log_dir(root, "c", "n")
    assert commands.prune([root, "c", "n", "1", "20d"]) == [f"pruned 0 file(s) from {d}"]
    out = commands.prune([root, "c", "n", "1", "10s"], now=time.time() + 3600)
    assert out[0].startswith(f"pruned {active - 1} file(s)")
    assert paths.numbered_files(d) == [active]
    with pytest.raises(BadArgument):
        commands.prune([root, "c", "n", "2", "1s"])
    assert commands.parse_retention("12h") == 43200 and commands.parse_retention("30m") == 1800
    assert main(["create", root, "c", "s", "0", "state"]) == 0
    assert "state-only" in commands.prune([root, "c", "s", "0", "1s"])[0]
    assert main(["create", root, "c", "gone", "3"]) == 0  # its numbered files removed by hand
    for f in paths.numbered_files(paths.log_dir(root, "c", "gone")):
        os.unlink(paths.log_dir(root, "c", "gone") / paths.numbered(f))
    with pytest.raises(LogNotFound, match="no numbered files"):  # not an IndexError
        commands.prune([root, "c", "gone", "3", "1s"])


def test_console_table_and_trace() -> None:
    assert set(commands.COMMANDS) == {"create", "export", "prune"}
    assert [c.words for c in commands.CONSOLE] == [
        "message.create",
        "message.export",
        "message.prune",
    ]
    assert all(c.run is commands.COMMANDS[c.words.split(".")[1]] for c in commands.CONSOLE)

    class Node:
        trace_on = False

    n = Node()
    assert commands.trace(n, ["on"]) == ["trace on"] and n.trace_on
    assert commands.trace(n, []) == ["trace off"] and not n.trace_on
    with pytest.raises(BadArgument):
        commands.trace(n, ["maybe"])


def test_consumer_polls_with_a_cursor(tmp_path: Path) -> None:
    d = create_log(tmp_path, "c", "n", 1)
    with MessageLog.open(tmp_path, "c", "n", max_file_size=300) as log:
        for i in range(10):
            log.originate(b"%d" % i)
        con = Consumer(d, "reader1")
        assert [r.data for r in con.poll()] == [b"%d" % i for i in range(10)]
        assert con.poll() == []
        for i in range(10, 15):
            log.originate(b"%d" % i)
        con.close()
        con2 = Consumer(d, "reader1")  # the cursor file carries the position over
        assert [r.data for r in con2.poll()] == [b"%d" % i for i in range(10, 15)]
        con2.close()


def test_a_count_takes_that_many_and_leaves_the_rest_for_the_next_poll(tmp_path: Path) -> None:
    d = create_log(tmp_path, "c", "n", 1)
    with MessageLog.open(tmp_path, "c", "n", max_file_size=300) as log:  # several files: a cut across one
        for i in range(20):
            log.originate(b"%d" % i)
        con = Consumer(d, "batch")
        assert [r.data for r in con.poll(5)] == [b"%d" % i for i in range(5)]
        con.close()
        taken: list[bytes] = []
        for _ in range(10):  # a fresh consumer of the same name: five at a time from the cursor
            con = Consumer(d, "batch")
            taken += [r.data for r in con.poll(5)]
            con.close()
        assert taken == [b"%d" % i for i in range(5, 20)]


def test_a_cursor_that_is_no_position_in_the_log_is_an_error(tmp_path: Path) -> None:
    """A consumer whose cursor is past the end (or negative, or after the newest file)
    waited for ever printing nothing; now it is told why. (Past the end of the active
    file is what a power loss leaves: the reader resyncs it, test_msglog_torn.py.)"""
    d = create_log(tmp_path, "c", "n", 1)
    with MessageLog.open(tmp_path, "c", "n") as log:
        log.originate(b"one")
        log.roll_over()  # file 1 is closed
    for text, why in (("1 999999", "past the end of that file"), ("99 0", "past the log's newest file"),
                      ("1 -5", "no position"), ("1 " + "9" * 25, "no position"), ("x", "not a cursor")):
        (d / "bad.cursor").write_text(text)
        with pytest.raises(MsgLogError, match=why):
            Consumer(d, "bad")
    (d / "bad.cursor").write_text("1 0")
    con = Consumer(d, "bad")
    assert [r.data for r in con.poll()] == [b"one"]
    with pytest.raises(MsgLogError, match="running already"):  # the name is one consumer's (seed 3.1.2)
        Consumer(d, "bad")
    con.close()
    Consumer(d, "bad").close()


def test_a_closed_file_cut_short_is_reported_not_waited_on(tmp_path: Path) -> None:
    """A file that a later file follows ends with its footer; one cut short (or empty)
    is a CorruptLog naming it, not the end of the log the consumer waits at for ever."""
    d = create_log(tmp_path, "c", "n", 1)
    with MessageLog.open(tmp_path, "c", "n", max_file_size=300) as log:
        for i in range(20):
            log.originate(b"%d" % i)
    assert (d / paths.numbered(2)).exists()
    (d / paths.numbered(1)).write_bytes(b"")  # emptied (a cut at a record boundary alike)
    con = Consumer(d, "late")
    with pytest.raises(CorruptLog, match="without its footer"):
        con.poll()
    con.close()


async def test_consumer_takes_the_live_stream_and_reads_the_log_on_a_gap(tmp_path: Path) -> None:
    d = create_log(tmp_path, "c", "n", 1)
    log = MessageLog.open(tmp_path, "c", "n")
    producer = Producer(log)
    await producer.start()
    log.originate(b"before")  # logged before the consumer asked: read from the log
    con = Consumer(d, "live")
    got: list[bytes] = []
    task = asyncio.create_task(con.stream(lambda r: got.append(r.data), count=40))
    for _ in range(200):
        if producer.consumers:
            break
        await asyncio.sleep(0.01)
    assert "live" in producer.consumers
    stray = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)  # anyone may write to its socket
    stray.sendto(b"short", str(paths.consumer_socket(d, "live")))  # (it killed the stream: struct.error)
    stray.close()
    for i in range(20):
        log.originate(b"live %d" % i)
        await asyncio.sleep(0)
    producer.consumers["live"][0] += 3  # packets lost: the consumer must notice
    for i in range(20, 39):
        log.originate(b"live %d" % i)
        await asyncio.sleep(0)
    assert await asyncio.wait_for(task, 10) >= 40
    assert got == [b"before"] + [b"live %d" % i for i in range(39)]
    assert con.from_packets > 0 and con.gaps >= 1
    producer.close()
    log.close()
    con.close()


async def test_stray_requests_on_the_producer_socket_are_counted_not_raised(tmp_path: Path) -> None:
    """A datagram on `~.socket` naming no plain consumer (`NBMQ../x`, an empty or a too
    long name) raised BadArgument in the event loop's reader callback, a traceback per
    datagram in serve's output; now each is counted and the next request is served."""
    d = create_log(tmp_path, "c", "n", 1)
    loop = asyncio.get_running_loop()
    raised: list[object] = []
    loop.set_exception_handler(lambda _, ctx: raised.append(ctx.get("exception")))
    log = MessageLog.open(tmp_path, "c", "n")
    producer = Producer(log)
    await producer.start()
    stray = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    for bad in (b"NBMQ../../x", b"NBMQ", b"NBMQ" + b"a" * 600, b"NBMQ\xff", b"NBMQ.hidden"):
        stray.sendto(bad, str(d / paths.PRODUCER_SOCKET))
    stray.sendto(b"NBMQgood", str(d / paths.PRODUCER_SOCKET))
    stray.close()
    for _ in range(200):
        if producer.consumers:
            break
        await asyncio.sleep(0.01)
    assert raised == []
    assert list(producer.consumers) == ["good"] and producer.bad_requests == 5
    producer.close()
    log.close()


@pytest.mark.parametrize(("words", "message"), [
    (["../logs", "c", "n", "1"], "a path must start with '/' or './'"),  # was: "type '1' is not content or state"
    (["logs/x", "c", "n", "1"], "a path must start with '/' or './'"),
    (["~/logs", "c", "n", "1"], "a path must start with '/' or './'"),
    (["c", "n", "1_0"], "is not a number 0..255"),  # was: node number 10
    (["c", "n", " 3"], "is not a number 0..255"),
    (["c", "n", "+3"], "is not a number 0..255"),
    (["c", "n", "٣"], "is not a number 0..255"),  # an Arabic-Indic three: int() took it
])
def test_create_refuses_what_the_seed_does_not_allow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     words: list[str], message: str) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BadArgument, match=message):
        commands.create(words)
    assert not (tmp_path / "message").exists()
