"""Configuration parameters: the manual's defaults table and its value units.

Implements the "Parameters" section of the manual (seed 000). A parameter value is
kept as written (so that `save` writes back what the operator wrote) and read through
typed accessors that apply the unit rules and the defaults table.

Decisions where the manual is vague:
- Time values accept a number (seconds) or a number and a unit: ns, us, ms,
  s/sec/secs/second(s), m/min/mins/minute(s), h/hr/hrs/hour(s), d/day(s), with or
  without a space ("5 secs", "10sec", "1.5 min"). Units are case-insensitive.
- Byte values accept a number (bytes) or a number and a unit b, k/kb/kib, m/mb/mib,
  g/gb/gib, t/tb/tib, all powers of 1024 ("4 MB" = "4 mb" = 4194304): the manual
  calls 4 MB "4 megabyte" of window memory, which is sized in binary units.
- Booleans accept YAML booleans and true/false, yes/no, on/off, t/f, 1/0.
- `timestamp` must be LOCAL or GMT.
- Names not in the table are kept as strings (the manual adds any unsectioned field
  to the parameters), so later subsystems can read their own parameters.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType

from raims_node.config.errors import ConfigError
from raims_node.wire.stream import MAX_FRAME


class Kind(Enum):
    FILENAME = "filename"
    DIRNAME = "dirname"
    STRING = "string"
    ARRAY = "array"
    BYTES = "bytes"
    TIME = "time"
    BOOLEAN = "boolean"
    COUNT = "count"


@dataclass(frozen=True, slots=True)
class ParamSpec:
    name: str
    kind: Kind
    default: str | None
    description: str
    maximum: float | None = None  # in the kind's unit (seconds, bytes, a count); None: the kind's limit
    why_maximum: str = ""


# Past these a value is no setting anyone means, and it overflowed the wire's fields or
# the event loop's C integers at start (a 1e22-second heartbeat, a 1e22-byte high water).
KIND_MAXIMUM: Mapping[Kind, float] = MappingProxyType({
    Kind.TIME: 10 * 365 * 86400.0, Kind.BYTES: float(1 << 40), Kind.COUNT: float((1 << 31) - 1)})
MAX_HEARTBEAT_S = 3600  # peers ignore an announced interval above this (router/links.py)
MAX_PAYLOAD_LIMIT = MAX_FRAME - (1 << 17)  # a message, its subject and fields in one frame


# The manual's table, in its order.
MANUAL_PARAMETERS: tuple[ParamSpec, ...] = (
    ParamSpec("salt", Kind.FILENAME, None, "File to find encryption salt"),
    ParamSpec("pass", Kind.FILENAME, None, "File to find encryption password"),
    ParamSpec("salt_data", Kind.STRING, None, "Base 64 encoded encryption salt"),
    ParamSpec("pass_data", Kind.STRING, None, "Base 64 encoded encryption password"),
    ParamSpec("listen", Kind.ARRAY, None, "Startup listen transports"),
    ParamSpec("connect", Kind.ARRAY, None, "Startup connect transports"),
    ParamSpec("pub_window_size", Kind.BYTES, "4 MB", "Size of publish window"),
    ParamSpec("sub_window_size", Kind.BYTES, "8 MB", "Size of subscribe window"),
    ParamSpec("pub_window_time", Kind.TIME, "10 secs", "Time of publish window"),
    ParamSpec("sub_window_time", Kind.TIME, "10 secs", "Time of subscribe window"),
    ParamSpec("heartbeat", Kind.TIME, "10 secs", "Interval of heartbeat", MAX_HEARTBEAT_S,
              "peers ignore a longer heartbeat interval"),
    ParamSpec("reliability", Kind.TIME, "15 secs", "Time of publish reliability"),
    ParamSpec("timestamp", Kind.STRING, "LOCAL", "Log using local time or GMT"),
    ParamSpec("pid_file", Kind.STRING, None, "Daemon pid file"),
    ParamSpec("map_file", Kind.STRING, None, "Use for key value storage"),
    ParamSpec("db_num", Kind.STRING, None, "Default db number for key value"),
    ParamSpec("ipc_name", Kind.STRING, None, "Connect to IPC sockets"),
    ParamSpec("tcp_timeout", Kind.TIME, "10 secs", "Default timeout for TCP/mesh connect"),
    ParamSpec("tcp_ipv4only", Kind.BOOLEAN, "false", "Use IPv4 addressing only"),
    ParamSpec("tcp_ipv6only", Kind.BOOLEAN, "false", "Use IPv6 addressing only"),
    ParamSpec("tcp_noencrypt", Kind.BOOLEAN, "false", "Default for TCP/mesh encryption"),
    ParamSpec("tcp_write_timeout", Kind.TIME, "10 secs", "Timeout for TCP write"),
    ParamSpec("tcp_write_highwater", Kind.BYTES, "1 MB", "TCP write buffer size"),
    ParamSpec("idle_busy", Kind.COUNT, "16", "Busy wait loop count"),
    ParamSpec("working_directory", Kind.DIRNAME, None, "Switch to directory when in daemon mode"),
)
# Not in the manual's table, named in its style (issue 18: unauthenticated link sockets;
# tcp_keepalive: redis-server's `tcp-keepalive`, raims_node/keepalive.py).
HARDENING_PARAMETERS: tuple[ParamSpec, ...] = (
    ParamSpec("tcp_auth_timeout", Kind.TIME, "10 secs",
              "Close a TCP/mesh link not authenticated, or an RV client not past its handshake, in this time"),
    ParamSpec("tcp_pending_max", Kind.COUNT, "1024", "Inbound TCP/mesh links waiting to authenticate, at most"),
    ParamSpec("tcp_pending_per_host", Kind.COUNT, "64", "Of those, from one source address, at most"),
    ParamSpec("tcp_keepalive", Kind.TIME, "300 secs",
              "TCP keepalive idle time of NATS, Redis, RV, web and telnet clients (0 off)", 32767,
              "Linux's TCP_KEEPIDLE limit"),
)
# raims's own, after the manual's table (flow control, nats-server's lame duck names)
RAIMS_PARAMETERS: tuple[ParamSpec, ...] = (
    ParamSpec("max_payload", Kind.BYTES, "1 MB", "Largest message a NATS or Redis client may publish",
              MAX_PAYLOAD_LIMIT, "a message must fit one frame"),
    ParamSpec("lame_duck_duration", Kind.TIME, "120 secs", "SIGUSR2: close clients spread over this time"),
    ParamSpec("lame_duck_grace_period", Kind.TIME, "10 secs", "SIGUSR2: wait before closing clients"),
)
PARAMETERS: tuple[ParamSpec, ...] = MANUAL_PARAMETERS + HARDENING_PARAMETERS + RAIMS_PARAMETERS
PARAM_SPECS: Mapping[str, ParamSpec] = MappingProxyType({p.name: p for p in PARAMETERS})
TIMESTAMP_VALUES = ("LOCAL", "GMT")

_TIME_UNITS: Mapping[str, float] = MappingProxyType({
    "ns": 1e-9, "us": 1e-6, "ms": 1e-3,
    "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
    "m": 60.0, "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hr": 3600.0, "hrs": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
})
_BYTE_UNITS: Mapping[str, int] = MappingProxyType({
    "b": 1, "byte": 1, "bytes": 1,
    "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10,
    "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
    "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30,
    "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40,
})
_TRUE = frozenset({"true", "yes", "on", "t", "y", "1"})
_FALSE = frozenset({"false", "no", "off", "f", "n", "0"})
_NUMBER_UNIT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z]*)\s*$")

ParamValue = str | int | float | bool | list[str]


def _split(value: object, what: str) -> tuple[float, str]:
    if isinstance(value, bool):
        raise ConfigError(f"{value!r} is not a {what}")
    if isinstance(value, int | float):
        number, unit = float(value), ""
    elif isinstance(value, str):
        m = _NUMBER_UNIT.match(value)
        if m is None:
            raise ConfigError(f"{value!r} is not a {what}")
        number, unit = float(m.group(1)), m.group(2).lower()
    else:
        raise ConfigError(f"{value!r} is not a {what}")
    if not math.isfinite(number) or number < 0:
        raise ConfigError(f"{value!r} is not a {what}")
    return number, unit


def parse_time(value: object) -> float:
    """Seconds from "5 secs", "10 sec", "250ms", 3 (seconds), ..."""
    number, unit = _split(value, "time (e.g. '10 secs')")
    if not unit:
        return number
    scale = _TIME_UNITS.get(unit)
    if scale is None:
        raise ConfigError(f"{value!r}: unknown time unit {unit!r} (use one of {', '.join(_TIME_UNITS)})")
    return number * scale


def parse_bytes(value: object) -> int:
    """Bytes from "4 MB", "10 mb", "512k", 1024, ..."""
    number, unit = _split(value, "size (e.g. '4 MB')")
    scale = 1
    if unit:
        found = _BYTE_UNITS.get(unit)
        if found is None:
            raise ConfigError(f"{value!r}: unknown size unit {unit!r} (use one of {', '.join(_BYTE_UNITS)})")
        scale = found
    return int(number * scale)


def parse_bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        low = value.strip().lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
    raise ConfigError(f"{value!r} is not a boolean (true or false)")


def parse_count(value: object) -> int:
    if isinstance(value, bool):
        raise ConfigError(f"{value!r} is not a number")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and value.strip().isdigit():
        number = int(value.strip())
    else:
        raise ConfigError(f"{value!r} is not a number")
    if number < 0:
        raise ConfigError(f"{value!r} is negative")
    return number


def parse_array(value: object) -> list[str]:
    """A list of names; a single scalar is a list of one."""
    items = value if isinstance(value, list) else [value]
    out: list[str] = []
    for item in items:
        if isinstance(item, list | dict) or item is None:
            raise ConfigError(f"{item!r} is not a name")
        out.append(str(item))
    return out


def validate(name: str, value: object) -> ParamValue:
    """Check a parameter against the table; return the value to keep (as written)."""
    spec = PARAM_SPECS.get(name)
    if isinstance(value, dict):
        raise ConfigError("a parameter value cannot be a mapping")
    if spec is None:
        if isinstance(value, list):
            return parse_array(value)
        if value is None:
            raise ConfigError("missing value")
        return value if isinstance(value, str | int | float | bool) else str(value)
    if value is None:
        raise ConfigError("missing value")
    kind = spec.kind
    if kind is Kind.ARRAY:
        return parse_array(value)
    if kind in (Kind.TIME, Kind.BYTES, Kind.COUNT):
        number = parse_time(value) if kind is Kind.TIME else parse_bytes(value) if kind is Kind.BYTES \
            else parse_count(value)
        most = spec.maximum if spec.maximum is not None else KIND_MAXIMUM[kind]
        if number > most:
            unit = {Kind.TIME: " secs", Kind.BYTES: " bytes"}.get(kind, "")
            raise ConfigError(f"{value!r} is more than {most:.0f}{unit}"
                              + (f" ({spec.why_maximum})" if spec.why_maximum else ""))
    elif kind is Kind.BOOLEAN:
        parse_bool(value)
    else:
        if isinstance(value, list):
            raise ConfigError(f"{value!r} is not a {kind.value}")
        if name == "timestamp" and str(value).upper() not in TIMESTAMP_VALUES:
            raise ConfigError(f"{value!r} is not one of {', '.join(TIMESTAMP_VALUES)}")
        return str(value) if not isinstance(value, bool) else str(value).lower()
    assert isinstance(value, str | int | float | bool)
    return value


class Parameters(Mapping[str, ParamValue]):
    """The parameters section: values as written, read through typed accessors.

    Every accessor falls back to the manual's default when the name is not set.
    """

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, ParamValue] | None = None) -> None:
        checked: dict[str, ParamValue] = {}
        for name, value in (values or {}).items():
            try:
                checked[name] = validate(name, value)
            except ConfigError as exc:
                raise ConfigError(exc.reason, field=name) from None
        self._values = checked

    def __getitem__(self, name: str) -> ParamValue:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Parameters):
            return self._values == other._values
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._values)))

    def __repr__(self) -> str:
        return f"Parameters({self._values!r})"

    def _raw(self, name: str) -> object:
        if name in self._values:
            return self._values[name]
        spec = PARAM_SPECS.get(name)
        if spec is None or spec.default is None:
            raise ConfigError(f"parameter {name!r} is not set and has no default")
        return spec.default

    def time(self, name: str) -> float:
        return parse_time(self._raw(name))

    def size(self, name: str) -> int:
        return parse_bytes(self._raw(name))

    def flag(self, name: str) -> bool:
        return parse_bool(self._raw(name))

    def count(self, name: str) -> int:
        return parse_count(self._raw(name))

    def text(self, name: str) -> str | None:
        """A string parameter, its default, or None when neither exists."""
        if name in self._values:
            return str(self._values[name])
        spec = PARAM_SPECS.get(name)
        return None if spec is None else spec.default

    def names(self, name: str) -> list[str]:
        value = self._values.get(name)
        return [] if value is None else parse_array(value)

    def with_values(self, **changes: ParamValue) -> Parameters:
        merged = dict(self._values)
        merged.update(changes)
        return Parameters(merged)

    def to_dict(self) -> dict[str, ParamValue]:
        return dict(self._values)

    # The parameters the rest of raims reads most often.
    @property
    def heartbeat(self) -> float:
        return self.time("heartbeat")

    @property
    def reliability(self) -> float:
        return self.time("reliability")

    @property
    def tcp_noencrypt(self) -> bool:
        return self.flag("tcp_noencrypt")

    @property
    def tcp_timeout(self) -> float:
        return self.time("tcp_timeout")


def gmt_logs(params: Parameters) -> bool:
    """The `timestamp` parameter: GMT stamps log lines in UTC, LOCAL in the local zone."""
    return str(params.text("timestamp") or "LOCAL").upper() == "GMT"


def log_stamp(now: float, params: Parameters) -> str:
    """HH:MM:SS.mmm of `now` as the log lines show it."""
    parts = time.gmtime(now) if gmt_logs(params) else time.localtime(now)
    return f"{time.strftime('%H:%M:%S', parts)}.{int(now * 1000) % 1000:03d}"
