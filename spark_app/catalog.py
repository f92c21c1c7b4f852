"""Unity Catalog tables over the lake: `CREATE TABLE ... LOCATION` statements, with the
schema files' column comments and the `date` partition as a generated column.

Issue 26, "Deploy": on Databricks the lake's Delta tables live at an external location
(the rollout writes them by path) and are registered once in a catalog and schema, so SQL
users and grants go through Unity Catalog:

    python -m spark_app.catalog --location s3://BUCKET/raims/lake \\
        [--catalog main] [--schema raims] > raims-tables.sql

Decisions: the catalog `main` and schema `raims` by default (deploy/README.md); tables
are external (`LOCATION <location>/<table>`, the path the rollout writes), so dropping one
keeps the data; `date` is `GENERATED ALWAYS AS (CAST(collected_at AS DATE))`, the rule
the schema files declare (`date(collected_at)`), which Delta then enforces on every
writer; every column and table carries its schema file's comment. The statements are
idempotent (`IF NOT EXISTS`); register before the first rollout or on existing tables
(Delta checks that the declared schema matches the table's).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Final

from spark_app.schemas import TABLES, TableSchema, load_schemas

DEFAULT_CATALOG: Final = "main"
DEFAULT_SCHEMA: Final = "raims"


def _sql_text(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def create_table(schema: TableSchema, location: str, catalog: str, database: str) -> str:
    """The CREATE TABLE statement of one table of the lake."""
    cols = []
    for c in schema.columns:
        line = f"  `{c.name}` {c.type.upper()}"
        if not c.nullable:
            line += " NOT NULL"
        if c.generated_from is not None:
            line += f" GENERATED ALWAYS AS (CAST({c.generated_from} AS DATE))"
        if c.comment:
            line += f" COMMENT {_sql_text(c.comment)}"
        cols.append(line)
    parts = f"PARTITIONED BY ({', '.join(schema.partition_by)})\n" if schema.partition_by else ""
    return (
        f"CREATE TABLE IF NOT EXISTS `{catalog}`.`{database}`.`{schema.table}` (\n"
        + ",\n".join(cols)
        + f"\n)\nUSING DELTA\n{parts}"
        + (f"COMMENT {_sql_text(schema.description)}\n" if schema.description else "")
        + f"LOCATION {_sql_text(location.rstrip('/') + '/' + schema.table)};\n"
    )


def statements(location: str, catalog: str = DEFAULT_CATALOG, database: str = DEFAULT_SCHEMA) -> list[str]:
    schemas = load_schemas()
    head = f"CREATE SCHEMA IF NOT EXISTS `{catalog}`.`{database}`;\n"
    return [head, *(create_table(schemas[t], location, catalog, database) for t in TABLES)]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m spark_app.catalog", description=__doc__.split("\n\n")[0])
    ap.add_argument("--location", required=True, help="the lake's external location (the rollout's lake)")
    ap.add_argument("--catalog", default=DEFAULT_CATALOG, help=f"default {DEFAULT_CATALOG}")
    ap.add_argument("--schema", default=DEFAULT_SCHEMA, help=f"default {DEFAULT_SCHEMA}")
    args = ap.parse_args(argv)
    print("\n".join(statements(args.location, args.catalog, args.schema)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
