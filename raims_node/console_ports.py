"""Telnet and web transports by name, for the console's `listen T` and `shutdown T`
(the manual: `configure transport web type web port 8080 listen 127.0.0.1`, then
`listen web`).

Those transports serve consoles above the daemon (server.py starts them), and a
console's operator host (operator.py) cannot import what imports it; so server.py
gives the daemon its `ConsolePorts` (`Daemon.console_ports`), where the operator host
finds it.
"""

from __future__ import annotations

from typing import Protocol

CONSOLE_TYPES = ("telnet", "web")


class ConsolePorts(Protocol):
    async def start(self, name: str) -> list[str]:
        """Start telnet or web transport `name` (started already: as it is); its addresses."""
        ...

    async def stop(self, name: str) -> bool:
        """Stop it; False when it is not running."""
        ...

    def running(self) -> list[str]:
        """The names of those running (save's `startup: listen:`)."""
        ...

    def changed(self) -> None:
        """A transport was started or stopped from a console: rewrite the endpoints file
        (raims_node.client.endpoints), so a client finds what now listens."""
        ...
