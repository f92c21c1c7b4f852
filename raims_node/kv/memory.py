"""The node's memory as its Redis side counts it: the process's resident set.

Python keeps no count of the bytes its objects hold (redis-server's allocator does), so
INFO's `used_memory` and the maxmemory check (commands.Engine.sample_memory) both read the
resident set of the whole node process: the map, the router, the bridges' buffers and the
interpreter itself (some 30-90 MB before any key). Unlike redis-server's used_memory it
need not drop when keys are deleted: CPython and the C allocator keep freed memory for
reuse and give it back to the system only sometimes (measured on a node, MB of resident
set: 200,000 SETs of 10 bytes 88 -> 117, after FLUSHALL 95; then 400 SETs of 100 KB
95 -> 192, after FLUSHALL 192). So DEL / FLUSHALL may not bring a node back under its
maxmemory; raising it or lifting it (0) does."""

from __future__ import annotations

from raims_node.procmem import rss_bytes as rss_bytes  # read here and by the NATS monitor

# redis-server 7.0.15's denyoom commands (COMMAND INFO's flags, redis_commands.json), refused
# over maxmemory; XGROUP (CREATE, CREATECONSUMER) and EVAL / EVALSHA (by the script's
# shebang) register a test of their arguments (commands.Cmd.denyoom)
DENYOOM = frozenset(
    b"append bitfield bitop blmove brpoplpush copy decr decrby geoadd georadius georadiusbymember "
    b"geosearchstore getset hincrby hincrbyfloat hmset hset hsetnx incr incrby incrbyfloat linsert lmove lpush "
    b"lpushx lset mset msetnx pfadd pfmerge psetex restore rpoplpush rpush rpushx sadd sdiffstore set setbit "
    b"setex setnx setrange sinterstore sort sunionstore xadd xsetid zadd zdiffstore zincrby zinterstore "
    b"zrangestore zunionstore".split())
