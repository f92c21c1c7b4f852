"""`idle_busy` (transports/idle_busy.py): after activity the loop turns `count` times,
still serving its sockets, then blocks; activity while turning starts the count again
without a second chain of turns; the window grows when blocks are short and shrinks
back to `count` when they are long. On asyncio and on uvloop."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Coroutine

import pytest

from raims_node.transports.idle_busy import POLL_MAX_NS, IdleBusy, next_window

uvloop = pytest.importorskip("uvloop")

RUNNERS: dict[str, Callable[[Coroutine[object, object, None]], None]] = {
    "asyncio": asyncio.run,
    "uvloop": uvloop.run,
}
MAX_PASSES = 10_000  # every wait below is bounded in loop passes


async def until_still(idle: IdleBusy) -> None:
    for _ in range(MAX_PASSES):
        if not idle.turning:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"still turning after {MAX_PASSES} passes ({idle.turns} turns)")


@pytest.mark.parametrize("loop", RUNNERS)
def test_turns_count_times_then_blocks(loop: str) -> None:
    async def main() -> None:
        idle = IdleBusy(16)
        idle.activity()
        assert idle.turning
        await until_still(idle)
        assert idle.turns == 16
        await asyncio.sleep(0.02)  # at rest: no turn without activity
        assert idle.turns == 16 and not idle.turning
        idle.activity()
        await until_still(idle)
        assert idle.turns == 32

    RUNNERS[loop](main())


@pytest.mark.parametrize("loop", RUNNERS)
def test_activity_while_turning_restarts_the_count(loop: str) -> None:
    async def main() -> None:
        idle = IdleBusy(10)
        idle.activity()
        for _ in range(MAX_PASSES):
            if idle.turns >= 4:
                break
            await asyncio.sleep(0)
        seen = idle.turns
        idle.activity()  # one chain of turns: the count is reset, not doubled
        await until_still(idle)
        assert idle.turns == seen + 10

    RUNNERS[loop](main())


@pytest.mark.parametrize("loop", RUNNERS)
def test_zero_never_turns(loop: str) -> None:
    async def main() -> None:
        idle = IdleBusy(0)
        idle.activity()
        assert not idle.turning
        await asyncio.sleep(0.01)
        assert idle.turns == 0

    RUNNERS[loop](main())


@pytest.mark.parametrize("loop", RUNNERS)
def test_sockets_are_served_between_turns(loop: str) -> None:
    """A read that arrives while the loop turns is handled in one of the turns, not after
    them: turning polls, it does not hold the loop."""

    async def main() -> None:
        idle = IdleBusy(100_000)  # far more turns than the read needs
        got = asyncio.get_running_loop().create_future()

        class Reader(asyncio.Protocol):
            def data_received(self, data: bytes) -> None:
                if not got.done():
                    got.set_result(idle.turns)
                idle.activity()

        ours, theirs = socket.socketpair()
        with ours, theirs:
            transport, _ = await asyncio.get_running_loop().connect_accepted_socket(Reader, ours)
            idle.activity()
            theirs.send(b"x")
            at_turn = await asyncio.wait_for(got, 5)
            assert idle.turning and at_turn < 100_000
            idle.count = idle.window = 1  # let it come to rest: one more turn
            idle.activity()
            await until_still(idle)
            transport.close()

    RUNNERS[loop](main())


def test_next_window_grows_on_short_blocks_up_to_the_poll_limit() -> None:
    window, turn_ns = 16, 2_000.0
    seen = [window]
    for _ in range(10):
        window = next_window(window, 16, turn_ns, blocked_ns=10_000)
        seen.append(window)
    assert seen[:4] == [16, 32, 64, 100]  # doubles, up to POLL_MAX_NS worth of turns
    assert window == POLL_MAX_NS // 2_000  # and stays there
    # a block that a full window would have caught, but not this one's growth: kept
    assert next_window(100, 16, turn_ns, blocked_ns=POLL_MAX_NS - 1_000) == 100


def test_next_window_shrinks_on_long_blocks_to_the_count() -> None:
    window = 100
    for want in (50, 25, 16, 16):
        window = next_window(window, 16, 2_000.0, blocked_ns=POLL_MAX_NS + 1)
        assert window == want


def test_next_window_never_goes_below_the_count() -> None:
    """A count already longer than the poll limit is the window: it neither grows past
    nor shrinks under it."""
    assert next_window(4096, 4096, 3_000.0, blocked_ns=1_000) == 4096
    assert next_window(4096, 4096, 3_000.0, blocked_ns=10**9) == 4096


@pytest.mark.parametrize("loop", RUNNERS)
def test_the_window_follows_the_gaps_between_activity(loop: str) -> None:
    """Activity right after each block (a short gap) grows the window beyond the count;
    after long gaps it is back at the count. The gaps are the test's clock's: a test
    descheduled on a loaded machine measures its own delays, not the rule."""
    now = [10**9]  # 0 would mean "no block to measure"

    async def main() -> None:
        idle = IdleBusy(4, clock=lambda: now[0])
        windows = []
        for _ in range(3):
            idle.activity()
            await until_still(idle)
            now[0] += 10_000  # 10 us: within POLL_MAX_NS with the window's turns
            windows.append(idle.window)
        assert windows == [4, 8, 16]
        for _ in range(3):
            now[0] += 2 * POLL_MAX_NS
            idle.activity()
            await until_still(idle)
            windows.append(idle.window)
        assert windows[3:] == [8, 4, 4]

    RUNNERS[loop](main())
