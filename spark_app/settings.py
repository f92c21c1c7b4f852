"""The rollout's settings: conf/rollout.yaml (see its comments), then command-line options.

Every value is checked here, before a Spark session starts, and a wrong one is a PlanError
naming the file, the key and what it must be: a `service` that is a list, `transports: 5`,
`messages: abc` or a negative timeout raised TypeError or ValueError with a traceback, or
(negative timeouts, `nodes_per_host: 0`, `observers: -3`) ran on as if it made sense.
Relative paths (lake, run_dir, keys_dir, a graph file) are relative to the driver's current
directory and made absolute, so every host uses the same run directory path. A graph file
is read and checked here too (missing, malformed, a link ms_server cannot run, cut off
nodes): found after the session started, it cost a Spark start and left a failed
`rollouts` row in the lake (of the current directory, by default).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

from raims_node.config.errors import ConfigError
from raims_node.config.keyset import check_name
from raims_node.linkstate import DEFAULT_COST
from spark_app.jobs import topology
from spark_app.jobs.errors import PlanError

BRIDGE_KINDS: Final = ("nats", "redis", "ipc")


@dataclass(frozen=True)
class Settings:
    service: str = "raims"
    topology: str = topology.MESH_TOPOLOGY  # "mesh", or a graph file
    nodes_per_host: int | None = None
    lake: str = "lake"
    keys_dir: str | None = None
    run_dir: str = "run"
    master: str | None = None
    mesh_cost: int = DEFAULT_COST
    ports: Mapping[str, int] = field(default_factory=dict)  # base ports: mesh, web, nats, redis
    bridges: tuple[str, ...] = BRIDGE_KINDS
    parameters: Mapping[str, Any] = field(default_factory=lambda: {"heartbeat": "1 sec"})
    start_timeout_s: float = 30.0
    converge_timeout_s: float = 60.0
    traffic_timeout_s: float = 30.0
    traffic_messages: int = 20
    keep_running: bool = False
    queries: bool = True
    observers: int | None = None  # nodes reporting the network views (None: all; see jobs.collect)


_TOP_KEYS: Final = ("service", "topology", "nodes_per_host", "lake", "keys_dir", "run_dir", "master",
                    "transports", "parameters", "timeouts", "traffic", "queries", "observers")
_TRANSPORT_KINDS: Final = ("mesh", "web", *BRIDGE_KINDS)
_TEXT_KEYS: Final = ("service", "topology", "lake", "keys_dir", "run_dir", "master")
_PATH_KEYS: Final = ("lake", "run_dir", "topology")
_TIMEOUTS: Final = {"start": "start_timeout_s", "converge": "converge_timeout_s", "traffic": "traffic_timeout_s"}


def _absolute(path: str) -> str:
    return path if "://" in path or path.startswith("dbfs:") else str(Path(path).resolve())


def _mapping(raw: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = raw.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{key}: must be a mapping, got {value!r}")
    return value


def _number(key: str, value: Any, kind: type, low: float, high: float | None = None) -> Any:
    """`value` as an int or float within [low, high]; bool and text are not numbers."""
    ok = isinstance(value, int | float) and not isinstance(value, bool) and (kind is float or isinstance(value, int))
    if not ok or value < low or (high is not None and value > high):
        what = "an integer" if kind is int else "a number"
        limits = f" from {low:g} to {high:g}" if high is not None else f" of at least {low:g}"
        raise ValueError(f"{key}: must be {what}{limits}, got {value!r}")
    return kind(value)


def _values(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The Settings fields `raw` (the YAML file's mapping) gives, checked."""
    unknown = sorted(set(raw) - set(_TOP_KEYS))
    transports = _mapping(raw, "transports")
    unknown += [f"transports.{k}" for k in sorted(set(transports) - set(_TRANSPORT_KINDS))]
    if unknown:
        raise ValueError(f"unknown key(s) {unknown} (known: {', '.join(_TOP_KEYS)})")
    values: dict[str, Any] = {k: raw[k] for k in (*_TEXT_KEYS, "nodes_per_host", "queries", "observers")
                              if raw.get(k) is not None}
    for kind, spec in transports.items():
        if spec is not None and not isinstance(spec, dict):
            raise ValueError(f"transports.{kind}: must be a mapping (port, cost) or empty, got {spec!r}")
    if "mesh" in transports:
        values["mesh_cost"] = _number("transports.mesh.cost", (transports["mesh"] or {}).get("cost", DEFAULT_COST),
                                      int, 1)
    if transports:
        values["ports"] = {k: _number(f"transports.{k}.port", (v or {}).get("port", 0), int, 0, 65535)
                           for k, v in transports.items()}
        values["bridges"] = tuple(k for k in BRIDGE_KINDS if k in transports)
        fixed = [(port, kind) for kind, port in values["ports"].items() if port]
        clash = sorted({f"{a} and {b} ({p})" for p, a in fixed for q, b in fixed if p == q and a < b})
        if clash:  # every node's transports would collide at start (base + node index alike)
            raise ValueError(f"transports: {', '.join(clash)} share a base port")
    if raw.get("parameters") is not None:
        values["parameters"] = _mapping(raw, "parameters")
    timeouts = _mapping(raw, "timeouts")
    unknown = sorted(set(timeouts) - set(_TIMEOUTS))
    if unknown:
        raise ValueError(f"timeouts: unknown key(s) {unknown} (known: {', '.join(_TIMEOUTS)})")
    for key, name in _TIMEOUTS.items():
        if key in timeouts:
            values[name] = _number(f"timeouts.{key}", timeouts[key], float, 0.001)
    traffic = _mapping(raw, "traffic")
    if set(traffic) - {"messages"}:
        raise ValueError(f"traffic: unknown key(s) {sorted(set(traffic) - {'messages'})} (known: messages)")
    if "messages" in traffic:
        values["traffic_messages"] = _number("traffic.messages", traffic["messages"], int, 0, 1_000_000)
    return values


def _check(values: dict[str, Any]) -> None:
    """The fields any source gives (file or command line), as Settings needs them."""
    for key in _TEXT_KEYS:
        if key in values and not isinstance(values[key], str):
            raise ValueError(f"{key}: must be text, got {values[key]!r}")
        if key in _PATH_KEYS and key in values and not values[key].strip():
            # '' was the current directory: the lake's tables written into it (the repository)
            raise ValueError(f"{key}: must be a path, got {values[key]!r}")
    if "service" in values:
        try:
            check_name(values["service"], "service")
        except ConfigError as exc:
            raise ValueError(f"service: {exc}") from None
    for key in ("nodes_per_host", "observers"):
        if key in values:
            values[key] = _number(key, values[key], int, 1)
    for key in ("queries", "keep_running"):
        if key in values and not isinstance(values[key], bool):
            raise ValueError(f"{key}: must be true or false, got {values[key]!r}")


def _yaml_error(exc: Exception) -> str:
    """PyYAML's error in one line with its place (its own message runs over six lines and
    points into "<unicode string>")."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        what = ": ".join(x for x in (exc.context, exc.problem) if x)
        return f", line {mark.line + 1}, column {mark.column + 1}: {what or type(exc).__name__}"
    return f": {' '.join(str(exc).split())}"


def load_settings(path: str | Path | None, **overrides: Any) -> Settings:
    """Settings from a rollout YAML file (None: the defaults), then `overrides` that are
    not None; PlanError naming the file and key for anything unknown or malformed."""
    where = f"rollout config {str(path)!r}" if path is not None else "rollout settings"
    raw: dict[str, Any] = {}
    if path is not None:
        try:
            raw = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        except OSError as exc:
            raise PlanError(f"{where}: {exc.strerror or exc}") from None
        except (UnicodeDecodeError, yaml.YAMLError) as exc:
            raise PlanError(f"{where}{_yaml_error(exc)}") from None
        if not isinstance(raw, dict):
            raise PlanError(f"{where} is not a mapping")
    try:
        values = _values(raw)
        values.update({k: v for k, v in overrides.items() if v is not None})
        _check(values)
    except ValueError as exc:
        raise PlanError(f"{where}: {exc}") from None
    for name in ("lake", "run_dir", "keys_dir"):
        if values.get(name):
            values[name] = _absolute(values[name])
    if values.get("topology", topology.MESH_TOPOLOGY) != topology.MESH_TOPOLOGY:
        values["topology"] = str(Path(values["topology"]).resolve())
        # what does not depend on the hosts (the file, its links, names, connectedness),
        # before a session starts and a failed run is recorded in the lake
        topology.make_plan(topology.read_graph(values["topology"]), 1, None, values["topology"])
    return Settings(**values)
