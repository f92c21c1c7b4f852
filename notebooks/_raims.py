"""What the raims notebooks share: the lake (Databricks catalog or local views), widgets,
and where tables and figures go.

Issue "Databricks notebooks, cluster deployment and packaging", item 1. The notebooks are
Databricks source files that also run as plain Python (`python notebooks/02_...py`), so
everything that differs between the two places is decided here, once:
- Spark: the `spark` of the Databricks runtime, else the active session, else a new
  local one (`$RAIMS_MASTER`, default local[2]) from spark_app.session.
- The lake (`raims_lake`): when the catalog schema (widget `schema`, default `raims`)
  has the tables, queries use the catalog (the operator registered them, e.g. with
  `CREATE TABLE raims.peers USING DELTA LOCATION ...`) and that schema becomes the
  current one; otherwise every table of the lake path (widget `lake`) becomes a
  temporary view through `spark_app.lake.Lake.register_views()`. Either way the notebook
  writes `SELECT ... FROM peers`.
- Widgets: `dbutils.widgets` when there is a dbutils; otherwise `$RAIMS_<NAME>`, else
  the default. So a test or a shell sets the same knobs through the environment.
- Output: every table a notebook shows is also written as CSV, every figure as PNG, into
  the widget `output_dir` (default ./notebook_output/<notebook>), so a run leaves
  something to look at outside Databricks and a test has something to check.
- `%sql` cells: Databricks runs them; locally `run_sql_cells` reads the notebook's own
  source and runs each through spark.sql, in order.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

NOTEBOOK_HEADER: Final = "# Databricks notebook source"
CELL_SEPARATOR: Final = "# COMMAND ----------"
MAGIC: Final = "# MAGIC "
ENV_PREFIX: Final = "RAIMS_"
DEFAULT_MASTER: Final = "local[2]"
DEFAULT_SCHEMA: Final = "raims"
DEFAULT_LAKE: Final = "lake"
PROBE_TABLE: Final = "peers"  # a schema with this table is taken to hold the lake's tables
SHOW_ROWS: Final = 20
FIGURE_DPI: Final = 110

_REPO = Path(__file__).resolve().parent.parent
if importlib.util.find_spec("spark_app") is None and (_REPO / "spark_app").is_dir():
    sys.path.insert(0, str(_REPO))  # run from a checkout where raims is not installed


class NotebookError(RuntimeError):
    """A notebook cannot find its lake or its inputs; the message says which and where."""


def _ipython_global(name: str) -> Any:
    """A global of the Databricks (IPython) user namespace, or None outside one."""
    main = sys.modules.get("__main__")
    found = getattr(main, name, None)
    if found is not None:
        return found
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    return None if shell is None else shell.user_ns.get(name)


def on_databricks() -> bool:
    return bool(os.environ.get("DATABRICKS_RUNTIME_VERSION"))


def widget(name: str, default: str, label: str | None = None) -> str:
    """The value of text widget `name`: dbutils' when present (the widget is created on
    first use), else `$RAIMS_<NAME>`, else `default`."""
    dbutils = _ipython_global("dbutils")
    if dbutils is not None:
        dbutils.widgets.text(name, default, label or name)
        return str(dbutils.widgets.get(name))
    return os.environ.get(ENV_PREFIX + name.upper(), default)


def get_spark() -> Any:
    """The notebook's SparkSession (see the module docstring)."""
    found = _ipython_global("spark")
    if found is not None:
        return found
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    from spark_app.session import build_session

    spark = build_session(os.environ.get(ENV_PREFIX + "MASTER", DEFAULT_MASTER), app_name="raims-notebook")
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@dataclass
class RaimsLake:
    """The lake as a notebook sees it: `sql`, `table`, `has` over catalog tables or views."""

    spark: Any
    source: str  # "catalog <schema>" or "views of <path>"
    tables: list[str]
    lake: Any = None  # spark_app.lake.Lake when the tables are local views
    path: str | None = None

    def has(self, table: str) -> bool:
        return table in self.tables

    def table(self, name: str) -> Any:
        if not self.has(name):
            raise NotebookError(f"table {name!r} is not in the lake ({self.source}: {', '.join(self.tables)})")
        return self.spark.table(name)

    def sql(self, query: str) -> Any:
        return self.spark.sql(query)

    def refresh(self) -> None:
        """Re-create the views after writes (views are pinned to a table version)."""
        if self.lake is not None:
            self.tables = self.lake.register_views()


def raims_lake(path: str | None = None, spark: Any = None, schema: str | None = None) -> RaimsLake:
    """The catalog schema's tables when it has them, else views of the lake at `path`
    (default: widget `lake`)."""
    spark = spark if spark is not None else get_spark()
    schema = schema if schema is not None else widget("schema", DEFAULT_SCHEMA, "catalog schema")
    try:
        in_catalog = spark.catalog.tableExists(f"{schema}.{PROBE_TABLE}")
    except Exception:  # no such schema, or a catalog that cannot be asked: use the views
        in_catalog = False
    if in_catalog:
        spark.catalog.setCurrentDatabase(schema)
        names = sorted(t.name for t in spark.catalog.listTables(schema))
        return RaimsLake(spark, f"catalog {schema}", names)
    path = path if path is not None else widget("lake", DEFAULT_LAKE, "lake path")
    from spark_app.lake import Lake

    lake = Lake(path, spark)
    names = lake.register_views()
    if not names:
        raise NotebookError(f"no raims tables in catalog schema {schema!r} nor at lake path {lake.path}: "
                            "run 01_rollout first, or set the widget/env RAIMS_LAKE")
    return RaimsLake(spark, f"views of {lake.path}", names, lake, lake.path)


@dataclass
class Output:
    """Where a notebook's tables (CSV) and figures (PNG) go; `saved` lists them."""

    directory: Path
    saved: list[Path] = field(default_factory=list)

    def table(self, df: Any, name: str, rows: int = SHOW_ROWS) -> Any:
        """Show a Spark or pandas frame and write it as `<name>.csv`; returns it as pandas."""
        pdf = df if hasattr(df, "iloc") else df.toPandas()
        path = self.directory / f"{name}.csv"
        pdf.to_csv(path, index=False)
        self.saved.append(path)
        display = _ipython_global("display")
        if display is not None and on_databricks():
            display(pdf)
        else:
            import pandas as pd

            with pd.option_context("display.width", 160, "display.max_columns", 20):
                print(f"\n-- {name} ({len(pdf)} rows)\n{pdf.head(rows).to_string(index=False)}")
        return pdf

    def figure(self, fig: Any, name: str) -> Path:
        """Save a matplotlib figure as `<name>.png` (and show it on Databricks)."""
        path = self.directory / f"{name}.png"
        fig.savefig(path, dpi=FIGURE_DPI, bbox_inches="tight")
        self.saved.append(path)
        if on_databricks():
            import matplotlib.pyplot as plt

            plt.show()
        else:
            import matplotlib.pyplot as plt

            plt.close(fig)
        print(f"figure {name}: {path}")
        return path


def output(notebook: str) -> Output:
    """The output directory of `notebook` (widget `output_dir`), created."""
    base = widget("output_dir", str(Path("notebook_output")), "output directory")
    directory = Path(base) / notebook
    directory.mkdir(parents=True, exist_ok=True)
    if not on_databricks():
        import matplotlib

        matplotlib.use("Agg")  # no display when run as a script
    return Output(directory)


def node_name(label: str | None) -> str:
    """`node2.1` (a peer as an observer numbers it) or `node0.*` (the observer) -> `node2`."""
    return "" if label is None else label.rsplit(".", 1)[0] if "." in label else label


SNAPSHOT_TABLE: Final = "peers"  # a rollout that wrote its snapshot has rows here


def latest_snapshot(lake: RaimsLake) -> str:
    """The snapshot id asked for (widget `snapshot`), else the newest rollout's that has
    rows: a run that failed before its write stage (a port in use, an interrupt) has a
    `rollouts` row and nothing else, and chosen it emptied every table of the notebook
    (02 died on an empty `peers`). Newer runs passed over are named."""
    asked = widget("snapshot", "", "snapshot id (empty: latest)")
    if asked:
        return asked
    has_rows = (f"snapshot_id IN (SELECT DISTINCT snapshot_id FROM {SNAPSHOT_TABLE})"
                if lake.has(SNAPSHOT_TABLE) else "TRUE")
    rows = lake.sql(f"SELECT snapshot_id, status, {has_rows} AS has_rows FROM rollouts "
                    "ORDER BY started_at DESC").collect()
    if not rows:
        raise NotebookError(f"no rollouts in the lake ({lake.source})")
    chosen = next((r for r in rows if r["has_rows"]), None)
    if chosen is None:
        raise NotebookError(f"no rollout in the lake ({lake.source}) wrote a snapshot: "
                            f"{len(rows)} run(s), the newest {rows[0]['snapshot_id']} {rows[0]['status']}")
    skipped = rows[:rows.index(chosen)]
    if skipped:
        print(f"snapshot {chosen['snapshot_id']}: the {len(skipped)} newer run(s) wrote none "
              f"({', '.join(f'{r.snapshot_id} {r.status}' for r in skipped)})")
    return str(chosen["snapshot_id"])


_SQL_CELL = re.compile(r"^# MAGIC %sql\s*$")


def sql_cells(source: str) -> list[str]:
    """The statements of the `%sql` cells of a Databricks source notebook, in order."""
    out = []
    for cell in source.split(CELL_SEPARATOR):
        lines = [ln for ln in cell.strip().splitlines() if ln.strip()]
        if lines and _SQL_CELL.match(lines[0]):
            body = [ln[len(MAGIC):] if ln.startswith(MAGIC) else ln.removeprefix("# MAGIC") for ln in lines[1:]]
            out.append("\n".join(body).strip().rstrip(";"))
    return out


def run_sql_cells(notebook_file: str | Path, lake: RaimsLake, out: Output,
                  names: Mapping[int, str] | None = None) -> list[Any]:
    """Run the notebook's `%sql` cells through spark.sql (outside Databricks), each
    result shown and saved as `sql_<i>` (or `names[i]`); returns the pandas frames."""
    frames = []
    for i, statement in enumerate(sql_cells(Path(notebook_file).read_text(encoding="utf-8")), 1):
        print(f"\n%sql [{i}]\n{statement}")
        frames.append(out.table(lake.sql(statement), (names or {}).get(i, f"sql_{i:02d}")))
    return frames
