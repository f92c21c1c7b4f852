"""The pipeline stage of the rollout (issue 20 point 3c): two Spark stages that pass rows
to each other through the raims network, with nothing but the documented API.

- Stage two starts first: `spark.readStream.format("raims")` subscribed on node
  `sub_node` (spark_app/stream.py: the reader subscribes on the driver, so `sub_node` is
  a node of the driver's host), into a memory sink.
- Stage one: `spark.range(rows)` in one partition, `foreachPartition(publish_partition)`
  on node `pub_node` (None: the node of the executor's host, found through its
  endpoints file), which waits until the network knows the subscriber, publishes every
  row as JSON and flushes.
- The result: the rows received, distinct ids and sums, compared with what was sent
  (exactly once: count, distinct count and checksum all equal).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from spark_app.errors import SparkAppError
from spark_app.stream import publish_partition, register

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_ROWS: Final = 100_000
POLL_S: Final = 0.2


class PipelineFailed(SparkAppError):
    """Stage two did not receive every row of stage one exactly once."""


@dataclass(frozen=True)
class PipelineResult:
    rows: int
    received: int
    distinct: int
    checksum: int
    expected_checksum: int
    seconds: float

    @property
    def exactly_once(self) -> bool:
        return self.received == self.distinct == self.rows and self.checksum == self.expected_checksum

    def summary(self) -> str:
        return (f"{self.received} of {self.rows} rows received ({self.distinct} distinct, checksum "
                f"{'ok' if self.checksum == self.expected_checksum else 'WRONG'}) in {self.seconds:.1f}s")


def run_pipeline(spark: SparkSession, sub_node: str | None, pub_node: str | None,
                 rows: int = DEFAULT_ROWS, timeout_s: float = 120.0) -> PipelineResult:
    """Run both stages; PipelineFailed unless every row arrived exactly once."""
    register(spark)
    run = uuid.uuid4().hex[:12]
    subject, table = f"pipeline/{run}", f"raims_pipeline_{run}"
    reader = spark.readStream.format("raims").option("subject", subject).schema("id long, v double")
    if sub_node:
        reader = reader.option("node", sub_node)
    query = reader.load().writeStream.format("memory").queryName(table).start()
    started = time.monotonic()
    try:
        query.processAllAvailable()  # the reader's subscription is in place
        data = spark.range(rows).selectExpr("id", "cast(id as double) / 2 as v").repartition(1)
        data.foreachPartition(publish_partition(subject, node=pub_node))
        deadline = started + timeout_s
        while True:
            query.processAllAvailable()
            got = spark.sql(f"select count(*), count(distinct id), coalesce(sum(id), 0) from {table}").first()
            assert got is not None
            received, distinct, checksum = int(got[0]), int(got[1]), int(got[2])
            if received >= rows or time.monotonic() > deadline:
                break
            time.sleep(POLL_S)
    finally:
        query.stop()
    result = PipelineResult(rows, received, distinct, checksum, rows * (rows - 1) // 2,
                            time.monotonic() - started)
    if not result.exactly_once:
        raise PipelineFailed(f"pipeline through {pub_node or 'the executor host node'} -> {sub_node}: "
                             f"{result.summary()}")
    return result
