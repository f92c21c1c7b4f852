# Databricks notebook source
# MAGIC %md
# MAGIC # 05 · A pipeline through the network
# MAGIC
# MAGIC Two Spark stages pass rows to each other through the raims daemons of their hosts,
# MAGIC with nothing but the documented API (`spark_app/stream.py`, `raims_node.client`):
# MAGIC
# MAGIC * stage two: `spark.readStream.format("raims").option("subject", S)` subscribes on one
# MAGIC   node (its messages are JSON rows; offsets count the messages received);
# MAGIC * stage one: `df.foreachPartition(publish_partition(S, node=...))` publishes every row
# MAGIC   on another node, once the network knows the subscriber (`wait_visible`).
# MAGIC
# MAGIC It needs daemons with an `ipc` transport on this host, e.g. after
# MAGIC `python spark_app/raims_rollout.py --keep-running` (the shipped config gives every
# MAGIC node one). Widgets: `rows`, `sub_node`, `pub_node` (empty: the first two nodes found).

# COMMAND ----------

import time

from raims_node.client import endpoints
from spark_app.stream import publish_partition, register

import _raims as nb

spark = nb.get_spark()
rows = int(nb.widget("rows", "100000", "rows to pass"))
found = [e for e in endpoints.nodes() if e.sbus]
print("nodes with an sbus on this host:", ", ".join(f"{e.node} ({e.sbus[0]})" for e in found) or "none")
if len(found) < 2:
    raise SystemExit("start two daemons with an ipc transport first: "
                     "python spark_app/raims_rollout.py --keep-running")
sub_node = nb.widget("sub_node", found[-1].node, "node of stage two")
pub_node = nb.widget("pub_node", found[0].node, "node of stage one")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Stage two first: the stream source subscribes

# COMMAND ----------

register(spark)
subject = "notebook/pipeline"
query = (spark.readStream.format("raims").option("subject", subject).option("node", sub_node)
         .schema("id long, v double").load()
         .writeStream.format("memory").queryName("pipeline_rows").start())
query.processAllAvailable()

# COMMAND ----------

# MAGIC %md
# MAGIC ## Stage one: one partition publishes every row

# COMMAND ----------

(spark.range(rows).selectExpr("id", "cast(id as double) / 2 as v").repartition(1)
 .foreachPartition(publish_partition(subject, node=pub_node)))

# COMMAND ----------

# MAGIC %md
# MAGIC ## Every row exactly once: count, distinct ids and checksum

# COMMAND ----------

deadline = time.monotonic() + 120
while True:
    query.processAllAvailable()
    got = spark.sql("SELECT count(*) AS n, count(DISTINCT id) AS ids, sum(id) AS checksum FROM pipeline_rows").first()
    if got["n"] >= rows or time.monotonic() > deadline:
        break
    time.sleep(0.2)
query.stop()
print(f"{pub_node} -> {sub_node}: {got['n']} rows, {got['ids']} distinct, checksum "
      f"{got['checksum']} (expected {rows * (rows - 1) // 2})")
assert got["n"] == got["ids"] == rows and got["checksum"] == rows * (rows - 1) // 2
