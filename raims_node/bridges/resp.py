"""RESP, the Redis protocol, server side: a sans-IO request parser and pure encoders.

Manual section "Redis"; protocol facts as redis-server 7 implements them:

- A request is a multibulk `*<n>\\r\\n` followed by n bulks `$<len>\\r\\n<bytes>\\r\\n`, or an
  inline command: one line (ending at `\\n`, optional `\\r`) split like redis-server's
  `sdssplitargs` (blanks separate, "double quotes" with `\\n \\r \\t \\b \\a \\xHH`
  escapes, 'single quotes' with `\\'`, a closing quote must end the argument). A NUL
  byte before the line's `\\n` hides it, as redis-server looks for it with strchr: the
  request never completes and passes MAX_INLINE (`too big inline request`, closed). An
  empty request (`*0`, `*-1`, a blank line) is skipped.
- Lengths are parsed as strictly as `string2ll` (no sign `+`, no leading zeros).
- Every violation is fatal: redis-server replies `-ERR Protocol error: <text>` and
  closes. The texts: "invalid multibulk length", "expected '$', got 'x'", "invalid
  bulk length", "too big mbulk count string", "too big bulk count string", "too big
  inline request", "unbalanced quotes in request". Lines are bounded by
  `MAX_INLINE` (64 KiB, redis-server's PROTO_INLINE_MAX_SIZE).
- Like redis-server the 2 bytes after a bulk are skipped, not checked.

Decisions (limits, named below): `max_bulk` defaults to 64 MiB instead of Redis' 512 MiB
because a message larger than the Rai MS wire frame limit (64 MiB) cannot be routed (the
bridge passes the node's `max_payload`, 1 MiB by default, as redis-server's
proto-max-bulk-len, or 64 MiB with a key-value map: redis_config.redis_limits); `max_args` defaults to 1,048,576 (Redis allows up to INT_MAX). Both
answer with the texts Redis uses for out-of-range lengths. `max_query` bounds the bytes
of one request (redis-server's client-query-buffer-limit, 1 GB there): a multibulk whose
arguments would pass it (a command that never completes, each argument within the
limits) is refused with `-ERR Protocol error: query buffer limit reached` before the
argument is read, and closed.

Speed: while no request is in progress, `feed` first runs a batch scan (`_scan`) over
the read: one `split(b"\r\n")` yields a pipeline of canonical multibulks, each bulk's
length line checked against a table of canonical `$n` lines and its bulk's length; what
the scan does not take (anything unusual) goes to the general parser, which alone raises
the errors above. Both give the same commands for any input and any split (tested).
The scan is compiled (`_resp_scan.c`, built by the install when a C compiler is there;
`RAIMS_PURE_PYTHON=1` turns it off): in Python it cost 0.45 us of a pipelined PUBLISH's
~1.1 us, compiled 0.11 (issue 24: Redis PUBLISH 0.47x redis-server -> 0.81x).

Encoders cover what a pub/sub server sends in RESP2 and RESP3: simple strings, errors,
integers, bulks, nulls (`$-1` / `_`), arrays, push (`>`, RESP3 only) and map (`%`,
RESP3; a flat array in RESP2) headers. Error texts never contain CR or LF (they are
replaced by spaces, as redis-server does for texts that quote client input).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable

from raims_node.bridges.errors import ProtocolViolation

Scan = Callable[[bytes, int, list[list[bytes]], int, int, int], int]
_compiled_scan: Scan | None
try:  # the batch scan compiled (_resp_scan.c), unless the install had no C compiler
    from raims_node.bridges._resp_scan import scan as _compiled_scan
except ImportError:
    _compiled_scan = None
# RAIMS_PURE_PYTHON=1: the pure-Python paths only (tests run both)
compiled_scan: Scan | None = None if os.environ.get("RAIMS_PURE_PYTHON") == "1" else _compiled_scan

OK = b"+OK\r\n"  # the reply of every command that only succeeds
MAX_INLINE = 64 * 1024
MAX_BULK = 64 * 1024 * 1024
MAX_ARGS = 1024 * 1024
MAX_QUERY = 4 * MAX_BULK

_LL = re.compile(rb"0|-?[1-9][0-9]{0,18}")
FAST_ARGS = 1024  # multibulk counts the batch scan takes (more: the general parser)
REPEATS_MIN = 32  # commands from which cutting a pipeline by columns pays (measured)
_COUNTS = {b"*%d" % i: i for i in range(1, FAST_ARGS + 1)}
_LENS = {b"$%d" % i: i for i in range(0, 1024)}  # canonical bulk length lines, small bulks
_INT64 = 1 << 63
_SPACE = frozenset(b" \t\n\r\x0b\x0c")  # C isspace()
_ESCAPES = {ord("n"): 10, ord("r"): 13, ord("t"): 9, ord("b"): 8, ord("a"): 7}
_HEX = frozenset(b"0123456789abcdefABCDEF")


def parse_ll(b: bytes | bytearray) -> int | None:
    """A signed 64-bit decimal as redis-server's string2ll accepts it, else None."""
    if _LL.fullmatch(b) is None:
        return None
    v = int(b)
    return v if -_INT64 <= v < _INT64 else None


# ------------------------------------------------------------------ errors

def encode_error(message: str | bytes, code: str = "ERR") -> bytes:
    """`-<code> <message>`; CR and LF in the message become spaces."""
    if isinstance(message, str):
        message = message.encode("utf-8", "surrogateescape")
    return b"-%s %s\r\n" % (code.encode(), message.replace(b"\r", b" ").replace(b"\n", b" "))


def encode_subscribed_refusal(fullname: str) -> bytes:
    """redis-server's refusal of a command in RESP2 subscribed mode."""
    return encode_error(f"Can't execute '{fullname}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE "
                        "/ PING / QUIT / RESET are allowed in this context")


class RespProtocolError(ProtocolViolation):
    """Malformed request; `reply` is redis-server's `-ERR Protocol error: ...` line."""

    def __init__(self, message: str, text: bytes) -> None:
        super().__init__(message, encode_error(b"Protocol error: " + text))
        self.events: list[list[bytes]] = []


class MalformedRequest(RespProtocolError):
    """A multibulk that does not follow the grammar."""


class RequestTooLong(RespProtocolError):
    """An inline command or a length line longer than MAX_INLINE."""


class ArrayTooLong(RespProtocolError):
    """A multibulk with more than `max_args` elements."""


class BulkTooLarge(RespProtocolError):
    """A bulk longer than `max_bulk`."""


class QueryTooLarge(RespProtocolError):
    """A request whose arguments together exceed `max_query`."""


class UnbalancedQuotes(RespProtocolError):
    """An inline command with an unterminated quote or a quote not ending its argument."""


# ------------------------------------------------------------------ parser

class RespParser:
    """`feed(bytes) -> commands` (each a list of byte-string arguments).

    Keeps the state of a multibulk across calls, so a command arriving in many small
    reads is parsed once. Raises a RespProtocolError (with `.events`, the commands decoded
    before the bad bytes) on malformed input; every later call raises again.
    """

    def __init__(self, max_bulk: int = MAX_BULK, max_args: int = MAX_ARGS, max_query: int = MAX_QUERY) -> None:
        self.max_bulk = max_bulk
        self.max_args = max_args
        self.max_query = max_query
        self._held = 0  # bytes of the arguments of the multibulk in progress
        self._tail = bytearray()  # unparsed bytes of earlier reads
        self._need = 0  # bytes the tail must hold before a parse can progress
        self._argc = 0  # bulks still expected by the multibulk in progress
        self._args: list[bytes] = []
        self._bulklen = -1  # length of the bulk being read, -1 before its $ line
        self._error: RespProtocolError | None = None
        self._batch: list[list[bytes]] = []  # _scan_repeats' commands
        # the batch scan's tables, within the limits
        self._counts = _COUNTS if max_args >= FAST_ARGS else {k: v for k, v in _COUNTS.items() if v <= max_args}
        self._lens = _LENS if max_bulk >= len(_LENS) else {k: v for k, v in _LENS.items() if v <= max_bulk}
        self._query_checked = max_query < FAST_ARGS * len(_LENS)  # else no fast command can pass it

    @property
    def buffered(self) -> int:
        """Input bytes kept for the request in progress (its arguments and the tail)."""
        return self._held + len(self._tail)

    def feed(self, data: bytes | bytearray | memoryview) -> list[list[bytes]]:
        if self._error is not None:
            raise type(self._error)(f"stream already failed: {self._error}", b"")
        tail = self._tail
        if tail:
            tail += data
            if len(tail) < self._need:  # a bulk still arriving: do not parse again
                return []
            data = bytes(tail)
            tail.clear()
        elif type(data) is not bytes:
            data = bytes(data)
        commands: list[list[bytes]] = []
        n = len(data)
        pos = 0
        scanned = False
        try:
            while pos < n:
                # the batch scan while idle at a multibulk (once per feed: see _scan), else
                # the general parser, which returns when its command is complete
                if not scanned and not self._argc and data[pos] == 42:
                    scanned = True
                    pos = self._scan(data, pos, commands)
                    if pos >= n:
                        break
                nxt = self._parse(data, commands, pos)
                if nxt == pos:
                    break  # waiting for more input
                pos = nxt
        except RespProtocolError as exc:
            exc.events = commands
            self._error = exc
            raise
        if pos < n:
            with memoryview(data) as mv:
                tail += mv[pos:]
        return commands

    def _scan(self, data: bytes, pos: int, commands: list[list[bytes]]) -> int:
        """The batch scan: compiled when built (_resp_scan.c, the same rule, a request at a
        time, taking bulks that hold CR LF too), else in Python."""
        c_scan = compiled_scan
        if c_scan is not None:
            return c_scan(data, pos, commands, min(self.max_args, FAST_ARGS), self.max_bulk, self.max_query)
        return self._scan_python(data, pos, commands)

    def _scan_python(self, data: bytes, pos: int, commands: list[list[bytes]]) -> int:
        """The fast path for a pipeline: the canonical multibulks from `pos` on (counts
        up to FAST_ARGS, every bulk length written as redis-server writes it and equal to
        its bulk's), parsed by one split of the buffer; the offset of the first byte it
        leaves to `_parse` (a partial command, an inline one, a bulk holding CR LF, a
        length the limits refuse, anything unusual). Run at most once per feed, so input
        that keeps stopping it costs one extra pass, never a quadratic one."""
        tokens = (data[pos:] if pos else data).split(b"\r\n")
        ntok = len(tokens)
        counts, get = self._counts, self._lens.get
        append = commands.append
        fit, checked = self._lengths_fit, self._query_checked
        i = self._scan_repeats(tokens) if not checked else 0
        if i:
            commands += self._batch
            self._batch = []
        while True:
            argc = counts.get(tokens[i])
            if argc is None:
                break
            end = i + 1 + 2 * argc
            if end >= ntok:
                break  # the last CR LF is not there yet
            # each bulk's length line must be canonical and equal to its length; the
            # short commands unrolled
            if argc == 2:
                a, b = tokens[i + 2], tokens[i + 4]
                if (get(tokens[i + 1]) != len(a) or get(tokens[i + 3]) != len(b)) \
                        and not fit(tokens[i + 1:end:2], [a, b]):
                    break
                args = [a, b]
            elif argc == 3:
                a, b, c = tokens[i + 2], tokens[i + 4], tokens[i + 6]
                if (get(tokens[i + 1]) != len(a) or get(tokens[i + 3]) != len(b) or get(tokens[i + 5]) != len(c)) \
                        and not fit(tokens[i + 1:end:2], [a, b, c]):
                    break
                args = [a, b, c]
            else:
                args = tokens[i + 2:end:2]
                if list(map(get, tokens[i + 1:end:2])) != list(map(len, args)) and not fit(tokens[i + 1:end:2], args):
                    break
            if checked and sum(map(len, args)) > self.max_query:
                break
            append(args)
            i = end
        if i:
            # the offset where the scan stopped: from the end, the tokens left are few
            rest = ntok - i
            pos = len(data) - (sum(map(len, tokens[i:])) + 2 * (rest - 1) if rest > 1 or tokens[i] else 0)
        return pos

    def _scan_repeats(self, tokens: list[bytes]) -> int:
        """A pipeline of commands with as many arguments as the first (redis-benchmark's,
        a producer's run of PUBLISH or SET) checked and cut column by column, each
        column one C-level slice: the number of tokens taken, 0 unless all of them fit."""
        argc = self._counts.get(tokens[0])
        if argc is None:
            return 0
        period = 1 + 2 * argc
        k = (len(tokens) - 1) // period  # complete commands: the token after each is there
        if k < REPEATS_MIN:
            return 0
        end = k * period
        if tokens[0:end:period] != [tokens[0]] * k:
            return 0
        get = self._lens.get
        columns = []
        for j in range(1, period, 2):
            column = tokens[j + 1:end:period]
            if list(map(get, tokens[j:end:period])) != list(map(len, column)):
                return 0
            columns.append(column)
        self._batch = list(map(list, zip(*columns, strict=True)))
        return end

    def _lengths_fit(self, heads: list[bytes], args: list[bytes]) -> bool:
        """Bulk length lines beyond _LENS: canonical, equal to the bulk, within the limits."""
        total = 0
        for head, arg in zip(heads, args, strict=True):
            size = len(arg)
            if head[:1] != b"$" or head[1:] != b"%d" % size or size > self.max_bulk:
                return False
            total += size
        return total <= self.max_query

    def _parse(self, data: bytes, commands: list[list[bytes]], pos: int) -> int:
        """Parse from `pos` until one request is complete (or skipped) or the input ends;
        the offset of the first unparsed byte."""
        argc, args, bulklen = self._argc, self._args, self._bulklen
        n = len(data)
        need = 0
        try:
            while pos < n:
                if not argc:
                    if data[pos] != 42:  # not '*': an inline command
                        nl = data.find(b"\n", pos)
                        if nl >= 0 and data.find(0, pos, nl) >= 0:
                            nl = -1  # redis-server's strchr stops at a NUL: no line end, ever
                        if nl < 0:
                            if n - pos > MAX_INLINE:
                                raise RequestTooLong(f"inline request of more than {MAX_INLINE} bytes",
                                                     b"too big inline request")
                            break
                        end = nl - 1 if nl > pos and data[nl - 1] == 13 else nl
                        inline = split_inline(data[pos:end])
                        if inline is None:
                            raise UnbalancedQuotes("inline request with unbalanced quotes",
                                                   b"unbalanced quotes in request")
                        pos = nl + 1
                        if inline:
                            commands.append(inline)
                        break
                    nl = data.find(b"\r\n", pos)
                    if nl < 0:
                        if n - pos > MAX_INLINE:
                            raise RequestTooLong(f"multibulk count line of more than {MAX_INLINE} bytes",
                                                 b"too big mbulk count string")
                        break
                    count = _length(data[pos + 1:nl])
                    if count is None:
                        raise MalformedRequest(f"bad multibulk count {data[pos + 1:nl][:32]!r}",
                                               b"invalid multibulk length")
                    if count > self.max_args:
                        raise ArrayTooLong(f"multibulk of {count} elements exceeds max_args {self.max_args}",
                                           b"invalid multibulk length")
                    pos = nl + 2
                    if count <= 0:
                        break  # an empty request, skipped
                    argc = count
                    continue
                if bulklen < 0:
                    nl = data.find(b"\r\n", pos)
                    if nl < 0:
                        if n - pos > MAX_INLINE:
                            raise RequestTooLong(f"bulk length line of more than {MAX_INLINE} bytes",
                                                 b"too big bulk count string")
                        break
                    if data[pos] != 36:  # '$'
                        raise MalformedRequest(f"expected '$' at a bulk, got {data[pos:pos + 1]!r}",
                                               b"expected '$', got '%c'" % data[pos])
                    length = _length(data[pos + 1:nl])
                    if length is None or length < 0:
                        raise MalformedRequest(f"bad bulk length {data[pos + 1:nl][:32]!r}",
                                               b"invalid bulk length")
                    if length > self.max_bulk:
                        raise BulkTooLarge(f"bulk of {length} bytes exceeds max_bulk {self.max_bulk}",
                                           b"invalid bulk length")
                    if self._held + length > self.max_query:
                        raise QueryTooLarge(f"request of more than {self._held + length} bytes exceeds "
                                            f"max_query {self.max_query}", b"query buffer limit reached")
                    bulklen = length
                    pos = nl + 2
                stop = pos + bulklen
                if stop + 2 > n:
                    need = stop + 2 - pos
                    break
                args.append(data[pos:stop])
                self._held += bulklen
                pos = stop + 2
                bulklen = -1
                argc -= 1
                if not argc:
                    commands.append(args)
                    args = []
                    self._held = 0
                    break
        finally:
            self._argc, self._args, self._bulklen, self._need = argc, args, bulklen, need
        return pos


def _length(b: bytes) -> int | None:
    """A length field: the common small positive case without the regex."""
    if b.isdigit() and len(b) <= 18 and (b[0] != 48 or len(b) == 1):
        return int(b)
    return parse_ll(b)


def split_inline(line: bytes) -> list[bytes] | None:
    """Split an inline command like redis-server's sdssplitargs; None: bad quoting."""
    nul = line.find(0)
    if nul >= 0:
        line = line[:nul]
    n = len(line)
    p = 0
    args: list[bytes] = []
    while True:
        while p < n and line[p] in _SPACE:
            p += 1
        if p >= n:
            return args
        cur = bytearray()
        inq = insq = False
        while True:
            if p >= n:
                if inq or insq:
                    return None
                break
            c = line[p]
            if inq:
                if (c == 92 and p + 3 < n and line[p + 1] == 120
                        and line[p + 2] in _HEX and line[p + 3] in _HEX):
                    cur.append(int(line[p + 2:p + 4], 16))
                    p += 3
                elif c == 92 and p + 1 < n:
                    p += 1
                    cur.append(_ESCAPES.get(line[p], line[p]))
                elif c == 34:
                    if p + 1 < n and line[p + 1] not in _SPACE:
                        return None
                    p += 1
                    break
                else:
                    cur.append(c)
            elif insq:
                if c == 92 and p + 1 < n and line[p + 1] == 39:
                    p += 1
                    cur.append(39)
                elif c == 39:
                    if p + 1 < n and line[p + 1] not in _SPACE:
                        return None
                    p += 1
                    break
                else:
                    cur.append(c)
            elif c in (32, 10, 13, 9):
                p += 1
                break
            elif c == 34:
                inq = True
            elif c == 39:
                insq = True
            else:
                cur.append(c)
            p += 1
        args.append(bytes(cur))


# ------------------------------------------------------------------ encoders

def encode_simple(text: str) -> bytes:
    return b"+%s\r\n" % text.encode()


def encode_int(value: int) -> bytes:
    return b":%d\r\n" % value


def encode_bulk(value: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(value), value)


def encode_null(resp: int) -> bytes:
    return b"_\r\n" if resp == 3 else b"$-1\r\n"


def encode_array_header(count: int) -> bytes:
    return b"*%d\r\n" % count


def encode_push_header(count: int, resp: int) -> bytes:
    """Pub/sub messages and (un)subscribe confirmations: a push in RESP3, an array in RESP2."""
    return b">%d\r\n" % count if resp == 3 else b"*%d\r\n" % count


def encode_countdown(kind: bytes, names: list[bytes], resp: int) -> bytes:
    """The confirmations of an unsubscribe of every name in `names`, the count going
    down to 0, in one join (100,000 one by one took ~90 ms in one loop turn, now 30)."""
    head, last = encode_push_header(3, resp) + encode_bulk(kind), len(names) - 1
    return b"".join([b"%s$%d\r\n%s\r\n:%d\r\n" % (head, len(raw), raw, last - i) for i, raw in enumerate(names)])


def encode_map_header(pairs: int, resp: int) -> bytes:
    return b"%%%d\r\n" % pairs if resp == 3 else b"*%d\r\n" % (2 * pairs)


def encode_bulks(values: Iterable[bytes]) -> bytes:
    """An array of bulks."""
    items = [encode_bulk(v) for v in values]
    return encode_array_header(len(items)) + b"".join(items)


def encode_command(*args: bytes) -> bytes:
    """A request as clients send it (a multibulk of bulks)."""
    return encode_bulks(args)
