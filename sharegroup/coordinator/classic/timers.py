"""Keyed deadlines of the classic-group protocol (Kafka's coordinator timer, keyed by operation).

Kafka schedules one timer task per key — a group's join phase, its pending SyncGroups, each member's
heartbeat — and scheduling a key again replaces its task. `ClassicTimers` keeps the same contract
without tasks: `schedule(key, deadline_ms, payload)` replaces the key's deadline, `pop_due(now_ms)`
hands back what is due, in deadline order. Nothing runs by itself: the coordinator's `run_timers()`
pops and handles what is due, so a test with a ManualClock decides exactly when a timeout happens, and
`sharegroup serve` calls it whenever `wait_due()` returns.

Cost: O(log n) per schedule and per pop; cancelled or replaced entries are dropped lazily when they
reach the top of the heap (the heap is rebuilt when they pile up).
"""

from __future__ import annotations

import asyncio
import heapq
from typing import Any, Hashable

from ...clock import Clock, ClockTimer, call_at

__all__ = ["ClassicTimers"]


class ClassicTimers:
    """Deadlines by key; see the module docstring."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._entries: dict[Hashable, tuple[int, int, Any]] = {}  # key -> (deadline, seq, payload)
        self._heap: list[tuple[int, int, Hashable]] = []
        self._seq = 0
        self._wake = asyncio.Event()
        self._timer: ClockTimer | None = None
        self._timer_at = -1

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def deadline_ms(self, key: Hashable) -> int | None:
        entry = self._entries.get(key)
        return None if entry is None else entry[0]

    def schedule(self, key: Hashable, deadline_ms: int, payload: Any = None) -> None:
        """(Re)arm `key` for `deadline_ms`, replacing any earlier deadline of the same key."""
        self._seq += 1
        self._entries[key] = (deadline_ms, self._seq, payload)
        heapq.heappush(self._heap, (deadline_ms, self._seq, key))
        if len(self._heap) > 4 * len(self._entries) + 64:
            self._heap = [(d, s, k) for k, (d, s, _p) in self._entries.items()]
            heapq.heapify(self._heap)
        if self._timer_at < 0 or deadline_ms < self._timer_at:
            self._wake.set()  # a waiter re-arms for the new, earlier deadline

    def cancel(self, key: Hashable) -> None:
        self._entries.pop(key, None)

    def cancel_group(self, group_id: str) -> None:
        """Drop every deadline of one group (keys are tuples whose second item is the group id)."""
        for key in [k for k in self._entries if isinstance(k, tuple) and len(k) > 1 and k[1] == group_id]:
            del self._entries[key]

    def next_deadline_ms(self) -> int:
        """The earliest live deadline, -1 when none."""
        heap = self._heap
        while heap:
            deadline, seq, key = heap[0]
            entry = self._entries.get(key)
            if entry is not None and entry[1] == seq:
                return deadline
            heapq.heappop(heap)
        return -1

    def pop_due(self, now_ms: int) -> list[tuple[Hashable, Any]]:
        """Remove and return (key, payload) of every deadline at or before `now_ms`, earliest first."""
        due: list[tuple[Hashable, Any]] = []
        heap = self._heap
        while heap and heap[0][0] <= now_ms:
            _deadline, seq, key = heapq.heappop(heap)
            entry = self._entries.get(key)
            if entry is not None and entry[1] == seq:
                del self._entries[key]
                due.append((key, entry[2]))
        return due

    async def wait_due(self) -> None:
        """Return once the earliest deadline is due (re-arming when an earlier one is scheduled)."""
        while True:
            self._wake.clear()
            top = self.next_deadline_ms()
            if top >= 0 and top <= self._clock.now_ms():
                return
            if top >= 0:
                self._timer_at = top
                self._timer = call_at(self._clock, top, self._wake.set)
            try:
                await self._wake.wait()
            finally:
                if self._timer is not None:
                    self._timer.cancel()
                self._timer, self._timer_at = None, -1

    def _check(self) -> None:
        live = {(d, s, k) for k, (d, s, _p) in self._entries.items()}
        assert live <= set(self._heap), "a live deadline is missing from the heap"
