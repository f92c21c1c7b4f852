"""The three audits in one process, over pandas frames: the same kernels the Spark job
runs, composed the same way (LSDB first, its reference database to the routing audit,
then the bloom audit), without Spark. For the kernels' tests and for notebooks on small
snapshots; `spark_app.jobs.audit` is the job.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TypeAlias

import pandas as pd
import pyarrow as pa

from spark_app.udfs.bloom import ProbeSet, audit_blooms_local
from spark_app.udfs.causes import classify
from spark_app.udfs.frames import dedupe, finish
from spark_app.udfs.lsdb import audit_lsdb_local
from spark_app.udfs.routing import audit_routes_local

Frame: TypeAlias = pd.DataFrame | pa.Table


def _pandas(frame: Frame) -> pd.DataFrame:
    return frame.to_pandas() if isinstance(frame, pa.Table) else frame


def audit_tables(
    tables: Mapping[str, Frame],
    probes: ProbeSet | None = None,
    *,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> dict[str, pa.Table]:
    """audit_lsdb, audit_routes and audit_blooms rows (input columns, as the job writes
    them) for every snapshot in `tables` (input table name -> rows); audits whose input
    tables are absent are left out."""
    frames = {name: dedupe(_pandas(t)) for name, t in tables.items()}
    collected: dict[str, datetime] = {}
    for name in ("peers", "blooms"):
        if name in frames and len(frames[name]):
            first = frames[name].groupby("snapshot_id")["collected_at"].min()
            for snapshot_id, when in first.items():
                stamp = pd.Timestamp(when).to_pydatetime()
                stamp = stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)
                collected[str(snapshot_id)] = min(collected.get(str(snapshot_id), stamp), stamp)
    audited_at = now()
    out: dict[str, pa.Table] = {}
    if "peers" in frames and "links" in frames:
        findings, reference = audit_lsdb_local(frames["peers"], frames["links"])
        out["audit_lsdb"] = finish("audit_lsdb", findings, collected, audited_at)
        routes = audit_routes_local(reference, frames.get("routes"), frames.get("forward"))
        out["audit_routes"] = finish("audit_routes", routes, collected, audited_at)
    if "subs" in frames and "blooms" in frames:
        blooms = audit_blooms_local(frames["subs"], frames["blooms"], probes)
        out["audit_blooms"] = finish("audit_blooms", blooms, collected, audited_at)
    return classify(out)
