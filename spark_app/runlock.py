"""The rollout's lock: one rollout of a service and run directory at a time on a driver.

A light module (no Spark import): raims_rollout.py takes the lock before the Spark
session starts, so a second rollout is refused in well under a second rather than after
the ~9 s of a session start (it was taken in `Rollout.run`, after the session).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from spark_app.jobs.errors import DeployError

LOCK_SUFFIX: Final = ".rollout.lock"


@contextmanager
def run_lock(run_dir: str, service: str) -> Iterator[None]:
    """Hold `<run_dir>/.<service>.rollout.lock` (flock) on the driver for a run. Two
    rollouts of one service and run directory at once replaced each other's daemons
    and each one's teardown stopped the other's: both failed, with errors about
    sockets in use and daemons exiting. A run directory the driver cannot create (a
    cluster's, made on the executors) goes without the lock."""
    import fcntl

    path = Path(run_dir) / f".{service}{LOCK_SUFFIX}"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise DeployError(f"another rollout of service {service} with run directory {run_dir} is running "
                              f"(pid {holder}, lock {path}): wait for it to end, or stop it first") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock
