# Databricks notebook source
# MAGIC %md
# MAGIC # 04 · SQL an operator needs
# MAGIC
# MAGIC Plain SQL over the lake's tables (catalog schema `raims`, or the local views). Each
# MAGIC `%sql` cell runs as it is in Databricks; run as a Python script, the cell below runs
# MAGIC them all through `spark.sql` in order. `latest` is a one-row view of the newest
# MAGIC snapshot id (or the `snapshot` widget's).

# COMMAND ----------

import _raims as nb

lake = nb.raims_lake()
out = nb.output("04_sql_examples")
snapshot = nb.latest_snapshot(lake)
lake.sql(f"SELECT '{snapshot}' AS snapshot_id").createOrReplaceTempView("latest")
print(f"lake: {lake.source}; snapshot {snapshot}")
if not nb.on_databricks():
    nb.run_sql_cells(__file__, lake, out)

# COMMAND ----------

# MAGIC %md
# MAGIC ### Did the last rollouts succeed, and how long did each stage take?

# COMMAND ----------

# MAGIC %sql
# MAGIC SELECT snapshot_id, status, nodes, hosts, converged, traffic_received, validations_failed,
# MAGIC        round(aggregate(map_values(stage_seconds), 0D, (a, x) -> a + x), 1) AS seconds, message
# MAGIC FROM rollouts ORDER BY started_at DESC LIMIT 10

# COMMAND ----------

# MAGIC %md
# MAGIC ### Nodes that do not see every peer

# COMMAND ----------

# MAGIC %sql
# MAGIC WITH seen AS (
# MAGIC   SELECT node, count(*) - 1 AS peers_seen FROM peers JOIN latest USING (snapshot_id) GROUP BY node)
# MAGIC SELECT node, peers_seen, (SELECT count(*) - 1 FROM seen) AS expected
# MAGIC FROM seen WHERE peers_seen < (SELECT count(*) - 1 FROM seen) ORDER BY node

# COMMAND ----------

# MAGIC %md
# MAGIC ### Links and costs as each node sees them (one line per observer)

# COMMAND ----------

# MAGIC %sql
# MAGIC SELECT node, count(*) AS links, min(cost) AS min_cost, max(cost) AS max_cost,
# MAGIC        count(DISTINCT tport) AS transports
# MAGIC FROM links JOIN latest USING (snapshot_id) GROUP BY node ORDER BY node

# COMMAND ----------

# MAGIC %md
# MAGIC ### Slowest peers (latency in ms)

# COMMAND ----------

# MAGIC %sql
# MAGIC SELECT node, user AS peer, tport, round(avg * 1000, 3) AS avg_ms, round(max * 1000, 3) AS max_ms
# MAGIC FROM peers JOIN latest USING (snapshot_id) WHERE lat IS NOT NULL
# MAGIC ORDER BY max DESC LIMIT 10

# COMMAND ----------

# MAGIC %md
# MAGIC ### Message loss by peer, newest snapshot first

# COMMAND ----------

# MAGIC %sql
# MAGIC SELECT snapshot_id, node, user AS peer, msg_loss, ibx_loss, repeat, not_sub, loss_time
# MAGIC FROM loss WHERE msg_loss + ibx_loss + repeat + not_sub > 0
# MAGIC ORDER BY collected_at DESC, msg_loss DESC LIMIT 50

# COMMAND ----------

# MAGIC %md
# MAGIC ### Events per kind in the last snapshot

# COMMAND ----------

# MAGIC %sql
# MAGIC SELECT event, count(*) AS n, count(DISTINCT node) AS nodes, min(stamp) AS first, max(stamp) AS last
# MAGIC FROM events JOIN latest USING (snapshot_id) GROUP BY event ORDER BY n DESC

# COMMAND ----------

# MAGIC %md
# MAGIC ### Failed data-quality expectations

# COMMAND ----------

# MAGIC %sql
# MAGIC SELECT snapshot_id, suite, count(*) AS expectations, count_if(NOT success) AS failed
# MAGIC FROM validations GROUP BY snapshot_id, suite ORDER BY snapshot_id DESC, suite LIMIT 30

# COMMAND ----------

# MAGIC %md
# MAGIC ### Subscriptions per node and bloom filter sizes

# COMMAND ----------

# MAGIC %sql
# MAGIC SELECT b.node, b.subs, b.total, b.size_bits, b.num_hashes,
# MAGIC        (SELECT count(*) FROM subs s WHERE s.snapshot_id = b.snapshot_id AND s.node = b.node) AS sub_rows
# MAGIC FROM blooms b JOIN latest USING (snapshot_id) WHERE b.dest = 'ipc' ORDER BY b.node
