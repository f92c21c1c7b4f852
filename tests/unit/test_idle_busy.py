"""`idle_busy` (transports/idle_busy.py): after activity the loop turns `count` times,
still serving its sockets, then blocks; activity while turning starts the count again
without a second chain of turns. On asyncio and on uvloop."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Coroutine

import pytest

from raims_node.transports.idle_busy import IdleBusy

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
            idle.count = 1  # let it come to rest: one more turn
            idle.activity()
            await until_still(idle)
            transport.close()

    RUNNERS[loop](main())
