# Databricks notebook source
# MAGIC %md
# MAGIC # 01 · Roll out a Rai MS network
# MAGIC
# MAGIC Deploys one `ms_server` per executor host (several per host on a local master), waits
# MAGIC for the link-state databases to agree, checks traffic, and snapshots every node into
# MAGIC the Delta lake — the stages of `spark_app/raims_rollout.py`, driven from widgets.
# MAGIC Then the snapshot is audited (routes, bloom filters, link state) unless the rollout
# MAGIC already did.
# MAGIC
# MAGIC Outside Databricks the widgets are environment variables: `RAIMS_LAKE`,
# MAGIC `RAIMS_TOPOLOGY`, `RAIMS_NODES_PER_HOST`, ... (see `notebooks/_raims.py`).
# MAGIC
# MAGIC **Cluster caveats:** dynamic allocation off, and at least one free task slot per
# MAGIC executor host for the barrier stage (see `deploy/README.md`).

# COMMAND ----------

from spark_app.controller import Rollout, RolloutFailed
from spark_app.jobs.audit import TABLE_OF, run_audits
from spark_app.settings import load_settings

import _raims as nb

config = nb.widget("config", "", "rollout config (YAML; empty: built-in defaults)")
lake_path = nb.widget("lake", nb.DEFAULT_LAKE, "lake path")
topology = nb.widget("topology", "mesh", "topology: mesh or a graph file")
nodes_per_host = nb.widget("nodes_per_host", "", "daemons per host (empty: default)")
run_dir = nb.widget("run_dir", "run", "run directory on every host")
service = nb.widget("service", "raims", "service name")
audit = nb.widget("audit", "yes", "audit the snapshot (yes/no)")
out = nb.output("01_rollout")

settings = load_settings(
    config or None,
    lake=lake_path,
    topology=topology,
    nodes_per_host=int(nodes_per_host) if nodes_per_host else None,
    run_dir=run_dir,
    service=service,
    queries=False,
)
spark = nb.get_spark()
print(f"service {settings.service}, topology {settings.topology}, lake {settings.lake}, "
      f"master {spark.sparkContext.master}")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Run the stages

# COMMAND ----------

rollout = Rollout(settings, spark)
try:
    outcome = rollout.run()
except RolloutFailed as exc:
    print(rollout.summary())
    raise RuntimeError(f"rollout failed: {exc}") from exc
print(rollout.summary())

# COMMAND ----------

# MAGIC %md
# MAGIC ## What was written

# COMMAND ----------

import pandas as pd  # noqa: E402

out.table(pd.DataFrame(sorted(outcome.written.items()), columns=["table", "rows_written"]), "written")
out.table(pd.DataFrame([{"stage": k, "seconds": v} for k, v in outcome.stages.items()]), "stages")
nodes = pd.DataFrame([{"node": n.node, "executor": n.executor, "pid": n.pid, **n.listeners}
                      for n in outcome.nodes])
out.table(nodes, "nodes")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Audit the snapshot

# COMMAND ----------

if audit.lower() in ("yes", "true", "1") and not any(t in outcome.written for t in TABLE_OF.values()):
    result = run_audits(spark, rollout.lake, outcome.snapshot_id)
    print(f"audit of {outcome.snapshot_id}: {result.summary()}")
    out.table(pd.DataFrame([{"table": t, "findings": n, "rows": result.tables[t].num_rows}
                            for t, n in result.findings().items()]), "audit")
print(f"snapshot {outcome.snapshot_id}: next, 02_network_health and 03_route_and_bloom_audit")
