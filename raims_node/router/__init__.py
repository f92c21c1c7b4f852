"""The router core, sans-IO: the node, its peers, sequence windows, events, simulator."""
