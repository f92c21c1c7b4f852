"""Pipeline stages that pub/sub through their host's raims node (issue 20 point 3).

Partition helpers (one client per partition, raims_node.client):

    df.foreachPartition(publish_partition("rows/out"))            # rows as JSON
    df.rdd.mapPartitions(with_client(lambda c, rows: ...))         # any use of a client

The `raims` Python data source (Spark 4 DataSource API, `register(spark)`):

    df.writeStream.format("raims").option("subject", "rows/out").start()
    spark.readStream.format("raims").option("subject", "rows/*").schema("id long, v double").load()

Options: `subject` (an sbus routing key to publish on; a pattern to read; refused when sbus
would keep it on the host or a key to publish on holds a wildcard: `check_subject`), `node` (which
node of the host: endpoints.find, else $RAIMS_NODE / the only node), `path` (the node's
sbus socket, `endpoints.find(node).sbus[0]`, for executors whose environment differs
from the driver's), `format` (`json`,
the default: one row per message, a JSON object of the row's columns (nested structs as
objects; decimals as strings, timestamps and dates ISO 8601, binary base64, which the
reader turns back into the schema's types; a message that is not a JSON object fails
the query with its subject and start); `raw`: the reader
gives `subject string, payload binary` rows and the writer publishes a `payload`
binary column as it is, a string one as UTF-8, null as empty; a raw reader has no
other schema, a raw writer needs that column: both are checked when the query starts),
and for the reader `maxBufferedMessages` / `maxBufferedBytes` (below). Any other option
(a typo: `subjct`) fails the query when it starts, naming the option and the valid ones;
Spark's own `checkpointLocation` is taken on the writer.

Delivery guarantee and offsets (decisions):
- The stream reader subscribes when the query starts (on the driver, in the Python
  worker that serves the source) and buffers what arrives; an offset is the count of
  messages received in this run of the query, `{"run": R, "offset": N}`. A micro-batch is the messages between two
  offsets; `commit` frees them. Within one run of the query every message published
  after the subscription is visible (`Client.wait_visible` on the publishing side) is
  read exactly once, in the order of each publisher. The network keeps nothing, so a
  restarted query does not replay: messages of batches not committed before a driver
  failure are lost (at most once across restarts). A restarted query resumes from an
  offset of an earlier run (`run` differs, or is missing): it reads from the first
  message its own subscription received, whatever the old count was.
- The reader's client asks the node for `blocking/hard/block` so that a slow driver
  holds local publishers instead of losing messages.
- Bounded buffer, with backpressure (decision: a streaming user expects a source to lag,
  as a Kafka source does, not to lose records it has taken). At most `maxBufferedMessages`
  (default 50,000) messages and `maxBufferedBytes` (default 32 MiB of payload and subject
  bytes; a larger message is taken alone) wait for a batch, and a batch takes at most as
  much; Spark commits batch N when it plans batch N+1, so the reader holds at most three
  times the limits. When the limit is reached its callback waits for Spark's next batch
  (it never waits for a commit: Spark plans that batch only from messages past the last
  one, so waiting for the commit was a deadlock): the client's reader thread stops
  reading, and the node's flood control holds local publishers (their publish blocks)
  and queues what comes from other nodes, up to its block cap (64 MiB, sbus_proto), past
  which it cuts this reader like any slow consumer. Visible: each episode is logged once
  on `raims.spark.stream` (WARNING, at most every 10 s, with the episodes in between
  counted), and `RaimsStreamReader.stats()` counts episodes and seconds held. Before,
  the buffer grew without limit with a fast publisher and a slow micro-batch.
- Data loss (decision: as Spark's Kafka source, `failOnDataLoss`, default true): when the
  node cuts the reader as a slow consumer (past its block cap) or the connection is
  lost (the node restarted), messages are lost although the client reconnects and
  resubscribes (client/errors.py). By default the query fails at its next batch with
  the reason and the count the node dropped: a streaming user trusts a running query to
  have read everything. With `failOnDataLoss` false the reader goes on, logs a warning
  (`raims.spark.stream`) and counts it in `stats()` (`cuts`, `lost`: the messages the
  node said it dropped, `losses`: connections lost). Before, the loss was silent. A
  message the node dropped as larger than the reader's socket takes (over the ipc
  max_packet, said in its place) is a loss too (one in `lost`; was a warning only).
- The stream writer and `publish_partition` publish each row of a task once and flush
  before the task ends; a task that Spark retries publishes its rows again (at least
  once under task retries).
"""

from __future__ import annotations

import base64
import datetime
import decimal
import difflib
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamWriter,
    SimpleDataSourceStreamReader,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

if TYPE_CHECKING:
    from pyspark.sql import Row, SparkSession

    from raims_node.client import Client, Message

SOURCE_NAME: Final = "raims"
RAW_SCHEMA: Final = "subject string, payload binary"
READER_FLOOD: Final = ("blocking/soft/queue", "blocking/hard/block")
DEFAULT_MAX_BUFFERED_MESSAGES: Final = 50_000
DEFAULT_MAX_BUFFERED_BYTES: Final = 32 * 1024 * 1024
HELD_LOG_EVERY_S: Final = 10.0
# the options each side takes, as Spark spells them to the user (it lowercases the keys)
COMMON_OPTIONS: Final = ("subject", "node", "path", "format")
READER_OPTIONS: Final = (*COMMON_OPTIONS, "maxBufferedMessages", "maxBufferedBytes", "failOnDataLoss")
WRITER_OPTIONS: Final = (*COMMON_OPTIONS, "checkpointLocation")

log = logging.getLogger("raims.spark.stream")


def _client(node: str | None, path: str | None = None, flood: tuple[str, ...] = (),
            error_cb: Callable[[Exception], Any] | None = None) -> Client:
    from raims_node.client import connect

    return connect(node=node or None, path=path or None, flood=flood, error_cb=error_cb)


def _jsonable(value: Any) -> Any:
    """`value` with Rows (nested too) as JSON objects of their fields, not arrays."""
    if isinstance(value, tuple) and hasattr(value, "__fields__"):
        return {k: _jsonable(v) for k, v in zip(value.__fields__, value, strict=True)}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


def _json_scalar(value: Any) -> Any:
    """Spark's values JSON has no type for (json.dumps' `default`); `_converter` reads them back."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (datetime.date, datetime.time)):  # datetime too
        return value.isoformat()
    return str(value)  # Decimal (exact), timedelta, ...


def encode_row(row: Row | dict[str, Any]) -> bytes:
    return json.dumps(_jsonable(row), separators=(",", ":"), default=_json_scalar).encode()


def _timestamp(value: Any) -> Any:
    return datetime.datetime.fromisoformat(value) if isinstance(value, str) else value


def _date(value: Any) -> Any:
    return datetime.datetime.fromisoformat(value).date() if isinstance(value, str) else value


def _binary(value: Any) -> Any:
    return base64.b64decode(value, validate=True) if isinstance(value, str) else value


def _converter(t: DataType) -> Callable[[Any], Any] | None:
    """How a JSON value becomes the Python value Spark takes for a column of type `t`
    (None: as it is); the inverse of encode_row's `_json_scalar`. Nulls stay null."""
    conv: Callable[[Any], Any] | None = None
    if isinstance(t, DecimalType):
        conv = lambda v: decimal.Decimal(str(v))  # noqa: E731
    elif isinstance(t, (TimestampType, TimestampNTZType)):
        conv = _timestamp
    elif isinstance(t, DateType):
        conv = _date
    elif isinstance(t, BinaryType):
        conv = _binary
    elif isinstance(t, ArrayType):
        elem = _converter(t.elementType)
        if elem is not None:
            conv = lambda v: [None if e is None else elem(e) for e in v]  # noqa: E731
    elif isinstance(t, MapType):
        key, val = _converter(t.keyType), _converter(t.valueType)
        if not isinstance(t.keyType, StringType):
            key = key or _json_key(t.keyType)
        if key is not None or val is not None:
            k, v_ = key or (lambda x: x), val or (lambda x: x)
            conv = lambda v: {k(a): None if b is None else v_(b) for a, b in v.items()}  # noqa: E731
    elif isinstance(t, StructType):
        conv = _struct_converter(t)
    if conv is None:
        return None
    inner = conv
    return lambda v: None if v is None else inner(v)


def _json_key(t: DataType) -> Callable[[Any], Any]:
    """A JSON object's key (always a string) as a map key of type `t`."""
    if isinstance(t, (ByteType, ShortType, IntegerType, LongType)):
        return int
    if isinstance(t, (FloatType, DoubleType)):
        return float
    if isinstance(t, BooleanType):
        return lambda k: k == "true"
    return lambda k: k


def _struct_converter(t: StructType) -> Callable[[Any], tuple[Any, ...]]:
    names = [f.name for f in t.fields]
    convs = [_converter(f.dataType) for f in t.fields]

    def conv(v: Any) -> tuple[Any, ...]:
        values = [v.get(n) for n in names] if isinstance(v, dict) else list(v)
        return tuple(c(x) if c is not None else x for c, x in zip(convs, values, strict=True))

    return conv


def publish_partition(subject: str, node: str | None = None, encode: Callable[[Any], bytes] = encode_row,
                      path: str | None = None) -> Callable[[Iterable[Any]], None]:
    """A `foreachPartition` function: one client per partition, each row published once
    on `subject`, flushed before the task ends."""
    check_subject(subject, publish=True)

    def run(rows: Iterable[Any]) -> None:
        with _client(node, path) as c:
            c.wait_visible(subject)
            for row in rows:
                c.publish(subject, encode(row))
            c.flush(timeout=120)

    return run


def with_client(fn: Callable[[Client, Iterable[Any]], Iterable[Any]], node: str | None = None,
                path: str | None = None) -> Callable[[Iterable[Any]], Iterator[Any]]:
    """A `mapPartitions` function: `fn(client, rows)` with one client per partition."""

    def run(rows: Iterable[Any]) -> Iterator[Any]:
        with _client(node, path) as c:
            yield from fn(c, rows)
            c.flush(timeout=120)

    return run


def check_subject(subject: str, publish: bool) -> None:
    """ValueError unless `subject` crosses the network: a key sbus keeps on its host (one
    with '.', an empty or '!' segment: sbus_proto.subject_of) would reach no stage on
    another host, without a word; a publisher's key must also hold no wildcard."""
    from raims_node.bridges.sbus_proto import network_sub, subject_of

    key = subject.encode("utf-8", "surrogateescape")
    what = "publish on" if publish else "read"
    if (subject_of(key) if publish else network_sub(key)) is None:
        raise ValueError(f"raims subject {subject!r}: sbus keeps it on this host, so stages on other hosts "
                         f"would never see it (keys are 'a/b/c': no '.', no empty or '!' segment); "
                         f"cannot {what} it")
    if publish and any(b"*" in seg or seg == b">" for seg in key.split(b"/")):
        raise ValueError(f"raims subject {subject!r}: a wildcard is a pattern to read, not a key to publish on")


# ---------------------------------------------------------------- the data source


def check_options(options: dict[str, str], valid: tuple[str, ...], what: str) -> None:
    """ValueError naming the first option not in `valid` (compared without case, as Spark
    passes keys lowercased), the closest valid one and all of them: a typo such as
    `subjct` was ignored without a word."""
    known = {v.lower(): v for v in valid}
    for key in options:
        if key.lower() not in known:
            close = difflib.get_close_matches(key.lower(), list(known), n=1)
            hint = f" (did you mean {known[close[0]]!r}?)" if close else ""
            raise ValueError(f"{what}: unknown option {key!r}{hint}; valid options: {', '.join(valid)}")


def _positive_int(options: dict[str, str], name: str, default: int) -> int:
    text = options.get(name.lower())
    if text is None:
        return default
    try:
        value = int(str(text).strip())
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"raims option {name} {text!r}: a whole number of at least 1")
    return value


def _boolean(options: dict[str, str], name: str, default: bool) -> bool:
    text = options.get(name.lower())
    if text is None:
        return default
    value = str(text).strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"raims option {name} {text!r}: true or false")
    return value == "true"


@dataclass
class _Options:
    subject: str
    node: str | None
    format: str
    path: str | None
    max_messages: int = DEFAULT_MAX_BUFFERED_MESSAGES
    max_bytes: int = DEFAULT_MAX_BUFFERED_BYTES
    fail_on_data_loss: bool = True

    @classmethod
    def of(cls, options: dict[str, str], publish: bool) -> _Options:
        options = {k.lower(): v for k, v in options.items()}
        check_options(options, WRITER_OPTIONS if publish else READER_OPTIONS,
                      "the raims stream writer" if publish else "the raims stream reader")
        subject = options.get("subject")
        if not subject:
            raise ValueError("the raims source needs .option('subject', ...)")
        check_subject(subject, publish)
        fmt = options.get("format", "json")
        if fmt not in ("json", "raw"):
            raise ValueError(f"raims format {fmt!r}: json or raw")
        return cls(subject, options.get("node") or None, fmt, options.get("path") or None,
                   _positive_int(options, "maxBufferedMessages", DEFAULT_MAX_BUFFERED_MESSAGES),
                   _positive_int(options, "maxBufferedBytes", DEFAULT_MAX_BUFFERED_BYTES),
                   _boolean(options, "failOnDataLoss", True))


class RaimsDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return RAW_SCHEMA

    def simpleStreamReader(self, schema: StructType) -> SimpleDataSourceStreamReader:
        opts = _Options.of(dict(self.options), publish=False)
        if opts.format == "raw" and [(f.name, f.dataType) for f in schema.fields] != \
                [("subject", StringType()), ("payload", BinaryType())]:
            raise ValueError(f"raims format raw reads rows of {RAW_SCHEMA!r}, not {schema.simpleString()!r}: "
                             "leave out .schema(...)")
        return RaimsStreamReader(opts, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        opts = _Options.of(dict(self.options), publish=True)
        if opts.format == "raw":
            payload = [f for f in schema.fields if f.name == "payload"]
            if not payload or not isinstance(payload[0].dataType, (BinaryType, StringType)):
                raise ValueError(f"raims format raw publishes a 'payload' column of binary or string; "
                                 f"the rows are {schema.simpleString()}")
        return RaimsStreamWriter(opts, schema)


class RaimsStreamReader(SimpleDataSourceStreamReader):
    """Subscribes on the driver; offsets count the messages received (module docstring)."""

    def __init__(self, opts: _Options, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self._row = _struct_converter(schema)
        self._lock = threading.Condition()  # notified when a commit frees room, or on stop
        self._rows: list[Message] = []
        self._base = 0  # offset of self._rows[0]
        self._bytes = 0  # payload and subject bytes in self._rows
        self._handed = 0  # offset up to which read() put the messages in a batch
        self._pending_bytes = 0  # bytes of the messages past self._handed
        self._stopped = False
        self._starting = False  # _start's flush waits: a full buffer does not hold the reader then
        self._held = 0  # episodes the buffer was full and the callback waited
        self._held_s = 0.0
        self._logged_at: float | None = None
        self._unlogged = 0
        self._client: Client | None = None
        self._cuts = self._lost = self._losses = 0  # connections cut / lost, messages the node dropped
        self._loss: str | None = None  # why the query fails at its next batch (failOnDataLoss)
        self._run = uuid.uuid4().hex  # offsets of other runs (a restart) count other messages

    def __getstate__(self) -> dict[str, Any]:
        # Spark pickles the reader to plan the read; the connection and buffer stay here
        return {"opts": self.opts, "schema": self.schema}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["opts"], state["schema"])  # type: ignore[misc]

    def _start(self) -> None:
        if self._client is None:
            self._stopped = False
            self._starting = True  # the flush's answer comes behind messages: none is held meanwhile
            try:
                self._client = _client(self.opts.node, self.opts.path, READER_FLOOD, self._on_error)
                self._client.subscribe(self.opts.subject, callback=self._on_msg)
                self._client.flush()
            finally:
                self._starting = False

    def _pending(self) -> int:
        return self._base + len(self._rows) - max(self._handed, self._base)

    def _full(self, size: int) -> bool:
        """No room for a message of `size` bytes among those no batch has taken yet (the
        limits leave out the batches Spark read: it commits batch N only once it has
        planned batch N+1, which needs messages past N)."""
        pending = self._pending()
        return pending > 0 and (pending >= self.opts.max_messages
                                or self._pending_bytes + size > self.opts.max_bytes)

    def _on_msg(self, msg: Message) -> None:
        # the reader thread only appends (decoding waits for the batch that reads it); a
        # full buffer holds the thread, so the node holds the publishers (module docstring)
        size = len(msg.payload) + len(msg.subject)
        with self._lock:
            if self._full(size) and not self._stopped and not self._starting:
                since = time.monotonic()
                self._held += 1
                self._log_held(since)
                while self._full(size) and not self._stopped:
                    self._lock.wait(1.0)
                self._held_s += time.monotonic() - since
            if self._stopped:
                return
            self._rows.append(msg)
            self._bytes += size
            self._pending_bytes += size

    def _on_error(self, err: Exception) -> None:
        """The client's error_cb (its reader thread): a lost connection or a message
        the node dropped as too large lost messages."""
        from raims_node.client import ConnectionLost, SlowConsumerCut
        from raims_node.client.errors import MessageTooLarge

        if not isinstance(err, ConnectionLost | MessageTooLarge):
            log.warning("raims reader on %r: %s", self.opts.subject, err)
            return
        with self._lock:
            if isinstance(err, MessageTooLarge):  # one message dropped in its place
                self._lost += 1
            else:
                self._losses += 1
            if isinstance(err, SlowConsumerCut):
                self._cuts += 1
                self._lost += err.dropped or 0
            if self.opts.fail_on_data_loss and self._loss is None:
                self._loss = (f"raims reader on {self.opts.subject!r} lost messages: {err} (the query cannot "
                              "read them again; .option('failOnDataLoss', 'false') goes on and counts them)")
        if not self.opts.fail_on_data_loss:
            log.warning("raims reader on %r lost messages (failOnDataLoss false, going on): %s",
                        self.opts.subject, err)

    def _log_held(self, now: float) -> None:
        if self._logged_at is not None and now - self._logged_at < HELD_LOG_EVERY_S:
            self._unlogged += 1
            return
        more = f" ({self._unlogged} more episode(s) since the last notice)" if self._unlogged else ""
        log.warning("raims reader on %r: buffer full (%d messages, %d bytes; maxBufferedMessages %d, "
                    "maxBufferedBytes %d): holding the node until Spark's next batch; local "
                    "publishers wait, messages from other nodes queue on the node%s",
                    self.opts.subject, self._pending(), self._pending_bytes, self.opts.max_messages,
                    self.opts.max_bytes, more)
        self._logged_at, self._unlogged = now, 0

    def stats(self) -> dict[str, float]:
        """Messages and bytes held (`messages`, `bytes`: until committed; `pending`,
        `pending_bytes`: not in a batch yet, what the limits bound), and the backpressure
        so far: `held` episodes of a full buffer, `held_s` seconds of the ended ones; data
        loss: `cuts` by the node (slow consumer), `lost` the messages it said it dropped,
        `losses` connections lost, cuts included (module docstring, failOnDataLoss)."""
        with self._lock:
            return {"messages": len(self._rows), "bytes": self._bytes, "pending": self._pending(),
                    "pending_bytes": self._pending_bytes, "held": self._held, "held_s": round(self._held_s, 3),
                    "cuts": self._cuts, "lost": self._lost, "losses": self._losses}

    def _decode(self, msgs: list[Message]) -> Iterator[tuple[Any, ...]]:
        if self.opts.format == "raw":
            for m in msgs:
                yield (m.subject, m.payload)
            return
        row = self._row
        for m in msgs:
            try:
                data = json.loads(m.payload)
                if not isinstance(data, dict):
                    raise ValueError(f"a JSON {type(data).__name__}")
                yield row(data)
            except (ValueError, TypeError, ArithmeticError) as exc:
                raise ValueError(f"raims message on {m.subject!r} is not a JSON object of the columns "
                                 f"{self.schema.simpleString()}: {exc} (payload {m.payload[:80]!r}); "
                                 "read other payloads with .option('format', 'raw')") from None

    def _offset(self, n: int) -> dict[str, Any]:
        return {"run": self._run, "offset": n}

    def _ours(self, offset: dict[str, Any]) -> bool:
        return offset.get("run") == self._run

    def initialOffset(self) -> dict[str, Any]:
        self._start()
        return self._offset(0)

    def read(self, start: dict[str, Any]) -> tuple[Iterator[tuple[Any, ...]], dict[str, Any]]:
        """The next batch; RuntimeError once messages were lost (failOnDataLoss)."""
        self._start()
        with self._lock:
            if self._loss is not None:
                raise RuntimeError(self._loss)
            # an earlier run's offset (a restart): from the first message of this run
            begin = max(int(start["offset"]) if self._ours(start) else self._base, self._base)
            rows: list[Message] = []
            size = 0
            for m in self._rows[begin - self._base:begin - self._base + self.opts.max_messages]:
                size += len(m.payload) + len(m.subject)
                if rows and size > self.opts.max_bytes:
                    break
                rows.append(m)
            end = begin + len(rows)
            if end > self._handed:  # these are in a batch now: room for as many
                taken = self._rows[max(self._handed, self._base) - self._base:end - self._base]
                self._pending_bytes -= sum(len(m.payload) + len(m.subject) for m in taken)
                self._handed = end
                self._lock.notify_all()
        return iter(list(self._decode(rows))), self._offset(end)

    def readBetweenOffsets(self, start: dict[str, Any], end: dict[str, Any]) -> Iterator[tuple[Any, ...]]:
        if not self._ours(end):  # a batch of an earlier run: its messages are gone
            return iter(())
        begin, stop = int(start["offset"]) if self._ours(start) else 0, int(end["offset"])
        with self._lock:
            if begin < self._base:
                raise RuntimeError(f"raims messages {begin}..{self._base} are gone (committed or lost "
                                   "with a previous driver): the network does not replay")
            rows = self._rows[begin - self._base:stop - self._base]
        return iter(list(self._decode(rows)))

    def commit(self, end: dict[str, Any]) -> None:
        if not self._ours(end):
            return
        stop = int(end["offset"])
        with self._lock:
            drop = max(0, min(stop - self._base, len(self._rows)))
            self._bytes -= sum(len(m.payload) + len(m.subject) for m in self._rows[:drop])
            if stop > self._handed:  # committed without a read of ours (not in one run)
                self._pending_bytes -= sum(len(m.payload) + len(m.subject)
                                           for m in self._rows[max(self._handed, self._base) - self._base:drop])
                self._handed = self._base + drop
            del self._rows[:drop]
            self._base += drop
            self._lock.notify_all()

    def stop(self) -> None:
        with self._lock:  # a callback waiting for room lets the client's reader thread go
            self._stopped = True
            self._lock.notify_all()
        if self._client is not None:
            self._client.close()
            self._client = None


def _raw_payload(value: bytes | bytearray | str | None) -> bytes:
    """A raw row's payload: binary as it is, a string as UTF-8, null as empty."""
    if value is None:
        return b""
    return value.encode() if isinstance(value, str) else bytes(value)


class RaimsStreamWriter(DataSourceStreamWriter):
    def __init__(self, opts: _Options, schema: StructType) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[Row]) -> WriterCommitMessage:
        raw = self.opts.format == "raw"
        with _client(self.opts.node, self.opts.path) as c:
            for row in iterator:
                c.publish(self.opts.subject, _raw_payload(row["payload"]) if raw else encode_row(row))
            c.flush(timeout=120)
        return WriterCommitMessage()

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        return None

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        return None


def register(spark: SparkSession) -> None:
    """Make `format("raims")` known to `spark`; this module travels to the Python
    workers by value (they need raims_node, not spark_app)."""
    import sys

    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    spark.dataSource.register(RaimsDataSource)
