"""The `raims` stream source and the partition helpers on Spark local mode, through two
daemons: stage one (`foreachPartition`, one partition) publishes 100,000 rows on node A,
stage two (`readStream.format("raims")`) receives them on node B exactly once."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from pyspark.sql import SparkSession
from pyspark.sql.types import LongType, StructField, StructType

from raims_node.client import Client, connect, endpoints
from spark_app.stream import publish_partition, register, with_client
from tests.integration.harness import NodeProc, graph_config

ROWS = 100_000
pytestmark = pytest.mark.slow


@pytest.fixture
def two_nodes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    cfg, commands = graph_config(tmp_path, "node A B\ntcp_link_ab A B : 100\n", web=False)
    data = yaml.safe_load(cfg.read_text())
    data["transports"] += [{"tport": "bus", "type": "ipc", "route": {"service": "pipe"}}]
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))
    nodes = []
    try:
        for command in commands:
            args = command.split()[1:]
            if "-t" not in args:
                args.append("-t")
            nodes.append(NodeProc(args[args.index("-u") + 1], [*args, "bus.listen"], tmp_path))
        for node in nodes:
            node.wait_for(r"network converges [\d.]+ secs, 1 uids", 30)
        deadline = time.monotonic() + 10
        while len(endpoints.nodes()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        yield {ep.node: ep.sbus[0] for ep in endpoints.nodes()}
    finally:
        for node in nodes:
            node.stop()


def test_pipeline_exactly_once(spark: SparkSession, two_nodes: dict[str, str]) -> None:
    register(spark)
    stream = (spark.readStream.format("raims").option("subject", "pipe/rows").option("path", two_nodes["B"])
              .schema("id long, v double").load())
    query = stream.writeStream.format("memory").queryName("raims_rx").start()
    try:
        rows = spark.range(ROWS).selectExpr("id", "cast(id as double) / 2 as v").repartition(1)
        rows.foreachPartition(publish_partition("pipe/rows", path=two_nodes["A"]))
        deadline = time.monotonic() + 90
        count = 0
        while time.monotonic() < deadline:
            query.processAllAvailable()
            count = spark.sql("select count(*) from raims_rx").first()[0]
            if count >= ROWS:
                break
            time.sleep(0.2)
        got = spark.sql("select count(*), count(distinct id), sum(id), sum(v) from raims_rx").first()
        assert tuple(got) == (ROWS, ROWS, ROWS * (ROWS - 1) // 2, ROWS * (ROWS - 1) / 4)
    finally:
        query.stop()


def test_map_partitions_with_one_client_per_partition(spark: SparkSession, two_nodes: dict[str, str]) -> None:
    def stage(c: Client, rows: Iterator[int]) -> Iterator[int]:
        for r in rows:
            c.publish("pipe/mp", b"%d" % r)
            yield r * 2

    with connect(path=two_nodes["B"]) as sub_client:
        sub = sub_client.subscribe("pipe/mp")
        with connect(path=two_nodes["A"]) as probe:
            probe.wait_visible("pipe/mp", timeout=30)
        out = spark.sparkContext.parallelize(range(100), 4).mapPartitions(
            with_client(stage, path=two_nodes["A"])).collect()
        assert sorted(out) == [2 * i for i in range(100)]
        assert sorted(int(sub.next(30).payload) for _ in range(100)) == list(range(100))


def test_stream_writer_publishes_rows(spark: SparkSession, two_nodes: dict[str, str], tmp_path: Path) -> None:
    import json

    register(spark)
    with connect(path=two_nodes["B"]) as sub_client:
        sub = sub_client.subscribe("pipe/ws")
        with connect(path=two_nodes["A"]) as probe:
            probe.wait_visible("pipe/ws", timeout=30)
        query = (spark.readStream.format("rate").option("rowsPerSecond", 100).load()
                 .writeStream.format("raims").option("subject", "pipe/ws").option("path", two_nodes["A"])
                 .option("checkpointLocation", str(tmp_path / "ck")).start())
        try:
            rows = [json.loads(sub.next(60).payload) for _ in range(20)]
        finally:
            query.stop()
    assert all(set(r) == {"timestamp", "value"} for r in rows)
    assert len({r["value"] for r in rows}) == 20


def test_json_rows_keep_their_types_from_writer_to_reader(spark: SparkSession, two_nodes: dict[str, str],
                                                          tmp_path: Path) -> None:
    """The writer used to send a decimal, a timestamp or a date as str() and binary as
    "b'...'", and a nested struct as an array; the reader handed the strings to Spark,
    which failed the query (`assert isinstance(value, decimal.Decimal)`)."""
    import datetime
    import decimal

    register(spark)
    columns = ("id long, d decimal(10,2), ts timestamp, dt date, b binary, s struct<a:int,b:string>, "
               "arr array<date>, m map<int,binary>, n string")
    received = (spark.readStream.format("raims").option("subject", "pipe/types").option("path", two_nodes["B"])
                .schema(columns).load().writeStream.format("memory").queryName("raims_types").start())
    writer = None
    try:
        with connect(path=two_nodes["A"]) as probe:
            probe.wait_visible("pipe/types", timeout=30)
        static = spark.sql("""select 7L as id, cast(1.25 as decimal(10,2)) as d,
            timestamp'2026-01-02 03:04:05.123456' as ts, date'2026-01-02' as dt, X'00FF' as b,
            named_struct('a', 1, 'b', 'x') as s, array(date'2026-03-04') as arr, map(5, X'01') as m,
            cast(null as string) as n""")
        writer = (spark.readStream.format("rate").option("rowsPerSecond", 5).load().crossJoin(static)
                  .drop("timestamp", "value").writeStream.format("raims").option("subject", "pipe/types")
                  .option("path", two_nodes["A"]).option("checkpointLocation", str(tmp_path / "ck")).start())
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            received.processAllAvailable()
            if spark.sql("select count(*) from raims_types").first()[0]:
                break
            time.sleep(0.2)
        row = spark.sql("select * from raims_types").first()
    finally:
        if writer is not None:
            writer.stop()
        received.stop()
    assert row is not None
    assert row.asDict(recursive=True) == {
        "id": 7, "d": decimal.Decimal("1.25"), "ts": datetime.datetime(2026, 1, 2, 3, 4, 5, 123456),
        "dt": datetime.date(2026, 1, 2), "b": b"\x00\xff", "s": {"a": 1, "b": "x"},
        "arr": [datetime.date(2026, 3, 4)], "m": {5: b"\x01"}, "n": None}


def test_a_message_that_is_not_a_json_object_fails_with_what_it_is() -> None:
    from raims_node.client import Message
    from spark_app.stream import RaimsStreamReader, _Options

    reader = RaimsStreamReader(_Options.of({"subject": "pipe/*"}, publish=False), StructType([StructField("id", LongType())]))
    assert list(reader._decode([Message("pipe/a", b'{"id":1}')])) == [(1,)]
    for payload in (b"not json", b"[1]", b'{"id":1'):
        with pytest.raises(ValueError, match=r"raims message on 'pipe/b' is not a JSON object .*format', 'raw'"):
            list(reader._decode([Message("pipe/b", payload)]))


@pytest.mark.parametrize(("subject", "side"), [("pipe.rows", "write"), ("pipe.rows", "read"), ("pipe//rows", "write"),
                                               ("pipe/*", "write"), ("!/cred/1/2/3", "read")])
def test_a_subject_the_network_does_not_carry_is_refused(spark: SparkSession, tmp_path: Path,
                                                         subject: str, side: str) -> None:
    """'pipe.rows' (NATS spelling) used to be taken: sbus keeps such keys on the host, so
    the rows reached no stage on another host and nothing said so."""
    from pyspark.errors import PySparkException

    register(spark)
    with pytest.raises((PySparkException, ValueError)) as info:  # noqa: PT012 (start or the first batch)
        if side == "write":
            query = (spark.readStream.format("rate").load().writeStream.format("raims").option("subject", subject)
                     .option("path", str(tmp_path / "none.sock")).option("checkpointLocation", str(tmp_path / "ck"))
                     .start())
        else:
            query = (spark.readStream.format("raims").option("subject", subject).option("path", str(tmp_path / "x"))
                     .schema("id long").load().writeStream.format("memory").queryName("raims_bad").start())
        try:
            query.awaitTermination(60)
        finally:
            query.stop()
    assert "raims subject" in str(info.value)
    if side == "write":
        with pytest.raises(ValueError, match="raims subject"):
            publish_partition(subject)


def test_a_restarted_reader_reads_its_run_from_the_first_message(two_nodes: dict[str, str]) -> None:
    """Offsets counted the messages of one run, so a query restarted from its checkpoint
    at offset 5 skipped the first 5 messages its new subscription received (here: all 3)."""
    from spark_app.stream import RaimsStreamReader, _Options

    def reader() -> RaimsStreamReader:
        return RaimsStreamReader(_Options.of({"subject": "pipe/rs", "path": two_nodes["B"]}, publish=False),
                                 StructType([StructField("id", LongType())]))

    def received(r: RaimsStreamReader, n: int) -> None:
        assert r._client is not None
        r._client.flush()  # the node's answer comes after the messages it sent before
        assert len(r._rows) == n

    with connect(path=two_nodes["B"]) as pub:
        first = reader()
        start = first.initialOffset()
        for i in range(5):
            pub.publish("pipe/rs", b'{"id":%d}' % i)
        pub.flush()
        received(first, 5)
        rows, checkpoint = first.read(start)
        assert list(rows) == [(i,) for i in range(5)]
        first.commit(checkpoint)
        first.stop()

        second = reader()  # the query restarted from its checkpoint
        second.initialOffset()  # subscribed; messages come before Spark's first read
        for i in range(100, 103):
            pub.publish("pipe/rs", b'{"id":%d}' % i)
        pub.flush()
        received(second, 3)
        assert list(second.readBetweenOffsets(start, checkpoint)) == []  # the old run's batch is gone
        second.commit(checkpoint)
        rows, end = second.read(checkpoint)
        assert list(rows) == [(100,), (101,), (102,)]
        pub.publish("pipe/rs", b'{"id":103}')
        pub.flush()
        received(second, 4)
        second.commit(end)
        rows, _ = second.read(end)
        assert list(rows) == [(103,)]
        second.stop()


@pytest.mark.parametrize("side", ["write", "read"])
def test_raw_format_checks_its_columns_when_the_query_starts(spark: SparkSession, tmp_path: Path, side: str) -> None:
    """A raw writer without a `payload` column failed each task with a bare error on
    `row["payload"]`; a raw reader with a schema of its own failed on its first row."""
    from pyspark.errors import PySparkException

    register(spark)
    with pytest.raises((PySparkException, ValueError)) as info:  # noqa: PT012 (start or the first batch)
        if side == "write":
            query = (spark.readStream.format("rate").load().writeStream.format("raims").option("format", "raw")
                     .option("subject", "pipe/raw").option("path", str(tmp_path / "none.sock"))
                     .option("checkpointLocation", str(tmp_path / "ck")).start())
        else:
            query = (spark.readStream.format("raims").option("format", "raw").option("subject", "pipe/raw")
                     .option("path", str(tmp_path / "none.sock")).schema("id long").load()
                     .writeStream.format("memory").queryName("raims_raw_bad").start())
        try:
            query.awaitTermination(60)
        finally:
            query.stop()
    assert "raims format raw" in str(info.value)


def test_raw_writer_publishes_a_string_payload_as_utf8(spark: SparkSession, two_nodes: dict[str, str],
                                                       tmp_path: Path) -> None:
    register(spark)
    with connect(path=two_nodes["B"]) as c:
        sub = c.subscribe("pipe/rawstr")
        query = (spark.readStream.format("rate").option("rowsPerSecond", 10).load()
                 .selectExpr("concat('é', cast(value as string)) as payload")
                 .writeStream.format("raims").option("format", "raw").option("subject", "pipe/rawstr")
                 .option("path", two_nodes["B"]).option("checkpointLocation", str(tmp_path / "ck")).start())
        try:
            got = sub.next(60).payload
        finally:
            query.stop()
    assert got.decode().startswith("é")
