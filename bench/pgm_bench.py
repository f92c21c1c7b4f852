"""PGM against TCP on one LAN: three nodes in network namespaces joined by a bridge
(tests/integration/netns.py), A publishing N messages to subscribers on B and C.

    python bench/pgm_bench.py [--quick] [--n N] [--size BYTES]

Runs, in the same session: `tcp` (B and C link to A by TCP), `pgm` (one PGM group) and
`pgm_loss5` (PGM with 5 % of the packets dropped each way on C's veth by nftables).
Reports messages per second until both subscribers have every message (in order: a
missing or reordered message fails the run), and the PGM counters. Needs root (network
namespaces); elsewhere it prints the reason and a JSON line with "skipped".
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.integration.harness import NodeProc, graph_config  # noqa: E402
from tests.integration.netns import Lan, skip_reason  # noqa: E402
from tests.integration.test_ipc_bus import Raw, msgs  # noqa: E402
from tests.integration.test_pgm_netns import LOSS_RULES  # noqa: E402

USERS = ("A", "B", "C")
CONVERGED = r"network converges [\d.]+ secs, 2 uids authenticated"
TIMEOUT_S = 120.0


def _config(tmp: Path, lan: Lan, kind: str) -> Path:
    if kind == "tcp":
        cfg, _ = graph_config(tmp, "node A B C\ntcp_link_ab A B : 100\ntcp_link_ac A C : 100\n", web=False)
    else:
        cfg, _ = graph_config(tmp, "node A B C\npgm_link_abc A B C : 100\n", web=False)
    data = yaml.safe_load(cfg.read_text())
    for t in data["transports"]:
        if t["type"] == "tcp":
            t["route"] = {"listen": lan.ip(0), "connect": lan.ip(0), "port": 7001 if t["tport"] == "link_ab" else 7002}
        elif t["type"] == "pgm":
            t["route"].update({"listen": f"{lan.network};239.192.78.1", "connect": f"{lan.network};239.192.78.1",
                               "port": 9000, "mtu": 1500})
    data["transports"] += [{"tport": f"bus_{u}", "type": "ipc", "route": {"path": str(tmp / f"{u}.sock"),
                                                                          "service": "test"}} for u in USERS]
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))
    return cfg


def _args(kind: str, user: str) -> list[str]:
    if kind == "tcp":
        links = {"A": ["link_ab.listen", "link_ac.listen"], "B": ["link_ab.connect"], "C": ["link_ac.connect"]}[user]
    else:
        links = ["link_abc.listen" if user == "A" else "link_abc.connect"]
    return ["-t", *links, f"bus_{user}.listen"]


def run(kind: str, n: int, size: int) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="raims-pgm-bench-"))
    lan = Lan(3, "pgb")
    nodes: list[NodeProc] = []
    try:
        if kind == "pgm_loss5":
            lan.in_ns(2, "nft", "-f", "-", stdin=LOSS_RULES)
        cfg = _config(tmp, lan, kind)
        for i, user in enumerate(USERS):
            nodes.append(NodeProc(user, ["-d", str(cfg), "-u", user, *_args(kind, user)], tmp,
                                  prefix=lan.exec_prefix(i)))
        for node in nodes:
            node.wait_for(CONVERGED, timeout=60)
        pub = Raw(tmp / "A.sock")
        subs = {u: Raw(tmp / f"{u}.sock") for u in ("B", "C")}
        for sub in subs.values():
            sub.sub(b"bench/")
            sub.sync()
        deadline = time.monotonic() + 30
        heard = dict.fromkeys(subs, False)
        while not all(heard.values()):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{kind}: probes not heard {heard}")
            pub.pub(b"bench/probe", b"p")
            pub.sync()
            time.sleep(0.2)
            for u, sub in subs.items():
                heard[u] = heard[u] or any(k == b"bench/probe" for k, _ in msgs(sub.drain()))
        body = bytes(max(0, size - 8))
        counts = dict.fromkeys(subs, 0)
        t0 = time.perf_counter()
        for k in range(n):
            pub.pub(b"bench/data", b"%08d" % k + body)
            if k % 200 == 199:
                for u, sub in subs.items():
                    counts[u] = _take(sub, counts[u], kind)
        pub.sync()
        deadline = time.monotonic() + TIMEOUT_S
        while min(counts.values()) < n:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{kind}: received {counts} of {n}")
            for u, sub in subs.items():
                counts[u] = _take(sub, counts[u], kind)
        seconds = time.perf_counter() - t0
        row: dict[str, Any] = {"transport": kind, "messages": n, "size": size, "seconds": round(seconds, 2),
                               "msgs_per_s": round(n / seconds)}
        if kind != "tcp":
            stats = {u: _pgm_counters(nodes[i]) for i, u in enumerate(USERS)}
            row.update({"odata_A": stats["A"].get("odata", ""), "naks_C": stats["C"].get("naks_sent", ""),
                        "rdata_A": stats["A"].get("rdata_sent", ""),
                        "lost": sum(int(s.get("lost", 0)) for s in stats.values())})
        return row
    finally:
        for node in nodes:
            node.stop()
        lan.close()
        shutil.rmtree(tmp, ignore_errors=True)


def _take(sub: Raw, count: int, kind: str) -> int:
    for key, payload in msgs(sub.drain()):
        if key == b"bench/data":
            if int(payload[:8]) != count:
                raise RuntimeError(f"{kind}: message {int(payload[:8])} where {count} was due")
            count += 1
    return count


def _pgm_counters(node: NodeProc) -> dict[str, Any]:
    """The last `pgm ... counters` line a node logs when it stops (transports/pgm.py)."""
    node.stop()
    for line in reversed(node.lines):
        m = re.search(r"pgm \S+ counters (\{.*\})", line)
        if m:
            return dict(json.loads(m.group(1)))
    return {}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="2,000 messages")
    ap.add_argument("--n", type=int, default=None, help="messages (default 20,000)")
    ap.add_argument("--size", type=int, default=128, help="message payload bytes")
    args = ap.parse_args(argv)
    n = args.n or (2000 if args.quick else 20000)
    reason = skip_reason("nft")
    if reason:
        print(f"skipped: {reason}")
        print(json.dumps({"bench": "pgm", "skipped": reason}))
        return 0
    rows = [run(kind, n, args.size) for kind in ("tcp", "pgm", "pgm_loss5")]
    cols = list(dict.fromkeys(c for r in rows for c in r))
    width = {c: max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in cols}
    print("  ".join(c.ljust(width[c]) for c in cols))
    for r in rows:
        print("  ".join(str(r.get(c, "")).ljust(width[c]) for c in cols))
    tcp = rows[0]["msgs_per_s"]
    print(json.dumps({"bench": "pgm", "rows": rows, "pgm_vs_tcp": round(rows[1]["msgs_per_s"] / tcp, 2),
                      "pgm_loss5_vs_tcp": round(rows[2]["msgs_per_s"] / tcp, 2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
