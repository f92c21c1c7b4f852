# Databricks notebook source
# MAGIC %md
# MAGIC # 02 · Is the network healthy?
# MAGIC
# MAGIC From the lake's tables: did every rollout converge and how fast, does every node see
# MAGIC every peer, do the nodes agree on the links (and their costs), is anything lost, and
# MAGIC what happened when (the event recorders). Widgets: `lake`, `schema`, `snapshot`
# MAGIC (empty: the latest), `output_dir`.

# COMMAND ----------

import math

import matplotlib.pyplot as plt
import pandas as pd

import _raims as nb

lake = nb.raims_lake()
out = nb.output("02_network_health")
snapshot = nb.latest_snapshot(lake)
lake.sql(f"SELECT '{snapshot}' AS snapshot_id").createOrReplaceTempView("chosen_snapshot")
print(f"lake: {lake.source}; tables: {', '.join(lake.tables)}; snapshot {snapshot}")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Convergence over time
# MAGIC One row per rollout: status, nodes, traffic, and how long start and convergence took.

# COMMAND ----------

rollouts = out.table(lake.sql("""
    SELECT snapshot_id, started_at, status, converged, hosts, nodes,
           traffic_sent, traffic_received, validations_failed,
           stage_seconds['start'] AS start_s, stage_seconds['converge'] AS converge_s, message
    FROM rollouts ORDER BY started_at"""), "rollouts")

fig, ax = plt.subplots(figsize=(8, 3.6))
labels = [f"{str(t)[:19]}\n{'converged' if ok else 'NOT converged'}"
          for t, ok in zip(rollouts["started_at"], rollouts["converged"], strict=True)]
x = range(len(rollouts))
ax.bar([i - 0.2 for i in x], rollouts["start_s"].fillna(0), width=0.4, label="start (s)", color="#8da0cb")
ax.bar([i + 0.2 for i in x], rollouts["converge_s"].fillna(0), width=0.4, label="converge (s)", color="#66c2a5")
ax.set_xticks(list(x), labels, fontsize=8)
ax.set_xlim(-0.8, max(len(rollouts), 3) - 0.2)  # one rollout still gets narrow bars
ax.set_ylabel("seconds")
ax.set_title("Rollouts: time to start the daemons and to converge")
ax.legend(loc="upper right")
out.figure(fig, "convergence")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Peers: does every node see every other?

# COMMAND ----------

peers = out.table(lake.sql("""
    SELECT node, count(*) - 1 AS peers_seen, round(avg(lat) * 1000, 3) AS avg_lat_ms,
           round(max(max) * 1000, 3) AS max_lat_ms, min(seq) AS min_seq, max(seq) AS max_seq
    FROM peers JOIN chosen_snapshot USING (snapshot_id)
    GROUP BY node ORDER BY node"""), "peers")
expected = len(peers) - 1
missing = peers[peers["peers_seen"] < expected]
print(f"{len(peers)} nodes; every node should see {expected} peers: "
      + ("all do" if missing.empty else f"{', '.join(missing['node'])} do not"))

# COMMAND ----------

# MAGIC %md
# MAGIC ## Links: one link-state database?
# MAGIC Every observer should report the same set of links; `distinct_views` > 1 means the
# MAGIC network has not converged (or a node's database is stale).

# COMMAND ----------

links = lake.sql("""
    SELECT node, user, adj, tport, type, cost FROM links JOIN chosen_snapshot USING (snapshot_id)""").toPandas()
links["src"] = links["user"].map(nb.node_name).where(~links["user"].str.endswith(".*"), links["node"])
links["dst"] = links["adj"].map(nb.node_name)
views = links.groupby("node").apply(
    lambda g: hash(tuple(sorted(zip(g["src"], g["dst"], g["cost"], strict=True)))), include_groups=False)
agreement = out.table(pd.DataFrame({"observers": [len(views)], "distinct_views": [views.nunique()],
                                    "links_per_view": [int(links.groupby("node").size().max())]}),
                      "link_agreement")

# COMMAND ----------

# the topology as the first observer sees it: nodes on a circle, one line per link with its cost
edges: dict[tuple[str, str], set[int]] = {}
first = links[links["node"] == sorted(links["node"].unique())[0]]
for src, dst, cost in zip(first["src"], first["dst"], first["cost"], strict=True):
    edges.setdefault((min(src, dst), max(src, dst)), set()).add(int(cost))
names = sorted({n for e in edges for n in e})
pos = {n: (math.cos(2 * math.pi * i / len(names) + math.pi / 2), math.sin(2 * math.pi * i / len(names) + math.pi / 2))
       for i, n in enumerate(names)}
fig, ax = plt.subplots(figsize=(6.5, 6.5))
for (a, b), costs in edges.items():
    (xa, ya), (xb, yb) = pos[a], pos[b]
    ax.plot([xa, xb], [ya, yb], color="#999999", lw=1.5, zorder=1)
    ax.text(xa + (xb - xa) * 0.35, ya + (yb - ya) * 0.35, "/".join(map(str, sorted(costs))), fontsize=9,
            ha="center", va="center", bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "#cccccc"}, zorder=2)
seen = dict(zip(peers["node"], peers["peers_seen"], strict=True))
for n, (x0, y0) in pos.items():
    ok = seen.get(n, 0) >= expected
    ax.scatter([x0], [y0], s=1400, color="#66c2a5" if ok else "#fc8d62", edgecolor="black", zorder=3)
    ax.text(x0, y0, n, ha="center", va="center", fontsize=10, fontweight="bold", zorder=4)
ax.set_title(f"Topology of {snapshot}\n{len(names)} nodes, {len(edges)} links (label: cost); "
             "red = node missing peers", fontsize=10)
ax.set_xlim(-1.35, 1.35)
ax.set_ylim(-1.35, 1.35)
ax.set_aspect("equal")
ax.axis("off")
out.figure(fig, "topology")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Loss over time
# MAGIC Repeated, not-subscribed, lost and inbox-lost messages, per snapshot and per peer.

# COMMAND ----------

kinds = ["msg_loss", "ibx_loss", "repeat", "not_sub"]
loss_time = out.table(lake.sql(f"""
    SELECT snapshot_id, min(collected_at) AS collected_at, {', '.join(f'sum({k}) AS {k}' for k in kinds)}
    FROM loss GROUP BY snapshot_id ORDER BY collected_at"""), "loss_over_time")
loss_now = out.table(lake.sql(f"""
    SELECT node, user, {', '.join(kinds)} FROM loss JOIN chosen_snapshot USING (snapshot_id)
    ORDER BY node, user"""), "loss_by_peer")

fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4), gridspec_kw={"width_ratios": [1, 1.3]})
for k in kinds:
    left.plot(range(len(loss_time)), loss_time[k], marker="o", label=k)
left.set_xticks(range(len(loss_time)), [str(t)[:19] for t in loss_time["collected_at"]], rotation=20,
                ha="right", fontsize=8)
left.set_xlim(-0.5, max(len(loss_time), 2) - 0.5)
left.set_ylim(0, max(1, float(loss_time[kinds].to_numpy().max())) * 1.1)
left.set_title("messages per snapshot (all nodes)")
left.set_ylabel("messages")
left.legend(fontsize=8)
pairs = [f"{a} <- {nb.node_name(b)}" for a, b in zip(loss_now["node"], loss_now["user"], strict=True)]
bottom = pd.Series(0, index=loss_now.index, dtype=float)
for k in kinds:
    right.barh(pairs, loss_now[k], left=bottom, label=k)
    bottom += loss_now[k]
right.invert_yaxis()
right.tick_params(axis="y", labelsize=8)
right.set_xlabel("messages")
right.set_title(f"per peer, snapshot {snapshot}")
if bottom.sum() == 0:
    right.text(0.5, 0.5, "no loss recorded", transform=right.transAxes, ha="center", va="center",
               fontsize=14, color="#2b8a3e", bbox={"fc": "white", "ec": "#2b8a3e"})
    right.set_xlim(0, 1)
fig.suptitle("Message loss")
fig.tight_layout()
out.figure(fig, "loss")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Events over time
# MAGIC The event recorders of the snapshot: what each node did from start-up to convergence.

# COMMAND ----------

events = lake.sql("""
    SELECT node, stamp, event, tport, peer FROM events JOIN chosen_snapshot USING (snapshot_id)""").toPandas()
out.table(events.groupby("event").size().rename("count").sort_values(ascending=False).reset_index(), "event_counts")
# event name -> group: the first group with a substring of the name, in this order
groups = {"start": ("startup", "converge"),
          "connect/auth": ("connect", "hello", "challenge", "trust", "auth", "shutdown"),
          "adjacency": ("adj",), "sync": ("sync", "peer_db"), "routes/blooms": ("route", "bloom")}


def group_of(event: str) -> str:
    return next((name for name, keys in groups.items() if any(k in event for k in keys)), "other")


events["group"] = events["event"].map(group_of)
t0 = pd.to_datetime(events["stamp"]).min()
events["seconds"] = (pd.to_datetime(events["stamp"]) - t0).dt.total_seconds()
nodes_sorted = sorted(events["node"].unique())
fig, ax = plt.subplots(figsize=(10, 0.6 * len(nodes_sorted) + 1.8))
lanes = [*groups, "other"]  # one lane per group in each node's row, so groups do not hide each other
for g, color in zip(lanes, ["#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#999999"],
                    strict=True):
    sel = events[events["group"] == g]
    row = sel["node"].map(nodes_sorted.index) + (len(lanes) - 1) / 2 * 0.12 - lanes.index(g) * 0.12
    ax.scatter(sel["seconds"], row, s=28, alpha=0.7, color=color,
               label=f"{g} ({len(sel)})")
ax.set_yticks(range(len(nodes_sorted)), nodes_sorted)
ax.set_xlabel(f"seconds since {t0:%Y-%m-%d %H:%M:%S} UTC")
ax.set_title(f"Event recorder timeline, snapshot {snapshot}")
ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=6, fontsize=8)
ax.grid(axis="x", alpha=0.3)
out.figure(fig, "events")
