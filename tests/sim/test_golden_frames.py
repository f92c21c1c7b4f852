"""The router's frames for a fixed 16-node simulation are exactly the recorded ones.

Locks behaviour across refactors of the router core (issue 16): the same inputs must put
the same bytes on the wire in the same order. A deliberate change of the wire behaviour
re-records GOLDEN (run `PYTHONHASHSEED=0 python -m tests.sim.golden_run`) and says why in
its commit message.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

GOLDEN = "4401 9e758073ee924faba3c928f7c6bba9fd52c8fbf7de9542ebcdb54efb451e7843 1280"
ROOT = Path(__file__).resolve().parents[2]


def test_fixed_simulation_sends_the_recorded_frames() -> None:
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "tests.sim.golden_run"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=240, check=True)
    assert out.stdout.strip() == GOLDEN
