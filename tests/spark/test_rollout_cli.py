"""`raims_rollout.py` as a user runs it (a process of its own): what is refused before a
Spark session starts is refused in about a second, in one line, without a traceback."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from spark_app.runlock import run_lock

ROLLOUT = Path(__file__).resolve().parents[2] / "spark_app" / "raims_rollout.py"


def _run(*args: str, cwd: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, str(ROLLOUT), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)
    return done, time.monotonic() - t0


def test_a_second_rollout_is_refused_before_its_spark_session(tmp_path: Path) -> None:
    """The lock was taken in Rollout.run, after the session had started: the refusal came
    after ~9 s of Spark start-up (local master), and after its log lines."""
    cfg = tmp_path / "rollout.yaml"
    cfg.write_text(yaml.safe_dump({"service": "clitest", "run_dir": str(tmp_path / "run"),
                                   "lake": str(tmp_path / "lake"), "master": "local[1]"}))
    with run_lock(str(tmp_path / "run"), "clitest"):  # the first rollout, running
        done, seconds = _run("--config", str(cfg), cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "raims_rollout: another rollout of service clitest with run directory "), done.stderr
    assert "session" not in done.stdout
    assert seconds < 4.0  # Python and the settings' imports; a Spark start is ~9 s more


@pytest.mark.parametrize(("text", "expected"), [
    ("service: [a\n", r"^raims_rollout: rollout config '.*bad\.yaml', line 2, column 1: while parsing a flow "
                      r"sequence: expected ',' or '\]', but got '<stream end>'$"),
    ("service: x\n\tlake: y\n", r"^raims_rollout: rollout config '.*bad\.yaml', line 2, column 1: while scanning for "
                                r"the next token: found character '\\t' that cannot start any token$"),
])
def test_a_config_that_is_not_yaml_is_one_line_with_its_place(tmp_path: Path, text: str, expected: str) -> None:
    """PyYAML's message ran over six lines, pointing into "<unicode string>"."""
    import re

    cfg = tmp_path / "bad.yaml"
    cfg.write_text(text)
    done, _ = _run("--config", str(cfg), cwd=tmp_path)
    assert done.returncode == 2
    assert re.match(expected, done.stderr.strip()), done.stderr
