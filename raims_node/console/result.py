"""What a console command returns: rows (dicts keyed by column), never text.

Column names are the manual's, lower case, with spaces and '/' turned into '_'
("rep time" -> "rep_time"). Cells hold plain data: str, int, float, a list of them, or
None for a value the node does not have (rendered as an empty cell). Time stamps and
durations stay integer nanoseconds in the rows; `kinds` tells the text renderer how to
print them, so the JSON rows keep full precision and need no parsing.

Layout hints for the text renderer only (the rows are complete without them):
- `group`: the column whose runs of equal values form groups, with a dashed rule
  between groups (show adjacency, show subs, show forward, show tree);
- `blank_repeats`: that column is printed only on a group's first row;
- `plain`: the rows are lines of text in the single column (show graph, show running);
- `spaced`: columns whose header the manual writes with spaces ("rep time"): the text
  header has the manual's, the rows keep the key ("rep_time").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

Cell = str | int | float | list[str] | list[int] | None
Row = dict[str, Cell]


class Kind(StrEnum):
    """How the text renderer prints a column's integer cells."""

    TIME = "time"  # ns since the epoch -> "MMDD HH:MM:SS.mmm" (UTC)
    DURATION = "duration"  # ns -> "189us", "4.61ms", "1.99s", "27.8hr"
    HEX = "hex"  # a bit mask -> "0x04000108"
    FLAGS = "flags"  # a list of words -> "inbox,mesh,hb"


def as_cell(value: object) -> Cell:
    """A value from outside the console (the daemon's rows) as a cell."""
    return value if value is None or isinstance(value, str | int | float) else str(value)


@dataclass(slots=True)
class CommandResult:
    columns: list[str]
    rows: list[Row] = field(default_factory=list)
    error: str | None = None
    kinds: dict[str, Kind] = field(default_factory=dict)
    group: str | None = None
    blank_repeats: bool = False
    plain: bool = False
    hidden: tuple[str, ...] = ()  # columns the table leaves out: data for JSON readers only
    spaced: tuple[str, ...] = ()  # columns headed with spaces for their '_' in the text

    @classmethod
    def failed(cls, message: str) -> CommandResult:
        return cls([], [], error=message)

    @classmethod
    def lines(cls, column: str, text: str) -> CommandResult:
        """A plain result: one row per line of `text`."""
        return cls([column], [{column: line} for line in text.splitlines()], plain=True)
