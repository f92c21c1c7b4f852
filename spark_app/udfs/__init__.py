"""The audits' kernels and their Spark UDF factories (CONVENTIONS.md rule 12; issue
"Routing, bloom and link-state audits as vectorized UDFs over the Delta snapshots").

Every audit is a pure pandas / NumPy function, tested without Spark, and a factory that
runs it as a grouped, cogrouped or iterator pandas UDF:
- `lsdb`: observers' agreement on peers, seqnos and link sets; the reference database
  (cogrouped `applyInPandas` by snapshot and bucket of peers, then by snapshot);
- `routing`: routes and forwarding trees recomputed with SciPy's csgraph from the
  reference database (cogrouped `applyInPandas` by snapshot, path and chunk of sources);
- `bloom`: filters against their node's subscriptions and random probes (`mapInPandas`,
  an iterator over Arrow batches of nodes);
- `labels` (peer and transport names in console rows), `frames` (the rows kernels return).

`ship()` makes executors unpickle these modules by value, as `spark_app.datasource`
does, so that executors need raims_node but not spark_app or the schema files.
"""

from __future__ import annotations

import sys

MODULES = (
    "spark_app.udfs.labels",
    "spark_app.udfs.frames",
    "spark_app.udfs.lsdb",
    "spark_app.udfs.routing",
    "spark_app.udfs.bloom",
)


def ship() -> None:
    """Pickle the kernel modules by value in the UDFs this process sends (idempotent)."""
    from importlib import import_module

    from pyspark import cloudpickle

    for name in MODULES:
        cloudpickle.register_pickle_by_value(sys.modules.get(name) or import_module(name))
