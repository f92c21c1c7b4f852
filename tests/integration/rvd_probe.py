"""Start `rvd` with no arguments and check it serves 7500 (RV) and 7580 (web).

    python -m tests.integration.rvd_probe DIR

DIR holds an `rvd` launcher and the `rv.yaml` beside it. Run by test_rvd.py inside a
network namespace of its own (`unshare -rn`, where it first brings `lo` up), so that
the fixed ports cannot collide with anything else on the machine; or directly when
the test found both ports free. Prints one JSON line: what it saw. The daemon it
started (it detaches, printing its pid) is ended with SIGHUP, as rvd is, and killed
if it does not go.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests.integration.rv_client import RvClient

RV_PORT, WEB_PORT = 7500, 7580


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")


def _show(words: str) -> str:
    """A console command through the web service's JSON (`GET /?show hosts`)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{WEB_PORT}/?{words.replace(' ', '+')}", timeout=5) as resp:
        return str(resp.read().decode())


async def _client(out: dict[str, Any]) -> bool:
    c = await RvClient.connect(RV_PORT)
    try:
        await c.listen("probe.subject")
        await c.publish("probe.subject", b"hello")
        ok = (await c.next(5, "probe.subject")).data == b"hello"
        loop = asyncio.get_running_loop()
        out["session"] = c.session
        out["show_hosts"] = await loop.run_in_executor(None, _show, "show hosts")
        out["show_rvsub"] = await loop.run_in_executor(None, _show, "show rvsub")
        return ok
    finally:
        await c.close()


def main(directory: str) -> int:
    out: dict[str, Any] = {}
    if "--lo" in sys.argv:
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    proc = subprocess.run([str(Path(directory) / "rvd")], cwd=directory, capture_output=True, text=True, timeout=30)
    out["launcher"] = proc.stdout + proc.stderr
    m = re.search(r"pid (\d+)", proc.stdout)
    if m is None:
        print(json.dumps(out))
        return 1
    pid = int(m.group(1))
    out["pid"] = pid
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # until the web answers (it starts after the RV listener)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{WEB_PORT}/", timeout=2) as resp:
                    out["web_status"] = resp.status
                break
            except urllib.error.HTTPError as exc:  # an answer all the same
                out["web_status"] = exc.code
                break
            except OSError:
                time.sleep(0.1)
        out["rv_client"] = asyncio.run(_client(out))
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGHUP)
        deadline = time.monotonic() + 10
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        out["exited_on_hup"] = not _alive(pid)
        if not out["exited_on_hup"]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
