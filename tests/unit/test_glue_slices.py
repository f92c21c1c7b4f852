"""A client's large read is fed a few ms a loop turn (bridges/glue.py `_feed`): 100,000
SUB lines in one write, fed 20 ms a turn, held the node's other clients 20-40 ms a turn
(nats-server: 11-25 ms for the whole burst)."""

from __future__ import annotations

import time
from types import SimpleNamespace

from raims_node.bridges import glue
from raims_node.bridges.gate import FlowGate
from raims_node.bridges.glue import SessionProtocol

LINE = b"SUB some.subject 1\r\n"
LINE_COST_S = 0.00002  # what one line costs the session here (a busy wait)


class SlowSession:
    closing = False

    def __init__(self) -> None:
        self.lines = 0

    def data_received(self, data: bytes) -> None:
        n = data.count(b"\n")
        end = time.perf_counter() + LINE_COST_S * n
        while time.perf_counter() < end:
            pass
        self.lines += n


def test_a_large_read_gives_the_loop_back_after_a_few_ms() -> None:
    p = SessionProtocol.__new__(SessionProtocol)  # no server, transport or loop: _feed alone
    session = SlowSession()
    p.session = session  # type: ignore[assignment]
    p._slice, p._backlog, p._spent = glue.SLICE_BYTES, None, 0.0
    p._loop = SimpleNamespace(call_soon=lambda f: None)  # type: ignore[assignment]
    p.flush = lambda: None  # type: ignore[method-assign]
    p.update_reading = lambda: None  # type: ignore[method-assign]
    p.server = SimpleNamespace(hub=SimpleNamespace(gate=FlowGate()))  # type: ignore[assignment]
    p._feed(LINE * 20_000, 0)
    assert p._backlog is not None, "the whole read was fed in one turn"
    # 5 ms of work: some 250 lines at 20 us, and the slice that crossed it (was 20 ms, 1,000 and more)
    assert session.lines * LINE_COST_S < 0.010, f"{session.lines} lines ({session.lines * LINE_COST_S * 1e3:.0f} ms) in one turn"


def test_reads_in_one_turn_share_its_slice() -> None:
    """uvloop reads a ready socket on within one turn: reads each under the slice (256 KB
    of small RV messages, ~4 ms) held the other clients 250 ms a turn. A read that comes
    once the turn's slice is spent waits whole for the next turn."""
    p = SessionProtocol.__new__(SessionProtocol)
    session = SlowSession()
    p.session = session  # type: ignore[assignment]
    p._slice, p._backlog, p._spent = glue.SLICE_BYTES, None, 0.0
    turns: list[object] = []
    p._loop = SimpleNamespace(call_soon=turns.append)  # type: ignore[assignment]
    p.flush = lambda: None  # type: ignore[method-assign]
    p.update_reading = lambda: None  # type: ignore[method-assign]
    p.server = SimpleNamespace(hub=SimpleNamespace(gate=FlowGate(),  # type: ignore[assignment]
                                                   idle=SimpleNamespace(activity=lambda: None)))
    p.bytes_in = p.rd_peak = 0
    read = LINE * 200  # ~4 ms of work: under the slice
    fed = 0
    for _ in range(10):  # ten reads in one turn
        p.data_received(read)
        if p._backlog is None:
            fed = session.lines
    assert session.lines * LINE_COST_S < 0.012, f"{session.lines} lines fed in one turn"
    assert p._backlog is not None and fed < 10 * 200
    assert turns, "nothing resets the slice on the next turn"
