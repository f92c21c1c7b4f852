"""spark_app/settings.py: a wrong value in the rollout config is a PlanError naming its
key, before any Spark session starts; `raims_rollout.py` prints it and exits 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from spark_app.jobs.errors import PlanError
from spark_app.settings import load_settings

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("text", "named"), [
    ("service: [1, 2]", "service: must be text"),
    ("service: 'a b'", "service: service name 'a b'"),
    ("transports: 5", "transports: must be a mapping"),
    ("transports: {mesh: 7}", "transports.mesh: must be a mapping"),
    ("transports: {nats: {port: 99999}}", "transports.nats.port: must be an integer from 0 to 65535"),
    ("transports: {mesh: {cost: 0}}", "transports.mesh.cost: must be an integer of at least 1"),
    ("timeouts: {start: -1}", "timeouts.start: must be a number"),
    ("timeouts: {start: '30s'}", "timeouts.start: must be a number"),
    ("timeouts: {stat: 3}", "timeouts: unknown key"),
    ("traffic: {messages: abc}", "traffic.messages: must be an integer"),
    ("traffic: {messages: true}", "traffic.messages: must be an integer"),
    ("nodes_per_host: 0", "nodes_per_host: must be an integer of at least 1"),
    ("observers: -3", "observers: must be an integer of at least 1"),
    ("queries: maybe", "queries: must be true or false"),
    ("parameters: [heartbeat]", "parameters: must be a mapping"),
    ("lake: 5", "lake: must be text"),
])
def test_a_wrong_value_names_its_key(tmp_path: Path, text: str, named: str) -> None:
    config = tmp_path / "rollout.yaml"
    config.write_text(text + "\n")
    with pytest.raises(PlanError, match="rollout config .*: " + named.replace("(", r"\(").replace("[", r"\[")):
        load_settings(config)


def test_values_that_make_sense_load(tmp_path: Path) -> None:
    config = tmp_path / "rollout.yaml"
    config.write_text(yaml.safe_dump({"service": "svc", "nodes_per_host": 2, "observers": 1, "queries": False,
                                      "timeouts": {"start": 5, "converge": 0.5}, "traffic": {"messages": 0},
                                      "transports": {"mesh": {"cost": 10, "port": 0}, "nats": None}}))
    s = load_settings(config, run_dir=str(tmp_path / "run"))
    assert (s.service, s.nodes_per_host, s.observers, s.queries) == ("svc", 2, 1, False)
    assert (s.start_timeout_s, s.converge_timeout_s, s.traffic_messages) == (5.0, 0.5, 0)
    assert (s.mesh_cost, s.ports, s.bridges) == (10, {"mesh": 0, "nats": 0}, ("nats",))
    with pytest.raises(PlanError, match="rollout settings: nodes_per_host"):
        load_settings(None, nodes_per_host=0)


@pytest.mark.parametrize("flag", [[], ["--audit-only", "--snapshot", "x"]])
def test_the_rollout_command_reports_it_and_exits_2(tmp_path: Path, flag: list[str]) -> None:
    config = tmp_path / "rollout.yaml"
    config.write_text("traffic: {messages: abc}\n")
    done = subprocess.run([sys.executable, "spark_app/raims_rollout.py", "--config", str(config), *flag],
                          cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "traffic.messages: must be an integer" in done.stderr
