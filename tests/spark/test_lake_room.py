"""A delta-rs write the disk cannot take is one LakeError line naming the table, with no
Rust panic on stderr (spark_app/room.py). Full disk: a small tmpfs (needs root, as
this machine's tests run); an unwritable folder: chmod (needs a user other than root)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from pyspark.sql import SparkSession

from spark_app.errors import LakeError, delta_message
from spark_app.lake import Lake
from spark_app.maintain import maintain_table
from tests.spark.synthetic import snapshot_rows

NOW = datetime(2026, 11, 27, 10, 0, tzinfo=UTC)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs, or the test is skipped where it cannot be mounted."""
    where = tmp_path / "disk"
    where.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(where)],
                                           capture_output=True).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _fill(disk: Path) -> None:
    with open(disk / "filler", "wb") as fh:
        try:
            while True:
                fh.write(b"\0" * 65536)
        except OSError:
            pass


def test_a_full_disk_is_one_error_line_naming_the_table(spark: SparkSession, small_disk: Path,
                                                        capfd: pytest.CaptureFixture[str]) -> None:
    """delta-rs printed "thread 'tokio-rt-worker' panicked at .../object_store-0.13.2/src/
    buffered.rs:369:41: Already shut down" and a backtrace before its error."""
    lake = Lake(small_disk / "lake", spark)
    rows = snapshot_rows("s1", NOW)["rollouts"]
    lake.write("rollouts", rows)
    _fill(small_disk)
    capfd.readouterr()
    with pytest.raises(LakeError, match=r"^table 'rollouts' at .*/lake/rollouts: no room: \d+ bytes free") as err:
        lake.write("rollouts", snapshot_rows("s2", NOW)["rollouts"])
    assert "\n" not in str(err.value)
    assert "panicked" not in capfd.readouterr().err


def test_maintain_on_a_full_disk_names_the_table(small_disk: Path, capfd: pytest.CaptureFixture[str]) -> None:
    path = str(small_disk / "t")
    for i in range(2):
        write_deltalake(path, pa.table({"snapshot_id": [f"s{i}"] * 100, "v": list(range(100))}), mode="append")
    _fill(small_disk)
    capfd.readouterr()
    with pytest.raises(LakeError, match=r"^lake maintain: table 't' at .*: no room"):
        maintain_table(path, "t")
    assert "panicked" not in capfd.readouterr().err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes any folder")
def test_an_unwritable_table_folder_is_one_error_line(spark: SparkSession, tmp_path: Path,
                                                       capfd: pytest.CaptureFixture[str]) -> None:
    lake = Lake(tmp_path / "lake", spark)
    lake.write("rollouts", snapshot_rows("s1", NOW)["rollouts"])
    os.chmod(lake.table_path("rollouts"), 0o555)
    try:
        with pytest.raises(LakeError, match=r"^table 'rollouts' at .*: cannot write: Permission denied"):
            lake.write("rollouts", snapshot_rows("s2", NOW)["rollouts"])
    finally:
        os.chmod(lake.table_path("rollouts"), 0o755)
    assert "panicked" not in capfd.readouterr().err


def test_delta_messages_are_one_line_without_colours() -> None:
    exc = OSError("Generic LocalFileSystem error\n          \x1b[31m↳\x1b[0m Unable to open file /l/t/_delta_log/1.json#1"
                  "\n           \x1b[31m↳\x1b[0m Permission denied (os error 13)\n")
    assert delta_message(exc) == ("Generic LocalFileSystem error: Unable to open file /l/t/_delta_log/1.json#1: "
                                  "Permission denied (os error 13)")
    assert delta_message(RuntimeError("first\n\nstack backtrace:\n   0: x")) == "first"
