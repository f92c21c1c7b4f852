# Databricks notebook source
# MAGIC %md
# MAGIC # 03 · Route and bloom audit
# MAGIC
# MAGIC The audit tables (`audit_routes`, `audit_blooms`, `audit_lsdb`) of one snapshot:
# MAGIC findings by check, a drill-down on one node, and the bloom filters' measured
# MAGIC false-positive rate against theory, (1 - e^(-k n / m))^k. A snapshot that was not
# MAGIC audited yet is audited first (into the lake, when the tables are local views).
# MAGIC Widgets: `lake`, `schema`, `snapshot`, `node` (empty: the node with most findings).

# COMMAND ----------

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from spark_app.jobs.audit import TABLE_OF, run_audits

import _raims as nb

lake = nb.raims_lake()
out = nb.output("03_route_and_bloom_audit")
snapshot = nb.latest_snapshot(lake)
audit_tables = list(TABLE_OF.values())


def audited(table: str) -> bool:
    return lake.has(table) and bool(lake.sql(
        f"SELECT 1 FROM {table} WHERE snapshot_id = '{snapshot}' LIMIT 1").collect())


if not all(audited(t) for t in audit_tables):
    if lake.lake is None:
        raise nb.NotebookError(f"snapshot {snapshot} has no audit rows in {lake.source}; run the audit job")
    print(f"auditing snapshot {snapshot} ...")
    print(run_audits(lake.spark, lake.lake, snapshot).summary())
    lake.refresh()
lake.sql(f"SELECT '{snapshot}' AS snapshot_id").createOrReplaceTempView("chosen_snapshot")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Findings by audit and check
# MAGIC Each audit writes one summary row (`check = 'summary'`, `checked`, `findings`) and one
# MAGIC row per finding.

# COMMAND ----------

union = " UNION ALL ".join(
    f"SELECT '{t}' AS audit, node, check, finding, checked, findings, detail FROM {t} "
    f"JOIN chosen_snapshot USING (snapshot_id)" for t in audit_tables)
lake.sql(union).createOrReplaceTempView("audit_rows")
summary = out.table(lake.sql("""
    SELECT audit, check, count_if(finding) AS findings, sum(coalesce(checked, 0)) AS checked
    FROM audit_rows GROUP BY audit, check ORDER BY audit, check"""), "findings_by_check")
by_node = out.table(lake.sql("""
    SELECT node, count_if(finding) AS findings, collect_set(CASE WHEN finding THEN check END) AS checks
    FROM audit_rows WHERE check <> 'summary' GROUP BY node ORDER BY findings DESC, node"""), "findings_by_node")
total = int(summary["findings"].sum())
print(f"snapshot {snapshot}: {total} finding(s)" + ("" if total else " - routes, filters and databases agree"))

# COMMAND ----------

# MAGIC %md
# MAGIC ## Drill-down: one node

# COMMAND ----------

node = nb.widget("node", "", "node to drill into (empty: most findings)") or (
    str(by_node["node"].iloc[0]) if len(by_node) else "")
print(f"node {node}")
out.table(lake.sql(f"""
    SELECT audit, check, finding, detail FROM audit_rows WHERE node = '{node}'
    ORDER BY finding DESC, audit, check LIMIT 200"""), "node_findings")
out.table(lake.sql(f"""
    SELECT check, path, source, dest, expected, reported, detail FROM audit_routes
    JOIN chosen_snapshot USING (snapshot_id) WHERE node = '{node}' AND finding
    ORDER BY check, path, source, dest"""), "node_route_findings")
out.table(lake.sql(f"""
    SELECT user, adj, tport, cost FROM links JOIN chosen_snapshot USING (snapshot_id)
    WHERE node = '{node}' ORDER BY user, adj"""), "node_links")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Bloom filters: false-positive rate against theory
# MAGIC One point per audited filter (measured by probing random subjects), over the theory
# MAGIC curve for the filters' size and hash count.

# COMMAND ----------

filters = out.table(lake.sql("""
    SELECT node, size_bits, num_hashes, entries, probes, fp_hits, fp_measured, fp_expected, finding
    FROM audit_blooms JOIN chosen_snapshot USING (snapshot_id)
    WHERE fp_expected IS NOT NULL ORDER BY node"""), "bloom_fp")

fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
m = int(filters["size_bits"].median()) if len(filters) and filters["size_bits"].notna().any() else 8192
k = int(filters["num_hashes"].median()) if len(filters) and filters["num_hashes"].notna().any() else 4
n = np.linspace(0, max(m / 2, float(filters["entries"].max()) * 1.2 if len(filters) else 0), 200)
left.plot(n, (1 - np.exp(-k * n / m)) ** k, color="black", lw=1.2, label=f"theory, m={m} bits, k={k}")
ok = filters[~filters["finding"].fillna(False).astype(bool)]
bad = filters[filters["finding"].fillna(False).astype(bool)]
left.scatter(ok["entries"], ok["fp_measured"], color="#1b9e77", label=f"measured ({len(ok)} filters)", zorder=3)
left.scatter(bad["entries"], bad["fp_measured"], color="#d95f02", marker="x", s=60,
             label=f"flagged ({len(bad)})", zorder=3)
left.set_xlabel("entries n")
left.set_ylabel("false-positive rate")
left.set_title("measured vs theoretical FP rate")
left.legend(fontsize=8)
lim = max(1e-4, float(filters[["fp_measured", "fp_expected"]].max().max()) * 1.1) if len(filters) else 1.0
right.plot([0, lim], [0, lim], color="black", lw=1, ls="--", label="measured = expected")
right.scatter(filters["fp_expected"], filters["fp_measured"], color="#7570b3", zorder=3)
right.set_xlim(0, lim)
right.set_ylim(0, lim)
right.set_xlabel("expected FP rate (theory)")
right.set_ylabel("measured FP rate")
right.set_title("per filter")
right.legend(fontsize=8)
if filters.empty or not filters["entries"].fillna(0).any():
    right.text(0.5, 0.5, "no subscriptions in this snapshot:\nempty filters have no false positives",
               transform=right.transAxes, ha="center", va="center", fontsize=11,
               bbox={"fc": "white", "ec": "#7570b3"})
fig.suptitle(f"Bloom filters of snapshot {snapshot}")
fig.tight_layout()
out.figure(fig, "bloom_fp")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Findings over time

# COMMAND ----------

trend = out.table(lake.sql(" UNION ALL ".join(
    f"SELECT '{t}' AS audit, snapshot_id, min(collected_at) AS collected_at, count_if(finding) AS findings "
    f"FROM {t} GROUP BY snapshot_id" for t in audit_tables) + " ORDER BY collected_at"), "findings_over_time")
fig, ax = plt.subplots(figsize=(8, 3.5))
snaps = list(dict.fromkeys(trend.sort_values("collected_at")["snapshot_id"]))
for audit_name, rows in trend.groupby("audit"):
    ax.plot([snaps.index(s) for s in rows["snapshot_id"]], rows["findings"], marker="o", label=audit_name)
ax.set_xticks(range(len(snaps)), [s[:16] for s in snaps], rotation=20, ha="right", fontsize=8)
ax.set_xlim(-0.5, max(len(snaps), 2) - 0.5)
ax.set_ylim(0, max(1, int(pd.to_numeric(trend["findings"]).max())) * 1.2)
ax.set_ylabel("findings")
ax.set_title("Audit findings per snapshot")
ax.legend(fontsize=8)
out.figure(fig, "findings_over_time")
