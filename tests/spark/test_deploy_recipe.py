"""The deploy README's `spark-submit` recipe, run as it stands, in client mode on a local
cluster (issue 26, "Deploy").

The test builds what `make dist` builds (scripts/make_dist.sh: the wheel and the
venv-pack environment, from the local package index), then runs the README's recipe
block, unchanged, with bash in a folder laid out like the repository (spark_app, dist/),
its placeholders set in the environment: MASTER=local-cluster[2,1,1024] (a standalone
master and two workers inside the driver's JVM, executors in their own JVMs),
EXECUTORS=2, and a lake and run directory of the test. What a real cluster keeps in
its spark-defaults.conf comes from SPARK_CONF_DIR here: shuffles of a few partitions
(two cores), UTC, no UI, C1-only JIT (spark_app.session: start-up over peak speed).
Measured here under load: the build about 55 s, the recipe 4-5 minutes (a session with
executors unpacking the 217 MB archive, Python workers importing from it).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.spark.test_rollout_failures import raims_processes

REPO = Path(__file__).resolve().parents[2]
README = REPO / "deploy" / "README.md"
MARK = "spark-submit --master"
DIST_TIMEOUT_S = 300
RECIPE_TIMEOUT_S = 480
SPARK_DEFAULTS = """\
spark.sql.shuffle.partitions 4
spark.sql.session.timeZone UTC
spark.ui.enabled false
spark.driver.host 127.0.0.1
spark.driver.bindAddress 127.0.0.1
spark.executorEnv.SPARK_LOCAL_IP 127.0.0.1
spark.driver.extraJavaOptions -XX:TieredStopAtLevel=1
spark.executor.extraJavaOptions -XX:TieredStopAtLevel=1
"""

pytestmark = pytest.mark.slow


def recipe_block(text: str) -> str:
    """The README's shell block that runs spark-submit."""
    blocks = re.findall(r"^```sh\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    found = [b for b in blocks if MARK in b]
    assert len(found) == 1, f"the README has {len(found)} blocks with {MARK!r}"
    return found[0]


def test_the_recipe_block_is_found_and_uses_only_its_placeholders() -> None:
    block = recipe_block(README.read_text(encoding="utf-8"))
    assert "--deploy-mode client" in block and "--archives dist/raims-env.tar.gz#environment" in block
    assert set(re.findall(r"\$\{?(\w+)", block)) == {"MASTER", "EXECUTORS", "LAKE", "RUN_DIR"}


@pytest.mark.timeout(DIST_TIMEOUT_S + RECIPE_TIMEOUT_S + 60)
def test_the_readme_recipe_runs_in_client_mode_on_a_local_cluster(tmp_path: Path) -> None:
    block = recipe_block(README.read_text(encoding="utf-8"))
    work = tmp_path / "repo"
    (work / "dist").mkdir(parents=True)
    (work / "spark_app").symlink_to(REPO / "spark_app")
    built = subprocess.run([str(REPO / "scripts" / "make_dist.sh"), str(work / "dist")], capture_output=True,
                           text=True, timeout=DIST_TIMEOUT_S, check=False,
                           env={**os.environ, "PYTHON": sys.executable, "TMPDIR": str(tmp_path)})
    assert built.returncode == 0, built.stderr[-3000:]
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text(SPARK_DEFAULTS)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               MASTER="local-cluster[2,1,1024]", EXECUTORS="2", LAKE=str(tmp_path / "lake"),
               RUN_DIR=str(tmp_path / "run"), SPARK_CONF_DIR=str(conf), TMPDIR=str(tmp_path))
    env.pop("PYTHONPATH", None)  # the driver runs ./environment/bin/python: raims from the archive
    try:
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=work, capture_output=True, text=True,
                              timeout=RECIPE_TIMEOUT_S, check=False, env=env)
    finally:
        leftover = raims_processes(tmp_path)
        for pid in leftover:
            os.kill(pid, 9)
    out = done.stdout
    assert done.returncode == 0, f"stdout:\n{out[-4000:]}\nstderr:\n{done.stderr[-4000:]}"
    assert "master (as launched)" in out and "local-cluster[2,1,1024]" in out
    audit = next(x for x in out.splitlines() if x.startswith("[  audit   ]"))
    assert re.findall(r"(\w+): (\d+) finding", audit) == [
        ("audit_lsdb", "0"), ("audit_routes", "0"), ("audit_blooms", "0")], audit
    assert "status" in out and re.search(r"^\S+\s+ok\s+True\s+\d+/\d+ via", out, re.MULTILINE), out[-3000:]
    assert leftover == []
