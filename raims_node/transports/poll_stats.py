"""`show poll`: where the event loop's time goes (manual, "show poll": "the latency of
poll states, the average time used for processing timers, read, write, and routing
events"), in the manual's columns.

Decisions (the loop is asyncio's, so its states are the daemon's callbacks):
- timer: the daemon's tick (heartbeats, timeouts, statistics, every 50 ms), each timed.
- read: a link's `data_received` (decrypting, splitting into frames, handing them to the
  router, so the routing is inside it); route: the router's part (the node's `on_frames`
  and carrying out its actions), each batch timed.
- One read in SAMPLE, one lone frame (a message alone in its read, the latency path) in
  SAMPLE and one write in SAMPLE are timed, all are counted: two clock reads on every
  lone message would add to the latency being measured.
- rd_lo: reads shorter than READ_BUFFER (the manual's 16 KB read buffer): the socket had
  no more to give. write: a link's flush of what one pass of the loop sent it. wr_hi:
  a link's transport went over its write mark (pause_writing); wr_poll: frames queued
  behind that backpressure, to be written when the socket drains.
- Averages are over the process's life, in nanoseconds (the JSON rows' ints), printed
  with their unit as the manual's `2.52us` (they were microsecond floats, printed
  `1.03e+03`); empty before anything was timed.
"""

from __future__ import annotations

import time

SAMPLE = 32
READ_BUFFER = 16 * 1024
POLL_COLUMNS = ["timer_lat", "timer_cnt", "read_lat", "read_cnt", "rd_lo", "route_lat", "route_cnt",
                "write_lat", "write_cnt", "wr_poll", "wr_hi"]


class PollStats:
    """One daemon's counters; the links and the daemon add to them in place."""

    __slots__ = ("timer_ns", "timer_cnt", "read_ns", "read_timed", "read_cnt", "rd_lo", "route_ns",
                 "route_timed", "route_cnt", "write_ns", "write_timed", "write_cnt", "wr_poll", "wr_hi")

    def __init__(self) -> None:
        self.timer_ns = self.timer_cnt = 0
        self.read_ns = self.read_timed = self.read_cnt = self.rd_lo = 0
        self.route_ns = self.route_timed = self.route_cnt = 0
        self.write_ns = self.write_timed = self.write_cnt = 0
        self.wr_poll = self.wr_hi = 0

    def routed(self, start_ns: int, frames: int) -> None:
        """A batch of `frames` routed since perf_counter_ns() was `start_ns`."""
        self.route_ns += time.perf_counter_ns() - start_ns
        self.route_timed += 1
        self.route_cnt += frames

    def ticked(self, start_ns: int) -> None:
        self.timer_ns += time.perf_counter_ns() - start_ns
        self.timer_cnt += 1

    def row(self) -> dict[str, int | None]:
        def avg(ns: int, n: int) -> int | None:
            return ns // n if n else None

        return {"timer_lat": avg(self.timer_ns, self.timer_cnt), "timer_cnt": self.timer_cnt,
                "read_lat": avg(self.read_ns, self.read_timed), "read_cnt": self.read_cnt, "rd_lo": self.rd_lo,
                "route_lat": avg(self.route_ns, self.route_timed), "route_cnt": self.route_cnt,
                "write_lat": avg(self.write_ns, self.write_timed), "write_cnt": self.write_cnt,
                "wr_poll": self.wr_poll, "wr_hi": self.wr_hi}
