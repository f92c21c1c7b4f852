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

GOLDEN = "4385 22cb3f6b03afba8befd15fcb236df7999d08be1b59548581840d7f74e81b18f1 1280"
ROOT = Path(__file__).resolve().parents[2]


def test_fixed_simulation_sends_the_recorded_frames() -> None:
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "tests.sim.golden_run"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=240, check=True)
    assert out.stdout.strip() == GOLDEN
