"""`show names` / `show topology` rows, and the rollout's `names` table built from them."""

from __future__ import annotations

import json

from raims_node.console import ConsoleContext, execute
from raims_node.names.service import NameService
from raims_node.router.node import Node
from spark_app.jobs.collect import table_rows
from spark_app.schemas import load_schemas
from tests.sim.conftest import creds_factory

NS = 1_000_000_000


def context() -> ConsoleContext:
    node = Node(creds_factory()("A"), now_ns=1_700_000_000 * NS)
    svc = NameService(node.bridge, node.user, 0)
    for body in ({"type": 17, "lower": 0, "upper": 9, "inbox": "p1"},
                 {"type": 17, "lower": 10, "upper": 19, "inbox": "p2", "scope": "node"}):
        svc.request("c", "_nats.", "BIND", None, None, json.dumps(body).encode(), 0)
    svc.request("c", "_nats.", "SUBSCRIBE", None, None, json.dumps({"type": 17, "inbox": "ev"}).encode(), 0)
    return ConsoleContext(node=node, names=svc)


def test_show_names_and_topology_rows() -> None:
    ctx = context()
    res = execute(ctx, "show names")
    assert res.columns == ["type", "lower", "upper", "scope", "node", "port"]
    assert [(r["type"], r["lower"], r["scope"], r["node"], r["port"]) for r in res.rows] == [
        (0, r0, "zone", "A", 0) for r0 in [res.rows[0]["lower"]]] + [(17, 0, "cluster", "A", 1), (17, 10, "node", "A", 2)]
    assert len(execute(ctx, "show names 17").rows) == 2
    assert execute(ctx, "show names x").error
    topo = execute(ctx, "show topology").rows
    assert [(r["kind"], r["type"], r["lower"], r["upper"], r["target"]) for r in topo] == [
        ("subscription", 17, 0, 0xFFFFFFFF, "_nats.ev")]
    assert execute(ConsoleContext(node=ctx.node), "show names").rows == []


def test_names_rows_fit_the_lake_schema() -> None:
    ctx = context()
    head = {"snapshot_id": "s", "collected_at": 1_700_000_000 * NS, "node": "A"}
    rows = table_rows("names", execute(ctx, "show names").rows, head)
    assert all(r["node"] == "A" and r["publisher"] == "A" for r in rows)
    assert load_schemas()["names"].conform(rows).num_rows == 3
