"""handover.hand_over: what a local owner raises on a delivery is counted and logged, and
never reaches the link that brought the message (it ended the link's read)."""

from __future__ import annotations

import logging

import pytest

from raims_node.handover import hand_over
from raims_node.router.actions import Deliver
from raims_node.router.state import Counters


class Broken:
    def __init__(self) -> None:
        self.calls = 0

    def on_deliver(self, d: Deliver) -> None:
        self.calls += 1
        raise OSError(28, "No space left on device")


def test_an_owner_that_raises_costs_its_delivery_only(caplog: pytest.LogCaptureFixture) -> None:
    counters, owner = Counters(), Broken()
    with caplog.at_level(logging.ERROR, logger="raims"):
        for i in range(20):
            hand_over(Deliver(owner, "s", "f.x", None, b"m%d" % i, b""), counters)
    assert owner.calls == 20 and counters.internal_errors == 20
    lines = [r for r in caplog.records if "f.x" in r.getMessage()]
    assert 1 <= len(lines) <= 5 and "No space left" in lines[0].getMessage()  # rate limited
