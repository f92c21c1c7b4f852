"""One local[2] SparkSession for the whole tests/spark run (starting one costs seconds)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_app.errors import SessionError
from spark_app.lake import Lake
from spark_app.session import TEST_MASTER, build_session, find_java


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    try:
        find_java()
    except SessionError as exc:
        pytest.skip(str(exc))
    session = build_session(TEST_MASTER, app_name="raims-tests")
    yield session
    session.stop()


@pytest.fixture
def lake(spark: SparkSession, tmp_path: Path) -> Lake:
    return Lake(tmp_path / "lake", spark)
