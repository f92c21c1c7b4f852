"""Severity and root cause of the audits' findings: one fault shows as several findings
(a node with a stale view reports wrong next hops and tree edges; a wrong tree edge
breaks its tree's coverage), and an operator wants the fault once, with how bad it is.

Runs on the driver over the three audit tables of one run (the findings are few next to
the snapshot), after the kernels, so it can look across audits.

Decisions where the issue is silent:
- Severity by check (`SEVERITY`): `critical` when messages are lost or the network is
  split (a subscription missing from a filter, a tree that misses nodes, a partition, a
  link only one end lists, an unreadable filter, an impostor), `major` when a node's
  state differs from the reference (routes, trees, views, seqnos, extra filter entries,
  a stale peer copy), `minor` for costs and sizing.
- A finding's id is `table:check:node[:subject]`, subject being the peer, the source
  (with the path), the dest or the subscription, whichever the row has.
- Cascades, each to the root's id: a routing finding (next_hop, route_cost, tree_edge)
  at a node whose own view of the network has an LSDB finding follows from the first
  such (by id); a tree_coverage of (path, source) follows from that tree's first
  tree_edge (and so from its root); an fp_rate follows from a resize of the same
  filter. Every other finding is its own root.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import pandas as pd
import pyarrow as pa

SEVERITY: Final[Mapping[str, str]] = {
    "partition": "critical", "asymmetric_link": "critical", "missing": "critical",
    "undecodable": "critical", "no_filter": "critical", "tree_coverage": "critical",
    "peer_identity": "critical",
    "next_hop": "major", "tree_edge": "major", "link_set": "major", "stale_link_seqno": "major",
    "stale_sub_seqno": "major", "future_link_seqno": "major", "future_sub_seqno": "major",
    "peer_unseen": "major", "zombie": "major", "over_inclusive": "major", "peer_copy": "major",
    "unhashable": "major", "geometry": "major",
    "route_cost": "minor", "link_cost": "minor", "resize": "minor", "fp_rate": "minor",
}
DEFAULT_SEVERITY: Final = "major"
VIEW_CASCADES: Final = frozenset({"next_hop", "route_cost", "tree_edge"})
SUBJECT_COLUMNS: Final[Mapping[str, tuple[str, ...]]] = {
    "audit_lsdb": ("peer",),
    "audit_routes": ("path", "source", "dest"),
    "audit_blooms": ("subject",),
}


def _ids(table: str, rows: pd.DataFrame) -> pd.Series:
    parts = [rows["check"].astype(str), rows["node"].astype(str)]
    for c in SUBJECT_COLUMNS[table]:
        if c in rows:
            parts.append(rows[c].astype(object).where(rows[c].notna(), "").astype(str))
    out = pd.Series(table, index=rows.index, dtype=object)
    for p in parts:
        out = out + ":" + p
    return out.str.rstrip(":")


def classify(tables: Mapping[str, pa.Table]) -> dict[str, pa.Table]:
    """`tables` (audit table -> rows as written) with `severity` and `cause` filled in."""
    frames = {t: rows.to_pandas() for t, rows in tables.items()}
    ids = {t: _ids(t, f) for t, f in frames.items()}
    causes = {t: ids[t].where(f["finding"].astype(bool), None) for t, f in frames.items()}
    lsdb = frames.get("audit_lsdb")
    views: dict[tuple[str, str], str] = {}  # (snapshot, observer) -> first LSDB finding at it
    if lsdb is not None:
        own = lsdb[lsdb["finding"].astype(bool) & (lsdb["node"] != "*")]
        for sid, node, fid in sorted(zip(own["snapshot_id"], own["node"], ids["audit_lsdb"][own.index], strict=True)):
            views.setdefault((sid, node), fid)
    if "audit_routes" in frames:
        r, c = frames["audit_routes"], causes["audit_routes"]
        is_f = r["finding"].astype(bool)
        for i in r.index[is_f & r["check"].isin(VIEW_CASCADES)]:
            root = views.get((r.at[i, "snapshot_id"], r.at[i, "node"]))
            if root is not None:
                c.at[i] = root
        first_edge: dict[tuple[str, object, object], str] = {}
        edges = r.index[is_f & (r["check"] == "tree_edge")]
        for i in sorted(edges, key=lambda i: ids["audit_routes"][i]):
            first_edge.setdefault((r.at[i, "snapshot_id"], r.at[i, "path"], r.at[i, "source"]), c.at[i])
        for i in r.index[is_f & (r["check"] == "tree_coverage")]:
            root = first_edge.get((r.at[i, "snapshot_id"], r.at[i, "path"], r.at[i, "source"]))
            if root is not None:
                c.at[i] = root
    if "audit_blooms" in frames:
        b, c = frames["audit_blooms"], causes["audit_blooms"]
        is_f = b["finding"].astype(bool)
        sel = b[is_f & (b["check"] == "resize")]
        resized = {
            (s, n): ids["audit_blooms"][i]
            for i, s, n in zip(sel.index, sel["snapshot_id"], sel["node"], strict=True)
        }
        for i in b.index[is_f & (b["check"] == "fp_rate")]:
            root = resized.get((b.at[i, "snapshot_id"], b.at[i, "node"]))
            if root is not None:
                c.at[i] = root
    out = {}
    for t, rows in tables.items():
        f = frames[t]
        finding = f["finding"].astype(bool)
        severity = f["check"].map(lambda k: SEVERITY.get(k, DEFAULT_SEVERITY)).where(finding, None)
        table = rows
        for name, values in (("severity", severity), ("cause", causes[t])):
            arr = pa.array(values.astype(object).where(values.notna(), None).tolist(), type=pa.string())
            table = table.set_column(table.schema.get_field_index(name), name, arr)
        out[t] = table
    return out
