"""The web transport's pages, graph and digest authentication on a real process
(issue 23): wrong and right passwords, /healthz open, HTML tables of show commands,
the graph page drawn from the link-state database, and headless Chromium screenshots."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.integration.harness import CONVERGED, NodeProc, graph_config

USER, PASSWORD, REALM = "myuser", "mypassword", "realm@raims"


def _start_abc(tmp_path: Path, web_route: dict[str, str]) -> tuple[list[NodeProc], str]:
    """A, B and C on a line (costs 100 and 300), A serving the web transport with
    `web_route` added to its route; (the processes, A's web address)."""
    cfg, commands = graph_config(tmp_path, "node A B C\ntcp_link_ab A B : 100\ntcp_link_bc B C : 300\n")
    data = yaml.safe_load(cfg.read_text())
    for t in data["transports"]:
        if t["tport"] == "web":
            t["route"].update(web_route)
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))
    nodes: list[NodeProc] = []
    try:
        for command in commands:
            args = command.split()[1:]
            args[args.index("-d") + 1] = str(cfg)
            if args[args.index("-u") + 1] == "A":
                args += ["web.listen"]
            node = NodeProc(args[args.index("-u") + 1], args, tmp_path)
            nodes.append(node)
            if ".listen" in command:
                node.listening()
        for node in nodes:
            node.wait_for(CONVERGED.format(n=2), 30)
        return nodes, nodes[0].wait_for(r"web listening on (\S+)").group(1)
    except BaseException:
        for node in nodes:
            node.stop()
        raise


@pytest.fixture
def web_ab(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    nodes, addr = _start_abc(tmp_path, {"http_username": USER, "http_password": PASSWORD, "http_realm": REALM})
    try:
        yield f"http://{addr}", tmp_path
    finally:
        for node in nodes:
            node.stop()


def _opener(password: str, url: str) -> urllib.request.OpenerDirector:
    mgr = urllib.request.HTTPPasswordMgrWithDefaultRealm()
    mgr.add_password(None, url, USER, password)
    return urllib.request.build_opener(urllib.request.HTTPDigestAuthHandler(mgr))


def _get(url: str, password: str | None, headers: dict[str, str] | None = None) -> tuple[int, str]:
    opener = _opener(password, url) if password is not None else urllib.request.build_opener()
    try:
        with opener.open(urllib.request.Request(url, headers=headers or {}), timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


def test_digest_auth_refuses_a_wrong_password_and_admits_the_right_one(web_ab: tuple[str, Path]) -> None:
    base, _ = web_ab
    assert _get(base + "/?show%20peers", None)[0] == 401
    assert _get(base + "/?show%20peers", "wrong")[0] == 401
    status, body = _get(base + "/?show%20peers", PASSWORD)
    assert status == 200 and '"user"' in body and "B" in body
    assert _get(base + "/metrics", None)[0] == 401
    status, body = _get(base + "/metrics", PASSWORD)
    assert status == 200
    for name in ("no_route", "anycast", "inbox_false", "no_responders"):  # the point-to-point counters
        assert f'raims_{name}_total{{user="' in body, name
    assert _get(base + "/healthz", None)[0] == 200  # health checks stay open


def test_show_pages_and_the_graph(web_ab: tuple[str, Path]) -> None:
    base, _ = web_ab
    status, body = _get(base + "/show/peers", PASSWORD)
    assert status == 200 and "<table>" in body and "<th>user</th>" in body and "<td>B." in body
    status, body = _get(base + "/graph", PASSWORD)
    assert status == 200 and "<svg" in body
    for user in "ABC":
        assert f">{user}</text>" in body
    assert ">100</text>" in body and ">300</text>" in body  # the links' costs
    assert body.count("<line ") == 2
    status, body = _get(base + "/graph_nodes.html", PASSWORD)  # opens with the network's own graph
    assert status == 200 and "<textarea name='graph'" in body and "node A B C" in body and body.count("<line ") == 2
    pasted = "node X Y Z\ntcp_xy X Y : 7\nmesh_m X Y Z : 9\n"
    status, body = _get(base + "/graph_nodes.html?graph=" + urllib.parse.quote(pasted), PASSWORD)
    assert status == 200 and ">X</text>" in body and ">7</text>" in body and body.count("<line ") == 3
    status, body = _get(base + "/graph_nodes.html?graph=" + urllib.parse.quote("tcp_q A B\n"), PASSWORD)
    assert status == 200 and "class='err'" in body and "<svg" not in body  # why, not a drawing
    status, body = _get(base + "/index.html", PASSWORD)
    assert status == 200 and "/show/peers" in body
    assert "/show/match'" not in body  # it needs a subject: no link to an error page
    status, body = _get(base + "/show/bogus", PASSWORD)
    assert status == 400 and "class='err'" in body
    assert _get(base + "/nothing.html", PASSWORD)[0] == 404


def test_the_consoles_network_commands_answer_over_http(web_ab: tuple[str, Path]) -> None:
    """The manual: every console command is exposed on the http endpoint (a session of
    its own per request); die, quit and exit are not."""
    base, _ = web_ab
    status, body = _get(base + "/?ping", PASSWORD)
    pinged = {str(r["user"]).split(".")[0] for r in json.loads(body)}
    assert status == 200 and pinged == {"B", "C"}
    status, body = _get(base + "/?mping", PASSWORD)
    assert status == 200 and {str(r["user"]).split(".")[0] for r in json.loads(body)} == {"B", "C"}
    status, body = _get(base + "/?pub%20web.test%20hello", PASSWORD)
    assert status == 200 and json.loads(body)
    for line in ("die", "di%203", "qu", "exit"):  # abbreviated too: the command table decides
        status, body = _get(base + f"/?{line}", PASSWORD)
        assert status == 403 and "not run over HTTP" in body, line
    assert _get(base + "/?show%20peers", PASSWORD)[0] == 200  # the node lives on
    status, body = _get(base + "/?remote%20B%20show%20pubtype", PASSWORD)  # B's answer, when it comes
    assert status == 200 and "recv_count" in body, body


def test_http_does_not_write_files_nor_take_orders_from_other_sites(web_ab: tuple[str, Path]) -> None:
    base, tmp = web_ab
    target = tmp / "overwritten"
    for line in (f"wevents {target}", f"sub x.y {target}", f"psub x.> {target}", f"message.create {target} cab n 1",
                 f"message.prune {target} cab n 1 1s"):
        status, body = _get(base + "/?" + urllib.parse.quote(line), PASSWORD)
        assert status == 403 and ("writes a file" in body or "works on files" in body), (line, body)
    assert not target.exists()
    status, body = _get(base + "/?sub%20x.y", PASSWORD)  # nothing to subscribe for: said, not done
    assert status == 403 and "/ws" in body
    evil = {"Origin": "http://evil.example"}
    for line in ("pub%20web.test%20forged", "shutdown%20link_ab", "configure%20parameter%20heartbeat%201"):
        status, body = _get(base + f"/?{line}", PASSWORD, evil)
        assert status == 403 and "another site" in body, (line, body)
    assert _get(base + "/?pub%20web.test%20x", PASSWORD, {"Sec-Fetch-Site": "cross-site"})[0] == 403
    assert _get(base + "/?ping", PASSWORD, evil)[0] == 200  # reading and pinging change nothing
    assert _get(base + "/?show%20peers", PASSWORD, evil)[0] == 200
    host = base.split("://", 1)[1]
    assert _get(base + "/?pub%20web.test%20mine", PASSWORD, {"Origin": f"http://{host}"})[0] == 200
    assert _get(base + "/?sub%20" + "y" * 10_000, PASSWORD)[0] == 400  # one log line, no traceback (conftest)


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (make debs installs it)")
def test_headless_chromium_renders_the_graph_and_a_show_page(tmp_path: Path) -> None:
    nodes, addr = _start_abc(tmp_path, {})
    try:
        for page in ("graph", "show/peers"):
            shot = tmp_path / (page.replace("/", "_") + ".png")
            assert CHROMIUM is not None
            subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                            "--no-first-run", "--disable-background-networking", "--disable-component-update",
                            "--disable-sync", f"--user-data-dir={tmp_path / 'chrome'}",
                            "--window-size=800,800", f"--screenshot={shot}", f"http://{addr}/{page}"],
                           check=True, capture_output=True, timeout=60)
            png = shot.read_bytes()
            assert png.startswith(b"\x89PNG") and len(png) > 5_000  # a rendered page, not a blank one
    finally:
        for node in nodes:
            node.stop()
