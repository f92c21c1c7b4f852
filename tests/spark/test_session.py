"""The local session: settings, environment of the workers, start-up cache, Delta detection."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from pyspark.sql import SparkSession

import spark_app.session
from spark_app.errors import SessionError
from spark_app.session import (
    FAST_JIT_OPTION,
    LOCAL_CLUSTER_MASTER,
    TEST_MASTER,
    build_session,
    cache_dir,
    cds_archive_path,
    find_java,
    has_delta,
    is_local_master,
    jvm_options,
    local_conf,
    memory_mb,
    pyspark_home,
    require_static_allocation,
    shadow_spark_home,
)


@pytest.mark.parametrize(
    ("master", "local"),
    [
        ("local", True),
        ("local[2]", True),
        ("local[*]", True),
        (LOCAL_CLUSTER_MASTER, True),
        ("yarn", False),
        ("spark://host:7077", False),
        ("localhost", False),
    ],
)
def test_is_local_master(master: str, local: bool) -> None:
    assert is_local_master(master) is local


@pytest.mark.parametrize(
    ("text", "mb"), [("2g", 2048), ("2048m", 2048), ("1536M", 1536), ("3G", 3072)]
)
def test_memory_mb(text: str, mb: float) -> None:
    assert memory_mb(text) == mb


def test_local_conf_has_the_rollout_settings() -> None:
    conf = local_conf(LOCAL_CLUSTER_MASTER, java_options="-Xfoo", python="/venv/bin/python")
    assert conf["spark.master"] == LOCAL_CLUSTER_MASTER
    assert conf["spark.dynamicAllocation.enabled"] == "false"
    assert memory_mb(conf["spark.driver.memory"]) >= 2048
    assert conf["spark.driver.bindAddress"] == "127.0.0.1"
    assert conf["spark.executorEnv.PYSPARK_PYTHON"] == "/venv/bin/python"
    assert (
        conf["spark.driver.extraJavaOptions"] == conf["spark.executor.extraJavaOptions"] == "-Xfoo"
    )
    assert not any("packages" in key for key in conf)  # nothing ever comes from Maven


@pytest.mark.parametrize(
    ("master", "memory", "message"),
    [
        ("yarn", "2g", "not a local master"),
        (TEST_MASTER, "1g", "below the 2048m"),
        (TEST_MASTER, "lots", "bad memory setting"),
    ],
)
def test_local_conf_rejects(master: str, memory: str, message: str) -> None:
    with pytest.raises(SessionError, match=message):
        local_conf(master, driver_memory=memory)


def test_jvm_options(tmp_path: Path) -> None:
    archive = tmp_path / "a.jsa"
    assert jvm_options(archive=None, fast_jit=False) == ""
    assert jvm_options(archive=None, fast_jit=True) == FAST_JIT_OPTION
    assert f"-XX:SharedArchiveFile={archive}" in jvm_options(archive=archive, fast_jit=True)


def test_cds_archive_is_keyed_on_spark_home_and_lives_in_the_cache(tmp_path: Path) -> None:
    java = find_java()
    a = cds_archive_path(tmp_path, Path("/one"), java)
    assert a.parent == tmp_path / "cds" and a.suffix == ".jsa"
    assert a == cds_archive_path(tmp_path, Path("/one"), java)
    assert a != cds_archive_path(tmp_path, Path("/two"), java)


def test_cache_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RAIMS_CACHE_DIR", str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c"
    monkeypatch.delenv("RAIMS_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert cache_dir() == tmp_path / "x" / "raims"


def test_shadow_spark_home_links_pyspark_but_not_its_work_dir(tmp_path: Path) -> None:
    home = shadow_spark_home(tmp_path)
    assert (home / "jars").resolve() == pyspark_home() / "jars"
    assert (home / "bin" / "spark-submit").exists()
    assert not (home / "work").exists()
    assert shadow_spark_home(tmp_path) == home  # built once


def test_each_pyspark_install_has_its_own_shadow_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache is shared by the user's checkouts: a home linked into another checkout's
    venv must not be reused, or deleting that checkout breaks Spark in this one."""
    other = tmp_path / "other-checkout" / "pyspark"
    (other / "bin").mkdir(parents=True)
    (other / "bin" / "spark-submit").write_text("")
    monkeypatch.setattr(spark_app.session, "pyspark_home", lambda: other)
    theirs = shadow_spark_home(tmp_path / "cache")
    assert (theirs / "bin").resolve() == other / "bin"
    shutil.rmtree(other.parent)  # that checkout is deleted
    monkeypatch.undo()
    ours = shadow_spark_home(tmp_path / "cache")
    assert ours != theirs and (ours / "bin" / "spark-submit").exists()


def test_workers_run_this_python_on_loopback(spark: SparkSession) -> None:
    got = (
        spark.sparkContext.parallelize(range(2), 2)
        .map(lambda _: (sys.executable, os.environ.get("SPARK_LOCAL_IP")))
        .collect()
    )
    assert set(got) == {(sys.executable, "127.0.0.1")}


def test_session_settings(spark: SparkSession) -> None:
    conf = spark.sparkContext.getConf()
    assert spark.sparkContext.master == TEST_MASTER
    assert memory_mb(conf.get("spark.driver.memory") or "0m") >= 2048
    assert conf.get("spark.dynamicAllocation.enabled") == "false"
    options = conf.get("spark.driver.extraJavaOptions") or ""
    assert FAST_JIT_OPTION in options
    archive = (
        options.split("-XX:SharedArchiveFile=")[1].split()[0]
        if "SharedArchiveFile" in options
        else None
    )
    if archive is not None:  # the archive is optional: only a start-up cache
        assert Path(archive).is_file()
        assert not Path(archive).is_relative_to(Path(__file__).resolve().parents[2])
    # executors' work directories go under Spark home: not the pyspark package in the venv
    assert Path(os.environ["SPARK_HOME"]).resolve() != pyspark_home()


def test_build_session_reuses_the_active_session_only_on_its_master(spark: SparkSession) -> None:
    assert build_session(TEST_MASTER) is spark
    with pytest.raises(
        SessionError, match=r"already active; stop it before starting one on 'local\[1\]'"
    ):
        build_session("local[1]")


def test_local_session_has_no_delta(spark: SparkSession) -> None:
    assert has_delta(spark) is False


def test_dynamic_allocation_is_refused() -> None:
    on = SimpleNamespace(conf=SimpleNamespace(get=lambda key, default=None: "true"))
    with pytest.raises(SessionError, match="dynamicAllocation.enabled is true"):
        require_static_allocation(on)  # type: ignore[arg-type]
