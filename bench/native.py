"""The native benchmark programs, compiled on first use: natsbench.c, the pipelined NATS
client of bridge_bench.py; hopfloor.c, bridge_bench's latency floor of a chain of relay
processes; and sbusfloor.c, ipc_bench.py's one-packet-per-message floor.

nats-bench (Go) cannot be installed here, and a Python client cannot saturate a server
that moves two million messages a second, so the bench carries its own publisher and
subscriber in C (plain C99 + pthreads). It is compiled with the system `cc` into a
cache directory keyed by the source's hash (`$XDG_CACHE_HOME/raims-bench`, else the
temp dir); with no compiler `build()` returns None and the bench falls back to its
Python raw clients, labelled as such.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

SOURCE = Path(__file__).resolve().parent / "natsbench.c"
SBUS_FLOOR_SOURCE = SOURCE.with_name("sbusfloor.c")
HOP_FLOOR_SOURCE = SOURCE.with_name("hopfloor.c")


@dataclass(frozen=True)
class Rate:
    rate: float
    received: int
    lost: int
    disorder: int


def build(source: Path = SOURCE) -> Path | None:
    """The compiled program, built if needed; None when no C compiler works."""
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        return None
    src = source.read_bytes()
    tag = hashlib.sha256(src).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or tempfile.gettempdir()) / "raims-bench"
    exe = cache / f"{source.stem}-{tag}"
    if exe.exists():
        return exe
    cache.mkdir(parents=True, exist_ok=True)
    tmp = exe.with_suffix(f".{os.getpid()}")
    proc = subprocess.run([cc, "-O2", "-std=gnu99", "-pthread", "-o", str(tmp), str(source)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        print(f"{source.name} did not compile:\n{proc.stderr}")
        return None
    tmp.replace(exe)
    return exe


def rate(exe: Path, pub_port: int, sub_port: int, count: int, size: int, timeout: float = 120.0) -> Rate:
    out = _run(exe, "rate", pub_port, sub_port, count, size, timeout).split()
    f = dict(zip(out[0::2], out[1::2], strict=True))
    return Rate(float(f["rate"]), int(f["received"]), int(f["lost"]), int(f["disorder"]))


def latency(exe: Path, pub_port: int, sub_port: int, count: int, size: int, timeout: float = 120.0) -> tuple[float, float]:
    """(p50, p99) in microseconds, one message in flight."""
    out = _run(exe, "lat", pub_port, sub_port, count, size, timeout).split()
    return float(out[2]), float(out[4])


def _run(exe: Path, mode: str, pub_port: int, sub_port: int, count: int, size: int, timeout: float) -> str:
    proc = subprocess.run([str(exe), mode, "127.0.0.1", str(pub_port), str(sub_port), str(count), str(size)],
                          capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"natsbench {mode} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout.strip()


def sbus_floor(exe: Path, count: int, size: int, timeout: float = 120.0) -> float:
    """msgs/s of sbusfloor.c: C publisher -> C relay -> C subscriber, one packet each."""
    proc = subprocess.run([str(exe), str(count), str(size)], capture_output=True, text=True,
                          timeout=timeout, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"sbusfloor failed ({proc.returncode}): {proc.stderr.strip()}")
    f = proc.stdout.split()
    return float(f[1])


def hop_floor(exe: Path, relays: int, samples: int, size: int, idle_busy: int = 0,
              timeout: float = 120.0) -> tuple[float, float]:
    """(p50, p99) in microseconds of hopfloor.c: one message at a time through `relays`
    C relay processes joined by loopback TCP, polling `idle_busy` times before blocking."""
    proc = subprocess.run([str(exe), str(relays), str(samples), str(size), str(idle_busy)], capture_output=True,
                          text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"hopfloor failed ({proc.returncode}): {proc.stderr.strip()}")
    f = proc.stdout.split()
    return float(f[1]), float(f[3])
