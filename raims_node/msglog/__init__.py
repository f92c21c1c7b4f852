"""NodeBrain-style durable message logs and cabal replication (seed 004, sections 1 and 3).

Modules, one concept each: `record` (file and link record format), `state` (last id per
origin and the exactly-once rule), `log` (the producer's log: files, rollover, torn-tail
repair, fsync policy), `reader` (reading from a position across files), `cursor`
(consumer positions), `producer` (the live datagram stream to consumers and the
polling/streaming `Consumer`), `config` (cabal configuration), `strategy` (the adaptive
ring, sans-IO), `wire` (link protocol, sans-IO), `feed` (a server's sending side),
`node` (the asyncio server/client), `commands` and `cli` (`ms_msglog`).
"""
