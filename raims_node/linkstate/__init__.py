"""Link-state database, routes and forwarding sets, network graph text.

Pure computation shared by the router, the console and the Spark audit: no asyncio,
no sockets. See the module docstrings for the seed sections each implements.
"""

from raims_node.linkstate.db import (
    Applied,
    ConsistencyReport,
    Inconsistency,
    LinkStateDB,
    NeedsSync,
    SeqnoSums,
)
from raims_node.linkstate.errors import (
    GraphError,
    InvalidPath,
    InvalidRecord,
    LinkStateError,
    UnknownPeer,
)
from raims_node.linkstate.graph import LINK_TYPES, Graph, GraphLink, parse_graph
from raims_node.linkstate.records import (
    BRIDGE_LEN,
    DEFAULT_COST,
    MAX_COST,
    NUM_PATHS,
    Cost,
    LinkRecord,
    PeerRecord,
    expand_cost,
)
from raims_node.linkstate.routes import Route, RouteTable, TreeEdge, path_for_hash
from raims_node.linkstate.topology import db_from_graph, graph_bridge, graph_from_db

__all__ = [
    "BRIDGE_LEN", "DEFAULT_COST", "LINK_TYPES", "MAX_COST", "NUM_PATHS",
    "Applied", "ConsistencyReport", "Cost", "Graph", "GraphError", "GraphLink",
    "Inconsistency", "InvalidPath", "InvalidRecord", "LinkRecord", "LinkStateDB",
    "LinkStateError", "NeedsSync", "PeerRecord", "Route", "RouteTable", "SeqnoSums",
    "TreeEdge", "UnknownPeer", "db_from_graph", "expand_cost", "graph_bridge",
    "graph_from_db", "parse_graph", "path_for_hash",
]
