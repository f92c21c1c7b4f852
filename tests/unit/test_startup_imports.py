"""What `ms_server` loads before it listens (issue 23: launch to accept under 0.3 s,
bench/startup_bench.py): a node imports the bridge modules of the transports it runs,
the key-value map only for a map or a Redis transport, PGM only for a PGM transport."""

from __future__ import annotations

import subprocess
import sys

import raims_node.bridges as bridges
from raims_node.bridges.registry import CLIENT_PROTOCOLS, server_class

LAZY = ("raims_node.kv", "raims_node.bridges.redis", "raims_node.bridges.rv", "raims_node.bridges.ipc",
        "raims_node.transports.pgm")


def test_the_server_and_daemon_modules_leave_the_optional_parts_unloaded() -> None:
    code = ("import sys, raims_node.server, raims_node.daemon\n"
            f"print('\\n'.join(m for m in sys.modules if m.startswith({LAZY!r})))")
    loaded = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.split()
    assert loaded == [], f"imported before any transport starts: {loaded}"


def test_every_protocol_and_every_package_name_resolves() -> None:
    for kind in CLIENT_PROTOCOLS:
        assert server_class(kind).__name__ == CLIENT_PROTOCOLS[kind][1]
    for name in bridges.__all__:
        assert getattr(bridges, name) is not None
    assert sorted(bridges.__all__) == sorted(bridges._HOME)
