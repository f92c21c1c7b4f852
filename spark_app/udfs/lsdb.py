"""Link-state agreement audit: do all observers hold the same link-state database?

Manual "Networking" ("the LSDB is the same in every one"; a peer record carries its sub
and link seqnos; "The LSDB is considered consistent when all peers agree that a link
exists. If peer A has an outgoing link to peer B, then peer B must have a link to peer
A"), "_Z.ADJ" (the link seqno orders link changes), "show peers" / "show peers zombie"
(dead peers). Input: the `peers` rows (each observer's `show peers`) and `links` rows
(each observer's `show adjacency`) of one snapshot. Output: `audit_lsdb` rows, and the
reference database the routing audit recomputes routes from.

Decisions where the manual is vague:
- Peers are keyed by user name (see `labels`). Observers are the nodes that reported
  `peers` rows. A peer belongs to the network when it is an observer itself or more than
  half of the observers see it; a member some observer does not list is `peer_unseen` (one
  row per such observer), a non-member some observers still list is a `zombie` (one row
  per observer holding it).
- Seqnos only grow, so the newest value any observer holds is the reference: an observer
  holding an older link or sub seqno of a member is `stale_link_seqno` /
  `stale_sub_seqno`. Its link set for that peer is not compared (it is expected to differ).
- The reference link set of a member is the one held by the most observers among those at
  its newest link seqno (ties: the smallest set signature, then the smallest observer
  name). An observer at the newest seqno holding another set is `link_set`, with the
  reference links it lacks as `expected` and its links the reference lacks as `reported`;
  so a link dropped from one observer's view is one row, whatever it breaks downstream.
- A link is (tport label, adj name, the four path costs); a null cost2..cost4 takes cost,
  as `expand_cost` repeats one value. Rows without an adj (the ipc transport, or a peer
  without links) are not links.
- Asymmetric links are checked once, on the reference database: a member's link to a peer
  that lists no link back (or to a peer that is not a member) is `asymmetric_link`, node
  '*'. The peer identity (bridge and start time) of a member is the pair most observers
  report (ties: the newer start).
- Work is split by peer (`labels.chunk_of` into buckets): every check above needs only one
  peer's rows from all observers, except the asymmetric check, which runs on the
  reference database (one row per node and per link) grouped by snapshot.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Final

import numpy as np
import numpy.typing as npt
import pandas as pd

from spark_app.udfs.frames import (
    SNAPSHOT_NODE,
    ddl,
    empty_frame,
    finding_rows,
    kernel_schema_ddl,
    typed,
    with_summary,
)
from spark_app.udfs.labels import chunk_of, peer_names

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

TABLE: Final = "audit_lsdb"
NUM_PATHS: Final = 4
COST_COLUMNS: Final = ("cost", "cost2", "cost3", "cost4")
PEER_COLUMNS: Final = ("snapshot_id", "node", "user", "bridge", "seq", "link", "time")
LINK_COLUMNS: Final = ("snapshot_id", "node", "user", "adj", "tport", "type", *COST_COLUMNS)
NODE_KIND: Final = "node"
LINK_KIND: Final = "link"
BUCKET: Final = "bucket"
# The reference database: one row per member ("node") and per link of a member ("link").
REFERENCE_COLUMNS: Final = (
    ("snapshot_id", "string"),
    ("kind", "string"),
    ("peer", "string"),
    ("bridge", "string"),
    ("start", "long"),
    ("link_seqno", "long"),
    ("sub_seqno", "long"),
    ("adj", "string"),
    ("tport", "string"),
    ("type", "string"),
    *((c, "int") for c in COST_COLUMNS),
)
_MIX: Final = (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB)

UInts = npt.NDArray[np.uint64]


def micros(values: pd.Series) -> pd.Series:
    """Timestamps (any unit or zone, from Spark or Arrow) as microseconds since the epoch."""
    ts = pd.to_datetime(values, utc=True).dt.as_unit("us")
    return pd.Series(ts.astype("int64").where(ts.notna()), dtype="Int64")


def peer_views(peers: pd.DataFrame) -> pd.DataFrame:
    """One row per (observer, peer): the peer's bridge, start time and seqnos as held."""
    views = pd.DataFrame(
        {
            "observer": peers["node"].to_numpy(dtype=object),
            "peer": peer_names(peers["user"]),
            "bridge": peers["bridge"].to_numpy(dtype=object),
            "start": micros(peers["time"]).array,
            "link_seqno": pd.array(peers["link"], dtype="Int64"),
            "sub_seqno": pd.array(peers["seq"], dtype="Int64"),
        }
    )
    return views.drop_duplicates(["observer", "peer"], ignore_index=True)


def link_views(links: pd.DataFrame) -> pd.DataFrame:
    """One row per link an observer holds: owner peer, adj, tport, type, four costs."""
    has_adj = links["adj"].notna().to_numpy()
    rows = links[has_adj]
    base = pd.array(rows["cost"], dtype="Int64")
    out = pd.DataFrame(
        {
            "observer": rows["node"].to_numpy(dtype=object),
            "peer": peer_names(rows["user"]),
            "adj": peer_names(rows["adj"]),
            "tport": rows["tport"].to_numpy(dtype=object),
            "type": rows["type"].to_numpy(dtype=object),
        }
    )
    for name in COST_COLUMNS:
        out[name] = pd.array(rows[name], dtype="Int64").fillna(base) if name != "cost" else base
    return out


def _mix(x: UInts) -> UInts:
    """splitmix64's finalizer: set signatures add these, so equal sets sum equal."""
    z = x + np.uint64(_MIX[0])
    z = (z ^ (z >> np.uint64(30))) * np.uint64(_MIX[1])
    z = (z ^ (z >> np.uint64(27))) * np.uint64(_MIX[2])
    return z ^ (z >> np.uint64(31))


def _link_codes(lv: pd.DataFrame) -> npt.NDArray[np.int64]:
    """One integer per distinct link (tport, adj, costs)."""
    if lv.empty:
        return np.zeros(0, dtype=np.int64)
    keys = ["tport", "adj", *COST_COLUMNS]
    return lv.groupby(keys, sort=False, dropna=False).ngroup().to_numpy(dtype=np.int64)


def _describe(lv: pd.DataFrame) -> pd.Series:
    costs = lv[list(COST_COLUMNS)].astype(str).agg(",".join, axis=1)
    return lv["tport"].astype(str) + ">" + lv["adj"].astype(str) + "[" + costs + "]"


def _signatures(views: pd.DataFrame, lv: pd.DataFrame, codes: npt.NDArray[np.int64]) -> pd.DataFrame:
    """`views` with the signature (sum of mixed link codes, count) of each view's link set."""
    out = views.copy()
    out["sig"] = pd.array(np.zeros(len(out), dtype=np.uint64), dtype="UInt64")
    out["n_links"] = 0
    if lv.empty:
        return out
    pair = pd.MultiIndex.from_arrays([lv["observer"], lv["peer"]])
    pair_codes, pairs = pd.factorize(pair)
    order = np.argsort(pair_codes, kind="stable")
    sorted_pairs = pair_codes[order]
    starts = np.flatnonzero(np.r_[True, sorted_pairs[1:] != sorted_pairs[:-1]])
    sums = np.add.reduceat(_mix(codes[order].astype(np.uint64)), starts)
    counts = np.diff(np.r_[starts, len(order)])
    held = pd.DataFrame(
        {
            "observer": pairs.get_level_values(0)[sorted_pairs[starts]],
            "peer": pairs.get_level_values(1)[sorted_pairs[starts]],
            "sig": pd.array(sums, dtype="UInt64"),  # nullable: the merge keeps all 64 bits
            "n_links": counts,
        }
    )
    out = out.drop(columns=["sig", "n_links"]).merge(held, on=["observer", "peer"], how="left")
    out["sig"] = out["sig"].fillna(0)
    out["n_links"] = out["n_links"].fillna(0).astype(np.int64)
    return out


def _members(views: pd.DataFrame, observers: Sequence[str]) -> pd.DataFrame:
    """Per peer: how many observers see it and whether it belongs to the network."""
    seen = views.groupby("peer", sort=True)["observer"].nunique().rename("seen").reset_index()
    seen["member"] = seen["peer"].isin(set(observers)) | (seen["seen"] * 2 > len(observers))
    return seen


def _newest(views: pd.DataFrame) -> pd.DataFrame:
    """Per peer, the reference seqnos: the owner's own (it alone makes them), or the
    newest any observer holds when the owner did not report."""
    own = views[(views["observer"] == views["peer"]).to_numpy(dtype=bool)]
    own = own.drop_duplicates("peer").set_index("peer")[["link_seqno", "sub_seqno"]]
    most = views.groupby("peer", sort=True)[["link_seqno", "sub_seqno"]].max()
    ref = own.reindex(most.index).combine_first(most) if len(own) else most
    ref = ref.astype("Int64")
    return ref.rename(columns={"link_seqno": "newest_link", "sub_seqno": "newest_sub"}).reset_index()


def _at_newest(views: pd.DataFrame) -> npt.NDArray[np.bool_]:
    """Views holding their peer's newest link seqno (all views when no seqno is known)."""
    known = views["newest_link"].notna()
    same = (views["link_seqno"] == views["newest_link"]).fillna(False)
    return np.asarray((~known | same).to_numpy(dtype=bool))


def _reference_observers(views: pd.DataFrame) -> pd.DataFrame:
    """Per member: the signature most observers at its newest link seqno hold, and the
    first observer holding it."""
    cand = views[_at_newest(views) & views["member"].to_numpy(dtype=bool)]
    votes = cand.groupby(["peer", "sig", "n_links"], sort=False).agg(
        votes=("observer", "size"), ref_observer=("observer", "min")
    )
    votes = votes.reset_index().sort_values(
        ["peer", "votes", "sig", "n_links"], ascending=[True, False, True, True]
    )
    best = votes.drop_duplicates("peer")
    return best.rename(columns={"sig": "ref_sig", "n_links": "ref_links"})[
        ["peer", "ref_sig", "ref_links", "ref_observer"]
    ]


def _identities(views: pd.DataFrame) -> pd.DataFrame:
    """Per peer, its reference identity (bridge, start): the one it reports itself, or
    the pair most observers report when it did not report (ties to the newer start)."""
    ident = views.groupby(["peer", "bridge", "start"], sort=False, dropna=False).size()
    ident = ident.rename("n").reset_index()
    ident["own"] = False
    own = views[(views["observer"] == views["peer"]).to_numpy(dtype=bool)][["peer", "bridge", "start"]]
    own = own.assign(n=0, own=True)
    ident = pd.concat([ident, own], ignore_index=True).sort_values(
        ["peer", "own", "n", "start"], ascending=[True, False, False, False]
    )
    return ident.drop_duplicates("peer")[["peer", "bridge", "start"]]


class _Snapshot:
    """The views of one snapshot (or one bucket of its peers), joined once."""

    def __init__(
        self, peers: pd.DataFrame, links: pd.DataFrame, observers: Sequence[str] | None
    ) -> None:
        self.snapshot_id = str(peers["snapshot_id"].iat[0]) if len(peers) else ""
        views = peer_views(peers)
        self.observers = (
            sorted(views["observer"].unique()) if observers is None else list(observers)
        )
        self.lv = link_views(links)
        self.codes = _link_codes(self.lv)
        members = _members(views, self.observers)
        views = _signatures(views, self.lv, self.codes)
        views = views.merge(members, on="peer").merge(_newest(views), on="peer")
        self.members = members
        self.views = views
        self.reference = _reference_observers(views)

    def reference_links(self) -> pd.DataFrame:
        ref = self.reference[["peer", "ref_observer"]].rename(columns={"ref_observer": "observer"})
        return self.lv.merge(ref, on=["observer", "peer"])

    def member_peers(self) -> pd.DataFrame:
        m = self.members[self.members["member"]][["peer"]]
        return m.merge(_identities(self.views), on="peer").merge(_newest(self.views), on="peer")


def reference_lsdb(
    peers: pd.DataFrame, links: pd.DataFrame, observers: Sequence[str] | None = None
) -> pd.DataFrame:
    """The reference database of the members among `peers` (module docstring): one `node`
    row per member, one `link` row per link of its reference link set."""
    snap = _Snapshot(peers, links, observers)
    nodes = snap.member_peers()
    node_rows = pd.DataFrame(
        {
            "kind": NODE_KIND,
            "peer": nodes["peer"],
            "bridge": nodes["bridge"],
            "start": nodes["start"],
            "link_seqno": nodes["newest_link"],
            "sub_seqno": nodes["newest_sub"],
        }
    )
    ref = snap.reference_links()
    link_rows = pd.DataFrame({"kind": LINK_KIND, **{c: ref[c] for c in ("peer", "adj", "tport", "type", *COST_COLUMNS)}})
    out = pd.concat([node_rows, link_rows], ignore_index=True)
    out.insert(0, "snapshot_id", snap.snapshot_id)
    return typed(out, REFERENCE_COLUMNS)


def empty_reference() -> pd.DataFrame:
    return typed({}, REFERENCE_COLUMNS)


def _visibility(snap: _Snapshot) -> list[pd.DataFrame]:
    views, members = snap.views, snap.members
    out = []
    partial = members[members["member"] & (members["seen"] < len(snap.observers))]
    if len(partial):
        some = views[views["peer"].isin(set(partial["peer"])).to_numpy()]
        seen_pairs = set(zip(some["observer"], some["peer"], strict=True))
        missing = [
            (o, p, s)
            for p, s in zip(partial["peer"], partial["seen"], strict=True)
            for o in snap.observers
            if o != p and (o, p) not in seen_pairs
        ]
        if missing:
            obs, peer, seen = zip(*missing, strict=True)
            out.append(
                finding_rows(
                    TABLE, snap.snapshot_id, "peer_unseen", node=list(obs), peer=list(peer),
                    expected="listed", reported=None, observers=list(seen),
                )
            )
    zombies = views[~views["member"].to_numpy(dtype=bool)]
    if len(zombies):
        out.append(
            finding_rows(
                TABLE, snap.snapshot_id, "zombie", node=zombies["observer"], peer=zombies["peer"],
                expected=None, reported="listed", observers=zombies["seen"],
            )
        )
    return out


def _stale(snap: _Snapshot) -> list[pd.DataFrame]:
    """Seqnos behind the reference (the observer missed updates) and ahead of it (the
    observer holds a seqno the owner never made: the observer is at fault, not the
    others)."""
    v = snap.views[snap.views["member"].to_numpy(dtype=bool)]
    out = []
    for check, have, newest, ahead in (
        ("stale_link_seqno", "link_seqno", "newest_link", False),
        ("stale_sub_seqno", "sub_seqno", "newest_sub", False),
        ("future_link_seqno", "link_seqno", "newest_link", True),
        ("future_sub_seqno", "sub_seqno", "newest_sub", True),
    ):
        off = (v[have] > v[newest]) if ahead else (v[have] < v[newest])
        behind = v[off.fillna(False).to_numpy(dtype=bool)]
        if len(behind):
            out.append(
                finding_rows(
                    TABLE, snap.snapshot_id, check, node=behind["observer"], peer=behind["peer"],
                    expected=behind[newest].astype(str), reported=behind[have].astype(str),
                )
            )
    return out


def _differs(a: pd.Series, b: pd.Series) -> npt.NDArray[np.bool_]:
    """Element-wise inequality where two nulls are equal and a null differs from a value."""
    na, nb = a.isna().to_numpy(dtype=bool), b.isna().to_numpy(dtype=bool)
    same = np.zeros(len(a), dtype=bool)
    both = ~na & ~nb
    same[both] = a.to_numpy(dtype=object)[both] == b.to_numpy(dtype=object)[both]
    return np.asarray(~(same | (na & nb)), dtype=bool)


def _identity(snap: _Snapshot) -> list[pd.DataFrame]:
    """`peer_identity`: an observer holding another bridge or start time for a peer than
    the peer's reference identity (an impostor using its name, or a restart the
    observer missed)."""
    v = snap.views[snap.views["member"].to_numpy(dtype=bool)]
    ref = _identities(v).rename(columns={"bridge": "ref_bridge", "start": "ref_start"})
    v = v.merge(ref, on="peer")
    bridge_differs = _differs(v["bridge"], v["ref_bridge"])
    wrong = bridge_differs | _differs(v["start"], v["ref_start"])
    bad = v[wrong]
    if bad.empty:
        return []

    def who(bridge: pd.Series, start: pd.Series) -> list[str]:
        return [f"{b}@{s}" for b, s in zip(bridge, start.astype(object), strict=True)]

    return [
        finding_rows(
            TABLE, snap.snapshot_id, "peer_identity", node=bad["observer"], peer=bad["peer"],
            expected=who(bad["ref_bridge"], bad["ref_start"]), reported=who(bad["bridge"], bad["start"]),
            detail=[json.dumps({"bridge_differs": bool(x)}) for x in bridge_differs[wrong]],
        )
    ]


def _link_sets(snap: _Snapshot) -> list[pd.DataFrame]:
    v = snap.views[_at_newest(snap.views) & snap.views["member"].to_numpy(dtype=bool)]
    v = v.merge(snap.reference, on="peer")
    bad = v[(v["sig"] != v["ref_sig"]) | (v["n_links"] != v["ref_links"])]
    if bad.empty:
        return []
    involved = set(bad["observer"]) | set(bad["ref_observer"])
    keep = (snap.lv["peer"].isin(set(bad["peer"])) & snap.lv["observer"].isin(involved)).to_numpy()
    lv = snap.lv[keep].assign(code=snap.codes[keep])
    lv = lv.assign(text=_describe(lv))
    held = lv.groupby(["observer", "peer"], sort=False)["code"].agg(frozenset)
    text = dict(zip(lv["code"], lv["text"], strict=True))
    expected, reported = [], []
    for o, p, r in zip(bad["observer"], bad["peer"], bad["ref_observer"], strict=True):
        mine = held.get((o, p), frozenset())
        ref = held.get((r, p), frozenset())
        expected.append(" ".join(sorted(text[c] for c in ref - mine)) or None)
        reported.append(" ".join(sorted(text[c] for c in mine - ref)) or None)
    votes = snap.views.groupby(["peer", "sig", "n_links"]).size()
    agree = [int(votes.get((p, s, n), 0)) for p, s, n in zip(bad["peer"], bad["sig"], bad["n_links"], strict=True)]
    return [
        finding_rows(
            TABLE, snap.snapshot_id, "link_set", node=bad["observer"], peer=bad["peer"],
            expected=expected, reported=reported, observers=agree,
        )
    ]


def audit_views(
    peers: pd.DataFrame, links: pd.DataFrame, observers: Sequence[str] | None = None
) -> pd.DataFrame:
    """Findings about each observer's view of each peer among `peers` (zombies, unseen
    peers, stale seqnos, link sets), then a summary row."""
    if peers.empty:
        return empty_frame(TABLE)
    snap = _Snapshot(peers, links, observers)
    members = snap.views["member"].to_numpy(dtype=bool)
    counts = {
        "views": len(snap.views),
        "link_sets": int(np.count_nonzero(_at_newest(snap.views) & members)),
        "identities": int(np.count_nonzero(members)),
    }
    parts = [*_visibility(snap), *_stale(snap), *_identity(snap), *_link_sets(snap)]
    return with_summary(TABLE, snap.snapshot_id, counts, parts)


def audit_links(reference: pd.DataFrame) -> pd.DataFrame:
    """Asymmetric links of the reference database (a link without its reverse), then a
    summary row."""
    if reference.empty:
        return empty_frame(TABLE)
    snapshot_id = str(reference["snapshot_id"].iat[0])
    is_link = (reference["kind"] == LINK_KIND).to_numpy()
    members = set(reference.loc[~is_link, "peer"])
    links = reference[is_link]
    forward = set(zip(links["peer"], links["adj"], strict=True))
    back = np.fromiter(
        ((a, p) in forward for p, a in zip(links["peer"], links["adj"], strict=True)),
        dtype=bool, count=len(links),
    )
    lone = links[~back]
    parts = []
    if len(lone):
        known = lone["adj"].isin(members)
        parts.append(
            finding_rows(
                TABLE, snapshot_id, "asymmetric_link", node=SNAPSHOT_NODE, peer=lone["peer"],
                adj=lone["adj"], tport=lone["tport"], expected=lone["adj"] + " -> " + lone["peer"],
                detail=[json.dumps({"adj_is_member": bool(k)}) for k in known],
            )
        )
    parts += _link_costs(snapshot_id, links)
    return with_summary(TABLE, snapshot_id, {"links": len(links)}, parts)


def _link_costs(snapshot_id: str, links: pd.DataFrame) -> list[pd.DataFrame]:
    """`link_cost`: the two ends of a link advertise different costs (the lowest of their
    parallel links, path by path): routes and trees then differ by direction. One row
    per pair of peers, `peer` the lesser name."""
    if links.empty:
        return []
    lowest = links.groupby(["peer", "adj"], sort=True)[list(COST_COLUMNS)].min()
    flipped = lowest.copy()
    flipped.index = flipped.index.swaplevel(0, 1).rename(["peer", "adj"])
    pairs = lowest.join(flipped, rsuffix="_back", how="inner").reset_index()
    pairs = pairs[(pairs["peer"] < pairs["adj"]).to_numpy(dtype=bool)]
    ours = pairs[list(COST_COLUMNS)].astype("Int64").fillna(-1).to_numpy(dtype=np.int64)
    back = pairs[[f"{c}_back" for c in COST_COLUMNS]].astype("Int64").fillna(-1).to_numpy(dtype=np.int64)
    bad = (ours != back).any(axis=1)
    if not bad.any():
        return []
    p = pairs[bad]

    def text(rows: npt.NDArray[np.int64]) -> list[str]:
        return [",".join(map(str, r)) for r in rows.tolist()]

    return [
        finding_rows(
            TABLE, snapshot_id, "link_cost", node=SNAPSHOT_NODE, peer=p["peer"], adj=p["adj"],
            expected=text(back[bad]), reported=text(ours[bad]),
        )
    ]


def audit_lsdb_local(peers: pd.DataFrame, links: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The whole audit in one process, snapshot by snapshot: (findings, reference)."""
    findings, references = [], []
    for snapshot_id, p in peers.groupby("snapshot_id", sort=True):
        lk = links[links["snapshot_id"] == snapshot_id]
        ref = reference_lsdb(p, lk)
        findings += [audit_views(p, lk), audit_links(ref)]
        references.append(ref)
    if not references:
        return empty_frame(TABLE), empty_reference()
    return pd.concat(findings, ignore_index=True), pd.concat(references, ignore_index=True)


# -- Spark ------------------------------------------------------------------------------


def _tag_buckets(buckets: int) -> Callable[[Iterator[pd.DataFrame]], Iterator[pd.DataFrame]]:
    """mapInPandas function adding the bucket of each row's peer (its `user` label)."""

    def tag(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for batch in batches:
            batch[BUCKET] = chunk_of(peer_names(batch["user"]), buckets).astype(np.int32)
            yield batch

    return tag


def _per_snapshot(
    kernel: Callable[[pd.DataFrame, pd.DataFrame, Sequence[str]], pd.DataFrame],
    empty: Callable[[], pd.DataFrame],
    observers: Mapping[str, Sequence[str]],
) -> Callable[[pd.DataFrame, pd.DataFrame], pd.DataFrame]:
    """A cogroup function running `kernel` with its snapshot's observers."""

    def run(peers: pd.DataFrame, links: pd.DataFrame) -> pd.DataFrame:
        if peers.empty:  # links of peers no observer lists: nothing to compare them with
            return empty()
        return kernel(peers, links, observers[str(peers["snapshot_id"].iat[0])])

    return run


def lsdb_spark(
    peers: DataFrame, links: DataFrame, *, buckets: int
) -> tuple[DataFrame, DataFrame]:
    """(findings, reference) DataFrames of every snapshot in `peers` and `links`; the
    view checks run per (snapshot, bucket of peers), the asymmetric check per snapshot.
    The reference is checkpointed: the routing audit reads it again."""
    from pyspark.sql.types import IntegerType, StructField, StructType

    observers: dict[str, list[str]] = {}
    for row in peers.select("snapshot_id", "node").distinct().collect():
        observers.setdefault(row[0], []).append(row[1])
    for names in observers.values():
        names.sort()

    def tagged(df: DataFrame) -> DataFrame:
        schema = StructType([*df.schema.fields, StructField(BUCKET, IntegerType(), False)])
        return df.mapInPandas(_tag_buckets(buckets), schema)

    grouped = (
        tagged(peers.select(*PEER_COLUMNS))
        .groupBy("snapshot_id", BUCKET)
        .cogroup(tagged(links.select(*LINK_COLUMNS)).groupBy("snapshot_id", BUCKET))
    )
    findings = grouped.applyInPandas(
        _per_snapshot(audit_views, lambda: empty_frame(TABLE), observers),
        kernel_schema_ddl(TABLE),
    )
    reference = grouped.applyInPandas(
        _per_snapshot(reference_lsdb, empty_reference, observers), ddl(REFERENCE_COLUMNS)
    ).localCheckpoint()
    asymmetric = reference.groupBy("snapshot_id").applyInPandas(
        audit_links, kernel_schema_ddl(TABLE)
    )
    return findings.unionByName(asymmetric), reference
