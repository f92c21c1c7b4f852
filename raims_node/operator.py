"""The daemon as an operator's console sees it (`console.session.ConsoleHost`): pings,
starting and stopping transports, joining networks, and the running configuration that
`configure` changes and `save` writes.

Kept apart from daemon.py, which runs the node; this module only adds what a person at
the console (stdin, a terminal, telnet) may ask of it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from raims_node.bridges.glue import parse_network
from raims_node.config.errors import ConfigError
from raims_node.config.params import Parameters
from raims_node.config.records import Startup, TransportConfig
from raims_node.config.tree import ConfigTree, save
from raims_node.console_ports import CONSOLE_TYPES
from raims_node.daemon import Daemon, DaemonError
from raims_node.router.node import Node

if TYPE_CHECKING:
    from raims_node.console.context import ConsoleContext

CONSOLE_BRIDGE = "console"


class OperatorHost:
    """`ConsoleHost` over a running `Daemon`; `config_dir` is where `save` writes."""

    def __init__(self, daemon: Daemon, config_dir: str | Path | None = None) -> None:
        self.daemon = daemon
        self.config_dir = Path(config_dir) if config_dir is not None else None

    # what the session reads
    @property
    def node(self) -> Node:
        return self.daemon.node

    @property
    def tree(self) -> ConfigTree:
        return self.daemon.tree

    def console_context(self) -> ConsoleContext:
        """What the show commands see: the daemon's own (its ports, log, names, flow and
        poll counters), one place for the console, the web and `rem`."""
        return self.daemon.console_context()

    def namespace_of(self, subject: str) -> str:
        """The client namespace prefix (`_nats.`) `subject` is in, or "" (console rpc).
        A bridge of this node names its own; else a first segment starting with `_` is
        taken for one of a bridge elsewhere (`rpc _nats.svc` from a node with no NATS
        transport: the responder's bridge answers on `_nats.<inbox>`)."""
        local = next((bus.prefix for bus in self.daemon.bridges.buses.values() if subject.startswith(bus.prefix)), "")
        head, dot, _ = subject.partition(".")
        return local or (head + "." if dot and head.startswith("_") and head != "_INBOX" else "")

    # local pub/sub
    def subscribe(self, owner: object, sid: str, subject: str, queue: str | None = None) -> None:
        self.daemon.subscribe(owner, sid, subject, queue)

    def psubscribe(self, owner: object, sid: str, pattern: str, syntax: str = "rv",
                   queue: str | None = None) -> None:
        self.daemon.psubscribe(owner, sid, pattern, syntax, queue)

    def unsubscribe(self, owner: object, sid: str) -> None:
        self.daemon.unsubscribe(owner, sid)

    def drop_owner(self, owner: object) -> None:
        self.daemon.drop_owner(owner)

    def publish(self, subject: str, payload: bytes, reply: str | None = None, headers: bytes | None = None,
                no_echo: object | None = None, opt: int = 0) -> int:
        return self.daemon.publish(subject, payload, reply, headers, no_echo, opt)

    # replies from peers
    def remote(self, user: str, command: str, owner: object) -> bool:
        """`remote U C`: the text comes back to `owner.on_deliver`; False when no peer
        has that user name."""
        node = self.daemon.node
        dest = next((b for b, p in node.peers.items() if p.user == user), None)
        if dest is None:
            return False
        self.daemon.apply(node.remote(dest, command, owner, time.time_ns()))
        return True

    def ping(self, user: str, owner: object, trace: bool) -> int | None:
        node = self.daemon.node
        dest = next((b for b, p in node.peers.items() if p.user == user and p.session_key), None)
        if dest is None:
            return None
        token, actions = node.ping(dest, owner, time.time_ns(), trace)
        self.daemon.apply(actions)
        return token

    def mping(self, path: int, owner: object) -> int:
        token, actions = self.daemon.node.mping(path, owner, time.time_ns())
        self.daemon.apply(actions)
        return token

    def cancel(self, token: int) -> None:
        self.daemon.node.cancel(token)

    # transports
    async def start_transport(self, name: str, listen: bool) -> object:
        """`listen T`, `connect T`: a telnet or web transport is served above the daemon
        (console_ports.py), the others by it."""
        ports = self.daemon.console_ports
        try:
            if ports is not None and name in {t.tport for t in self.daemon.tree.transports
                                              if t.type in CONSOLE_TYPES}:
                started: object = await ports.start(name)
            else:
                started = await self.daemon.start_transport(name, listen)
        except DaemonError as exc:
            raise RuntimeError(str(exc)) from None
        if ports is not None:
            ports.changed()
        return started

    async def stop_transport(self, name: str) -> bool:
        """Close transport `name`: its listeners, connectors, links or bridge clients."""
        d = self.daemon
        ports = d.console_ports
        if ports is not None and await ports.stop(name):
            ports.changed()
            return True
        run = d.running.pop(name, None)
        if run is None:
            return False
        for task in run.tasks:
            task.cancel()
        for server in run.servers:
            server.close()
        if run.bridge is not None:
            run.bridge.close()
        for link in [lk for lk in d.links.values() if lk.tport_id == run.tport_id]:
            link.close("shutdown")
        d.say(f"shutdown {name}")
        if ports is not None:
            ports.changed()
        return True

    async def join_network(self, service: str, network: str) -> str:
        try:
            parsed = parse_network(network)
            if parsed is None:
                raise ValueError(f"network {network!r} names no network")
            await self.daemon.bridges.join_network(CONSOLE_BRIDGE, service, parsed)
        except (ConfigError, DaemonError, ValueError) as exc:
            raise RuntimeError(str(exc)) from None
        return f"{service} {network}"

    # configuration
    def configure_transport(self, name: str, fields: Mapping[str, str]) -> None:
        tree = self.daemon.tree
        old = next((t for t in tree.transports if t.tport == name), None)
        # a number typed is a number, as the manual's `show` prints `port: 5000` (it saved '5000')
        route = {**(old.route if old else {}), **{k: int(v) if v.isdigit() else v for k, v in fields.items()
                                                  if k != "type"}}
        kind = fields.get("type") or (old.type if old else None)
        if kind is None:
            raise RuntimeError(f"configure transport {name}: a new transport needs `type <type>`")
        new = TransportConfig(name, kind, route, hosts=tree.hosts)
        others = tuple(t for t in tree.transports if t.tport != name)
        self.daemon.tree = dataclasses.replace(tree, transports=(*others, new))

    def configure_parameter(self, name: str, value: str) -> None:
        """Set a parameter the manual lists (a typo is refused, not kept and saved)."""
        from raims_node.config.params import PARAM_SPECS

        if name not in PARAM_SPECS:
            raise RuntimeError(f"no parameter {name!r}: the parameters are {', '.join(sorted(PARAM_SPECS))}")
        tree = self.daemon.tree
        try:
            params = Parameters({**tree.parameters.to_dict(), name: value})
        except ConfigError as exc:
            raise RuntimeError(f"parameter {name}: {exc}") from None
        self.daemon.tree = dataclasses.replace(tree, parameters=params)
        if name == "heartbeat":
            from raims_node.daemon import params_from

            with contextlib.suppress(ConfigError):  # announced from the next heartbeat (no flapping)
                self.daemon.node.set_heartbeat(params_from(self.daemon.tree).heartbeat_ns)

    def save(self) -> list[str]:
        """`save`: the running config as the startup config, its `startup:` the configured
        transports running now (the manual's example saves `listen mytran` so)."""
        if self.config_dir is None or not self.config_dir.is_dir():
            raise RuntimeError("save needs ms_server -d DIRECTORY (the config is not a directory)")
        d = self.daemon
        ports = d.console_ports
        configured = {t.tport for t in d.tree.transports}
        running = {n: r for n, r in d.running.items() if n in configured}
        startup = Startup(
            tuple([n for n, r in running.items() if not r.connect] + (ports.running() if ports else [])),
            tuple(n for n, r in running.items() if r.connect))
        d.tree = dataclasses.replace(d.tree, startup=startup)
        return [str(op) for op in save(d.tree, self.config_dir)]
