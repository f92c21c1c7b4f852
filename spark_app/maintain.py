"""`raims lake maintain`: keep the lake's Delta tables fast to read and bounded on disk.

Issue 26, "Lake": every rollout appends a few small files per table, so after weeks a
query opens thousands of files and the log replays thousands of commits. For each table
of the lake this runs, with delta-rs (no Spark needed, any standard Delta table):
1. compaction with Z-ordering by `snapshot_id` (`optimize.z_order`): the small files of
   each date partition become few files whose min/max statistics on `snapshot_id` are
   narrow, so the `raims_delta` source (and Spark's Delta reader) skip most of them;
2. a checkpoint (`create_checkpoint`): readers start from it instead of replaying every
   JSON commit;
3. vacuum (`vacuum`, not a dry run) of the files no version younger than the retention
   needs: the default retention, 168 hours, is Delta's own; a shorter one (0 in tests)
   also drops time travel to versions older than it.

Decisions: tables are maintained one after another, each on its own (a failure names
the table and stops there: what was done stays done, every step being a Delta commit);
rows, and so every view's counts, are unchanged. On Databricks the same is `OPTIMIZE
<table> ZORDER BY (snapshot_id)` and `VACUUM <table> RETAIN n HOURS` (deploy/README.md).

    raims lake maintain --lake PATH [--retention-hours H] [--table T ...]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from spark_app.errors import LakeError, delta_message
from spark_app.room import check_room
from spark_app.schemas import TABLES

DEFAULT_RETENTION_HOURS: Final = 168
ZORDER_COLUMNS: Final = ("snapshot_id",)


@dataclass(frozen=True, slots=True)
class Maintained:
    table: str
    files_before: int  # data files of the current version
    files_after: int
    rows: int
    vacuumed: int  # files deleted from storage
    version: int


def _files(dt: object) -> int:
    import pyarrow as pa

    return pa.table(dt.get_add_actions(flatten=True)).num_rows  # type: ignore[attr-defined]


def maintain_table(path: str, table: str, retention_hours: int = DEFAULT_RETENTION_HOURS) -> Maintained:
    """Compact and Z-order, checkpoint and vacuum one Delta table."""
    import pyarrow as pa
    from deltalake import DeltaTable

    try:
        dt = DeltaTable(path)
        before = _files(dt)
        if before > 1:  # delta-rs panics on a file it cannot write (spark_app.room)
            check_room(path, table, sum(pa.table(dt.get_add_actions(flatten=True)).column("size_bytes").to_pylist()))
            dt.optimize.z_order(list(ZORDER_COLUMNS))
        dt = DeltaTable(path)
        dt.create_checkpoint()
        vacuumed = dt.vacuum(retention_hours=retention_hours, dry_run=False,
                             enforce_retention_duration=retention_hours >= DEFAULT_RETENTION_HOURS)
        dt = DeltaTable(path)
        rows = sum(dt.get_add_actions(flatten=True).column("num_records").to_pylist() or [0])
        return Maintained(table, before, _files(dt), int(rows), len(vacuumed), dt.version())
    except LakeError as exc:
        raise LakeError(f"lake maintain: {exc}") from None
    except Exception as exc:  # delta-rs raises its own classes; name the table
        raise LakeError(f"lake maintain: table {table!r} at {path}: {delta_message(exc)}") from exc


def maintain(lake: str, tables: Sequence[str] | None = None,
             retention_hours: int = DEFAULT_RETENTION_HOURS) -> list[Maintained]:
    """Maintain every existing table of the lake at `lake` (or `tables`)."""
    from deltalake import DeltaTable

    out = []
    for table in tables or TABLES:
        path = f"{str(lake).rstrip('/')}/{table}"
        if "://" not in path and not Path(path).is_dir():
            continue
        if not DeltaTable.is_deltatable(path):
            continue
        out.append(maintain_table(path, table, retention_hours))
    return out


def hours(text: str) -> int:
    """A --retention-hours value: a whole number, 0 or more."""
    value = int(text)
    if value < 0:
        raise ValueError(text)
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """A lake path that is no directory is an error (a typo printed an empty table, exit
    0); one with none of the tables says so; --table takes the lake's table names."""
    ap = argparse.ArgumentParser(prog="raims lake maintain", description=__doc__.splitlines()[0])
    ap.add_argument("--lake", required=True, help="the lake's directory (or URI)")
    ap.add_argument("--retention-hours", type=hours, default=DEFAULT_RETENTION_HOURS, metavar="H",
                    help=f"vacuum files older than this many hours, 0 or more (default {DEFAULT_RETENTION_HOURS})")
    ap.add_argument("--table", action="append", choices=TABLES, metavar="TABLE",
                    help=f"only this table (repeatable): {', '.join(TABLES)}")
    args = ap.parse_args(argv)
    if "://" not in args.lake and not Path(args.lake).is_dir():
        print(f"raims lake maintain: lake {args.lake!r} is not a directory", file=sys.stderr)
        return 1
    try:
        done = maintain(args.lake, args.table, args.retention_hours)
    except LakeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if not done:
        print(f"raims lake maintain: no Delta tables of the lake under {args.lake!r}", file=sys.stderr)
        return 0
    print(f"{'table':<14} {'files':>7} {'after':>7} {'rows':>9} {'vacuumed':>9} {'version':>8}")
    for m in done:
        print(f"{m.table:<14} {m.files_before:>7} {m.files_after:>7} {m.rows:>9} {m.vacuumed:>9} {m.version:>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
