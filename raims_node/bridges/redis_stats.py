"""Per-command and per-error statistics of a Redis transport: INFO commandstats,
errorstats, latencystats and `total_error_replies`, as redis-server 7.0.15 keeps them.

One `Stats` per transport (RedisHost.stats), as INFO is scoped; CONFIG RESETSTAT
clears it. Counted as redis-server 7.0.15 counts (checked against it by
tests/integration/test_redis_differential.py):

- calls: a command that ran (after it ran: an INFO does not see itself), a command run
  by EXEC (EXEC counts too), a blocking pop when it answers (served or timed out).
  A command queued in MULTI is counted when EXEC runs it, not when queued.
- rejected_calls: a command refused before it ran: its arity, RESP2 subscribed mode,
  refused inside MULTI (arity, no-multi: that transaction's EXEC then fails), an EXEC
  refused itself (EXECABORT of its arity or context), a write without a map.
- failed_calls: a command that ran and answered an error (WRONGTYPE, syntax, EXEC's
  EXECABORT or "without MULTI"...); the errors of the commands EXEC ran are theirs,
  not EXEC's.
- An unknown command or subcommand is counted in errorstats only.
- errorstats: every error reply by its first word (up to the first space in its first
  32 bytes, else ERR), those inside EXEC's array and those sent while CLIENT REPLY OFF
  included, and a protocol error's. Decision: at most 128 prefixes are kept (redis-server
  7.2's limit; 7.0.15 has none), later new ones count in total_error_replies only.
- Names are redis-server's: the lower-case command, `container|sub` for subcommands.

Time: the general dispatch times each command (the clock reads SLOWLOG already made);
the batch path (redis_batch.py) times a run once and splits its time evenly among its
commands, and counts a run of one command with one addition. latencystats is an
approximation of redis-server's HDR histogram: buckets of 1/8 of an octave (values
within 12.5%), each percentile answered as the top of its bucket, in microseconds with
three decimals, under redis-server's keys (p50, p99, p99.9). The commands a script runs
(EVAL, FCALL) are not counted apart: only the script command is.
"""

from __future__ import annotations

import math

from raims_node.kv.commands import COMMANDS, Cmd
from raims_node.kv.errors import NO_MAP, OOM
from raims_node.kv.reply import Err

MAX_ERROR_PREFIXES = 128
PERCENTILES = (("p50", 50.0), ("p99", 99.0), ("p99.9", 99.9))
_UNSAFE = bytes.maketrans(b":\r\n", b"___")


class CmdStat:
    """One command's counters and latency histogram (bucket -> count)."""

    __slots__ = ("calls", "ns", "rejected", "failed", "hist")

    def __init__(self) -> None:
        self.calls = 0
        self.ns = 0
        self.rejected = 0
        self.failed = 0
        self.hist: dict[int, int] = {}


def bucket(ns: int) -> int:
    """The histogram bucket of `ns`: exact below 16, then 8 buckets an octave."""
    if ns < 16:
        return ns if ns > 0 else 1
    shift = ns.bit_length() - 4
    return shift * 8 + (ns >> shift)


def bucket_top(index: int) -> int:
    """The largest value of bucket `index`."""
    if index < 16:
        return index
    shift, mantissa = index // 8 - 1, index % 8 + 8
    return ((mantissa + 1) << shift) - 1


class Stats:
    """A transport's command and error statistics."""

    __slots__ = ("cmds", "errors", "total_errors", "mark")

    def __init__(self) -> None:
        self.cmds: dict[str, CmdStat] = {}
        self.errors: dict[bytes, int] = {}
        self.total_errors = 0
        self.mark = 0  # total_errors when the command being accounted began (its own errors: failed)

    def stat(self, name: str) -> CmdStat:
        st = self.cmds.get(name)
        if st is None:
            st = self.cmds[name] = CmdStat()
        return st

    def reset(self) -> None:
        """CONFIG RESETSTAT."""
        self.cmds.clear()
        self.errors.clear()
        self.total_errors = self.mark = 0

    def error(self, reply: bytes) -> None:
        """An error reply (encoded, `-CODE text\\r\\n`) was sent."""
        self.total_errors += 1
        space = reply.find(b" ", 0, 32)
        prefix = reply[1:space] if space > 1 else b"ERR"
        errors = self.errors
        count = errors.get(prefix)
        if count is not None:
            errors[prefix] = count + 1
        elif len(errors) < MAX_ERROR_PREFIXES:
            errors[prefix] = 1

    def reject(self, name: str) -> None:
        self.stat(name).rejected += 1

    def call(self, name: str, ns: int) -> None:
        """`name` ran in `ns`; failed if an error was sent since `mark`."""
        st = self.stat(name)
        st.calls += 1
        st.ns += ns
        b = bucket(ns)
        st.hist[b] = st.hist.get(b, 0) + 1
        if self.total_errors > self.mark:
            st.failed += 1
        self.mark = self.total_errors

    def aside(self, name: str, ns: int, errors: int) -> None:
        """A call counted while another command runs (a blocked pop answered): failed if
        it sent `errors`, which are not the running command's."""
        st = self.stat(name)
        st.calls += 1
        st.ns += ns
        b = bucket(ns)
        st.hist[b] = st.hist.get(b, 0) + 1
        if errors:
            st.failed += 1
        self.mark += errors

    # ------------------------------------------------------------ INFO sections

    def commandstats(self) -> bytes:
        lines = [b"cmdstat_%s:calls=%d,usec=%d,usec_per_call=%.2f,rejected_calls=%d,failed_calls=%d\r\n" % (
                     _safe(name), st.calls, st.ns // 1000, st.ns / 1000 / st.calls if st.calls else 0.0,
                     st.rejected, st.failed)
                 for name, st in sorted(self.cmds.items()) if st.calls or st.rejected or st.failed]
        return b"# Commandstats\r\n" + b"".join(lines)

    def errorstats(self) -> bytes:
        return b"# Errorstats\r\n" + b"".join(
            b"errorstat_%s:count=%d\r\n" % (prefix.translate(_UNSAFE), count)
            for prefix, count in sorted(self.errors.items()))

    def latencystats(self) -> bytes:
        lines = []
        for name, st in sorted(self.cmds.items()):
            if st.calls:
                values = percentiles(st.hist)
                lines.append(b"latency_percentiles_usec_%s:%s\r\n" % (_safe(name), b",".join(
                    b"%s=%.3f" % (key.encode(), value / 1000) for (key, _), value in zip(PERCENTILES, values,
                                                                                      strict=True))))
        return b"# Latencystats\r\n" + b"".join(lines)


def percentiles(hist: dict[int, int]) -> list[int]:
    """The values (ns, the tops of their buckets) at PERCENTILES, as hdr_value_at_percentile
    counts: the first bucket where the running count reaches p% of all, rounded."""
    total = sum(hist.values())
    out = []
    for _, p in PERCENTILES:
        want = max(1, math.floor(p / 100 * total + 0.5))
        seen = 0
        for index in sorted(hist):
            seen += hist[index]
            if seen >= want:
                out.append(bucket_top(index))
                break
    return out


def _safe(name: str) -> bytes:
    return name.encode("utf-8", "replace").translate(_UNSAFE)


def data_name(args: list[bytes], cmd: Cmd | None = None) -> str | None:
    """The name data command `args` is counted under: `container|sub` for a container's
    subcommand, None for one the map does not know (counted in errorstats only)."""
    if cmd is None:
        cmd = COMMANDS[args[0].lower()]
    if not cmd.subcommands or len(args) < 2:
        return cmd.name
    sub = args[1].lower().decode("utf-8", "replace")
    return f"{cmd.name}|{sub}" if sub in cmd.subcommands else None


def data_refused(cmd: Cmd, args: list[bytes], reply: object) -> bool:
    """Engine.execute's `reply` to `args` refused it before it ran: its arity (a
    subcommand's: checked by the container's handler), a write without a map, a denyoom
    command over maxmemory (the engine's own OOM text object: a script's is a failure)."""
    if type(reply) is not Err:
        return False
    n = len(args)
    text = reply.text
    return (cmd.arity != n if cmd.arity > 0 else n < -cmd.arity) or text == NO_MAP or text is OOM or (
        bool(cmd.subcommands) and text.startswith(b"ERR wrong number of arguments for '"))


def data_outcome(stats: Stats, cmd: Cmd, args: list[bytes], reply: object) -> str:
    """The name data command `args` answered with `reply` is counted under as a call, or
    "" (refused: counted as rejected here; unknown subcommand)."""
    name = data_name(args, cmd)
    if data_refused(cmd, args, reply):
        if name:
            stats.reject(name)
        return ""
    return name or ""
