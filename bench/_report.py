"""Shared output for benchmarks: a table, then one JSON line."""

from __future__ import annotations

import json
import time
from collections.abc import Callable


def rate(fn: Callable[[], object], n: int, repeat: int = 3) -> float:
    """Best-of-`repeat` calls per second of `fn` over `n` calls."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, time.perf_counter() - t0)
    return n / best


def report(name: str, rows: list[dict[str, object]], extra: dict[str, object] | None = None) -> None:
    """Print `rows` as a table, then one JSON line (with `extra` keys beside the rows)."""
    cols = list(rows[0])
    width = {c: max(len(c), *(len(_fmt(r[c])) for r in rows)) for c in cols}
    print("  ".join(c.ljust(width[c]) for c in cols))
    for r in rows:
        print("  ".join(_fmt(r[c]).ljust(width[c]) for c in cols))
    print(json.dumps({"bench": name, "results": rows, **(extra or {})}))


def _fmt(v: object) -> str:
    if isinstance(v, float):
        return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"
    return str(v)
