"""How collected rows name peers and transports, and how the audits split work by peer.

Manual "Console": "lex_a2.3 is the user lex_a2 that has a uid of 3", "The * is often used
for uid 0", and a transport prints as `<name>.<tport_id>` ("The tport_id of 0 is also
special"). The collector stores console rows as they are (DESIGN.md: "Nothing ever parses
console text", and the rows are the console's JSON rows), so a peer appears in the lake
under each observer's own label, `<name>.<uid>`, and as `<name>.*` in its own rows.

Decisions where the seed is silent:
- Across observers a peer is identified by its user name, the label without its uid
  suffix: a rollout names its nodes uniquely, the uid is only the observer's local
  numbering. A label without a suffix (a plain name) is taken as the name.
- The tport id of a transport label is the number after its last dot; a label without
  one ranks after every numbered transport (`UNKNOWN_TPORT_ID`).
- Work is split by `chunk_of(name, n)`, CRC-32 of the UTF-8 name modulo n, the same in
  every process (Python's own `hash` is salted per process, and Spark's `hash` is not
  reproducible in Python), so a kernel can tell which peers its group owns.

All functions are vectorized over arrays of labels: they work on the distinct values
(factorized once) and broadcast back, so millions of rows cost one pass per distinct label.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pandas as pd

UID_PATTERN: Final = r"\.(?:\d+|\*)$"  # also Spark's regexp_replace pattern (Java regex)
UID_SUFFIX: Final = re.compile(UID_PATTERN)
SELF_SUFFIX: Final = ".*"
UNKNOWN_TPORT_ID: Final = 1 << 40

Names = npt.NDArray[np.object_]
Ints = npt.NDArray[np.int64]


def _per_distinct(
    labels: pd.Series | npt.ArrayLike, fn: Callable[[Any], Any], dtype: type
) -> tuple[npt.NDArray[Any], Ints]:
    """`fn` of each distinct non-null label, broadcast back to every row (as `dtype`),
    and the factorized codes (-1 for nulls, whose result is left to the caller)."""
    codes, uniques = pd.factorize(pd.Series(labels, dtype=object), use_na_sentinel=True)
    mapped: npt.NDArray[Any] = np.fromiter((fn(u) for u in uniques), dtype=dtype, count=len(uniques))
    out = mapped[np.maximum(codes, 0)] if len(mapped) else np.zeros(len(codes), dtype=dtype)
    return out, codes.astype(np.int64)


def peer_names(labels: pd.Series | npt.ArrayLike) -> Names:
    """User names of console labels (`n1.3`, `n1.*` and `n1` all give `n1`); None stays None."""
    out, codes = _per_distinct(labels, lambda s: UID_SUFFIX.sub("", s), object)
    out[codes < 0] = None
    return out


def tport_ids(labels: pd.Series | npt.ArrayLike) -> Ints:
    """The tport id of each transport label (`mesh.3` gives 3), UNKNOWN_TPORT_ID otherwise."""

    def one(label: str) -> int:
        _, _, tail = label.rpartition(".")
        return int(tail) if tail.isdigit() else UNKNOWN_TPORT_ID

    out, codes = _per_distinct(labels, one, np.int64)
    out[codes < 0] = UNKNOWN_TPORT_ID
    return out


def chunk_of(names: pd.Series | npt.ArrayLike, chunks: int) -> Ints:
    """The chunk (0 .. chunks - 1) that owns each peer name."""
    out, _ = _per_distinct(names, lambda s: zlib.crc32(str(s).encode()) % chunks, np.int64)
    return out


def is_self_label(users: pd.Series, nodes: pd.Series) -> npt.NDArray[np.bool_]:
    """Whether each row's user label names the observing node itself (`<node>.*`, or the
    plain node name)."""
    u = users.to_numpy(dtype=object)
    n = nodes.to_numpy(dtype=object)
    return np.asarray((u == n) | (u == n + SELF_SUFFIX), dtype=bool)
