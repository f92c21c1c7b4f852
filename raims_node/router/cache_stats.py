"""Hit and miss counts of a router cache (show cache: the manual's hit_pct, hit, miss,
max_cnt, max_size).

A cache counts its lookups and its misses (both a single increment; a hit is a lookup
that did not miss), the most entries it held at once and the largest entry it stored
(for a forwarding decision, the connections it names). Counts run from the node's
start; a cache that is emptied (a link or filter change) keeps them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class CacheStats:
    lookups: int = 0
    misses: int = 0
    max_cnt: int = 0  # the most entries held at once
    max_size: int = 0  # the largest entry stored

    def missed(self, entries: int, size: int) -> None:
        """A lookup that missed; the cache now holds `entries`, the new one of `size`."""
        self.misses += 1
        if entries > self.max_cnt:
            self.max_cnt = entries
        if size > self.max_size:
            self.max_size = size

    @property
    def hits(self) -> int:
        return self.lookups - self.misses

    @property
    def hit_pct(self) -> float:
        return round(self.hits * 100 / self.lookups, 2) if self.lookups else 0.0
