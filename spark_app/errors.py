"""Errors of the Spark side of raims: one root, `SparkAppError`, under `raims_node.RaimsError`.

Every error carries the values that caused it (table, column, path, setting) so that a
failed rollout says what to fix without a debugger.
"""

from __future__ import annotations

import re

from raims_node import RaimsError

_PYTHON_ERROR = re.compile(r"^((?!org\.|java\.|py4j\.)[A-Za-z_][\w.]*(?:Error|Exception)\b.*)$", re.MULTILINE)


class SparkAppError(RaimsError):
    """Root of every error raised by spark_app."""


class SessionError(SparkAppError):
    """The SparkSession cannot be built or is not fit for a rollout."""


class LakeError(SparkAppError):
    """A Delta table cannot be written or read."""


class SchemaError(LakeError):
    """A schema file under data/schemas/ is missing or malformed."""


class SchemaViolation(LakeError):
    """Rows do not match their table's declared schema; names the table and the column."""

    def __init__(self, table: str, column: str, problem: str) -> None:
        super().__init__(f"table {table!r}, column {column!r}: {problem}")
        self.table = table
        self.column = column
        self.problem = problem


class QualityError(SparkAppError):
    """An expectation suite under data/schemas/expectations/ is missing or malformed."""


class AuditError(SparkAppError):
    """`--audit-only` cannot audit: the lake or the snapshot is not there, or the run failed."""


def first_lines(exc: BaseException, lines: int = 3) -> str:
    """An unexpected error in a few lines: a failed Spark job's message is pages of Java
    trace around the Python error that matters, which is its last Python error line."""
    text = str(exc).strip()
    found = _PYTHON_ERROR.findall(text)
    head = "\n".join(text.splitlines()[:lines])
    return f"{type(exc).__name__}: {head}" + (f"\n  ... {found[-1]}" if found else "")


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def delta_message(exc: BaseException) -> str:
    """A delta-rs error in one line: its message runs over lines (an `↳` chain of causes,
    with terminal colours, then possibly a Rust backtrace); the chain is kept, joined."""
    parts = []
    for line in _ANSI.sub("", str(exc)).splitlines():
        text = line.strip().lstrip("↳").strip()
        if not text:
            continue
        if text.startswith(("stack backtrace:", "Stack backtrace:", "0:")):
            break
        parts.append(text.rstrip(":"))
    return ": ".join(parts) or type(exc).__name__
