"""The manual's console commands other than `show`, on real processes over telnet
(a sweep of the manual's help screen, 2026-11-27): `any S M` reaches one subscriber,
`remote U C` prints the answer under the command, `debug` takes flag names, and
`listen`, `shutdown` and `save` work for the telnet and web transports as the manual's
`configure transport web ...` / `listen web` example does."""

from __future__ import annotations

import asyncio
import re
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from nats.aio.msg import Msg

from tests.integration.harness import (
    CONVERGED,
    PYTHON,
    TELNET_TPORT,
    NodeProc,
    add_transports,
    graph_config,
    poll,
)
from tests.integration.test_console_telnet import TelnetClient

CHAIN = "node A B C\ntcp_link_ab A B : 100\ntcp_link_bc B C : 100\n"
NATS_TPORT = {"tport": "nats", "type": "nats", "route": {"listen": "127.0.0.1", "port": 0}}


@pytest.fixture(scope="module")
def chain_telnet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, TelnetClient]]:
    """A - B - C, each with a telnet console; C with a NATS listener too (one network for
    the module: each test uses subjects of its own)."""
    tmp_path = tmp_path_factory.mktemp("chain")
    cfg, commands = graph_config(tmp_path, CHAIN, web=False)
    add_transports(cfg, TELNET_TPORT, NATS_TPORT)
    nodes: list[NodeProc] = []
    try:
        for command in commands:
            args = command.split()[1:]
            args[args.index("-d") + 1] = str(cfg)
            args.insert(args.index("-t") + 1, "tel.listen")
            if args[args.index("-u") + 1] == "C":
                args.insert(args.index("-t") + 1, "nats.listen")
            nodes.append(NodeProc(args[args.index("-u") + 1], args, tmp_path))
        consoles = {}
        for node in nodes:
            node.wait_for(CONVERGED.format(n=2), 30)
            port = int(node.wait_for(r"telnet listening on [\d.]+:(\d+)").group(1))
            consoles[node.name] = TelnetClient(port)
            consoles[node.name].read_until_prompt()
        yield consoles
    finally:
        for node in nodes:
            node.stop()


def _received(console: TelnetClient, until: str, timeout: float = 10.0) -> list[str]:
    """The `sub` lines a console printed, up to and including the line `until`."""
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while until not in lines:
        assert time.monotonic() < deadline, f"no {until!r}; got {lines}"
        lines += [ln.strip() for ln in console.command("").splitlines() if ln.startswith("bar: ")]
    return lines


def test_any_reaches_one_subscriber_of_many(chain_telnet: dict[str, TelnetClient]) -> None:
    """The manual: "Randomly choose a subscription match for S and forward message M to
    that endpoint". B and C subscribe; every `any` from A reaches exactly one of them
    (it reached both, as `pub` does)."""
    a, b, c = chain_telnet["A"], chain_telnet["B"], chain_telnet["C"]
    for console in (b, c):
        console.command("sub bar")
    assert poll(lambda: len(re.findall(r"^\s*[BC]\.\d+\s*$", a.command("show match bar"), re.M)) == 2)
    sent = [f"bar: m{i}" for i in range(8)]
    for line in sent:
        assert "error" not in a.command(f"any bar {line[5:]}")
    a.command("pub bar end")  # multicast, behind the anycasts on the same links: to both
    got = _received(b, "bar: end") + _received(c, "bar: end")
    assert sorted(x for x in got if x != "bar: end") == sorted(sent), got


def test_remote_prints_the_answer_under_the_command(chain_telnet: dict[str, TelnetClient]) -> None:
    """The manual's example: `rem lee_a1 show pubtype` answers `from lee_a1.19:` and the
    table, before the next prompt (it came after the prompt, in the next command's output)."""
    a = chain_telnet["A"]
    out = a.command("remote C show pubtype")
    assert re.search(r"^from C\.\d+:\r?$", out, re.M), out
    assert re.search(r"type\W+recv_count\W+send_count", out), out
    assert "no peer named 'Z'" in a.command("remote Z show peers")


async def test_snap_writes_the_answer_to_its_file(chain_telnet: dict[str, TelnetClient], tmp_path: Path) -> None:
    """`rpc` and `snap S [F]` to a NATS responder two hops away, from a node with no NATS
    transport (the inbox was listened to outside `_nats.`, where the answer comes: no
    answer); snap's F gets the answer, as `sub S F` gets messages (F was ignored)."""
    import nats

    a, c = chain_telnet["A"], chain_telnet["C"]
    port = re.search(r"^\s*nats\S*\s*\|.*:(\d+)\s*$", await asyncio.to_thread(c.command, "show ports"), re.M)
    assert port, "no nats port"
    nc = await nats.connect(f"nats://127.0.0.1:{port.group(1)}")
    try:
        async def answer(msg: Msg) -> None:
            await msg.respond(b"snapped")

        await nc.subscribe("snapme", cb=answer)
        await nc.flush()
        out = tmp_path / "snap.txt"
        assert await asyncio.to_thread(poll, lambda: "_nats.snapme" in a.command("show subs"))
        assert re.search(r"_nats\._INBOX\S+\s*\|\s*snapped", await asyncio.to_thread(a.command, "rpc _nats.snapme x"))
        shown = await asyncio.to_thread(a.command, f"snap _nats.snapme {out}")
        assert "1 answer" in shown, shown
        assert re.fullmatch(r"_nats\._INBOX\S+: snapped\n", out.read_text()), out.read_text()
    finally:
        await nc.close()


def test_debug_takes_the_manuals_flag_names(chain_telnet: dict[str, TelnetClient]) -> None:
    """`debug tcp hb`: "either a mask or a list of strings" (refused as two arguments)."""
    a = chain_telnet["A"]
    assert "0x201" in a.command("debug tcp hb")
    assert "0x0" in a.command("debug 0")
    assert "nosuch" in a.command("debug tcp nosuch")


def _web_answers(addr: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://{addr}/healthz", timeout=5):
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


def test_listen_shutdown_and_save_a_web_transport(tmp_path: Path) -> None:
    """The manual: `configure transport web type web port 8080 listen 127.0.0.1`, `listen
    web` ("Transport (web) started listening"; it was refused: "ms_server starts ('tcp',
    ...) here"), and `save` writes startup.yaml with what is running (it wrote none), so
    the next start starts them; `shutdown web` closes it and a save drops it."""
    subprocess.run([PYTHON, "-m", "raims_node.config.gen_key", "-u", "A", "-s", "test", "-y"], cwd=tmp_path,
                   check=True, capture_output=True)
    config = tmp_path / "config"
    (config / "tport_tel.yaml").write_text(yaml.safe_dump(TELNET_TPORT))
    node = NodeProc("A", ["-d", str(config), "-u", "A.test", "-t", "tel.listen"], tmp_path)
    try:
        t = TelnetClient(int(node.wait_for(r"telnet listening on [\d.]+:(\d+)").group(1)))
        t.read_until_prompt()
        out = t.command("configure transport web type web port 0 listen 127.0.0.1")
        assert "error" not in out, out
        mark = len(node.lines)
        assert "error" not in (out := t.command("listen web")), out
        addr = node.wait_for(r"web listening on (\S+)", after=mark).group(1)
        assert _web_answers(addr)
        assert re.search(r"^\s*web\s*\|\s*web\s*\|.*running", t.command("show tport web"), re.M)
        assert "startup.yaml" in t.command("save")
        assert yaml.safe_load((config / "tport_web.yaml").read_text())["route"] == {"port": 0, "listen": "127.0.0.1"}
        assert yaml.safe_load((config / "startup.yaml").read_text()) == {"startup": {"listen": ["tel", "web"]}}
        assert "error" not in (out := t.command("shutdown web")), out
        assert not _web_answers(addr)
        assert "is not running" in t.command("shutdown web")
        t.command("save")
        assert yaml.safe_load((config / "startup.yaml").read_text()) == {"startup": {"listen": ["tel"]}}
        t.command("listen web")
        t.command("save")
    finally:
        node.stop()
    again = NodeProc("A2", ["-d", str(config), "-u", "A.test"], tmp_path)  # no -t: the saved startup
    try:
        again.wait_for(r"telnet listening on")
        assert _web_answers(again.wait_for(r"web listening on (\S+)").group(1))
    finally:
        again.stop()
