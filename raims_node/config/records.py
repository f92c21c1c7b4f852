"""The typed records of a configuration tree: services, users, groups, transports,
startup, and the tree itself (manual "Configuration", "Networking"). Loading and saving
them is tree.py's; this module only holds what was loaded and types its route values.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raims_node.config.errors import ConfigError
from raims_node.config.params import Parameters, parse_bool, parse_count, parse_time
from raims_node.config.yamlsrc import as_text

NUM_PATHS = 4
DEFAULT_COST = 1000
_NUMBERED = re.compile(r"^(listen|connect|cost)([2-9]|[1-9][0-9]+)$")


@dataclass(frozen=True, slots=True)
class Loc:
    """Where a record came from, for error messages."""

    source: str = ""
    line: int = 0

    def error(self, message: str, fld: str = "") -> ConfigError:
        return ConfigError(message, self.source, self.line, fld)


@dataclass(frozen=True)
class UserConfig:
    user: str
    svc: str
    create: str
    pub: str
    pri: str | None = None
    expires: str | None = None
    revoke: str | None = None
    loc: Loc = field(default=Loc(), compare=False, repr=False)

    def to_dict(self, include_pri: bool = True) -> dict[str, str]:
        out = {"user": self.user, "svc": self.svc, "create": self.create}
        for name in ("expires", "revoke"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if include_pri and self.pri is not None:
            out["pri"] = self.pri
        out["pub"] = self.pub
        return out


@dataclass(frozen=True)
class ServiceConfig:
    svc: str
    create: str
    pub: str
    pri: str | None = None
    users: Mapping[str, str] = field(default_factory=dict)  # user -> service signature
    revoke: Mapping[str, str] = field(default_factory=dict)
    loc: Loc = field(default=Loc(), compare=False, repr=False)

    def to_dict(self, include_pri: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"svc": self.svc, "create": self.create}
        if include_pri and self.pri is not None:
            out["pri"] = self.pri
        out["pub"] = self.pub
        if self.users:
            out["users"] = dict(self.users)
        if self.revoke:
            out["revoke"] = dict(self.revoke)
        return out


@dataclass(frozen=True)
class GroupConfig:
    group: str
    users: tuple[str, ...] = ()
    loc: Loc = field(default=Loc(), compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {"group": self.group, "users": list(self.users)}


def substitute_hosts(address: str, hosts: Mapping[str, str]) -> str:
    """Replace host names by their `hosts` address, keeping any `:port` and PGM parts."""
    if not hosts:
        return address

    def one(token: str) -> str:
        if token in hosts:
            return hosts[token]
        host, sep, port = token.rpartition(":")
        if sep and host in hosts and port.isdigit():
            return f"{hosts[host]}:{port}"
        return token

    return re.sub(r"[^;,]+", lambda m: one(m.group(0)), address)


@dataclass(frozen=True)
class TransportConfig:
    """A transport record; route values as written, typed by the accessors."""

    tport: str
    type: str
    route: Mapping[str, Any] = field(default_factory=dict)
    hosts: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    loc: Loc = field(default=Loc(), compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {"tport": self.tport, "type": self.type, "route": dict(self.route)}

    def _numbered(self, name: str) -> list[Any]:
        values: list[Any] = []
        first = self.route.get(name)
        if first is not None:
            values.extend(first if isinstance(first, list) else [first])
        numbered = sorted(
            (int(m.group(2)), key) for key in self.route if (m := _NUMBERED.match(key)) and m.group(1) == name
        )
        values.extend(self.route[key] for _, key in numbered)
        return values

    def _addresses(self, name: str) -> list[str]:
        return [substitute_hosts(as_text(v), self.hosts) for v in self._numbered(name)]

    @property
    def listen(self) -> list[str]:
        """Listen addresses with hosts substituted (empty when not configured)."""
        return self._addresses("listen")

    @property
    def connect(self) -> list[str]:
        """connect, connect2, ... (or a list) with hosts substituted."""
        return self._addresses("connect")

    @property
    def port(self) -> int | None:
        value = self.route.get("port")
        return None if value is None else parse_count(value)

    @property
    def cost(self) -> tuple[int, int, int, int]:
        """The cost of each of the 4 equal-cost paths."""
        costs = [parse_count(v) for v in self._numbered("cost")][:NUM_PATHS]
        if not costs:
            return (DEFAULT_COST,) * NUM_PATHS  # type: ignore[return-value]
        costs += [costs[0]] * (NUM_PATHS - len(costs))
        return (costs[0], costs[1], costs[2], costs[3])

    @property
    def timeout(self) -> float | None:
        value = self.route.get("timeout")
        return None if value is None else parse_time(value)

    @property
    def noencrypt(self) -> bool | None:
        """None when not set: the `tcp_noencrypt` parameter decides."""
        value = self.route.get("noencrypt")
        return None if value is None else parse_bool(value)

    @property
    def edge(self) -> bool:
        return parse_bool(self.route.get("edge", False))

    @property
    def device(self) -> str | None:
        value = self.route.get("device")
        return None if value is None else as_text(value)

    def flag(self, name: str, default: bool = False) -> bool:
        value = self.route.get(name)
        return default if value is None else parse_bool(value)

    def number(self, name: str, default: int | None = None) -> int | None:
        value = self.route.get(name)
        return default if value is None else parse_count(value)

    def text(self, name: str, default: str | None = None) -> str | None:
        value = self.route.get(name)
        return default if value is None else as_text(value)


@dataclass(frozen=True)
class Startup:
    listen: tuple[str, ...] = ()
    connect: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        if self.listen:
            out["listen"] = list(self.listen)
        if self.connect:
            out["connect"] = list(self.connect)
        return out


@dataclass(frozen=True)
class ConfigTree:
    services: tuple[ServiceConfig, ...] = ()
    users: tuple[UserConfig, ...] = ()
    transports: tuple[TransportConfig, ...] = ()
    groups: tuple[GroupConfig, ...] = ()
    parameters: Parameters = field(default_factory=Parameters)
    startup: Startup = field(default_factory=Startup)
    hosts: Mapping[str, str] = field(default_factory=dict)
    # where relative `salt`/`pass` files are found; not part of equality
    base_dir: Path | None = field(default=None, compare=False)
    sources: tuple[str, ...] = field(default=(), compare=False)

    def service(self, name: str | None = None) -> ServiceConfig:
        """The named service, or the only one when name is None."""
        if name is None:
            if len(self.services) != 1:
                names = ", ".join(s.svc for s in self.services) or "none"
                raise ConfigError(f"expected one service, configured: {names}")
            return self.services[0]
        for svc in self.services:
            if svc.svc == name:
                return svc
        raise ConfigError(f"service {name!r} is not configured", field="services")

    def user(self, name: str, svc: str | None = None) -> UserConfig:
        for u in self.users:
            if u.user == name and (svc is None or u.svc == svc):
                return u
        where = f" of service {svc!r}" if svc else ""
        raise ConfigError(f"user {name!r}{where} is not configured", field="users")

    def transport(self, name: str) -> TransportConfig:
        for t in self.transports:
            if t.tport == name:
                return t
        raise ConfigError(f"transport {name!r} is not configured", field="transports")

    def to_dict(self) -> dict[str, Any]:
        """The single-file form (what `ms_gen_key -o` writes); `from_dict` reads it back."""
        out: dict[str, Any] = {}
        if self.services:
            out["services"] = [s.to_dict() for s in self.services]
        if self.users:
            out["users"] = [u.to_dict() for u in self.users]
        if self.groups:
            out["groups"] = [g.to_dict() for g in self.groups]
        if self.transports:
            out["transports"] = [t.to_dict() for t in self.transports]
        if self.parameters:
            out["parameters"] = self.parameters.to_dict()
        if self.startup.listen or self.startup.connect:
            out["startup"] = self.startup.to_dict()
        if self.hosts:
            out["hosts"] = dict(self.hosts)
        return out


# ---------------------------------------------------------------- building
