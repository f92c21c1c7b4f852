"""CLIENT LIST / INFO's buffer and memory fields (qbuf, qbuf-free, argv-mem, rbs, rbp,
obl, oll, omem, tot-mem, events) as redis-server 7.0.15 (jemalloc, 64 bits) fills them,
from what a raims session has: its unparsed input, the command it runs (or is blocked
in), its unsent output, its subscriptions and its age and idle time.

redis-server's model, measured there (tests/integration/test_redis_client_fields.py):
- The query buffer: sdsempty() until the first read (qbuf-free=4, 8 bytes allocated),
  then 20,480 bytes (16 KB read greedily: 20,474 free of an empty buffer); the client
  running CLIENT LIST / INFO still holds its own command in it (qbuf is the command's
  bytes; here its multibulk form, also for an inline command, whose line redis-server
  counts). Idle more than 2 s (clientsCronResizeQueryBuffer): freed to 8 bytes, 0 free.
- argv-mem: the argument bytes of the command being run, or of the one the client is
  blocked in; tot-mem adds a pointer (8 bytes) per argument.
- The reply buffer: 16 KB at the connection (rbs=rbp=16384, the peak starting at the
  size). The cron resets the peak to what is pending at its first visit (the reset's
  clock starts in seconds and is compared with milliseconds: at once) and shrinks the
  buffer to 1 KB at the next (rbs=1024, rbp=0): within 0.1-0.2 s at hz 10, here at
  0.15 s. Later resets come every 5 s (reply-buffer-peak-reset-time).
- obl: pending reply bytes in that buffer; oll / omem: the reply list beyond it (16 KB
  blocks); events `rw` while output is pending, else `r`.
- multi-mem: the queued commands' argument bytes and 8 per argument.
- tot-mem = 768 (the client struct's allocation) + query buffer + rbs + argv-mem +
  8 x arguments + multi-mem + 56 per WATCHed key + 24 per queued command's slot (2,
  then doubling) + 24 per pattern + per channel dict (24 an entry, 8 a slot: 4 slots up
  to 4 channels, then the next power of two) + omem.
Kept different (not modelled; allocator or read-pattern details): a query buffer grown
by a large argument (redis-server keeps the grown size until its cron trims it), a
reply buffer's peak and size after the first 0.15 s (redis-server's rbp is the largest
reply pending since its cron last reset it, e.g. 278 after a CLIENT INFO: timing, the
cron's phase; a reply filling the buffer grows it up to 16 KB again: here 1024 and 0), a channel dict keeping its slots
after its channels are gone, the reply list's blocks sized to large messages, and
multi-mem (0 here: redis-server counts the queued commands' arguments).
"""

from __future__ import annotations

STRUCT = 768  # zmalloc_size(client)
QBUF_ALLOC, QBUF_EMPTY = 20480, 8  # the query buffer's allocation, read into / empty
QBUF_HEADER = 6  # sds header (type 32: 5) and NUL
RBS_START, RBS_MIN = 16384, 1024  # PROTO_REPLY_CHUNK_BYTES, PROTO_REPLY_MIN_BYTES
SHRINK_S = 0.15  # the cron's second visit
QBUF_IDLE_S = 3.0  # `unixtime - lastinteraction > 2` (whole seconds)
ENTRY, SLOT, LIST_NODE = 24, 8, 24
WATCHED, MULTI_CMD = 56, 24  # a WATCHed key (list node and watchedKey), a queued command's slot


def _slots(n: int) -> int:
    if n == 0:
        return 0
    slots = 4
    while slots < n:
        slots *= 2
    return slots


def encoded_len(args: list[bytes]) -> int:
    """The bytes of `args` as a RESP multibulk (what redis-server's query buffer held)."""
    return len(b"*%d\r\n" % len(args)) + sum(len(b"$%d\r\n" % len(a)) + len(a) + 2 for a in args)


def buffer_fields(*, pending_in: int, running: list[bytes] | None, blocked: list[bytes] | None, fresh: bool,
                  age: float, idle: float, output: int, subs: tuple[int, int, int], watched: int = 0,
                  queued: list[list[bytes]] | None = None) -> str:
    """`qbuf=.. qbuf-free=.. argv-mem=.. multi-mem=0 rbs=.. rbp=.. obl=.. oll=.. omem=..
    tot-mem=.. events=..` for a client with `pending_in` unparsed input bytes, `running`
    the command it runs now (the caller of CLIENT LIST / INFO), `blocked` the one it
    waits in, `output` unsent reply bytes, `queued` its MULTI's commands."""
    qbuf = pending_in + (encoded_len(running) if running is not None else 0)
    if qbuf == 0 and fresh:
        qalloc, qfree = QBUF_EMPTY, 4
    elif qbuf == 0 and idle >= QBUF_IDLE_S:
        qalloc, qfree = QBUF_EMPTY, 0
    else:
        qalloc = max(QBUF_ALLOC, qbuf + QBUF_HEADER)
        qfree = qalloc - QBUF_HEADER - qbuf
    argv = running if running is not None else blocked
    argv_mem = sum(map(len, argv)) if argv is not None else 0
    argc = len(argv) if argv is not None else 0
    rbs, rbp = (RBS_START, RBS_START) if age < SHRINK_S else (RBS_MIN, 0)
    obl = min(output, rbs)
    rest = output - obl
    oll = -(-rest // RBS_START)
    omem = oll * RBS_START
    sub, psub, ssub = subs
    pubsub = LIST_NODE * psub + ENTRY * (sub + ssub) + SLOT * (_slots(sub) + _slots(ssub))
    multi_mem = sum(sum(map(len, q)) + 8 * len(q) for q in queued) if queued else 0
    slots = 0 if not queued else 2
    while queued and slots < len(queued):
        slots *= 2
    multi = multi_mem + WATCHED * watched + MULTI_CMD * slots
    tot = STRUCT + qalloc + rbs + argv_mem + 8 * argc + multi + pubsub + omem
    return (f"qbuf={qbuf} qbuf-free={qfree} argv-mem={argv_mem} multi-mem={multi_mem} rbs={rbs} rbp={rbp} "
            f"obl={obl} oll={oll} omem={omem} tot-mem={tot} events={'rw' if output else 'r'}")
