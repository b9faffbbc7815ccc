"""Deadlines by key (member sessions, rebalance timeouts): the coordinator's timers, without tasks.

Kafka's coordinator schedules one timer per member session; here a group keeps its deadlines in a dict
with a lazy min-heap beside it, and whoever holds the group lock asks which ones are due at the clock's
`now_ms()`. So time-dependent behaviour follows the injected clock (a `ManualClock` in tests) and no
task outlives a group. Deadlines are not persisted: after a restart every member gets a fresh session.
"""

from __future__ import annotations

import heapq
from typing import Generic, Hashable, TypeVar

__all__ = ["Deadlines"]

K = TypeVar("K", bound=Hashable)


class Deadlines(Generic[K]):
    """key -> deadline in ms, with `due(now_ms)` in deadline order.

    `touch` is O(log n); stale heap entries (older deadlines of a touched or cancelled key) are dropped
    as they reach the top, and the heap is rebuilt when they pile up, so it stays O(keys)."""

    __slots__ = ("deadlines", "_heap")

    def __init__(self) -> None:
        self.deadlines: dict[K, int] = {}
        self._heap: list[tuple[int, K]] = []

    def touch(self, key: K, deadline_ms: int) -> None:
        """(Re)start `key`'s timer so it is due at `deadline_ms`."""
        if self.deadlines.get(key) == deadline_ms:
            return
        self.deadlines[key] = deadline_ms
        heapq.heappush(self._heap, (deadline_ms, key))
        if len(self._heap) > 4 * len(self.deadlines) + 64:
            self._heap = [(d, k) for k, d in self.deadlines.items()]
            heapq.heapify(self._heap)

    def cancel(self, key: K) -> None:
        self.deadlines.pop(key, None)

    def has_due(self, now_ms: int) -> bool:
        """Whether some deadline may have passed at `now_ms` (O(1); a stale heap entry can say yes)."""
        return bool(self._heap) and self._heap[0][0] <= now_ms

    def due(self, now_ms: int) -> list[K]:
        """Keys whose deadline is at or before `now_ms`, in deadline order. They stay until cancelled,
        so a removal that fails is retried on the next call. Amortized O(due log n)."""
        heap, out, seen = self._heap, [], set()
        while heap and heap[0][0] <= now_ms:
            deadline, key = heapq.heappop(heap)
            if self.deadlines.get(key) == deadline and key not in seen:
                out.append(key)
                seen.add(key)
        for key in out:
            heapq.heappush(heap, (self.deadlines[key], key))
        return out

    def __contains__(self, key: object) -> bool:
        return key in self.deadlines

    def __len__(self) -> int:
        return len(self.deadlines)
