"""The operator's console on real processes, over the telnet transport (issue 23):
negotiation as a terminal client does it, ping/tping/mping answered by every peer,
connect/shutdown of a transport on a live node, sub and pub through the console."""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from raims_node.console.telnet import DO, ECHO, IAC, SGA, TTYPE, WILL, WONT
from tests.integration.harness import (
    CONVERGED,
    MANUAL_GRAPH,
    TELNET_TPORT,
    NodeProc,
    add_transports,
    get_json,
    graph_config,
    poll,
    web_addr,
)

PROMPT = re.compile(rb"\S+\.\S+\[\S+\]@\S+\[(\d+)\](\(\S+\))?> ")  # (T): configuring transport T


class TelnetClient:
    """A terminal-capable client: agrees to server echo and SGA, refuses TTYPE."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""
        self.prompt = b""  # the last one read
        self.negotiated: list[bytes] = []

    def read_until_prompt(self, timeout: float = 10.0) -> str:
        deadline = time.monotonic() + timeout
        while not PROMPT.search(self.buf):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no prompt; got {self.buf[-400:]!r}")
            self.sock.settimeout(left)
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError(f"closed; got {self.buf[-400:]!r}")
            self.buf += self._options(chunk)
        m = PROMPT.search(self.buf)
        assert m is not None
        self.prompt = m.group(0)
        out, self.buf = self.buf[: m.start()], self.buf[m.end():]
        return out.decode(errors="replace")

    def _options(self, chunk: bytes) -> bytes:
        out = bytearray()
        i = 0
        while i < len(chunk):
            if chunk[i] == IAC and i + 2 < len(chunk):
                verb, opt = chunk[i + 1], chunk[i + 2]
                self.negotiated.append(bytes([verb, opt]))
                if verb == WILL and opt in (ECHO, SGA):
                    self.sock.sendall(bytes([IAC, DO, opt]))
                elif verb == DO and opt == TTYPE:
                    self.sock.sendall(bytes([IAC, WONT, opt]))
                i += 3
            else:
                out.append(chunk[i])
                i += 1
        return bytes(out)

    def command(self, line: str, timeout: float = 10.0) -> str:
        self.sock.sendall(line.encode() + b"\r\n")
        return self.read_until_prompt(timeout)


@pytest.fixture
def abcd_telnet(tmp_path: Path) -> Iterator[tuple[dict[str, NodeProc], int]]:
    cfg, commands = graph_config(tmp_path, MANUAL_GRAPH, web=False)
    add_transports(cfg, TELNET_TPORT)
    nodes: dict[str, NodeProc] = {}
    try:
        for command in commands:
            args = command.split()[1:]
            args[args.index("-d") + 1] = str(cfg)
            if args[args.index("-u") + 1] == "A":
                args += ["tel.listen"] if "-t" in args else ["-t", "tel.listen"]
            node = NodeProc(args[args.index("-u") + 1], args, tmp_path)
            if ".listen" in command:
                node.listening()
            nodes[node.name] = node
        for node in nodes.values():
            node.wait_for(CONVERGED.format(n=3), 30)
        port = int(nodes["A"].wait_for(r"telnet listening on [\d.]+:(\d+)").group(1))
        yield nodes, port
    finally:
        for node in nodes.values():
            node.stop()


def test_telnet_console_pings_every_peer_and_path(abcd_telnet: tuple[dict[str, NodeProc], int]) -> None:
    _, port = abcd_telnet
    t = TelnetClient(port)
    t.read_until_prompt()
    assert bytes([WILL, ECHO]) in t.negotiated and bytes([DO, TTYPE]) in t.negotiated
    out = t.command("ping")
    assert re.search(r"user\W+cost\W+lat\W+tport\W+peer_tport", out), out  # the manual's columns
    for user in "BCD":
        assert re.search(rf"^\s*{user}\b.*\d+(\.\d+)?(us|ms|s)\b", out, re.M), out
    assert "no reply" not in out
    # peer_tport: where the ping came in at the peer (B's end of link_ab)
    assert re.search(r"^\s*B\.\d+\W.*\|\s*link_ab\s*$", out, re.M), out
    out = t.command("tping D")
    assert re.search(r"^\s*D\b.*\d+(\.\d+)?(us|ms|s)\b", out, re.M), out
    assert "trace" in out  # a router on the way (B or C) answered
    for path in range(4):
        out = t.command(f"mping {path}")
        assert all(re.search(rf"^\s*{u}\b.*(us|ms|s)\b", out, re.M) for u in "BCD"), out
    assert "no such peer" in t.command("ping nobody")
    assert "slow_consumers" in t.command("show counters")  # the flow control counters, as on the web
    assert re.search(r"timer_lat\W+timer_cnt\W+read_lat", t.command("show poll"))


def test_telnet_console_shutdown_and_connect_a_transport(abcd_telnet: tuple[dict[str, NodeProc], int]) -> None:
    nodes, port = abcd_telnet
    t = TelnetClient(port)
    t.read_until_prompt()
    mark = len(nodes["B"].lines)
    out = t.command("shutdown link_ab")
    assert "shutdown" in out and "link_ab" in out
    nodes["B"].wait_for(r"remove auth A", 15, after=mark)
    out = t.command("show ports")
    assert "link_ab" not in out
    assert re.search(r"^\s*link_ab\W+tcp\W+-\s", t.command("show tport"), re.M)  # not running, as show status
    assert "not an interface" in t.command("network 7500 tcp.127.0.0.1:0")
    assert "net_7500" not in t.command("show ports") + t.command("show tport")  # not left half started
    out = t.command("listen link_ab")
    assert "listen" in out
    nodes["A"].wait_for(r"listening on 127\.0\.0\.1:\d+", 10)
    assert "not running" in t.command("shutdown nothing_here")


def test_telnet_console_sub_and_pub(abcd_telnet: tuple[dict[str, NodeProc], int]) -> None:
    _, port = abcd_telnet
    a = TelnetClient(port)
    a.read_until_prompt()
    a.command("sub hello.world")
    out = a.command("pub hello.world hi-there")  # delivered locally before the prompt returns
    assert "hello.world: hi-there" in out
    a.command("psub hello.>")
    out = a.command("show rpcs")  # the manual's columns; recv counts what each subscription got
    assert re.search(r"type\W+arg\W+recv\W+count", out), out
    assert re.search(r"^\s*sub\W+hello\.world\W+1\b", out, re.M) and re.search(r"^\s*psub\W+hello\.>\W+0\b", out, re.M), out
    a.command("punsub hello.>")
    out = a.command("unsub hello.world") + a.command("pub hello.world again")
    assert "again" not in out.replace("pub hello.world again", "")
    assert "is not subscribed" in a.command("unsub never.subscribed")
    a.command("sub one.x")
    a.command("sub two.x")
    assert re.search(r"unsub\W+one\.x two\.x", a.command("unsub"))  # the manual: all subjects
    out = a.command("pub one.x gone") + a.command("pub two.x gone")
    assert "one.x: gone" not in out and "two.x: gone" not in out
    assert "unknown command" in a.command("frobnicate")
    a.sock.sendall(b"quit\r\n")
    a.sock.settimeout(5)
    while a.sock.recv(4096):
        pass  # the server closes the connection


def test_telnet_console_configures_a_transport_as_the_manual_shows(abcd_telnet: tuple[dict[str, NodeProc], int]) -> None:
    """The manual's two forms: `configure transport T` then a field per line, `show` and
    `exit` (the prompt names T meanwhile), and all fields on one line."""
    _, port = abcd_telnet
    t = TelnetClient(port)
    t.read_until_prompt()
    t.command("configure transport mytran")
    assert t.prompt.endswith(b"(mytran)> ")
    for line in ("type mesh", "listen *", "port 5000"):
        t.command(line)
    shown = t.command("show")
    assert "tport: mytran" in shown and "type: mesh" in shown and "5000" in shown
    t.command("exit")
    assert not t.prompt.endswith(b"(mytran)> ")
    running = t.command("show running transports mytran")
    assert "tport: mytran" in running and "type: mesh" in running and "listen" in running
    t.command("configure transport test type tcp port 9000 connect host1")
    running = t.command("show running transports test")
    assert "type: tcp" in running and "host1" in running
    assert "has no value" in t.command("configure transport test port")


@pytest.fixture
def ab_telnet_web(tmp_path: Path) -> Iterator[tuple[dict[str, NodeProc], int, str]]:
    """A (telnet) and B (web), linked: B's web publishes over the link to A's console."""
    cfg, commands = graph_config(tmp_path, "node A B\ntcp_link_ab A B\n", web=True)
    add_transports(cfg, TELNET_TPORT)
    nodes = {"A": NodeProc("A", ["-d", str(cfg), "-u", "A", "-t", "link_ab.listen", "tel.listen"], tmp_path)}
    try:
        nodes["A"].listening()
        nodes["B"] = NodeProc("B", ["-d", str(cfg), "-u", "B", "-t", "link_ab.connect", "web.listen"], tmp_path)
        for node in nodes.values():
            node.wait_for(CONVERGED.format(n=1), 30)
        port = int(nodes["A"].wait_for(r"telnet listening on [\d.]+:(\d+)").group(1))
        yield nodes, port, web_addr(nodes["B"])
    finally:
        for node in nodes.values():
            node.stop()


def test_sub_to_a_file_it_cannot_write(ab_telnet_web: tuple[dict[str, NodeProc], int, str], tmp_path: Path) -> None:
    nodes, port, b_web = ab_telnet_web
    a = TelnetClient(port)
    a.read_until_prompt()
    assert "No such file or directory" in a.command(f"sub never.x {tmp_path}/no/such/dir/f")  # refused at once
    out_file = tmp_path / "f.out"
    a.command(f"sub f.x {out_file}")
    for attempt in range(50):  # from B, over the link, once A's subscription reached B
        get_json(b_web, f"pub f.x first{attempt}")
        if poll(lambda: out_file.exists() and "f.x: first" in out_file.read_text(), 0.2):
            break
    assert "f.x: first" in out_file.read_text()
    out_file.unlink()
    out_file.mkdir()  # the file cannot be written any more
    mark = len(nodes["A"].lines)
    get_json(b_web, "pub f.x second")
    got = ""
    for _ in range(50):  # the message is written to the session when it comes: between prompts
        got += a.command("show cache")
        if "f.x: second" in got:
            break
        time.sleep(0.1)
    assert "cannot write" in got and "f.x: second" in got, got
    get_json(b_web, "pub f.x third")  # the link is still up: the next one comes too
    for _ in range(50):
        got += a.command("show cache")
        if "f.x: third" in got:
            break
        time.sleep(0.1)
    assert "f.x: third" in got, got
    assert not any("remove auth" in line for line in nodes["A"].lines[mark:]), nodes["A"].lines[mark:]


def test_telnet_console_odd_input(abcd_telnet: tuple[dict[str, NodeProc], int]) -> None:
    _, port = abcd_telnet
    t = TelnetClient(port)
    t.read_until_prompt()
    assert "a line over 4096 bytes is not run" in t.command("show subs " + "L" * 6000)  # not run cut
    assert "unknown command 'show bogus'" in t.command("show bogus")
    assert "no parameter 'bogus_param'" in t.command("configure parameter bogus_param xyz")  # a typo, not kept
    assert "idle_busy = 16" in t.command("configure parameter idle_busy 16")
    t.sock.sendall(b"rpc nobody.listens m\r\n")
    echoed = b""
    while b"\r\n" not in echoed:  # the line echoed: the rpc runs, waiting 2 s for a reply
        echoed += t.sock.recv(4096)
    started = time.monotonic()
    t.sock.sendall(b"cancel\r\n")  # ends the wait now, not after it
    out = t.read_until_prompt()
    assert re.search(r"waiting\W+replies\W+expected", out) and "nobody.listens" in out, out
    assert time.monotonic() - started < 1.5


def test_cancel_with_nothing_waiting_gives_the_prompt_back(ab_telnet_web: tuple[dict[str, NodeProc], int, str]) -> None:
    """`cancel` runs as it arrives (not behind what it cancels); with nothing running,
    no command's end wrote the prompt after it and the console seemed to hang."""
    _, port, _ = ab_telnet_web
    a = TelnetClient(port)
    a.read_until_prompt()
    assert "waiting" in a.command("cancel", timeout=5)
    assert a.prompt.endswith(b"> ")
    assert "link_ab" in a.command("show ports", timeout=5)  # and the next command still answers
