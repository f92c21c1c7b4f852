"""Bloom filter audit: no filter may miss a subscription of its node; measure each filter's
false-positive rate against the theory; flag filters that should have resized.

Manual "Networking" (a peer's filter holds everything it subscribes, "about 2 bytes per
subscription for a false positive error rate at about 0.05%"), "Wildcard Matching"
(prefix hashes for patterns), "_Z.BLM" (resize "when crossing powers of two subscription
counts"). The hashing, bit layout, codec and resize rule are the router's own, imported
from `raims_node.bloom` so that they are bit-identical: `subject_hash`, the pattern
entries (`entry.pattern_entry`), `bit_positions`, `decode_image`, `capacity` /
`level_for` and the shrink factor.

Input: one row per node with its own filter (the `show blooms` row with dest `ipc`: the
filter's bytes and geometry) and its own subscriptions (the `show subs` rows of the node
itself), built by `bloom_input` (or the Spark join in `blooms_spark`).

Decisions where the manual is vague:
- missing: a subject is present when the filter holds the full-subject key with all its
  bit positions set; a pattern when the filter holds its key: for a plain prefix (or a
  literal pattern) the key length is in use and its bits are set, for a pattern with a
  suffix or shard the exact detail record is there. A subscription the router cannot
  compile is `unhashable`.
- fp_rate: random subjects (`PROBES` of them, 24 random characters, from a fixed seed so
  reruns agree) go through the full-subject test of each filter. A random subject's hash
  is uniform, so the theoretical rate for M bits, k hashes and n plain entries is
  (1 - exp(-k n / M)) ** k; a filter is flagged when its hits are improbable under that
  rate (binomial upper tail below `FP_ALPHA`), i.e. it passes more subjects than its bits
  explain, or improbable under the manual's target of 0.05% (`FP_TARGET`: a filter past
  its capacity, or past the last level's). Prefix lengths multiply a subject's chances by
  the number of lengths it is tested at; a random subject shares no literal prefix with
  the patterns, so only the full-subject test is probed.
- resize: a filter whose entries exceed its level's capacity (below the last level), or
  have fallen to a quarter of it (above level 0), should have resized (the owner's rule,
  `BloomFilter._autosize`); `expected_level` is `level_for(entries)`.
- geometry: the row's size_bits / num_hashes / seed columns disagree with the bytes.
- over_inclusive: the filter holds more entries at some key length than its node's
  subscriptions make (distinct subscriptions; a subject or pattern the node dropped is
  still advertised, and peers keep sending it).
- peer_copy: an observer's copy of a peer's filter (`show blooms copies`) differs from
  the filter most hold among the copies and the owner's own (see `audit_copies`).
- The probe set is built once per task (the iterator UDF's point) and each filter is
  probed in one vectorized pass: filters sharing a geometry share the probes' positions,
  and a single-hash filter's hits are the probes landing on its set bits.
"""

from __future__ import annotations

import json
import math
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy.special import bdtrc

from raims_node.bloom import (
    BASE_SIZE_SHIFT,
    MAX_LEVEL,
    BloomError,
    FilterImage,
    bit_positions,
    capacity,
    decode_image,
    level_for,
    subject_hash,
)
from raims_node.bloom.entry import FULL, Detail, pattern_entry
from raims_node.bloom.filter import SHRINK_FACTOR
from raims_node.subject import SubjectError, compile_pattern, subject_bytes
from spark_app.udfs.frames import (
    empty_frame,
    finding_rows,
    kernel_frame,
    kernel_schema_ddl,
    typed,
    with_summary,
)
from spark_app.udfs.labels import SELF_SUFFIX, UID_PATTERN, is_self_label, peer_names

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

TABLE: Final = "audit_blooms"
IPC_DEST: Final = "ipc"
PROBES: Final = 1 << 18
PROBE_SEED: Final = 0x5EED
PROBE_LEN: Final = 24
PROBE_ALPHABET: Final = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz0123456789._", dtype=np.uint8)
FP_ALPHA: Final = 1e-9
FP_TARGET: Final = 0.0005  # the manual's "about 0.05% (1 in 2000 subjects)"
INPUT_COLUMNS: Final = (
    ("snapshot_id", "string"),
    ("node", "string"),
    ("filter", "binary"),
    ("size_bits", "long"),
    ("num_hashes", "int"),
    ("seed", "long"),
    ("subjects", "array<string>"),
    ("patterns", "array<boolean>"),
    ("syntaxes", "array<string>"),
)
COPY_COLUMNS: Final = (
    ("snapshot_id", "string"),
    ("node", "string"),
    ("peer", "string"),
    ("filter", "binary"),
    ("owner_filter", "binary"),
)
COPY_BUCKETS: Final = 16  # groups of peers for the peer-copy check in Spark
SHARED_GEOMETRY: Final = 8  # filters of one geometry in a batch that share probe counts
MAX_CACHED_GEOMETRIES: Final = 16
BITMAP_MAX_BITS: Final = 1 << 24
POSITION_SHIFT: Final = 33  # filter index above the bit position (positions < 2**32)

U32 = npt.NDArray[np.uint32]
Ints = npt.NDArray[np.int64]


class ProbeSet:
    """The full hashes of the probe subjects, and their bit positions per geometry. Random
    subjects by default. The positions of the geometries many filters share (the default
    seed at each size) are kept, up to MAX_CACHED_GEOMETRIES, for every batch of a task;
    a reseeded filter's are computed for it alone."""

    def __init__(
        self, count: int = PROBES, seed: int = PROBE_SEED, subjects: Sequence[bytes] | None = None
    ) -> None:
        if subjects is None:
            rng = np.random.default_rng(seed)
            raw = PROBE_ALPHABET[rng.integers(0, len(PROBE_ALPHABET), (count, PROBE_LEN))].tobytes()
            subjects = [raw[i : i + PROBE_LEN] for i in range(0, len(raw), PROBE_LEN)]
        self.hashes: U32 = np.fromiter(
            (subject_hash(s) for s in subjects), dtype=np.uint32, count=len(subjects)
        )
        self.count = len(self.hashes)
        self._landing: OrderedDict[tuple[int, int], tuple[npt.NDArray[np.uint64], Ints]] = OrderedDict()

    def positions(self, size_bits: int, seed: int, num_hashes: int) -> npt.NDArray[np.uint64]:
        """Shape (count, num_hashes): each probe's bit positions in that geometry."""
        return bit_positions(size_bits, seed, num_hashes, self.hashes)

    def landing(self, size_bits: int, seed: int) -> tuple[npt.NDArray[np.uint64], Ints]:
        """Single-hash geometry: the distinct positions probes land on, and how many land
        on each (a filter's hits are the counts at its set bits)."""
        key = (size_bits, seed)
        if key in self._landing:
            self._landing.move_to_end(key)
        else:
            values, counts = np.unique(self.positions(size_bits, seed, 1)[:, 0], return_counts=True)
            self._landing[key] = (values, counts.astype(np.int64))
            if len(self._landing) > MAX_CACHED_GEOMETRIES:
                self._landing.popitem(last=False)
        return self._landing[key]


def _entry_key(text: str, syntax: str | None) -> tuple[int, int, Detail | None] | str:
    """(key_len, key_hash, detail) of a subscription, or why it cannot be hashed."""
    if syntax is None:
        return FULL, subject_hash(subject_bytes(text)), None
    try:
        e = pattern_entry(compile_pattern(text, syntax))  # type: ignore[arg-type]
    except SubjectError as exc:
        return str(exc)
    return e.key_len, e.key_hash, e.detail


def _decode(data: object) -> FilterImage | str | None:
    """The filter of a row, None when there is none, or why its bytes do not decode."""
    if not isinstance(data, bytes | bytearray | memoryview):
        return None
    try:
        return decode_image(bytes(data))
    except BloomError as exc:
        return str(exc)


def _level(size_bits: int) -> int | None:
    shift = size_bits.bit_length() - 1
    level = shift - BASE_SIZE_SHIFT
    return level if size_bits == 1 << shift and 0 <= level <= MAX_LEVEL else None


def _cells(cell: object) -> list[Any]:
    """An array cell (a list, a numpy array from Arrow, or null) as a list."""
    return list(cell) if isinstance(cell, list | tuple | np.ndarray) else []


def _int_or_none(cell: object) -> int | None:
    return None if cell is None or pd.isna(cell) else int(cell)  # type: ignore[call-overload]


class _Batch:
    """One batch of nodes: decoded filters, flattened subscriptions, output rows."""

    def __init__(self, nodes: pd.DataFrame) -> None:
        self.nodes = nodes.reset_index(drop=True)
        self.snapshot_ids = self.nodes["snapshot_id"].to_numpy(dtype=object)
        self.names = self.nodes["node"].to_numpy(dtype=object)
        self.images = [_decode(f) for f in self.nodes["filter"]]
        owner: list[int] = []
        texts: list[str] = []
        syntaxes: list[str | None] = []
        for i, (subj, pat, syn) in enumerate(
            zip(self.nodes["subjects"], self.nodes["patterns"], self.nodes["syntaxes"], strict=True)
        ):
            for text, is_pattern, syntax in zip(_cells(subj), _cells(pat), _cells(syn), strict=True):
                owner.append(i)
                texts.append(str(text))
                syntaxes.append(str(syntax) if is_pattern else None)
        self.owner = np.asarray(owner, dtype=np.int64)
        self.texts = texts
        self.syntaxes = syntaxes
        self.checked = np.zeros(len(self.nodes), dtype=np.int64)  # subscriptions per node
        self.rows: list[dict[str, Any]] = []

    def image(self, i: int) -> FilterImage | None:
        img = self.images[i]
        return img if isinstance(img, FilterImage) else None

    def add(self, i: int, check: str, finding: bool = True, **cols: Any) -> None:
        self.rows.append(
            {"snapshot_id": self.snapshot_ids[i], "node": self.names[i], "check": check,
             "finding": finding, **cols}
        )


def _check_filters(b: _Batch) -> None:
    for i, img in enumerate(b.images):
        if isinstance(img, str):
            b.add(i, "undecodable", detail=json.dumps({"error": img}))
            continue
        if img is None:
            count = int(np.count_nonzero(b.owner == i))
            b.add(i, "no_filter", detail=json.dumps({"subscriptions": count}))
            continue
        actual = {"size_bits": img.size_bits, "num_hashes": img.num_hashes, "seed": img.seed}
        wrong = {
            k: v for k in actual
            if (v := _int_or_none(b.nodes.at[i, k])) is not None and v != actual[k]
        }
        if wrong:
            b.add(i, "geometry", size_bits=img.size_bits, num_hashes=img.num_hashes,
                  detail=json.dumps({"row": wrong, "bytes": {k: actual[k] for k in wrong}}))
        entries = img.subject_count + img.pattern_count
        level = _level(img.size_bits)
        if level is None:
            continue
        grow = entries > capacity(level) and level < MAX_LEVEL
        shrink = level > 0 and entries <= capacity(level) // SHRINK_FACTOR
        if grow or shrink:
            b.add(i, "resize", size_bits=img.size_bits, num_hashes=img.num_hashes,
                  entries=entries, level=level, expected_level=level_for(entries),
                  detail=json.dumps({"capacity": capacity(level), "grow": grow}))


def _check_subscriptions(b: _Batch) -> None:
    """`missing` and `unhashable` rows; counts the subscriptions checked per node."""
    keys: dict[tuple[str, str | None], tuple[int, int, Detail | None] | str] = {}
    plain_sub: list[int] = []
    plain_len: list[int] = []
    plain_hash: list[int] = []
    expect: dict[int, Counter[tuple[int, bool]]] = {}  # node -> (key_len, detail) -> entries
    seen: set[tuple[int, str, str | None]] = set()
    for j, (i, text, syntax) in enumerate(zip(b.owner.tolist(), b.texts, b.syntaxes, strict=True)):
        img = b.image(i)
        if img is None or (i, text, syntax) in seen:  # a subscription listed twice is one
            continue
        seen.add((i, text, syntax))
        b.checked[i] += 1
        key = keys.get((text, syntax))
        if key is None:
            key = keys[(text, syntax)] = _entry_key(text, syntax)
        if not isinstance(key, str):
            expect.setdefault(i, Counter())[(key[0], key[2] is not None)] += 1
        if isinstance(key, str):
            b.add(i, "unhashable", subject=text, syntax=syntax, detail=json.dumps({"error": key}))
        elif key[2] is not None:
            found = any(
                r.key_len == key[0] and r.key_hash == key[1] and r.detail == key[2] for r in img.details
            )
            if not found:
                b.add(i, "missing", subject=text, syntax=syntax, detail=json.dumps({"key_len": key[0]}))
        else:
            plain_sub.append(j)
            plain_len.append(key[0])
            plain_hash.append(key[1])
    if plain_sub:
        sub = np.asarray(plain_sub, dtype=np.int64)
        present = _plain_present(b, b.owner[sub], np.asarray(plain_len), np.asarray(plain_hash, dtype=np.uint32))
        for j, key_len in zip(sub[~present].tolist(), np.asarray(plain_len)[~present].tolist(), strict=True):
            b.add(int(b.owner[j]), "missing", subject=b.texts[j], syntax=b.syntaxes[j],
                  detail=json.dumps({"key_len": key_len}))
    _check_extra(b, expect)


def _check_extra(b: _Batch, expect: dict[int, Counter[tuple[int, bool]]]) -> None:
    """`over_inclusive`: a filter holding more entries of some key length than its node's
    subscriptions give (a subscription the node dropped is still in its filter: its
    peers keep sending what nobody wants)."""
    for i, img in enumerate(b.images):
        if not isinstance(img, FilterImage):
            continue
        want = expect.get(i, Counter())
        extra = {
            f"{k}{'/detail' if det else ''}": [n, want[(k, det)]]
            for k, plain, detail in img.key_counts
            for det, n in ((False, plain), (True, detail))
            if n > want[(k, det)]
        }
        if extra:
            surplus = sum(n - w for n, w in extra.values())
            b.add(i, "over_inclusive", size_bits=img.size_bits, num_hashes=img.num_hashes,
                  entries=img.subject_count + img.pattern_count,
                  detail=json.dumps({"surplus": surplus, "by_key": extra}, sort_keys=True))


def _plain_present(b: _Batch, node: npt.NDArray[np.int64], key_len: npt.NDArray[np.int64], key_hash: U32) -> npt.NDArray[np.bool_]:
    """Whether each plain key is in its node's filter: its key length is in use and all
    its bit positions are set (one search over every filter's set bits, keyed by filter)."""
    images = b.images
    in_use_lo = np.zeros(len(images), dtype=np.uint64)  # bit n: prefix length n in use
    full = np.zeros(len(images), dtype=bool)
    geometry = np.full(len(images), -1, dtype=np.int64)
    shapes: dict[tuple[int, int, int], int] = {}
    bits = []
    for i, img in enumerate(images):
        if not isinstance(img, FilterImage):
            continue
        for k, plain, _ in img.key_counts:
            if plain and k == FULL:
                full[i] = True
            elif plain:
                in_use_lo[i] |= np.uint64(1 << k)
        geometry[i] = shapes.setdefault((img.size_bits, img.seed, img.num_hashes), len(shapes))
        bits.append((np.uint64(i) << np.uint64(POSITION_SHIFT)) | np.unique(img.positions))
    universe = np.concatenate(bits) if bits else np.zeros(0, dtype=np.uint64)
    present = np.zeros(len(node), dtype=bool)
    if not len(universe):  # no filter has a bit set (emptied filters): nothing is present
        return present
    is_full = key_len == FULL
    in_use = np.where(
        is_full, full[node], (in_use_lo[node] >> np.where(is_full, 0, key_len).astype(np.uint64)) & np.uint64(1)
    ).astype(bool)
    by_shape = _split(geometry[node])
    for (size_bits, seed, k), g in shapes.items():
        rows = by_shape.get(g)
        if rows is None:
            continue
        pos = bit_positions(size_bits, seed, k, key_hash[rows])
        wanted = (node[rows].astype(np.uint64)[:, None] << np.uint64(POSITION_SHIFT)) | pos
        at = np.minimum(np.searchsorted(universe, wanted), len(universe) - 1)
        present[rows] = (universe[at] == wanted).all(axis=1)
    return present & in_use


def _split(keys: Ints) -> dict[int, Ints]:
    """Row indices of each distinct key."""
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]]) if len(keys) else keys
    return {
        int(sorted_keys[lo]): order[lo:hi]
        for lo, hi in zip(starts.tolist(), [*starts[1:].tolist(), len(keys)], strict=True)
    }


def _hits(probes: ProbeSet, img: FilterImage, shared: bool) -> int:
    """Probes the filter passes (all their bit positions set)."""
    bits = np.unique(img.positions)
    if img.num_hashes == 1 and shared:  # probes' landing counts, computed once
        values, counts = probes.landing(img.size_bits, img.seed)
        at = np.minimum(np.searchsorted(values, bits), max(len(values) - 1, 0))
        return int(counts[at][values[at] == bits].sum()) if len(values) else 0
    pos = probes.positions(img.size_bits, img.seed, img.num_hashes)
    if img.size_bits <= BITMAP_MAX_BITS:  # a lookup table is the fastest membership test
        table = np.zeros(img.size_bits, dtype=bool)
        table[bits] = True
        return int(table[pos].all(axis=1).sum())
    return int(np.isin(pos, bits).all(axis=1).sum())


def _probe(b: _Batch, probes: ProbeSet) -> npt.NDArray[np.float64]:
    """A `filter` row per decoded filter, and `fp_rate` rows; per node (probes, hits,
    expected hits). Filters are taken geometry by geometry, so the probes' positions are
    computed once per geometry of the batch."""
    totals = np.zeros((len(b.images), 3))
    shapes: dict[tuple[int, int, int], list[int]] = {}
    for i, img in enumerate(b.images):
        if isinstance(img, FilterImage):
            shapes.setdefault((img.size_bits, img.seed, img.num_hashes), []).append(i)
    for members in shapes.values():
        for i in members:
            _probe_one(b, probes, i, len(members) >= SHARED_GEOMETRY, totals)
    return totals


def _probe_one(
    b: _Batch, probes: ProbeSet, i: int, shared: bool, totals: npt.NDArray[np.float64]
) -> None:
    img = b.images[i]
    assert isinstance(img, FilterImage)
    m, k = img.size_bits, img.num_hashes
    n_plain = sum(p for _, p, _ in img.key_counts)
    expected = (1.0 - math.exp(-k * n_plain / m)) ** k
    hits = _hits(probes, img, shared)
    stats: dict[str, Any] = {
        "size_bits": m, "num_hashes": k, "entries": img.subject_count + img.pattern_count,
        "level": _level(m), "probes": probes.count, "fp_hits": hits,
        "fp_measured": hits / probes.count, "fp_expected": expected,
    }
    b.add(i, "filter", finding=False, **stats)
    above = {
        name: p_value
        for name, rate in (("theory", expected), ("target", FP_TARGET))
        if hits > rate * probes.count
        and (p_value := float(bdtrc(hits - 1, probes.count, rate))) < FP_ALPHA
    }
    if above:
        b.add(i, "fp_rate", **stats, detail=json.dumps({"p_value_above": above}))
    totals[i] = (probes.count, hits, expected * probes.count)


def audit_bloom(nodes: pd.DataFrame, probes: ProbeSet) -> pd.DataFrame:
    """audit_blooms rows for a batch of nodes (INPUT_COLUMNS, any snapshots), then a
    summary row per snapshot of the batch."""
    if nodes.empty:
        return empty_frame(TABLE)
    b = _Batch(nodes)
    _check_filters(b)
    _check_subscriptions(b)
    totals = _probe(b, probes)
    frame = kernel_frame(TABLE, pd.DataFrame(b.rows)) if b.rows else empty_frame(TABLE)
    out = []
    for snapshot_id in pd.unique(b.snapshot_ids):
        mine = b.snapshot_ids == snapshot_id
        counts = {
            "filters": sum(isinstance(b.images[i], FilterImage) for i in np.flatnonzero(mine)),
            "subscriptions": int(b.checked[mine].sum()),
        }
        part = with_summary(TABLE, str(snapshot_id), counts, [frame[frame["snapshot_id"] == snapshot_id]])
        detail = json.loads(part["detail"].iat[-1])
        sums = totals[mine].sum(axis=0)
        detail["fp"] = {"probes": int(sums[0]), "hits": int(sums[1]), "expected_hits": float(sums[2])}
        part.loc[part.index[-1], "detail"] = json.dumps(detail, sort_keys=True)
        out.append(part)
    return pd.concat(out, ignore_index=True)


def bloom_input(subs: pd.DataFrame, blooms: pd.DataFrame) -> pd.DataFrame:
    """One row per node (INPUT_COLUMNS): its ipc filter and its own subscriptions."""
    own = subs[is_self_label(subs["user"], subs["node"])]
    lists = own.groupby(["snapshot_id", "node"], sort=True).agg(
        subjects=("subject", list), patterns=("pattern", list), syntaxes=("syntax", list)
    ).reset_index()
    ipc = blooms[(blooms["dest"] == IPC_DEST).to_numpy()][
        ["snapshot_id", "node", "filter", "size_bits", "num_hashes", "seed"]
    ]
    out = ipc.merge(lists, on=["snapshot_id", "node"], how="outer")
    return out[[c for c, _ in INPUT_COLUMNS]]


def copy_input(blooms: pd.DataFrame) -> pd.DataFrame:
    """One row per peer-copy row of `blooms` (COPY_COLUMNS): an observer's copy of a peer's
    filter (a row with a filter, a peer as `dest` and no transport) beside the filter the
    peer reports as its own (its ipc row; null when the peer reported none)."""
    if not {"dest", "tport", "filter"} <= set(blooms.columns):
        return typed({}, COPY_COLUMNS)
    dest = blooms["dest"]
    is_copy = (dest.notna() & (dest != IPC_DEST) & blooms["tport"].isna() & blooms["filter"].notna()).to_numpy()
    copies = blooms[is_copy]
    copies = pd.DataFrame({
        "snapshot_id": copies["snapshot_id"].to_numpy(dtype=object),
        "node": copies["node"].to_numpy(dtype=object),
        "peer": peer_names(copies["dest"]),
        "filter": copies["filter"].to_numpy(dtype=object),
    })
    own = blooms[(dest == IPC_DEST).to_numpy()]
    owners = pd.DataFrame({
        "snapshot_id": own["snapshot_id"].to_numpy(dtype=object),
        "peer": own["node"].to_numpy(dtype=object),
        "owner_filter": own["filter"].to_numpy(dtype=object),
    }).drop_duplicates(["snapshot_id", "peer"])
    out = copies.merge(owners, on=["snapshot_id", "peer"], how="left")
    return out[[c for c, _ in COPY_COLUMNS]]


def _entries(data: object) -> int | None:
    img = _decode(data)
    return img.subject_count + img.pattern_count if isinstance(img, FilterImage) else None


def audit_copies(copies: pd.DataFrame) -> pd.DataFrame:
    """`peer_copy` rows: an observer's copy of a peer's filter that is not, byte for byte,
    the peer's reference filter (the observer missed an update: it sends the peer's
    subjects the wrong way or not at all); a summary row per snapshot. The reference is
    the filter most hold among the copies and the owner's own (ties: the owner's), so an
    owner whose own row is wrong (flagged by its own checks) does not blame every peer."""
    if copies.empty:
        return empty_frame(TABLE)
    out = []
    for snapshot_id, part in copies.groupby("snapshot_id", sort=True):
        bad_rows: list[tuple[str, str, object, object]] = []
        for peer, group in part.groupby("peer", sort=True):
            held = [bytes(c) for c in group["filter"]]
            owner = group["owner_filter"].iat[0]
            votes = Counter(held)
            if owner is not None and not (isinstance(owner, float) and math.isnan(owner)):
                votes[bytes(owner)] += 1
                top = max(votes.values())
                ref = bytes(owner) if votes[bytes(owner)] == top else max(votes, key=lambda k: (votes[k], k))
            else:
                ref = max(votes, key=lambda k: (votes[k], k))
            bad_rows += [(str(n), str(peer), c, ref) for n, c in zip(group["node"], held, strict=True) if c != ref]
        rows = [
            finding_rows(
                TABLE, str(snapshot_id), "peer_copy", node=[r[0] for r in bad_rows],
                detail=[json.dumps({"peer": p, "copy_entries": _entries(c), "reference_entries": _entries(o)})
                        for _, p, c, o in bad_rows],
            )
        ] if bad_rows else []
        out.append(with_summary(TABLE, str(snapshot_id), {"peer_copies": len(part)}, rows))
    return pd.concat(out, ignore_index=True)


def audit_blooms_local(subs: pd.DataFrame, blooms: pd.DataFrame, probes: ProbeSet | None = None) -> pd.DataFrame:
    """The whole audit in one process."""
    nodes = audit_bloom(bloom_input(subs, blooms), probes or ProbeSet())
    return pd.concat([nodes, audit_copies(copy_input(blooms))], ignore_index=True)


# -- Spark ------------------------------------------------------------------------------


def _batches(count: int, seed: int) -> Callable[[Iterator[pd.DataFrame]], Iterator[pd.DataFrame]]:
    def run(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        probes = ProbeSet(count, seed)  # hashed once per task, used for every batch
        for batch in batches:
            yield audit_bloom(batch, probes)

    return run


def blooms_spark(subs: DataFrame, blooms: DataFrame, *, probes: int = PROBES, seed: int = PROBE_SEED) -> DataFrame:
    """Rows of audit_blooms for every node of `subs` and `blooms` (any snapshots), by an
    iterator pandas UDF (mapInPandas) over batches of nodes."""
    from pyspark.sql import functions as F

    own = (
        subs.where(
            (F.col("user") == F.col("node"))
            | (F.col("user") == F.concat(F.col("node"), F.lit(SELF_SUFFIX)))
        )
        .groupBy("snapshot_id", "node")
        .agg(F.collect_list(F.struct("subject", "pattern", "syntax")).alias("subs"))
    )
    ipc = blooms.where(F.col("dest") == IPC_DEST).select(
        "snapshot_id", "node", "filter", "size_bits", "num_hashes", "seed"
    )
    nodes = ipc.join(own, ["snapshot_id", "node"], "full_outer").select(
        "snapshot_id", "node", "filter", "size_bits", "num_hashes", "seed",
        F.col("subs.subject").alias("subjects"),
        F.col("subs.pattern").alias("patterns"),
        F.col("subs.syntax").alias("syntaxes"),
    )
    audited = nodes.mapInPandas(_batches(probes, seed), kernel_schema_ddl(TABLE))
    copies = blooms.where(
        F.col("dest").isNotNull() & (F.col("dest") != IPC_DEST) & F.col("tport").isNull()
        & F.col("filter").isNotNull()
    ).select("snapshot_id", "node", F.regexp_replace("dest", UID_PATTERN, "").alias("peer"), "filter")
    owners = ipc.select(
        "snapshot_id", F.col("node").alias("peer"), F.col("filter").alias("owner_filter")
    ).dropDuplicates(["snapshot_id", "peer"])
    pairs = copies.join(owners, ["snapshot_id", "peer"], "left").select(*(c for c, _ in COPY_COLUMNS))
    # grouped by peer (a peer's copies and its own filter together), peers hashed into buckets
    bucket = F.pmod(F.crc32(F.encode("peer", "UTF-8")), F.lit(COPY_BUCKETS))
    checked = pairs.withColumn("bucket", bucket).groupBy("snapshot_id", "bucket").applyInPandas(
        lambda rows: audit_copies(rows.drop(columns=["bucket"], errors="ignore")), kernel_schema_ddl(TABLE)
    )
    return audited.unionByName(checked)
