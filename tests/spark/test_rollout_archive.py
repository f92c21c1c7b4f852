"""Executors without raims (issue 11): the import probe before the deploy stage, and the
session settings that ship the `make dist` environment archive to the executors."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from pyspark import cloudpickle
from pyspark.sql import SparkSession

from spark_app.controller import NOT_IMPORTABLE_HELP, import_probe, probe_imports
from spark_app.errors import SessionError
from spark_app.jobs.errors import DeployError
from spark_app.jobs.hosts import executor_hosts
from spark_app.raims_rollout import ARCHIVE_ENV, parse_args
from spark_app.session import (
    ARCHIVE_PYTHON,
    LOCAL_CLUSTER_MASTER,
    TEST_MASTER,
    archive_conf,
    build_session,
    local_conf,
    resolve_archive,
)

MISSING_MODULE = "raims_node_absent_for_the_probe_test"
REPO = Path(__file__).resolve().parents[2]
E2E_TIMEOUT_S = 240
# An environment archive whose bin/python is this interpreter on a path that hides raims
# (a sitecustomize that blocks raims_node), like an executor host without the package.
_WRAPPER = """#!/bin/sh
here=$(cd "$(dirname "$0")/.." && pwd)
RAIMS_FROM_ARCHIVE=yes PYTHONPATH="$here/site:$PYTHONPATH" exec {python} "$@"
"""
_BLOCK_RAIMS = "import sys\nsys.modules['raims_node'] = None\n"
# Run in a child process: this one already has the tests' session, and a context takes
# its workers' interpreter once, when it starts.
_E2E = """
import json, os, sys
from spark_app.controller import probe_imports, ship_source
from spark_app.jobs.errors import DeployError
from spark_app.session import build_session
spark = build_session("local-cluster[1,1,1024]", app_name="raims-archive-test", archive=sys.argv[1])
ship_source(spark)
out = {"conf": dict(spark.sparkContext.getConf().getAll()), "exec": spark.sparkContext.pythonExec,
       "driver_env": os.environ.get("PYSPARK_PYTHON"),
       "worker": spark.sparkContext.parallelize([0], 1).map(
           lambda _: [os.environ.get("RAIMS_FROM_ARCHIVE"), os.getcwd()]).collect()[0]}
try:
    probe_imports(spark, 1)
except DeployError as exc:
    out["probe"] = str(exc)
spark.stop()
print(json.dumps(out))
"""


# ---------------------------------------------------------------- the probe


def test_probe_passes_where_raims_imports(spark: SparkSession) -> None:
    hosts = executor_hosts(spark)
    reports = probe_imports(spark, hosts)
    assert len(reports) == hosts
    assert all(r["error"] == "" and r["host"] and r["python"] for r in reports)


def test_probe_names_the_host_the_error_and_the_remedy(spark: SparkSession) -> None:
    with pytest.raises(DeployError) as caught:
        probe_imports(spark, executor_hosts(spark), MISSING_MODULE)
    message = str(caught.value)
    host = message.removeprefix("raims is not importable on executor host(s) ").split(" (", 1)[0]
    assert message.startswith("raims is not importable on executor host(s) ")
    assert host and host != message
    assert f"ModuleNotFoundError: No module named '{MISSING_MODULE}'" in message
    assert message.endswith(f": {NOT_IMPORTABLE_HELP}")
    for hint in ("make dist", "--archive dist/raims-env.tar.gz", "#environment",
                 "spark.pyspark.python=./environment/bin/python", "deploy/databricks-init.sh"):
        assert hint in message
    assert caught.value.started == []


def test_probe_task_unpickles_where_raims_and_spark_app_are_missing() -> None:
    # the executor only has pyspark: raims_node and spark_app must not be imported to
    # load the task (a module-level function would be pickled by reference and fail)
    blob = cloudpickle.dumps(import_probe("json"))
    code = ("import json, pickle, sys\n"
            "for name in ('raims_node', 'spark_app', 'tests'): sys.modules[name] = None\n"
            "task = pickle.loads(sys.stdin.buffer.read())\n"
            "loaded = sorted(m for m, v in sys.modules.items() if v is not None and m.startswith(('raims', 'spark')))\n"
            "print(json.dumps([task.__name__, loaded]))\n")
    done = subprocess.run([sys.executable, "-c", code], input=blob, capture_output=True, timeout=60,
                          check=False, cwd="/")
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert json.loads(done.stdout) == ["probe", []]


def _fake_environment(path: Path) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, text, mode in (("bin/python", _WRAPPER.format(python=sys.executable), 0o755),
                                 ("site/sitecustomize.py", _BLOCK_RAIMS, 0o644)):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    return path


def test_executors_run_the_archive_python_and_the_probe_sees_raims_missing(tmp_path: Path) -> None:
    archive = _fake_environment(tmp_path / "raims-env.tar.gz")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-c", _E2E, str(archive)], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=E2E_TIMEOUT_S, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["conf"]["spark.archives"] == f"{archive}#environment"
    assert out["conf"]["spark.pyspark.python"] == ARCHIVE_PYTHON
    assert out["conf"]["spark.pyspark.driver.python"] == sys.executable
    assert out["exec"] == ARCHIVE_PYTHON
    assert out["driver_env"] == sys.executable  # restored once the context started
    from_archive, cwd = out["worker"]
    assert from_archive == "yes" and cwd != str(tmp_path)
    assert out["probe"].startswith("raims is not importable on executor host(s) 127.0.0.1 (ModuleNotFoundError")
    assert out["probe"].endswith(NOT_IMPORTABLE_HELP)


# ---------------------------------------------------------------- the archive settings


def test_archive_conf_ships_the_environment_and_keeps_the_driver_python() -> None:
    conf = local_conf(LOCAL_CLUSTER_MASTER, archive="/d/raims-env.tar.gz", python="/usr/bin/python3.11")
    assert conf["spark.archives"] == "/d/raims-env.tar.gz#environment"
    assert conf["spark.pyspark.python"] == ARCHIVE_PYTHON == "./environment/bin/python"
    assert conf["spark.executorEnv.PYSPARK_PYTHON"] == ARCHIVE_PYTHON
    assert conf["spark.pyspark.driver.python"] == "/usr/bin/python3.11"
    plain = local_conf(LOCAL_CLUSTER_MASTER, python="/usr/bin/python3.11")
    assert "spark.archives" not in plain
    assert plain["spark.pyspark.python"] == "/usr/bin/python3.11"
    assert archive_conf("hdfs:///raims/raims-env.tar.gz")["spark.archives"] == (
        "hdfs:///raims/raims-env.tar.gz#environment")


def test_archive_is_refused_where_it_cannot_work(tmp_path: Path) -> None:
    with pytest.raises(SessionError, match="executors of their own"):
        local_conf(TEST_MASTER, archive="/d/raims-env.tar.gz")
    with pytest.raises(SessionError, match="#fragment"):
        archive_conf("/d/raims-env.tar.gz#env")
    with pytest.raises(SessionError, match="run `make dist`"):
        resolve_archive(str(tmp_path / "raims-env.tar.gz"))


def test_resolve_archive_makes_local_paths_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "raims-env.tar.gz").write_bytes(b"x")
    monkeypatch.chdir(tmp_path)
    assert resolve_archive("raims-env.tar.gz") == str(tmp_path / "raims-env.tar.gz")
    assert resolve_archive(f"file:{tmp_path}/raims-env.tar.gz") == str(tmp_path / "raims-env.tar.gz")
    assert resolve_archive("s3a://bucket/raims-env.tar.gz") == "s3a://bucket/raims-env.tar.gz"


def test_an_archive_cannot_be_added_to_a_running_session(spark: SparkSession) -> None:
    with pytest.raises(SessionError, match="--archives /d/raims-env.tar.gz#environment"):
        build_session(spark.sparkContext.master, archive="/d/raims-env.tar.gz")


def test_rollout_takes_the_archive_from_the_option_or_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ARCHIVE_ENV, raising=False)
    assert parse_args([]).archive is None
    monkeypatch.setenv(ARCHIVE_ENV, "/env/raims-env.tar.gz")
    assert parse_args([]).archive == "/env/raims-env.tar.gz"
    assert parse_args(["--archive", "dist/raims-env.tar.gz"]).archive == "dist/raims-env.tar.gz"
