"""TIPC-style service names over Rai MS (seed 002, sections 2.2 Addressing and 2.3
Topology Services): port names and name sequences bound by clients, a naming table
replicated to every node, lookups with the draft's policies, multicast to a name
sequence, and the topology service (inquiries and subscriptions with timeouts).

Sans-IO parts: `table` (publications, overlap queries, lookups), `topology`
(subscriptions, inquiries, events), `replication` (per-origin sequence numbers, dumps,
catch-up), `service` (the `_NAMES.*` requests, tying them together). `glue` drives the
service from a running daemon; `client` is a small Python helper for applications.
"""
