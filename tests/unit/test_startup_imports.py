"""What `ms_server` loads before it listens (issue 23: launch to accept under 0.3 s,
bench/startup_bench.py): a node imports the bridge modules of the transports it runs,
the key-value map only for a map or a Redis transport, PGM only for a PGM transport; numpy
and scipy on first use (the bloom filters' vectorized paths, the first route), which the
daemon warms up in a thread once its listeners are up."""

from __future__ import annotations

import subprocess
import sys

import raims_node.bridges as bridges
from raims_node.bridges.registry import CLIENT_PROTOCOLS, server_class

LAZY = ("raims_node.kv", "raims_node.bridges.redis", "raims_node.bridges.rv", "raims_node.bridges.ipc",
        "raims_node.transports.pgm", "numpy", "scipy")


def test_the_server_and_daemon_modules_leave_the_optional_parts_unloaded() -> None:
    code = ("import sys, raims_node.server, raims_node.daemon\n"
            f"print('\\n'.join(m for m in sys.modules if m.startswith({LAZY!r})))")
    loaded = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.split()
    assert loaded == [], f"imported before any transport starts: {loaded}"


def test_every_protocol_and_every_package_name_resolves() -> None:
    for kind in CLIENT_PROTOCOLS:
        assert server_class(kind).__name__ == CLIENT_PROTOCOLS[kind][1]
    for name in bridges.__all__:
        assert getattr(bridges, name) is not None
    assert sorted(bridges.__all__) == sorted(bridges._HOME)


def test_bloom_and_routes_import_numpy_on_first_use() -> None:
    """The modules that call numpy import it when first called: a filter's resize, bytes
    and decode, and a route computation work in an interpreter that has not loaded it."""
    code = """if True:
        import sys
        from raims_node.bloom import BloomFilter, decode_image
        from raims_node.linkstate import Graph, GraphLink, RouteTable, db_from_graph, expand_cost, graph_bridge
        assert "numpy" not in sys.modules
        f = BloomFilter(seed=1)
        resized = [f.add_subject(b"s.%d" % i) for i in range(40)]
        assert any(resized) and "numpy" in sys.modules
        g = BloomFilter.from_bytes(f.to_bytes())
        assert g.matches(b"s.7") and g.to_bytes() == f.to_bytes()
        assert decode_image(f.to_bytes()).probe_hashes(__import__("numpy").array([0], "uint32")).shape == (1,)
        names = ("a", "b", "c")
        links = tuple(GraphLink("tcp", f"l{k}", (names[k], names[(k + 1) % 3]), expand_cost([100]))
                      for k in range(3))
        rt = RouteTable(db_from_graph(Graph(names, links)), graph_bridge("a"))
        assert [r.cost for r in rt.routes(0)] == [100, 100]
        assert rt.path_cost(graph_bridge("c"), 0) == 100 and len(rt.tree(graph_bridge("a"), 0)) == 2
        assert rt.forward_table(0)[graph_bridge("b")] == ()
        print("ok")
    """
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.split() == ["ok"]
