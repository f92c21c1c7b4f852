"""Inputs the fuzzer (bench/fuzz.py) once crashed a parser with, replayed: each must now
raise only the package's typed error. Also a short run of the harness itself and
hypothesis properties of the same contract."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raims_node import RaimsError
from raims_node.bridges.nats_proto import NatsParser
from raims_node.bridges.resp import RespParser
from raims_node.bridges.rv_codec import RvFrameReader
from raims_node.bridges.rv_codec import decode as rv_decode
from raims_node.config.tree import load_text
from raims_node.wire import FrameReader, decode_frame

ROOT = Path(__file__).resolve().parents[2]
CASES = sorted((ROOT / "tests" / "fixtures" / "fuzz").glob("*.bin"))


def _parse(target: str, data: bytes) -> None:
    if target == "config":
        load_text(data.decode("utf-8", "replace"), "<fuzz>")
    elif target in ("wire", "handshake", "router"):
        decode_frame(data)
    elif target == "stream":
        FrameReader().feed(data)
    elif target == "nats":
        NatsParser().feed(data)
    elif target == "resp":
        RespParser().feed(data)
    elif target == "rv":
        reader = RvFrameReader(1 << 20)
        reader.push(data)
        for frame in reader.frames():
            rv_decode(frame).to_dict()
    else:
        raise AssertionError(f"unknown fuzz target {target!r}")


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_crash_case_raises_only_a_typed_error(case: Path) -> None:
    try:
        _parse(case.name.split("-", 1)[0], case.read_bytes())
    except RaimsError:
        pass


def test_fuzz_harness_runs_clean() -> None:
    out = subprocess.run([sys.executable, "bench/fuzz.py", "--n", "400", "--save", "/nonexistent-on-success"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert '"bench": "fuzz"' in out.stdout


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=512), st.sampled_from(["wire", "stream", "nats", "resp", "rv"]))
def test_any_bytes_give_events_or_a_typed_error(data: bytes, target: str) -> None:
    try:
        _parse(target, data)
    except RaimsError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab:-[]{}'\"\n ?&*!|>#0")), max_size=200))
def test_any_yaml_text_gives_a_tree_or_a_config_error(text: str) -> None:
    try:
        load_text(text, "<hypothesis>")
    except RaimsError:
        pass
