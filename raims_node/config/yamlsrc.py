"""Reading YAML and JSON configuration text with the line of every key.

Part of the manual's "Configuration" section (seed 000): configuration files are
YAML or JSON. Mappings load as `LineDict` and sequences as `LineList`, which remember
the 1-based line of each key or item, so that errors can say `file:line: field: ...`.

Decisions where the manual is vague:
- The manual writes `listen: *` unquoted, which YAML reads as an alias with no name
  (a syntax error). A value that is exactly `*` is read as the string "*"; no valid
  YAML document changes meaning by this.
- Plain (unquoted) floats keep their text, so `create: 1663653977.579093187` is not
  rounded by a float conversion when it is read as a string.
- JSON text (it starts with `{` or `[`) may be indented with tabs; JSON forbids raw
  tabs inside strings, so replacing them with spaces before the YAML parser sees them
  cannot change a value.
- A key repeated in one mapping is an error rather than "last one wins".
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from raims_node.config.errors import ConfigError


class LineDict(dict[Any, Any]):
    """A mapping that knows the line of each of its keys (0 when unknown)."""

    line = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lines: dict[Any, int] = {}


class LineList(list[Any]):
    """A sequence that knows the line of each of its items (0 when unknown)."""

    line = 0

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.lines: list[int] = []


class RawFloat(float):
    """A float read from plain YAML text, keeping that text."""

    text: str

    def __new__(cls, value: float, text: str) -> RawFloat:
        obj = super().__new__(cls, value)
        obj.text = text
        return obj


def line_of(container: object, key: object) -> int:
    """Line of `key` in a LineDict (or index in a LineList); 0 when unknown."""
    if isinstance(container, LineDict):
        return container.lines.get(key, container.line)
    if isinstance(container, LineList) and isinstance(key, int) and 0 <= key < len(container.lines):
        return container.lines[key]
    return getattr(container, "line", 0)


class _Loader(yaml.SafeLoader):
    pass


def _construct_map(loader: _Loader, node: yaml.MappingNode) -> LineDict:
    loader.flatten_mapping(node)
    out = LineDict()
    out.line = node.start_mark.line + 1
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        if isinstance(key, dict | list):  # YAML's complex keys ("? {a: b}"): no config has them
            raise ConfigError(f"a {type(key).__name__.removeprefix('Line').lower()} cannot be a key", line=line)
        if key in out:
            raise ConfigError(f"key {key!r} repeated (first on line {out.lines[key]})", line=line, field=str(key))
        out[key] = loader.construct_object(value_node, deep=True)
        out.lines[key] = line
    return out


def _construct_seq(loader: _Loader, node: yaml.SequenceNode) -> LineList:
    out = LineList()
    out.line = node.start_mark.line + 1
    for item in node.value:
        out.append(loader.construct_object(item, deep=True))
        out.lines.append(item.start_mark.line + 1)
    return out


def _construct_float(loader: _Loader, node: yaml.ScalarNode) -> float:
    value = yaml.SafeLoader.construct_yaml_float(loader, node)
    return RawFloat(value, str(node.value)) if node.style is None else value


_Loader.add_constructor("tag:yaml.org,2002:map", _construct_map)
_Loader.add_constructor("tag:yaml.org,2002:seq", _construct_seq)
_Loader.add_constructor("tag:yaml.org,2002:float", _construct_float)

_BARE_STAR = re.compile(r"^(\s*(?:-\s+)?[^\s#:][^#:]*:\s+|\s*-\s+)\*(\s*(?:#.*)?)$", re.MULTILINE)


def parse_text(text: str, source: str) -> list[object]:
    """All documents in `text` (YAML or JSON), with line information."""
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        text = text.replace("\t", " ")
    else:
        text = _BARE_STAR.sub(r'\1"*"\2', text)
    try:
        return [doc for doc in yaml.load_all(text, Loader=_Loader) if doc is not None]
    except ConfigError as exc:
        raise ConfigError(exc.reason, source, exc.line, exc.field) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 0
        raise ConfigError(f"{exc.problem or exc.context}", source, line) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"not YAML or JSON: {exc}", source) from None
    except RecursionError:
        raise ConfigError("nested too deeply to be a configuration", source) from None


def as_text(value: object) -> str:
    """A scalar as the string it was written as."""
    if isinstance(value, RawFloat):
        return value.text
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
