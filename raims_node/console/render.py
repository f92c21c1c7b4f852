"""Renderers of a `CommandResult`: the console's table, and JSON for the web and Spark.

The table follows the manual's console output ("The Show Commands"):

       user   |     tport   | cost
    ----------+-------------+-----
     pic_a2.1 | pic_amesh.2 | 1000
              | pic_amesh.3 | 2000

Cells are right-aligned, headers centred (an odd space going left), columns joined by
` | ` and the header underlined by dashes joined with `+`; trailing blanks are cut. A grouped result gets a rule
between groups and, with `blank_repeats`, its group column only on a group's first row.

Decisions where the manual is vague:
- Times print in UTC, as "MMDD HH:MM:SS.mmm".
- Durations print with 3 significant digits in us below 1 ms, ms below 1 s, s below an
  hour, hr above ("0.154us", "4.61ms", "27.8hr"); a negative skew keeps its sign.
- Bit masks print as 0x and 8 hex digits (16 above 32 bits), and 0 as "0".
- Lists print joined by "," when they hold numbers ("0,1,2,3") or flags ("inbox,hb"),
  by ", " otherwise (names).
- JSON is the rows as they are (null for an empty cell); an error renders as the
  object {"error": message}, so a caller never mistakes it for an empty table.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from raims_node.console.result import Cell, CommandResult, Kind

NS_PER_US = 1_000
NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000
NS_PER_HR = 3600 * NS_PER_S
_DURATION_UNITS = ((NS_PER_MS, NS_PER_US, "us"), (NS_PER_S, NS_PER_MS, "ms"),
                   (NS_PER_HR, NS_PER_S, "s"))
HEX_SHORT_BITS = 32


def format_cell(value: Cell, kind: Kind | None = None) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        sep = "," if kind is Kind.FLAGS or all(isinstance(v, int) for v in value) else ", "
        return sep.join(str(v) for v in value)
    if isinstance(value, int) and not isinstance(value, bool):
        if kind is Kind.TIME:
            return format_time(value)
        if kind is Kind.DURATION:
            return format_duration(value)
        if kind is Kind.HEX:
            return format_mask(value)
    if isinstance(value, float):
        return f"{value:.3g}"
    text = str(value)
    if text.isprintable():
        return text
    # a subject or name from the network may hold control characters: shown escaped,
    # never written raw to the operator's terminal (ESC [2J clears it)
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def format_time(ns: int) -> str:
    t = datetime.fromtimestamp(ns // NS_PER_S, UTC)
    return f"{t:%m%d %H:%M:%S}.{ns % NS_PER_S // NS_PER_MS:03d}"


def format_duration(ns: int) -> str:
    for limit, unit_ns, unit in _DURATION_UNITS:
        if abs(ns) < limit:
            return f"{ns / unit_ns:.3g}{unit}"
    return f"{ns / NS_PER_HR:.3g}hr"


def format_mask(mask: int) -> str:
    if mask == 0:
        return "0"
    return f"0x{mask:08X}" if mask < 1 << HEX_SHORT_BITS else f"0x{mask:016X}"


def _center(text: str, width: int) -> str:
    pad = width - len(text)
    left = (pad + 1) // 2
    return " " * left + text + " " * (pad - left)


def render_text(result: CommandResult) -> str:
    if result.error is not None:
        return f"error: {result.error}\n"
    if result.plain:
        col = result.columns[0]
        return "".join(f"{format_cell(row.get(col))}\n" for row in result.rows)
    cols = [c for c in result.columns if c not in result.hidden]
    group = result.group
    cells: list[list[str] | None] = []  # None: a rule between groups
    prev: object = object()
    for row in result.rows:
        if group is not None and row.get(group) != prev:
            if cells:
                cells.append(None)
            first = True
            prev = row.get(group)
        else:
            first = False
        cells.append([
            "" if c == group and result.blank_repeats and not first
            else format_cell(row.get(c), result.kinds.get(c))
            for c in cols
        ])
    width = [max([len(c), *(len(r[i]) for r in cells if r is not None)]) for i, c in enumerate(cols)]
    last = len(cols) - 1

    def line(parts: list[str]) -> str:
        return "|".join(
            (" " if i else "") + p + (" " if i < last else "") for i, p in enumerate(parts)
        ).rstrip()

    rule = "+".join("-" * (w + (1 if i else 0) + (1 if i < last else 0)) for i, w in enumerate(width))
    titles = [c.replace("_", " ") if c in result.spaced else c for c in cols]
    out = [line([_center(c, width[i]) for i, c in enumerate(titles)]), rule]
    for r in cells:
        out.append(rule if r is None else line([p.rjust(width[i]) for i, p in enumerate(r)]))
    return "\n".join(out) + "\n"


def render_json(result: CommandResult) -> str:
    if result.error is not None:
        return json.dumps({"error": result.error})
    return json.dumps(result.rows)
