"""A consistent synthetic snapshot of a full-mesh network, as the collector would write it:
every node observes every other, links come in pairs, costs are positive."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from datetime import datetime, timedelta
from itertools import permutations
from typing import Any

NODES = ("n1", "n2", "n3", "n4")
COST = 1000


def bridge(node: str) -> str:
    return base64.b64encode(hashlib.md5(node.encode()).digest()).decode().rstrip("=")


def snapshot_rows(
    snapshot_id: str, collected_at: datetime, nodes: Sequence[str] = NODES
) -> dict[str, list[dict[str, Any]]]:
    head = {"snapshot_id": snapshot_id, "collected_at": collected_at}
    started = collected_at - timedelta(minutes=5)
    tport = {(a, b): f"mesh.{i + 1}" for i, (a, b) in enumerate(permutations(nodes, 2))}
    rows: dict[str, list[dict[str, Any]]] = {
        t: []
        for t in (
            "peers",
            "links",
            "routes",
            "subs",
            "blooms",
            "ports",
            "counters",
            "loss",
            "events",
        )
    }
    for obs in nodes:
        h = {**head, "node": obs}
        for peer in nodes:
            me = peer == obs
            rows["peers"].append(
                {
                    **h,
                    "user": peer,
                    "bridge": bridge(peer),
                    "sub": 2,
                    "seq": 0,
                    "link": len(nodes) - 1,
                    "lat": None if me else 0.0002,
                    "max": None if me else 0.0004,
                    "avg": None if me else 0.0003,
                    "time": started,
                    "tport": None if me else tport[(obs, peer)],
                    "cost": None if me else COST,
                }
            )
            rows["subs"].extend(
                {**h, "user": peer, "subject": s, "pattern": p, "syntax": "rv" if p else None}
                for s, p in (
                    (f"_I.{bridge(peer)}.>", True),
                    ("_M.>", True),
                    (f"data.{peer}", False),
                )
            )
            rows["blooms"].append(
                {
                    **h,
                    "fd": None,
                    "dest": peer,
                    "tport": "mesh",
                    "bloom": ["(peer)", peer],
                    "prefix": "0x0000000004000108",
                    "detail": "0",
                    "subs": 1,
                    "total": 3,
                    "filter": b"\x01\x05\x01",
                    "size_bits": 32,
                    "num_hashes": 1,
                    "seed": 7,
                }
            )
            rows["counters"].append(
                {
                    **h,
                    "user": peer,
                    "start": started,
                    "hb_seqno": None if me else 10,
                    "hb_time": None if me else collected_at,
                    "snd_ibx": 3,
                    "rcv_ibx": 3,
                    "ping_snd": 1,
                    "ping_stime": collected_at,
                    "pong_rcv": 1,
                    "ping_rcv": 1,
                }
            )
            if not me:
                rows["routes"].append(
                    {
                        **h,
                        "user": peer,
                        "tport": tport[(obs, peer)],
                        "adj": peer,
                        "state": ["inbox", "mesh", "hb"],
                        "cost": COST,
                        "path": [0, 1, 2, 3],
                        "lat": 0.0002,
                        "fd": 10,
                        "route": f"{peer}@mesh",
                    }
                )
                rows["loss"].append(
                    {
                        **h,
                        "user": peer,
                        "repeat": 0,
                        "rep_time": None,
                        "not_sub": 0,
                        "not_time": None,
                        "msg_loss": 0,
                        "loss_time": None,
                        "ibx_loss": 0,
                        "ibx_time": None,
                    }
                )
        rows["links"].append(
            {
                **h,
                "user": obs,
                "adj": None,
                "tport": "ipc.0",
                "type": "ipc",
                "cost": COST,
                "cost2": COST,
                "cost3": COST,
                "cost4": COST,
            }
        )
        rows["links"].extend(
            {
                **h,
                "user": a,
                "adj": b,
                "tport": tport[(a, b)],
                "type": "mesh",
                "cost": COST,
                "cost2": COST,
                "cost3": COST,
                "cost4": COST,
            }
            for a, b in permutations(nodes, 2)
        )
        rows["ports"].append(
            {
                **h,
                "tport": "mesh.0",
                "type": "mesh",
                "cost": COST,
                "fd": 9,
                "bs": 100,
                "br": 100,
                "ms": 5,
                "mr": 5,
                "lat": 0.0002,
                "idle": 1.5,
                "fl": "LXD",
                "address": "mesh://127.0.0.1:9000",
            }
        )
        rows["events"].extend(
            {
                **h,
                "stamp": started,
                "tport": None,
                "user": obs,
                "peer": None,
                "event": ev,
                "data": None,
            }
            for ev in ("startup", "converge")
        )
    rows["rollouts"] = [
        {
            **head,
            "node": "driver",
            "service": "test",
            "master": "local[2]",
            "topology": "mesh",
            "hosts": 2,
            "nodes": len(nodes),
            "nodes_per_host": 2,
            "lake_backend": "delta-rs",
            "raims_version": "0.1.0",
            "spark_version": "4.2.1",
            "converged": True,
            "traffic_sent": 12,
            "traffic_received": 12,
            "validations_failed": 0,
            "status": "ok",
            "message": None,
            "stage_seconds": {"start": 1.0, "converge": 2.0},
            "started_at": started,
            "finished_at": collected_at,
        }
    ]
    return rows
