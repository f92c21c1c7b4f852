"""The `raims` stream reader's bounded buffer (backpressure) and the options both data
sources refuse. The reader is driven as Spark drives it (read, then commit) against a
real node, so most of this runs without Spark; one query checks that Spark's commit
order (batch N is committed when batch N+1 is planned) does not deadlock the limit."""

from __future__ import annotations

import logging
import re
import threading
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import LongType, StructField, StructType

from raims_node.client import connect
from spark_app.stream import DEFAULT_MAX_BUFFERED_MESSAGES, RaimsStreamReader, _Options, register
from tests.integration import test_client
from tests.integration.harness import poll
from tests.integration.test_client import Node

node = test_client.node  # the fixture: a real node, its endpoints file in tmp_path
LIMIT = 1000
SENT = 40_000  # more than the node queues for its reader (10,000 packets) and its socket take


def _reader(subject: str, **options: str) -> RaimsStreamReader:
    return RaimsStreamReader(_Options.of({"subject": subject, **options}, publish=False),
                             StructType([StructField("id", LongType())]))


def test_a_fast_publisher_is_held_and_the_buffer_stays_bounded(node: Node, caplog: pytest.LogCaptureFixture) -> None:
    """The reader buffered every message between two micro-batches: with a publisher
    faster than the batches its memory grew without limit (here 40,000 messages)."""
    reader = _reader("lim/x", maxBufferedMessages=str(LIMIT))
    offset = reader.initialOffset()
    sent = [0]

    def publish() -> None:
        with connect() as pub:
            for i in range(SENT):
                pub.publish("lim/x", b'{"id":%d}' % i)
                sent[0] = i + 1
            pub.flush(timeout=60)

    publisher = threading.Thread(target=publish, daemon=True)
    caplog.set_level(logging.WARNING, logger="raims.spark.stream")
    publisher.start()
    try:
        assert poll(lambda: reader.stats()["held"] >= 1, timeout=20)  # the slow consumer has not read yet
        assert poll(lambda: sent[0] < SENT and reader.stats()["pending"] == LIMIT, timeout=5), \
            f"the publisher was not held: {sent[0]} sent, {reader.stats()}"
        got: list[int] = []
        peak = 0
        deadline = time.monotonic() + 60
        while len(got) < SENT and time.monotonic() < deadline:
            peak = max(peak, int(reader.stats()["messages"]))
            rows, end = reader.read(offset)
            got += [r[0] for r in rows]
            reader.commit(end)
            offset = end
            if not got or len(got) < SENT:
                poll(lambda: reader.stats()["pending"] > 0, timeout=5, interval=0.01)
        publisher.join(30)
        assert got == list(range(SENT))  # held, not dropped: every message once, in order
        assert peak <= LIMIT
        assert reader.stats()["held"] >= 1
        notices = [r.getMessage() for r in caplog.records if r.name == "raims.spark.stream"]
        assert notices and "raims reader on 'lim/x': buffer full (1000 messages" in notices[0]
        assert "maxBufferedMessages 1000" in notices[0]
    finally:
        reader.stop()
        publisher.join(30)


def test_stop_releases_a_reader_held_by_a_full_buffer(node: Node) -> None:
    reader = _reader("lim/stop", maxBufferedMessages="10")
    reader.initialOffset()
    with connect() as pub:
        for i in range(50):
            pub.publish("lim/stop", b'{"id":%d}' % i)
        assert poll(lambda: reader.stats()["held"] >= 1, timeout=10)
        client = reader._client
        assert client is not None
        t0 = time.monotonic()
        reader.stop()
        assert time.monotonic() - t0 < 2.0
        assert client._reader.join(5) is None and not client._reader.is_alive()


@pytest.mark.parametrize(("options", "publish", "message"), [
    ({"subjct": "a/b"}, False, r"the raims stream reader: unknown option 'subjct' \(did you mean 'subject'\?\); "
                               r"valid options: subject, node, path, format, maxBufferedMessages, maxBufferedBytes"),
    ({"subject": "a/b", "maxbufferedmessages": "1000", "formt": "raw"}, False, r"unknown option 'formt'"),
    ({"subject": "a/b", "maxBufferedMessages": "1000"}, True, r"the raims stream writer: unknown option "
                                                             r"'maxbufferedmessages'.*checkpointLocation"),
    ({"subject": "a/b", "maxBufferedBytes": "lots"}, False, r"raims option maxBufferedBytes 'lots': a whole number"),
    ({"subject": "a/b", "maxBufferedMessages": "0"}, False, r"raims option maxBufferedMessages '0'"),
])
def test_unknown_options_and_bad_limits_are_refused(options: dict[str, str], publish: bool, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _Options.of(options, publish=publish)


def test_options_of_both_sides_are_taken() -> None:
    opts = _Options.of({"Subject": "a/*", "MAXBUFFEREDBYTES": "4096", "path": "/x.sock"}, publish=False)
    assert (opts.subject, opts.max_bytes, opts.max_messages, opts.path) == (
        "a/*", 4096, DEFAULT_MAX_BUFFERED_MESSAGES, "/x.sock")
    assert _Options.of({"subject": "a/b", "checkpointlocation": "/ck"}, publish=True).subject == "a/b"


def test_a_typo_in_an_option_fails_the_query_when_it_starts(spark: SparkSession, tmp_path: Path) -> None:
    """`.option("subjct", ...)` was ignored; the query then failed on a missing subject,
    and a typo in an optional one (`formt`) was never noticed at all."""
    from pyspark.errors import PySparkException

    from spark_app import datasource
    from spark_app.lake import Lake

    register(spark)
    with pytest.raises((PySparkException, ValueError)) as info:  # noqa: PT012 (start or the first batch)
        query = (spark.readStream.format("raims").option("subject", "a/b").option("formt", "raw")
                 .option("path", str(tmp_path / "none.sock")).schema("id long").load()
                 .writeStream.format("memory").queryName("raims_typo").start())
        try:
            query.awaitTermination(60)
        finally:
            query.stop()
    assert "unknown option 'formt' (did you mean 'format'?)" in str(info.value)

    lake = Lake(tmp_path / "lake", spark)
    lake.write("rollouts", [])
    path = lake.table_path("rollouts")
    for options, message in ((f"path '{path}', verison '0'", "unknown option 'verison' (did you mean 'version'?)"),
                             (f"path '{path}', version 'last'", "version 'last' is not a table version")):
        with pytest.raises(Exception, match=re.escape(message)):  # noqa: PT011,PT012 (Spark wraps the LakeError)
            spark.sql(f"CREATE OR REPLACE TEMP VIEW typo USING {datasource.SOURCE_NAME} OPTIONS ({options})")
            spark.sql("SELECT count(*) FROM typo").collect()


def test_a_query_reads_a_fast_publisher_whole_through_a_small_buffer(spark: SparkSession, node: Node) -> None:
    """Spark commits batch N only when it plans batch N+1: a reader that waited for a
    commit to make room (rather than for a batch to take the messages) never got one."""
    from raims_node.client import endpoints

    register(spark)
    sent = 2000
    query = (spark.readStream.format("raims").option("subject", "lim/q").option("path", endpoints.find().sbus[0])
             .option("maxBufferedMessages", "500").schema("id long").load()
             .writeStream.format("memory").queryName("raims_lim").start())
    try:
        with connect() as pub:
            pub.wait_visible("lim/q")
            for i in range(sent):
                pub.publish("lim/q", b'{"id":%d}' % i)
            pub.flush(timeout=60)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            query.processAllAvailable()
            if spark.sql("select count(*) from raims_lim").first()[0] >= sent:
                break
        got = spark.sql("select count(*), count(distinct id), min(id), max(id) from raims_lim").first()
        assert tuple(got) == (sent, sent, 0, sent - 1)
    finally:
        query.stop()
