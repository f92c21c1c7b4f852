"""Cabal configuration (seed 004 section 3.1.5): the ring order and, per node, its
number, type and addresses.

Two spellings of the same thing, chosen by the file's suffix:
- `.nb`, the seed's own rule file, read literally (one statement per `;`, `#` comments):

      define ring cell "hub1,hub2,hub3";
      define hub1 node;
      hub1. define id     cell 1;
      hub1. define type   cell "hub";                      # hub | spoke | source | sink
      hub1. define client cell "unix:///run/c/hub1.client";
      hub1. define server cell "unix:///run/c/hub1.server";

- anything else, YAML (or JSON): `{ring: [hub1, ...], nodes: {hub1: {id: 1, type: hub,
  client: ..., server: ...}}}`.

Addresses are `unix://<path>` or `tcp://<host>:<port>`; `tls://` is refused with a clear
error (no certificates here; a cabal on one host uses unix sockets, across hosts tcp).
Checks: every ring name is defined and every node is in the ring once; types are the
seed's four; hub and source nodes have a server address and a number 1..255, unique in
the cabal; hubs have a client address (other hubs' servers connect to it); spokes and
sinks may share number 0 and need no address.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml

from raims_node.msglog.errors import ConfigError
from raims_node.msglog.paths import check_name
from raims_node.msglog.state import MAX_ORIGIN


class NodeType(StrEnum):
    HUB = "hub"
    SPOKE = "spoke"
    SOURCE = "source"
    SINK = "sink"


@dataclass(frozen=True, slots=True)
class Address:
    scheme: str  # "unix" or "tcp"
    path: str = ""
    host: str = ""
    port: int = 0

    def __str__(self) -> str:
        return f"unix://{self.path}" if self.scheme == "unix" else f"tcp://{self.host}:{self.port}"


def parse_address(text: str) -> Address:
    scheme, sep, rest = text.partition("://")
    if not sep:
        raise ConfigError(f"address {text!r} has no scheme (unix:// or tcp://)")
    if scheme == "unix":
        if not rest:
            raise ConfigError(f"address {text!r} has no path")
        return Address("unix", path=rest)
    if scheme == "tcp":
        host, _, port = rest.rpartition(":")
        host = host.strip("[]")
        if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ConfigError(f"address {text!r} is not tcp://host:port")
        return Address("tcp", host=host, port=int(port))
    if scheme == "tls":
        raise ConfigError(f"address {text!r}: tls is not supported, use tcp:// or unix://")
    raise ConfigError(f"address {text!r}: unknown scheme {scheme!r}")


@dataclass(frozen=True, slots=True)
class NodeConf:
    name: str
    number: int
    type: NodeType
    client: Address | None = None
    server: Address | None = None


@dataclass(frozen=True, slots=True)
class Cabal:
    name: str
    ring: tuple[str, ...]
    nodes: Mapping[str, NodeConf]

    def node(self, name: str) -> NodeConf:
        try:
            return self.nodes[name]
        except KeyError:
            raise ConfigError(f"node {name!r} is not in cabal {self.name!r}") from None

    def ahead(self, name: str) -> list[NodeConf]:
        """The other nodes in ring order after `name` (circular)."""
        i = self.ring.index(name)
        return [self.nodes[n] for n in self.ring[i + 1 :] + self.ring[:i]]

    def behind(self, name: str) -> list[NodeConf]:
        """The other nodes in ring order before `name`, nearest first."""
        return list(reversed(self.ahead(name)))

    def by_number(self, number: int) -> NodeConf | None:
        for n in self.nodes.values():
            if n.number == number and number:
                return n
        return None


def build(cabal: str, ring: list[str], raw_nodes: Mapping[str, Mapping[str, Any]]) -> Cabal:
    check_name("cabal", cabal)
    nodes: dict[str, NodeConf] = {}
    for name, raw in raw_nodes.items():
        check_name("node name", name)
        try:
            number = int(raw.get("id", 0))
            ntype = NodeType(str(raw.get("type", "")))
        except ValueError as exc:
            raise ConfigError(f"node {name!r}: {exc}") from None
        if not 0 <= number <= MAX_ORIGIN:
            raise ConfigError(f"node {name!r}: id {number} is not in 0..{MAX_ORIGIN}")
        client = parse_address(str(raw["client"])) if raw.get("client") else None
        server = parse_address(str(raw["server"])) if raw.get("server") else None
        if ntype in (NodeType.HUB, NodeType.SOURCE):
            if server is None:
                raise ConfigError(f"node {name!r}: a {ntype} needs a server address")
            if number == 0:
                raise ConfigError(f"node {name!r}: a {ntype} needs a number 1..{MAX_ORIGIN}")
        if ntype is NodeType.HUB and client is None:
            raise ConfigError(f"node {name!r}: a hub needs a client address")
        nodes[name] = NodeConf(name, number, ntype, client, server)
    if len(set(ring)) != len(ring):
        raise ConfigError(f"cabal {cabal!r}: a node is in the ring twice")
    missing = [n for n in ring if n not in nodes]
    if missing:
        raise ConfigError(f"cabal {cabal!r}: ring names undefined node(s) {', '.join(missing)}")
    absent = [n for n in nodes if n not in ring]
    if absent:
        raise ConfigError(f"cabal {cabal!r}: node(s) {', '.join(absent)} not in the ring")
    seen: dict[int, str] = {}
    for n in nodes.values():
        if n.number:
            if n.number in seen:
                raise ConfigError(
                    f"cabal {cabal!r}: nodes {seen[n.number]!r} and {n.name!r} share number {n.number}"
                )
            seen[n.number] = n.name
    return Cabal(cabal, tuple(ring), nodes)


_STATEMENT = re.compile(
    r"""^(?:(?P<owner>[A-Za-z0-9_.-]+?)\.\s+)?define\s+(?P<name>[A-Za-z0-9_.-]+)\s+
        (?P<what>cell|node)\s*(?P<value>.*)$""",
    re.X | re.S,
)


def parse_nb(cabal: str, text: str) -> Cabal:
    """The seed's `agent/cabal.nb` rule file."""
    lines = [ln.split("#", 1)[0] for ln in text.splitlines()]
    ring: list[str] | None = None
    nodes: dict[str, dict[str, Any]] = {}
    for stmt in "\n".join(lines).split(";"):
        stmt = " ".join(stmt.split())
        if not stmt:
            continue
        m = _STATEMENT.match(stmt)
        if m is None:
            raise ConfigError(f"cabal {cabal!r}: cannot read statement {stmt!r}")
        owner, name, what, value = m["owner"], m["name"], m["what"], m["value"].strip()
        if what == "node":
            if owner is not None or value:
                raise ConfigError(f"cabal {cabal!r}: unexpected {stmt!r}")
            nodes.setdefault(name, {})
            continue
        parsed: Any
        if value.startswith('"') and value.endswith('"') and len(value) >= 2:
            parsed = value[1:-1]
        elif re.fullmatch(r"-?\d+", value):
            parsed = int(value)
        else:
            raise ConfigError(f"cabal {cabal!r}: bad cell value in {stmt!r}")
        if owner is None:
            if name != "ring":
                raise ConfigError(f"cabal {cabal!r}: unknown top-level cell {name!r}")
            ring = [n.strip() for n in str(parsed).split(",") if n.strip()]
        else:
            if owner not in nodes:
                raise ConfigError(
                    f"cabal {cabal!r}: {owner!r} is used before 'define {owner} node'"
                )
            if name not in ("id", "type", "client", "server"):
                raise ConfigError(f"cabal {cabal!r}: node {owner!r}: unknown cell {name!r}")
            nodes[owner][name] = parsed
    if ring is None:
        raise ConfigError(f"cabal {cabal!r}: no 'define ring cell \"...\"'")
    return build(cabal, ring, nodes)


def parse_mapping(cabal: str, raw: object) -> Cabal:
    if not isinstance(raw, dict) or not isinstance(raw.get("ring"), list):
        raise ConfigError(f"cabal {cabal!r}: expected a mapping with 'ring' (a list) and 'nodes'")
    nodes = raw.get("nodes") or {}
    if not isinstance(nodes, dict) or not all(isinstance(v, dict) for v in nodes.values()):
        raise ConfigError(f"cabal {cabal!r}: 'nodes' must map names to mappings")
    return build(cabal, [str(n) for n in raw["ring"]], nodes)


def load(cabal: str, path: str | Path) -> Cabal:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read cabal configuration {p}: {exc.strerror}") from None
    if p.suffix == ".nb":
        return parse_nb(cabal, text)
    try:
        raw = json.loads(text) if p.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise ConfigError(f"cabal configuration {p}: {exc}") from None
    return parse_mapping(cabal, raw)


def to_nb(cabal: Cabal) -> str:
    """The seed's rule-file text for a cabal (tests and examples write configs with it)."""
    out = [f'define ring cell "{",".join(cabal.ring)}";']
    for name in cabal.ring:
        n = cabal.nodes[name]
        out.append(f"define {name} node;")
        out.append(f"{name}. define id cell {n.number};")
        out.append(f'{name}. define type cell "{n.type}";')
        if n.client is not None:
            out.append(f'{name}. define client cell "{n.client}";')
        if n.server is not None:
            out.append(f'{name}. define server cell "{n.server}";')
    return "\n".join(out) + "\n"
