"""Cabals of real `ms_msglog serve` processes (seed 004 sections 1.3-1.7): a ring of five
hubs delivers every origin's messages once and in order, bypasses a hub killed with -9,
and catches it up (after a torn write) with no gap and no duplicate; ten hubs split into
two rings of five and heal into one; source/sink and spoke roles."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from raims_node.msglog import paths
from raims_node.msglog.record import encode_message
from raims_node.msglog.wire import encode_hello
from tests.integration.msglog_harness import CABAL, Cluster, ring


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator[type[Cluster]]:
    made: list[Cluster] = []

    def make(types: list[str]) -> Cluster:
        c = Cluster(tmp_path, types)
        made.append(c)
        return c

    yield make  # type: ignore[misc]
    for c in made:
        c.stop_all()


def test_five_hub_ring_kill_bypass_torn_write_and_catch_up(make_cluster) -> None:  # type: ignore[no-untyped-def]
    c = make_cluster(["hub"] * 5)
    c.start_all()
    names = c.names
    c.wait_feeds(ring(names))
    for n in names:
        c.send(n, 30)
    c.wait_states(names, names)
    for n in names:
        c.check_exactly_once(n, names)

    c.kill("n3")  # kill -9: the ring bypasses it
    c.wait_feeds(ring(["n1", "n2", "n4", "n5"]))
    live = ["n1", "n2", "n4", "n5"]
    for n in live:
        c.send(n, 20, "b")
    c.wait_states(live, names)

    # a torn write on the dead hub's active file: the next record, cut short
    d = paths.log_dir(c.root, CABAL, "n3")
    with open(d / os.readlink(d / "n3.msg"), "ab") as f:
        f.write(encode_message(3, 31, 0, b"x" * 64)[:40])
    c.start("n3")
    assert "cut a torn last record" in c.out("n3")
    for _ in range(10):  # traffic while the ring re-forms over redundant links
        for n in live:
            c.send(n, 5, "r")
    c.wait_feeds(ring(names))
    c.send("n3", 10, "c")
    c.wait_states(names, names)
    for n in names:
        c.check_exactly_once(n, names)
    # redundant paths carried duplicates at times; none reached a log
    assert sum(c.status(n)["counters"]["gaps"] for n in names) == 0


def test_ten_hubs_partition_into_two_rings_then_heal(make_cluster) -> None:  # type: ignore[no-untyped-def]
    c = make_cluster(["hub"] * 10)
    c.start_all()
    names = c.names
    left, right = names[:5], names[5:]
    c.wait_feeds(ring(names), timeout=30)
    for n in names:
        c.send(n, 10)
    c.wait_states(names, names)

    c.partition.write_text(json.dumps({"groups": [left, right]}))
    c.wait_feeds(ring(left) | ring(right))
    for n in names:
        c.send(n, 10, "split")
    c.wait_states(left, left)
    c.wait_states(right, right)
    # each side has only its own side's new messages
    assert c.status("n1")["state"][str(c.number("n6"))] == 10

    os.unlink(c.partition)
    for _ in range(10):  # traffic while the two rings merge
        for n in names:
            c.send(n, 3, "m")
    c.wait_feeds(ring(names), timeout=30)
    for n in names:
        c.send(n, 5, "healed")
    c.wait_states(names, names)
    for n in names:
        c.check_exactly_once(n, names)


def test_sources_sinks_and_spokes(make_cluster) -> None:  # type: ignore[no-untyped-def]
    # n1 source, n2 sink, n3 source, n4 hub, n5 spoke, n6 hub, n7 spoke (state only is
    # covered in unit tests; here spokes and sinks keep content)
    c = make_cluster(["source", "sink", "source", "hub", "spoke", "hub", "spoke"])
    for n in c.names:  # the spoke n5 keeps only its state (seed 3.5.1 "state")
        c.start(n, extra=["--kind", "state"] if n == "n5" else None)
    c.wait_feeds(
        {("n1", "n2"), ("n3", "n2"), ("n4", "n5"), ("n6", "n7"), ("n4", "n6"), ("n6", "n4")}
    )
    for n in ("n1", "n3", "n4", "n6"):
        c.send(n, 15)
    c.wait_states(["n2"], ["n1", "n3"])
    c.wait_states(["n4", "n5", "n6", "n7"], ["n4", "n6"])
    c.check_exactly_once("n2", ["n1", "n3"])
    c.check_exactly_once("n7", ["n4", "n6"])
    d5 = paths.log_dir(c.root, CABAL, "n5")
    assert not (d5 / "n5.msg").is_symlink() and not list(d5.glob("0*.msg"))
    # a source logs only its own; hubs do not see sources (sinks are the sources' only clients)
    assert {o for o, _, _ in c.log_messages("n1")} == {1}
    assert "3" not in c.status("n4")["state"]
    # the spoke n7 taps n6; when n6 dies it moves to the next hub behind it, n4
    c.kill("n6", signal.SIGKILL)
    c.wait_feeds({("n1", "n2"), ("n3", "n2"), ("n4", "n5"), ("n4", "n7")})
    c.send("n4", 5, "late")
    c.wait_states(["n5", "n7"], ["n4"])
    c.check_exactly_once("n7", ["n4", "n6"])
    assert sum(c.status(n)["counters"]["gaps"] for n in ("n2", "n5", "n7")) == 0


def test_tcp_links_on_loopback(make_cluster) -> None:  # type: ignore[no-untyped-def]
    c = make_cluster(["source", "sink"])
    text = c.config.read_text()
    c.config.write_text(text.replace(f'"unix://{c.sock}/n1.server"', '"tcp://127.0.0.1:0"'))
    c.start("n1")
    port = re.search(r"listening on tcp://127\.0\.0\.1:(\d+)", c.out("n1"))
    assert port is not None
    c.config.write_text(
        text.replace(f'"unix://{c.sock}/n1.server"', f'"tcp://127.0.0.1:{port.group(1)}"')
    )
    c.send("n1", 25)
    # bad clients are refused without harm to the others: garbage, then a stranger's hello
    for junk in (
        b"GET / HTTP/1.1\r\n\r\n",
        encode_hello({"cabal": CABAL, "node": "mallory", "number": 9, "role": "client"}),
    ):
        with socket.create_connection(("127.0.0.1", int(port.group(1))), timeout=5) as s:
            s.sendall(junk)
            s.settimeout(5)
            while s.recv(4096):  # the server answers its hello, then closes
                pass
    c.start("n2")
    c.wait_states(["n2"], ["n1"])
    c.check_exactly_once("n2", ["n1"])
    counters = c.status("n1")["counters"]
    assert counters["protocol_errors"] == 2 and counters["rejected"] == 1


def test_ring_under_load_with_kills_and_restarts(make_cluster) -> None:  # type: ignore[no-untyped-def]
    c = make_cluster(["hub"] * 5)
    c.start_all()
    names = c.names
    c.wait_feeds(ring(names))
    for rnd in range(3):
        victim = names[(2 * rnd + 1) % 5]
        for n in names:
            c.send(n, 400, f"a{rnd}")
        # the victim logged its own (a kill loses lines still in its stdin pipe, which no
        # log could keep) while the others' messages are still on their way round
        c.wait_states([victim], [victim])
        c.kill(victim)
        live = [n for n in names if n != victim]
        for n in live:
            c.send(n, 400, f"b{rnd}")
        c.start(victim)
        for n in names:
            c.send(n, 400, f"c{rnd}")
        c.wait_states(names, names, timeout=60)
    for n in names:
        c.check_exactly_once(n, names)
    assert sum(c.status(n)["counters"]["gaps"] for n in names) == 0


def test_a_hung_hub_is_bypassed_by_keepalive_and_rejoins(make_cluster) -> None:  # type: ignore[no-untyped-def]
    c = make_cluster(["hub"] * 4)
    for n in c.names:
        c.start(n, extra=["--heartbeat", "0.2"])
    names = c.names
    c.wait_feeds(ring(names))
    c.procs["n2"].send_signal(signal.SIGSTOP)  # hung, not dead: its sockets stay open
    try:
        live = ["n1", "n3", "n4"]
        deadline = time.monotonic() + 15
        while {(a, b) for a, b in c.feeds() if "n2" not in (a, b)} != ring(live):
            assert time.monotonic() < deadline, c.feeds()
            time.sleep(0.05)
        # both of n2's neighbours close on silence; the ring can re-form after the first
        while sum(c.status(n).get("counters", {}).get("silent_peers", 0) for n in live) < 2:
            assert time.monotonic() < deadline, [c.status(n).get("counters") for n in live]
            time.sleep(0.05)
        for n in live:
            c.send(n, 20)
        c.wait_states(live, live)
    finally:
        c.procs["n2"].send_signal(signal.SIGCONT)
    c.wait_feeds(ring(names))
    c.send("n2", 20)
    c.wait_states(names, names)
    for n in names:
        c.check_exactly_once(n, names)


def test_a_consumer_process_takes_the_producers_live_stream(make_cluster) -> None:  # type: ignore[no-untyped-def]
    c = make_cluster(["source"])
    c.start("n1")
    c.send("n1", 5)
    c.wait_states(["n1"], ["n1"])
    consumer = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "raims_node.msglog",
            "consume",
            str(c.root),
            CABAL,
            "n1",
            "reader1",
            "--live",
            "--count",
            "30",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        d = paths.log_dir(c.root, CABAL, "n1")
        deadline = time.monotonic() + 20
        while not (d / "reader1.socket").exists():  # bound: it asks the producer next
            assert time.monotonic() < deadline and consumer.poll() is None
            time.sleep(0.02)
        c.send("n1", 25)
        out, err = consumer.communicate(timeout=30)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait(5)
    lines = out.decode().splitlines()
    assert lines == [f'1 {i + 1} data="n1-{i}"' for i in range(30)], lines
    m = re.search(rb"consumed (\d+) from packets, (\d+) from the log", err)
    assert m is not None and int(m.group(1)) > 0 and int(m.group(2)) >= 5, err
    assert (paths.log_dir(c.root, CABAL, "n1") / "reader1.cursor").read_text().split()[0] == "1"


def test_a_line_too_long_is_refused_and_the_next_ones_are_logged(make_cluster) -> None:  # type: ignore[no-untyped-def]
    """A stdin line over the reader's limit (16 MiB) is refused with a line on stderr;
    the server goes on logging (it stopped reading stdin, and lost every later line)."""
    from raims_node.msglog.cli import LINE_LIMIT

    c = make_cluster(["source"])
    c.start_all()
    c.send("n1", 2)
    proc = c.procs["n1"]
    proc.stdin.write(b"x" * (LINE_LIMIT + 100) + b"\n")
    proc.stdin.flush()
    c.send("n1", 3)
    c.wait_states(["n1"], ["n1"])
    c.check_exactly_once("n1", ["n1"])
    assert f"a line over {LINE_LIMIT} bytes refused" in c.out("n1")
