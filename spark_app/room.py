"""Preconditions of a delta-rs write that creates data files, checked before it starts.

delta-rs 1.6 writes a data file through object_store's BufWriter; when the file cannot be
created or written (a directory it may not write, a full disk) the write raises, but a
writer task on its tokio runtime also panics ("Already shut down", object_store
buffered.rs) and Rust's panic hook prints the panic, with a backtrace under
RUST_BACKTRACE=1, on stderr: the user saw a Rust trace before the error line. The
panic happens on a runtime thread, so no Python code can catch it (it never becomes a
PanicException). So a local table's folder (and the partition folders the rows go to)
must take a file, and its disk must have room for the rows (their Arrow size, more than
the Parquet files take) before delta-rs is called; otherwise a LakeError names the table.
A disk that fills while the write runs still gets the panic's lines (then the LakeError).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from spark_app.errors import LakeError

MARGIN_BYTES: Final = 1024 * 1024  # the commit's JSON, a checkpoint


def is_local(path: str) -> bool:
    return "://" not in path and not path.startswith("dbfs:")


def check_room(path: str, table: str, need_bytes: int, folders: Iterable[str] = ()) -> None:
    """LakeError unless `path` (made if missing) and those of its sub`folders` that
    exist take a new file, and its disk has `need_bytes` (+ MARGIN_BYTES) free. URLs are
    the store's to check."""
    if not is_local(path):
        return
    root = Path(path)
    try:
        root.mkdir(parents=True, exist_ok=True)
        for folder in [root, *(root / f for f in folders)]:
            if folder.is_dir():
                probe = folder / f".raims-write-probe-{os.getpid()}"
                os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
                probe.unlink()
        st = os.statvfs(root)
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(root) else ""
        raise LakeError(f"table {table!r} at {path}: cannot write: {exc.strerror or exc}{where}") from None
    free = st.f_bavail * st.f_frsize
    if free < need_bytes + MARGIN_BYTES:
        raise LakeError(f"table {table!r} at {path}: no room: {free} bytes free on its disk, "
                        f"the write needs about {need_bytes + MARGIN_BYTES}")
