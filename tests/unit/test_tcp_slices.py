"""A link's frames are handed over in batches sized to their work (transports/tcp.py
`_deliver`): 256 frames of batched subscription floods took 100 ms and more at the
receiver before the slice was checked, holding its loop, every client and link."""

from __future__ import annotations

import time

from raims_node.transports import tcp
from raims_node.transports.tcp import LinkProtocol
from tests.unit.test_tcp_lone import HEARTBEAT, Owner

FRAME_COST_S = 0.004  # what one frame costs its owner here (a busy wait)


class SlowOwner(Owner):
    def __init__(self) -> None:
        super().__init__(lone=False)
        self.handed = 0

    def link_frames(self, conn_id: int, frames: list[bytes]) -> None:
        end = time.perf_counter() + FRAME_COST_S * len(frames)
        while time.perf_counter() < end:
            pass
        self.handed += len(frames)


async def test_heavy_frames_give_the_loop_back_after_about_a_slice() -> None:
    owner = SlowOwner()
    link = LinkProtocol(owner, 0, None)
    link.conn_id = 1
    took = []
    for _ in range(3):  # reads of 64 heavy frames each, every one waiting for the last to be fed
        start = time.perf_counter()
        link._deliver([HEARTBEAT] * 64)
        took.append(time.perf_counter() - start)
        while link._backlog:  # the loop's next turns
            start = time.perf_counter()
            link._continue()
            took.append(time.perf_counter() - start)
    assert owner.handed == 3 * 64
    # the first read is handed over whole (nothing known of its cost yet): after that
    # no turn runs much past the slice (was 64 frames, 256 ms, a read)
    assert max(took[1:]) < tcp.SLICE_S * 5, [round(t * 1e3) for t in took]
