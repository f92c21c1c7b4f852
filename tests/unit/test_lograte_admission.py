"""The rate-limited log and the pending-link admission (issue 18), with a fake clock."""

from __future__ import annotations

import logging

from raims_node.lograte import RateLimitedLog, key_of
from raims_node.transports.admission import Admission


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_a_flood_costs_burst_lines_and_one_summary() -> None:
    clock = Clock()
    lines: list[str] = []
    limited = RateLimitedLog(lambda level, text: lines.append(text), clock=clock, burst=5)
    for i in range(10_000):
        limited.log(None, logging.WARNING, f"closing link 127.0.0.1:{1000 + i}: bad stream")
        clock.t += 0.0001
    limited.log("other", logging.INFO, "a different warning")
    assert len(lines) == 6
    clock.t += 10
    limited.flush()
    assert lines[-1].startswith("... and 9,995 more like this in the last 10 s")
    assert limited.suppressed_total == 9_995
    limited.log(None, logging.WARNING, "closing link 127.0.0.1:1: bad stream")
    assert len(lines) == 8  # a new window writes again


def test_key_of_blanks_what_varies() -> None:
    assert key_of("closing link [::1]:5000: x 'A'") == key_of("closing link 10.0.0.1:77: x 'B'")


def test_admission_caps_and_deadlines() -> None:
    adm = Admission(auth_timeout_s=2.0, pending_max=3, per_host=2)
    assert adm.admit(1, "h1", 0.0) is None
    assert adm.admit(2, "h1", 0.0) is None
    refused = adm.admit(3, "h1", 0.0)
    assert refused is not None and "tcp_pending_per_host 2" in refused
    assert adm.admit(4, "h2", 0.5) is None
    refused = adm.admit(5, "h3", 0.5)
    assert refused is not None and "tcp_pending_max 3" in refused
    assert adm.admit(6, None, 0.5) is None  # outbound: deadline, no cap
    assert adm.expired(1.9) == []
    assert sorted(adm.expired(2.6)) == [1, 2, 4, 6]
    adm.done(1)
    assert adm.admit(7, "h1", 3.0) is None  # its slot is free again
    for cid in (2, 4, 6, 7):
        adm.done(cid)
    assert len(adm) == 0 and adm._by_host == {}
