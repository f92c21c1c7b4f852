"""The Spark side of raims: the session the rollout runs in, the Delta lake of network
snapshots, its schemas and its data-quality suites (DESIGN.md "Delta without Maven",
"Spark environment"; issue "The main job").

Modules: `session` (SparkSession for local and cluster masters, JVM start-up cache),
`schemas` (data/schemas/*.json, enforced on write), `datasource` (a Spark Python data
source over delta-rs), `lake` (append-only Delta tables, Spark-Delta or delta-rs),
`quality` (great-expectations suites over one snapshot).
"""

from spark_app.errors import (
    LakeError,
    QualityError,
    SchemaError,
    SchemaViolation,
    SessionError,
    SparkAppError,
)

__all__ = [
    "LakeError",
    "QualityError",
    "SchemaError",
    "SchemaViolation",
    "SessionError",
    "SparkAppError",
]
