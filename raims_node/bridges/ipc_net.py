"""The bus subscriptions of an sbus server (bridges/ipc.py): one per distinct network
pattern its clients hold (with the holders counted), and which of them delivers a
subject that several match (the smallest sid, so each message reaches the bus once).

Decision: the bus subscription of the last holder's pattern ends at the loop's next
turn, not at once: a client cut inside a delivery (a slow consumer) must not change
which sid delivers the rest of the messages being handed over; when its wildcard was
that sid, the rest of a run was skipped by every sid and lost for the other clients.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import MutableMapping
from typing import TYPE_CHECKING

from raims_node.bloom import Shard, subject_hash
from raims_node.bridges import sbus_proto as sp
from raims_node.bridges.bus import ClientHandle
from raims_node.subject import Pattern, SubjectError, compile_pattern, subject_bytes

if TYPE_CHECKING:
    from raims_node.bridges.router_bus import RouterBus

CANON_CACHE_LIMIT = 65536  # subjects whose delivering sid is remembered (cleared when full)

NetKey = tuple[sp.NetSub, Shard | None]


class NetSubs:
    def __init__(self, owner: ClientHandle, bus: RouterBus, counters: MutableMapping[str, int]) -> None:
        self.owner, self.bus, self.counters = owner, bus, counters
        self.subs: dict[NetKey, tuple[str, list[int], Pattern | None]] = {}  # -> sid, [holders], pattern
        self.canon: dict[str, str] = {}  # bus subject -> the one sid that delivers it
        self._seq = 0
        self._released: list[NetKey] = []  # ended at the loop's next turn

    @staticmethod
    def key(pattern: bytes) -> NetKey | None:
        """The bus subscription of an sbus pattern (with its shard, for `_SHARD/`)."""
        split = sp.shard_split(pattern)
        if split is None:
            net = sp.network_sub(pattern)
            return None if net is None else (net, None)
        net = sp.network_sub(split[2])
        return None if net is None else (net, Shard(split[0], split[1]))

    def hold(self, pattern: bytes) -> None:
        found = self.key(pattern)
        if found is None:
            return
        entry = self.subs.get(found)
        if entry is not None:
            entry[1][0] += 1
            return
        net, shard = found
        self._seq += 1
        sid = f"{self._seq:012d}"  # ordered: the smallest matching sid delivers
        compiled = None
        try:
            if net.wild or shard is not None:
                compiled = compile_pattern(net.text, "rv")
                queue = None if shard is None else f"_SHARD.{shard.index}.{shard.count}"
                refused = self.bus.psubscribe(self.owner, sid, net.text, "rv", queue)
            else:
                refused = self.bus.subscribe(self.owner, sid, net.text)
        except SubjectError as exc:
            refused = str(exc)
        if refused is not None:
            self.counters["bad_patterns"] += 1
            return
        self.subs[found] = (sid, [1], compiled)
        self.canon.clear()

    def release(self, pattern: bytes) -> None:
        """One holder fewer; the last one's bus subscription ends at the loop's next turn."""
        found = self.key(pattern)
        entry = None if found is None else self.subs.get(found)
        if found is None or entry is None:
            return
        entry[1][0] -= 1
        if entry[1][0] == 0:
            self._released.append(found)
            if len(self._released) == 1:
                with contextlib.suppress(RuntimeError):  # no loop (a test): at once
                    asyncio.get_running_loop().call_soon(self._end_released)
                    return
                self._end_released()

    def _end_released(self) -> None:
        released, self._released = self._released, []
        for found in released:
            entry = self.subs.get(found)
            if entry is not None and entry[1][0] == 0:  # not held again meanwhile
                del self.subs[found]
                self.canon.clear()
                self.bus.unsubscribe(self.owner, entry[0])

    def canonical(self, subject: str) -> str:
        """The sid of ours that delivers `subject`: the smallest whose pattern (and shard) takes it."""
        h: int | None = None
        sids = []
        for (net, shard), (sid, _, compiled) in self.subs.items():
            if not (compiled.matches(subject) if compiled is not None else net.text == subject):
                continue
            if shard is not None:
                if h is None:
                    h = subject_hash(subject_bytes(self.bus.inside(subject)))
                if not shard.holds(h):
                    continue
            sids.append(sid)
        canon = min(sids) if sids else ""
        if len(self.canon) >= CANON_CACHE_LIMIT:
            self.canon.clear()
        self.canon[subject] = canon
        return canon
