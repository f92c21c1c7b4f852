"""The configuration tree: load a config directory, one YAML/JSON file or stdin, and save.

Implements the manual's "Configuration", "Single File Configuration", "Parameters",
"Startup" and "Hosts" sections and the transport records of "Networking" (seed 000).
The sources load into one typed, validated `ConfigTree`:

    services:   [{svc, create, pri, pub, users: {user: signature}, revoke: {...}}]
    users:      [{user, svc, create, expires, revoke, pri, pub}]
    transports: [{tport, type, route: {listen, connect, port, cost, ...}}]
    groups:     [{group, users: [...]}]
    parameters: {name: value}   (or the same fields bare at the top level)
    startup:    {listen: [...], connect: [...]}
    hosts:      {name: address}
    include:    "*.yaml"        (relative to the including file)

Decisions where the manual is vague:
- A directory loads its `config.yaml` (which `ms_gen_key` writes as `include: "*.yaml"`);
  a directory without one loads as if it had that file. Every file loads at most once,
  so `*.yaml` may match the including file itself.
- A top-level mapping with a `tport` key is one transport record (the manual's
  tport_*.yaml files); with `user` and `svc` a user; with `svc` a service; with
  `group` a group. Otherwise its keys are sections, and any other key whose value is
  not a mapping is a parameter.
- Later definitions win for parameters, hosts and transports of the same name (so the
  files written by `save` override older ones); a user or service defined twice with
  different content is an error, since it holds keys.
- `listen`/`connect` given as parameters are startup entries (the manual's table
  lists them among the parameters) and are merged into `startup`.
- Route values keep what was written; accessors type them. `connect`, `connect2`, ...
  (or a list) give the connect addresses in order; `cost` (a number or a list of up to
  four) and `cost2`..`cost4` give the four path costs, a missing one taking `cost`.
  Hosts names are substituted in listen/connect (also per `;`/`,` part of a PGM
  address and before a `:port`) by the accessors; the raw value is what is saved.
- `save` writes only the files whose content changes and reports each as the manual's
  console does ("update file A/param.yaml -- parameter config").
"""

from __future__ import annotations

import glob
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import yaml

from raims_node.config.errors import ConfigError
from raims_node.config.params import (
    Parameters,
    ParamValue,
    parse_bool,
    parse_count,
    parse_time,
    validate,
)
from raims_node.config.records import (
    _NUMBERED,
    NUM_PATHS,
    ConfigTree,
    GroupConfig,
    Loc,
    ServiceConfig,
    Startup,
    TransportConfig,
    UserConfig,
    substitute_hosts,
)
from raims_node.config.yamlsrc import as_text, line_of, parse_text
from raims_node.linkstate.records import MAX_COST, MIN_COST

CONFIG_FILE = "config.yaml"
DEFAULT_INCLUDE = "*.yaml"
PARAM_FILE = "param.yaml"
STARTUP_FILE = "startup.yaml"
MAX_INCLUDE_FILES = 10_000
MAX_PORT = 0xFFFF
TRANSPORT_TYPES = ("pgm", "mesh", "tcp", "rv", "nats", "redis", "ipc", "telnet", "web", "name")
SECTIONS = ("services", "users", "transports", "groups", "parameters", "startup", "hosts", "include")

_USER_FIELDS = ("user", "svc", "create", "expires", "revoke", "pri", "pub")
_SERVICE_FIELDS = ("svc", "create", "pri", "pub", "users", "revoke")
_TPORT_FIELDS = ("tport", "type", "route")
_GROUP_FIELDS = ("group", "users")

# Route fields whose values are checked at load time, by kind.
_ROUTE_BOOL = frozenset({
    "noencrypt", "edge", "use_service_prefix", "no_permanent", "no_mcast", "no_fakeip",
    "ipv4only", "ipv6only",
})
_ROUTE_COUNT = frozenset({"mtu", "txw_sqns", "rxw_sqns", "mcast_loop"})
_ROUTE_TIME = frozenset({"timeout", "txw_secs"})

def _text(value: object, loc: Loc, fld: str, required: bool = True) -> str | None:
    if value is None:
        if required:
            raise loc.error("missing value", fld)
        return None
    if isinstance(value, dict | list):
        raise loc.error(f"expected a string, got a {'mapping' if isinstance(value, dict) else 'list'}", fld)
    return as_text(value)


def _req(value: object, loc: Loc, fld: str) -> str:
    out = _text(value, loc, fld)
    assert out is not None
    if not out:
        raise loc.error("must not be empty", fld)
    return out


class _Builder:
    def __init__(self) -> None:
        self.services: dict[str, ServiceConfig] = {}
        self.users: dict[tuple[str, str], UserConfig] = {}
        self.transports: dict[str, TransportConfig] = {}
        self.groups: dict[str, GroupConfig] = {}
        self.params: dict[str, ParamValue] = {}
        self.listen: list[str] = []
        self.connect: list[str] = []
        self.hosts: dict[str, str] = {}
        self.loaded: set[Path] = set()
        self.sources: list[str] = []

    # -- sources

    def add_file(self, path: Path, display: str, loc: Loc | None = None) -> None:
        resolved = path.resolve()
        if resolved in self.loaded:
            return
        if len(self.loaded) >= MAX_INCLUDE_FILES:
            raise (loc or Loc(display)).error(f"more than {MAX_INCLUDE_FILES} files included")
        self.loaded.add(resolved)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise (loc or Loc(display)).error(f"cannot read {display}: {exc.strerror}") from None
        except UnicodeDecodeError as exc:
            raise (loc or Loc(display)).error(f"{display} is not UTF-8 text (byte {exc.start}: "
                                              f"{exc.object[exc.start:exc.start + 1]!r})") from None
        self.add_text(text, display, path.parent)

    def add_text(self, text: str, source: str, base: Path | None) -> None:
        self.sources.append(source)
        for doc in parse_text(text, source):
            self.add_doc(doc, source, base)

    def add_doc(self, doc: object, source: str, base: Path | None) -> None:
        if isinstance(doc, list):
            for i, item in enumerate(doc):
                if not isinstance(item, dict):
                    raise ConfigError("expected a mapping", source, line_of(doc, i))
                self.add_doc(item, source, base)
            return
        if not isinstance(doc, dict):
            raise ConfigError("expected a mapping of configuration sections", source, getattr(doc, "line", 1))
        loc = Loc(source, getattr(doc, "line", 0))
        if "tport" in doc:
            self.add_transport(doc, loc)
        elif "user" in doc and "svc" in doc:
            self.add_user(doc, loc)
        elif "svc" in doc:
            self.add_service(doc, loc)
        elif "group" in doc:
            self.add_group(doc, loc)
        else:
            for key, value in doc.items():
                self.add_section(str(key), value, Loc(source, line_of(doc, key)), base)

    def add_section(self, key: str, value: object, loc: Loc, base: Path | None) -> None:
        if key in ("services", "users", "transports", "groups"):
            adder = {
                "services": self.add_service, "users": self.add_user,
                "transports": self.add_transport, "groups": self.add_group,
            }[key]
            records = value if isinstance(value, list) else [value]
            for i, rec in enumerate(records):
                rloc = Loc(loc.source, line_of(records, i) or loc.line)
                if not isinstance(rec, dict):
                    raise rloc.error(f"expected a {key[:-1]} record (a mapping)", key)
                adder(rec, Loc(loc.source, getattr(rec, "line", 0) or rloc.line))
        elif key == "parameters":
            if not isinstance(value, dict):
                raise loc.error("expected a mapping of parameters", key)
            for name, pval in value.items():
                self.add_param(str(name), pval, Loc(loc.source, line_of(value, name)))
        elif key == "startup":
            self.add_startup(value, loc)
        elif key == "hosts":
            if not isinstance(value, dict):
                raise loc.error("expected a mapping of host name to address", key)
            for name, addr in value.items():
                self.hosts[str(name)] = _req(addr, Loc(loc.source, line_of(value, name)), str(name))
        elif key == "include":
            self.add_include(value, loc, base)
        elif isinstance(value, dict):
            raise loc.error(f"unknown section (expected one of {', '.join(SECTIONS)} or a parameter)", key)
        else:
            self.add_param(key, value, loc)

    def add_include(self, value: object, loc: Loc, base: Path | None) -> None:
        patterns = value if isinstance(value, list) else [value]
        for pattern in patterns:
            pat = _req(pattern, loc, "include")
            root = base if base is not None else Path.cwd()
            full = root / pat
            if glob.has_magic(pat):
                matches = sorted(Path(p) for p in glob.glob(str(full)))
            elif full.exists():
                matches = [full]
            else:
                raise loc.error(f"included file {str(full)!r} does not exist", "include")
            for path in matches:
                if path.is_file():
                    self.add_file(path, _display(path), loc)

    # -- records

    @staticmethod
    def _check_fields(rec: Mapping[Any, Any], allowed: tuple[str, ...], loc: Loc, what: str) -> None:
        for key in rec:
            if key not in allowed:
                raise Loc(loc.source, line_of(rec, key)).error(
                    f"unknown {what} field (expected one of {', '.join(allowed)})", str(key)
                )

    @staticmethod
    def _at(rec: Mapping[Any, Any], key: str, loc: Loc) -> Loc:
        return Loc(loc.source, line_of(rec, key) or loc.line)

    def add_user(self, rec: Mapping[Any, Any], loc: Loc) -> None:
        self._check_fields(rec, _USER_FIELDS, loc, "user")
        at = self._at
        user = UserConfig(
            user=_req(rec.get("user"), at(rec, "user", loc), "user"),
            svc=_req(rec.get("svc"), at(rec, "svc", loc), "svc"),
            create=_req(rec.get("create"), at(rec, "create", loc), "create"),
            pub=_req(rec.get("pub"), at(rec, "pub", loc), "pub"),
            pri=_text(rec.get("pri"), at(rec, "pri", loc), "pri", required=False),
            expires=_text(rec.get("expires"), at(rec, "expires", loc), "expires", required=False),
            revoke=_text(rec.get("revoke"), at(rec, "revoke", loc), "revoke", required=False),
            loc=loc,
        )
        key = (user.svc, user.user)
        old = self.users.get(key)
        if old is not None and old != user:
            raise loc.error(f"user {user.user!r} of service {user.svc!r} is also defined at "
                            f"{old.loc.source}:{old.loc.line} with different keys", "user")
        self.users[key] = user

    def _signatures(self, value: object, loc: Loc, fld: str) -> dict[str, str]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise loc.error("expected a mapping of user name to signature", fld)
        return {str(k): _req(v, Loc(loc.source, line_of(value, k)), str(k)) for k, v in value.items()}

    def add_service(self, rec: Mapping[Any, Any], loc: Loc) -> None:
        self._check_fields(rec, _SERVICE_FIELDS, loc, "service")
        at = self._at
        svc = ServiceConfig(
            svc=_req(rec.get("svc"), at(rec, "svc", loc), "svc"),
            create=_req(rec.get("create"), at(rec, "create", loc), "create"),
            pub=_req(rec.get("pub"), at(rec, "pub", loc), "pub"),
            pri=_text(rec.get("pri"), at(rec, "pri", loc), "pri", required=False),
            users=self._signatures(rec.get("users"), at(rec, "users", loc), "users"),
            revoke=self._signatures(rec.get("revoke"), at(rec, "revoke", loc), "revoke"),
            loc=loc,
        )
        old = self.services.get(svc.svc)
        if old is not None and old != svc:
            raise loc.error(f"service {svc.svc!r} is also defined at {old.loc.source}:{old.loc.line} "
                            "with different keys", "svc")
        self.services[svc.svc] = svc

    def add_group(self, rec: Mapping[Any, Any], loc: Loc) -> None:
        self._check_fields(rec, _GROUP_FIELDS, loc, "group")
        name = _req(rec.get("group"), self._at(rec, "group", loc), "group")
        users = rec.get("users") or []
        uloc = self._at(rec, "users", loc)
        members = tuple(_req(u, uloc, "users") for u in (users if isinstance(users, list) else [users]))
        self.groups[name] = GroupConfig(name, members, loc)

    def add_transport(self, rec: Mapping[Any, Any], loc: Loc) -> None:
        self._check_fields(rec, _TPORT_FIELDS, loc, "transport")
        at = self._at
        name = _req(rec.get("tport"), at(rec, "tport", loc), "tport")
        ttype = _req(rec.get("type"), at(rec, "type", loc), "type")
        if ttype not in TRANSPORT_TYPES:
            raise at(rec, "type", loc).error(f"{ttype!r} is not a transport type ({' | '.join(TRANSPORT_TYPES)})",
                                             "type")
        route = rec.get("route") or {}
        if not isinstance(route, dict):
            raise at(rec, "route", loc).error("expected a mapping of route fields", "route")
        checked: dict[str, Any] = {}
        for key, value in route.items():
            checked[str(key)] = _check_route(str(key), value, Loc(loc.source, line_of(route, key)))
        self.transports[name] = TransportConfig(name, ttype, checked, loc=loc)

    def add_param(self, name: str, value: object, loc: Loc) -> None:
        try:
            checked = validate(name, value)
        except ConfigError as exc:
            raise loc.error(exc.reason, name) from None
        if name in ("listen", "connect"):
            self._add_startup(name, checked, loc)
            return
        self.params[name] = checked

    def _add_startup(self, name: str, value: object, loc: Loc) -> None:
        names = value if isinstance(value, list) else [value]
        target = self.listen if name == "listen" else self.connect
        for item in names:
            tport = _req(item, loc, name)
            if tport not in target:
                target.append(tport)

    def add_startup(self, value: object, loc: Loc) -> None:
        if not isinstance(value, dict):
            raise loc.error("expected a mapping with listen and connect", "startup")
        for key, names in value.items():
            kloc = Loc(loc.source, line_of(value, key))
            if key not in ("listen", "connect"):
                raise kloc.error("unknown startup field (expected listen or connect)", str(key))
            self._add_startup(key, names, kloc)

    def build(self, base_dir: Path | None) -> ConfigTree:
        hosts = dict(self.hosts)
        transports = tuple(
            TransportConfig(t.tport, t.type, t.route, hosts, t.loc) for t in self.transports.values()
        )
        return ConfigTree(
            services=tuple(self.services.values()),
            users=tuple(self.users.values()),
            transports=transports,
            groups=tuple(self.groups.values()),
            parameters=Parameters(self.params),
            startup=Startup(tuple(self.listen), tuple(self.connect)),
            hosts=hosts,
            base_dir=base_dir,
            sources=tuple(self.sources),
        )


def _check_route(key: str, value: object, loc: Loc) -> Any:
    if isinstance(value, dict):
        raise loc.error("expected a value, got a mapping", key)
    m = _NUMBERED.match(key)
    base = m.group(1) if m else key
    try:
        if base == "port":
            port = parse_count(value)
            if port > MAX_PORT:
                raise ConfigError(f"{value!r} is not a port number (0..{MAX_PORT})")
        elif base == "cost":
            items = value if isinstance(value, list) else [value]
            if len(items) > NUM_PATHS:
                raise ConfigError(f"{len(items)} costs given, at most {NUM_PATHS} paths")
            for item in items:
                if not MIN_COST <= parse_count(item) <= MAX_COST:  # else the link state refuses the link
                    raise ConfigError(f"{item!r} is not a cost ({MIN_COST}..{MAX_COST})")
        elif base in ("listen", "connect"):
            for item in value if isinstance(value, list) else [value]:
                if item is None or isinstance(item, list | dict):
                    raise ConfigError(f"{item!r} is not an address")
        elif base in _ROUTE_BOOL:
            parse_bool(value)
        elif base in _ROUTE_COUNT:
            parse_count(value)
        elif base in _ROUTE_TIME:
            parse_time(value)
    except ConfigError as exc:
        raise loc.error(exc.reason, key) from None
    if isinstance(value, list):
        return [as_text(v) if not isinstance(v, int | bool) else v for v in value]
    return value.text if hasattr(value, "text") else value


def _display(path: Path) -> str:
    """A path as the operator typed it (relative when under the current directory)."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


# ---------------------------------------------------------------- loading


def load_dir(directory: str | Path) -> ConfigTree:
    """Load a config directory: its config.yaml and what that includes."""
    d = Path(directory)
    if not d.is_dir():
        raise ConfigError(f"config directory {str(d)!r} does not exist")
    b = _Builder()
    main = d / CONFIG_FILE
    if main.is_file():
        b.add_file(main, str(main))
    else:
        b.add_include(DEFAULT_INCLUDE, Loc(str(d)), d)
    return b.build(d)


def load_file(path: str | Path) -> ConfigTree:
    """Load one YAML or JSON file (and what it includes)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file {str(p)!r} does not exist")
    b = _Builder()
    b.add_file(p, str(p))
    return b.build(p.parent)


def load_text(text: str, source: str = "<stdin>", base_dir: str | Path | None = None) -> ConfigTree:
    """Load configuration text (stdin for `-d -`); includes resolve against base_dir."""
    base = Path(base_dir) if base_dir is not None else None
    b = _Builder()
    b.add_text(text, source, base)
    return b.build(base)


def from_dict(data: Mapping[str, Any], source: str = "<dict>", base_dir: str | Path | None = None) -> ConfigTree:
    """Load a tree given as plain data (the single-file form)."""
    base = Path(base_dir) if base_dir is not None else None
    b = _Builder()
    b.sources.append(source)
    # round trip through JSON: copies the data and rejects what a file could not hold
    try:
        doc = json.loads(json.dumps(data))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"not configuration data: {exc}", source) from None
    b.add_doc(doc, source, base)
    return b.build(base)


def load(source: str | Path, stdin: TextIO | None = None) -> ConfigTree:
    """`-d` semantics: "-" reads stdin, a directory loads config.yaml, else one file.
    What the operating system refuses (a directory this user may not list, a file it may
    not read) is a ConfigError naming the path, as a missing file is."""
    if str(source) == "-":
        return load_text((stdin or sys.stdin).read(), "<stdin>")
    try:
        if Path(source).is_dir():
            return load_dir(source)
        return load_file(source)
    except OSError as exc:
        raise ConfigError(f"cannot read the configuration {str(exc.filename or source)!r}: {exc.strerror}") from None


# ---------------------------------------------------------------- saving


@dataclass(frozen=True, slots=True)
class FileOp:
    op: str  # "create file" / "update file"
    path: Path
    description: str

    def __str__(self) -> str:
        return f"{self.op} {self.path}  -- {self.description}"


def dump_yaml(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True, width=1 << 16)


def write_file(path: Path, content: str, description: str) -> FileOp | None:
    """Write `content` unless the file already holds it; the op done, or None."""
    existed = path.exists()
    if existed and path.read_text(encoding="utf-8") == content:
        return None
    tmp = path.with_name(path.name + ".new")
    tmp.write_text(content, encoding="utf-8")
    tmp.replace(path)
    return FileOp("update file" if existed else "create file", path, description)


def save(tree: ConfigTree, directory: str | Path) -> list[FileOp]:
    """Write param.yaml, startup.yaml and tport_<name>.yaml into directory."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    plan: list[tuple[Path, str, str]] = []
    if not (d / CONFIG_FILE).exists():
        plan.append((d / CONFIG_FILE, dump_yaml({"include": DEFAULT_INCLUDE}), "base include file"))
    if tree.parameters:
        plan.append((d / PARAM_FILE, dump_yaml({"parameters": tree.parameters.to_dict()}), "parameter config"))
    if tree.startup.listen or tree.startup.connect or (d / STARTUP_FILE).exists():  # emptied: saved empty
        plan.append((d / STARTUP_FILE, dump_yaml({"startup": tree.startup.to_dict()}), "startup config"))
    for t in tree.transports:
        plan.append((d / f"tport_{t.tport}.yaml", dump_yaml(t.to_dict()), "transport"))
    ops = [write_file(path, content, descr) for path, content, descr in plan]
    return [op for op in ops if op is not None]


__all__ = [
    "ConfigTree", "FileOp", "GroupConfig", "Loc", "ServiceConfig", "Startup", "TransportConfig",
    "UserConfig", "from_dict", "load", "load_dir", "load_file", "load_text", "save",
    "substitute_hosts",
]
