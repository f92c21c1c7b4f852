"""A (P|S)SUBSCRIBE of very many names is taken a slice per loop turn, each slice
bounded by time (redis_ops.subscribe_slice): a slice of 256 names by count held the node
5-50 ms a turn on a loaded machine, and each slice copied the names left."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from raims_node.bridges import redis_ops
from raims_node.bridges.resp import encode_command
from tests.unit.test_nats_redis_bus import MemoryBus, redis

NAME_COST_S = 0.0002  # what subscribing one name costs here (a busy wait)


def slow(bus: MemoryBus) -> None:
    plain = bus.subscribe

    def subscribe(*args: object, **kw: object) -> object:
        end = time.perf_counter() + NAME_COST_S
        while time.perf_counter() < end:
            pass
        return plain(*args, **kw)  # type: ignore[arg-type]

    bus.subscribe = subscribe  # type: ignore[method-assign]


def test_a_subscribe_slice_ends_after_its_budget_and_the_rest_keeps_its_place(monkeypatch: pytest.MonkeyPatch) -> None:
    bus = MemoryBus()
    slow(bus)
    s = redis(bus, 1)
    turns: list[Callable[[], None]] = []
    s.host.ops.schedule = lambda delay, fn: turns.append(fn)
    n = 1000
    s.data_received(encode_command(b"SUBSCRIBE", *(b"ch.%d" % i for i in range(n)))
                    + encode_command(b"PING", b"after"))
    sizes = [s.pending_output().count(b"$9\r\nsubscribe\r\n")]
    held = s._pause_held[0]
    while turns and len(sizes) < n:
        assert s._pause_held[0] is held, "a slice copied the names left"
        turns.pop(0)()
        out = s.pending_output()
        sizes.append(out.count(b"$9\r\nsubscribe\r\n"))
    assert sum(sizes) == n and out.endswith(b":%d\r\n*2\r\n$4\r\npong\r\n$5\r\nafter\r\n" % n)
    # 2 ms of work a slice: some 10 names at 0.2 ms, and at least SUBSCRIBE_MIN (was 256)
    assert max(sizes) <= redis_ops.SUBSCRIBE_MIN + 16, sizes
