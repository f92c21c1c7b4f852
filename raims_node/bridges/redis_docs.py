"""COMMAND DOCS' table (redis_admin.py): summary, since and group per command, as
redis-server 7.0.15 documents them for the commands raims answers itself and for the
map's families that list theirs; the other data commands get a generic summary
("<NAME>, a <group> command of the node's key-value map"), their group taken from the
module that registers them (GROUPS)."""

from __future__ import annotations

from raims_node.kv.commands import COMMANDS
from raims_node.kv.reply import Map

SINCE_GROUP: dict[str, tuple[str, str, str]] = {
    "ping": ("Returns the server's liveliness response.", "1.0.0", "connection"),
    "echo": ("Returns the given string.", "1.0.0", "connection"),
    "select": ("Changes the selected database.", "1.0.0", "connection"),
    "quit": ("Closes the connection.", "1.0.0", "connection"),
    "reset": ("Resets the connection.", "6.2.0", "connection"),
    "hello": ("Handshakes with the Redis server.", "6.0.0", "connection"),
    "client": ("A container for client connection commands.", "2.4.0", "connection"),
    "client|id": ("Returns the unique client ID of the connection.", "5.0.0", "connection"),
    "client|setname": ("Sets the connection name.", "2.6.9", "connection"),
    "client|getname": ("Returns the name of the connection.", "2.6.9", "connection"),
    "client|setinfo": ("Sets information specific to the client or connection.", "7.2.0", "connection"),
    "client|list": ("Lists open connections.", "2.4.0", "connection"),
    "client|info": ("Returns information about the connection.", "6.2.0", "connection"),
    "client|kill": ("Terminates open connections.", "2.4.0", "connection"),
    "client|reply": ("Instructs the server whether to reply to commands.", "3.2.0", "connection"),
    "subscribe": ("Listens for messages published to channels.", "2.0.0", "pubsub"),
    "unsubscribe": ("Stops listening to messages posted to channels.", "2.0.0", "pubsub"),
    "psubscribe": ("Listens for messages published to channels that match one or more patterns.",
                   "2.0.0", "pubsub"),
    "punsubscribe": ("Stops listening to messages published to channels that match one or more "
                     "patterns.", "2.0.0", "pubsub"),
    "ssubscribe": ("Listens for messages published to shard channels.", "7.0.0", "pubsub"),
    "sunsubscribe": ("Stops listening to messages posted to shard channels.", "7.0.0", "pubsub"),
    "publish": ("Posts a message to a channel.", "2.0.0", "pubsub"),
    "spublish": ("Post a message to a shard channel", "7.0.0", "pubsub"),
    "pubsub": ("A container for Pub/Sub commands.", "2.8.0", "pubsub"),
    "pubsub|channels": ("Returns the active channels.", "2.8.0", "pubsub"),
    "pubsub|numsub": ("Returns a count of subscribers to channels.", "2.8.0", "pubsub"),
    "pubsub|numpat": ("Returns a count of unique pattern subscriptions.", "2.8.0", "pubsub"),
    "pubsub|shardchannels": ("Returns the active shard channels.", "7.0.0", "pubsub"),
    "pubsub|shardnumsub": ("Returns the count of subscribers of shard channels.", "7.0.0", "pubsub"),
    "auth": ("Authenticates the connection.", "1.0.0", "connection"),
    "time": ("Returns the server time.", "2.6.0", "server"),
    "role": ("Returns the replication role.", "2.8.12", "server"),
    "monitor": ("Listens for all requests received by the server in real-time.", "1.0.0", "server"),
    "command": ("Returns detailed information about all commands.", "2.8.13", "server"),
    "command|count": ("Returns a count of commands.", "2.8.13", "server"),
    "command|docs": ("Returns documentary information about one, multiple or all commands.",
                     "7.0.0", "server"),
    "info": ("Returns information and statistics about the server.", "1.0.0", "server"),
    "multi": ("Starts a transaction.", "1.2.0", "transactions"),
    "exec": ("Executes all commands in a transaction.", "1.2.0", "transactions"),
    "discard": ("Discards a transaction.", "2.0.0", "transactions"),
    "watch": ("Monitors changes to keys to determine the execution of a transaction.", "2.2.0",
              "transactions"),
    "unwatch": ("Forgets about watched keys of a transaction.", "2.2.0", "transactions"),
    # the map's bitmap commands and LCS, as redis-server 7.0.15 documents them
    "setbit": ("Sets or clears the bit at offset in the string value stored at key", "2.2.0", "bitmap"),
    "getbit": ("Returns the bit value at offset in the string value stored at key", "2.2.0", "bitmap"),
    "bitcount": ("Count set bits in a string", "2.6.0", "bitmap"),
    "bitpos": ("Find first bit set or clear in a string", "2.8.7", "bitmap"),
    "bitop": ("Perform bitwise operations between strings", "2.6.0", "bitmap"),
    "bitfield": ("Perform arbitrary bitfield integer operations on strings", "3.2.0", "bitmap"),
    "bitfield_ro": ("Perform arbitrary bitfield integer operations on strings. Read-only variant of BITFIELD",
                    "6.0.0", "bitmap"),
    "lcs": ("Find longest common substring", "7.0.0", "string"),
    "pfadd": ("Adds the specified elements to the specified HyperLogLog.", "2.8.9", "hyperloglog"),
    "pfcount": ("Return the approximated cardinality of the set(s) observed by the HyperLogLog at key(s).",
                "2.8.9", "hyperloglog"),
    "pfmerge": ("Merge N different HyperLogLogs into a single one.", "2.8.9", "hyperloglog"),
    "sort": ("Sort the elements in a list, set or sorted set", "1.0.0", "generic"),
    "sort_ro": ("Sort the elements in a list, set or sorted set. Read-only variant of SORT.", "7.0.0",
                "generic"),
    # the operator commands (redis_ops.py, redis_ops_mem.py), as redis-server 7.0.15 documents them
    "slowlog": ('A container for slow log commands', "2.2.12", "server"),
    "slowlog|get": ("Get the slow log's entries", "2.2.12", "server"),
    "slowlog|len": ("Get the slow log's length", "2.2.12", "server"),
    "slowlog|reset": ('Clear all entries from the slow log', "2.2.12", "server"),
    "slowlog|help": ('Show helpful text about the different subcommands', "6.2.0", "server"),
    "latency": ('A container for latency diagnostics commands', "2.8.13", "server"),
    "latency|latest": ('Return the latest latency samples for all events.', "2.8.13", "server"),
    "latency|history": ('Return timestamp-latency samples for the event.', "2.8.13", "server"),
    "latency|reset": ('Reset latency data for one or more events.', "2.8.13", "server"),
    "latency|doctor": ('Return a human readable latency analysis report.', "2.8.13", "server"),
    "latency|graph": ('Return a latency graph for the event.', "2.8.13", "server"),
    "latency|histogram": ('Return the cumulative distribution of latencies of a subset of commands or all.',
     "7.0.0", "server"),
    "latency|help": ('Show helpful text about the different subcommands.', "2.8.13", "server"),
    "memory": ('A container for memory diagnostics commands', "4.0.0", "server"),
    "memory|usage": ('Estimate the memory usage of a key', "4.0.0", "server"),
    "memory|stats": ('Show memory usage details', "4.0.0", "server"),
    "memory|doctor": ('Outputs memory problems report', "4.0.0", "server"),
    "memory|malloc-stats": ('Show allocator internal stats', "4.0.0", "server"),
    "memory|purge": ('Ask the allocator to release memory', "4.0.0", "server"),
    "memory|help": ('Show helpful text about the different subcommands', "4.0.0", "server"),
    "config": ('A container for server configuration commands', "2.0.0", "server"),
    "config|get": ('Get the values of configuration parameters', "2.0.0", "server"),
    "config|set": ('Set configuration parameters to the given values', "2.0.0", "server"),
    "config|resetstat": ('Reset the stats returned by INFO', "2.0.0", "server"),
    "lolwut": ('Display some computer art and the Redis version', "5.0.0", "server"),
    "client|pause": ('Stop processing commands from clients for some time', "2.9.50", "connection"),
    "client|unpause": ('Resume processing of clients that were paused', "6.2.0", "connection"),
}
GROUPS = {"strings": "string", "keys": "generic", "hashes": "hash", "lists": "list", "sets": "set",
           "zsets": "sorted-set", "zsets_algebra": "sorted-set", "server": "server",
           "bitmaps": "bitmap", "bitfield": "bitmap", "lcs": "string", "hll": "hyperloglog", "sort": "generic",
           "geo": "geo", "streams_cmds": "stream", "streams_groups": "stream", "streams_claim": "stream",
           "streams_info": "stream"}


def command_doc(name: str) -> Map:
    """COMMAND DOCS of one command or subcommand (its full name): summary, since, group."""
    entry = SINCE_GROUP.get(name)
    if entry is None:
        cmd = COMMANDS.get(name.encode())
        group = GROUPS.get(cmd.handler.__module__.rpartition(".")[2], "generic") if cmd else "generic"
        entry = (f"{name.upper()}, a {group} command of the node's key-value map.", "1.0.0", group)
    summary, since, group = entry
    return Map([(b"summary", summary.encode()), (b"since", since.encode()), (b"group", group.encode())])
