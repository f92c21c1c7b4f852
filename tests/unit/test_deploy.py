"""deploy/ and `make dist`: the Databricks init script, job spec and rollout config agree with
each other and with the package; the systemd unit is valid; the packed environment runs.

shellcheck and systemd-analyze run when installed. The archive checks use dist/ as
`make dist` left it (building it takes minutes, too long for a unit test) and are skipped,
saying so, when there is none.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
DIST = Path(os.environ.get("RAIMS_DIST_DIR", ROOT / "dist"))
ARCHIVE = DIST / "raims-env.tar.gz"
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def job() -> dict:
    return json.loads((DEPLOY / "databricks-job.json").read_text())


def cluster() -> dict:
    (only,) = job()["job_clusters"]
    return only["new_cluster"]


def test_job_spec_runs_the_rollout_on_a_fixed_cluster() -> None:
    spec, new = job(), cluster()
    assert new["spark_conf"]["spark.dynamicAllocation.enabled"] == "false"
    assert "autoscale" not in new and new["num_workers"] >= 2  # the barrier stage needs fixed hosts
    (task,) = spec["tasks"]
    assert task["job_cluster_key"] == spec["job_clusters"][0]["job_cluster_key"]
    assert Path(task["spark_python_task"]["python_file"]).name == "raims_rollout.py"
    wheel = Path(new["spark_env_vars"]["RAIMS_WHEEL"]).name
    assert wheel == f"raims-{VERSION}-py3-none-any.whl"
    (init,) = new["init_scripts"]
    assert Path(next(iter(init.values()))["destination"]).name == "databricks-init.sh"


def test_rollout_config_matches_the_firewall_rule() -> None:
    params = job()["tasks"][0]["spark_python_task"]["parameters"]
    config_name = Path(params[params.index("--config") + 1]).name
    config = yaml.safe_load((DEPLOY / config_name).read_text())
    first, last = (int(p) for p in cluster()["spark_env_vars"]["RAIMS_MESH_PORTS"].split(":"))
    assert config["transports"]["mesh"]["port"] == first < last
    assert all(config["transports"][k]["port"] > 0 for k in config["transports"])  # no ephemeral ports
    from spark_app.settings import load_settings

    settings = load_settings(DEPLOY / config_name)  # the rollout accepts every key
    assert settings.ports["mesh"] == first and settings.lake.startswith("dbfs:")


def test_init_script_uses_the_spec_variables() -> None:
    text = (DEPLOY / "databricks-init.sh").read_text()
    assert text.startswith("#!/bin/bash\n") and "set -euo pipefail" in text
    used = set(re.findall(r"\$\{?(RAIMS_[A-Z_]+)", text))
    assert used <= set(cluster()["spark_env_vars"]), used
    commands = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    assert not [ln for ln in commands if "ms_server" in ln or ln.rstrip().endswith("&")]  # starts nothing


def test_init_script_refuses_a_missing_wheel(tmp_path: Path) -> None:
    env = {**os.environ, "RAIMS_WHEEL": str(tmp_path / "absent.whl")}
    got = subprocess.run(["bash", str(DEPLOY / "databricks-init.sh")], env=env, capture_output=True, text=True)
    assert got.returncode == 1 and "absent.whl not found" in got.stderr


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed")
@pytest.mark.parametrize("script", ["deploy/databricks-init.sh", "scripts/make_dist.sh"])
def test_shellcheck(script: str) -> None:
    got = subprocess.run(["shellcheck", str(ROOT / script)], capture_output=True, text=True)
    assert got.returncode == 0, got.stdout


def test_systemd_unit_paths_agree() -> None:
    unit = (DEPLOY / "ms_server.service").read_text()
    fields = dict(re.findall(r"^(\w+)=(.*)$", unit, re.MULTILINE))
    assert fields["Type"] == "forking" and " -b" in fields["ExecStart"]  # -b writes the pid file
    assert fields["PIDFile"].startswith(f"/run/{fields['RuntimeDirectory']}/")
    assert f"-d /etc/{fields['ConfigurationDirectory']}" in fields["ExecStart"]
    assert fields["WorkingDirectory"] == f"/var/lib/{fields['StateDirectory']}"
    server = Path(fields["ExecStart"].split()[0])
    assert server.name == "ms_server"
    # venv-pack's scripts run `env python`: the environment's bin must lead the PATH
    assert fields["Environment"] == f"PATH={server.parent}:/usr/bin:/bin"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_systemd_analyze_verify(tmp_path: Path) -> None:
    # verify checks that ExecStart exists: point it at this venv's ms_server
    server = Path(sys.executable).parent / "ms_server"
    unit = (DEPLOY / "ms_server.service").read_text().replace("/opt/raims/env/bin/ms_server", str(server))
    path = tmp_path / "ms_server.service"
    path.write_text(unit)
    got = subprocess.run(["systemd-analyze", "verify", str(path)], capture_output=True, text=True)
    problems = [ln for ln in (got.stdout + got.stderr).splitlines() if "ms_server.service" in ln]
    assert got.returncode == 0 and not problems, got.stdout + got.stderr


@pytest.mark.skipif(not ARCHIVE.is_file(), reason=f"no {ARCHIVE}: run `make dist`")
def test_wheel_carries_the_schemas() -> None:
    (wheel,) = DIST.glob("raims-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for schema in (ROOT / "data" / "schemas").rglob("*.json"):
        assert f"spark_app/data/schemas/{schema.relative_to(ROOT / 'data' / 'schemas')}" in names


@pytest.mark.skipif(not ARCHIVE.is_file(), reason=f"no {ARCHIVE}: run `make dist`")
def test_unpacked_environment_runs_ms_server(tmp_path: Path) -> None:
    env_dir = tmp_path / "environment"
    with tarfile.open(ARCHIVE) as tar:
        tar.extractall(env_dir, filter="tar")
    # as `source environment/bin/activate` would: venv-pack's scripts run `env python`
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    clean["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{os.environ['PATH']}"
    got = subprocess.run([str(env_dir / "bin" / "ms_server"), "--version"], capture_output=True, text=True,
                         env=clean, cwd=tmp_path)
    assert got.returncode == 0 and got.stdout.strip() == f"ms_server (raims) {VERSION}", got
    got = subprocess.run([str(env_dir / "bin" / "ms_server"), "-v", "-d", str(tmp_path / "none")],
                         capture_output=True, text=True, env=clean, cwd=tmp_path)
    assert got.returncode == 2 and "does not exist" in got.stderr, got  # runs, and says what is wrong
    probe = ("import importlib.resources as r, pathlib, raims_node, spark_app; "
             "print(pathlib.Path(raims_node.__file__).parent.parent); "
             "print(len(list((r.files('spark_app') / 'data' / 'schemas').glob('*.json'))))")
    got = subprocess.run([str(env_dir / "bin" / "python"), "-c", probe], capture_output=True, text=True,
                         env=clean, cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    site, schemas = got.stdout.splitlines()
    assert Path(site).is_relative_to(env_dir)  # the archive's package, not the checkout's
    assert int(schemas) == len(list((ROOT / "data" / "schemas").glob("*.json")))
