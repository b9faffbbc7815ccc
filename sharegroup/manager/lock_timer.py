"""One acquisition-lock timer service for every share-partition of a manager.

Kafka arms a timer task per acquired batch on one timer wheel per manager. Our trackers already keep
their own lock heaps and answer `next_lock_deadline_ms()`, so the service keeps only a heap of
(deadline, share-partition) entries: one clock timer is armed for the earliest deadline; when it fires,
the service expires exactly the share-partitions that are due and wakes the fetches waiting on them. No
task per partition, no scans of idle partitions.

The heap is refreshed lazily. `schedule(entry)` pushes a share-partition whenever its deadline moved
earlier than the one it is queued at (after an acquisition); acknowledgements and renewals only move
deadlines later, so a popped entry whose share-partition is not yet due is pushed again at its current
deadline. Each share-partition therefore has at most a couple of heap entries. Cost: O(log n) per
schedule and per pop.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
from typing import Any, Awaitable, Callable, Protocol

from ..clock import Clock, ClockTimer, call_at

__all__ = ["LockTimer", "TimedPartition"]

log = logging.getLogger(__name__)


class TimedPartition(Protocol):
    """What the timer needs of a share-partition entry: its current earliest lock deadline (-1: none),
    the deadline it is queued at (-1: not queued) and whether it was dropped from the manager."""

    timer_deadline_ms: int
    dropped: bool

    def next_lock_deadline_ms(self) -> int: ...


class LockTimer:
    """Sleeps until the earliest acquisition-lock deadline and expires what is due.

    `expire(entry)` is the manager's coroutine that expires one share-partition's due locks, wakes its
    waiting fetches and returns the number of records expired. `start()` runs the service task;
    `expire_due()` runs one pass directly (the service runs the same pass; passes never overlap).
    """

    def __init__(self, clock: Clock, expire: Callable[[Any], Awaitable[int]]) -> None:
        self._clock = clock
        self._expire = expire
        self._heap: list[tuple[int, int, TimedPartition]] = []
        self._seq = 0
        self._timer: ClockTimer | None = None
        self._timer_at = -1
        self._due = asyncio.Event()
        self._pass = asyncio.Lock()
        self._task: asyncio.Task | None = None
        self.passes = 0
        self.expired_total = 0

    def __len__(self) -> int:
        return len(self._heap)

    @property
    def next_deadline_ms(self) -> int:
        """The earliest queued deadline (-1: none); it may belong to a share-partition since acknowledged."""
        return self._heap[0][0] if self._heap else -1

    def schedule(self, entry: TimedPartition) -> None:
        """Queue `entry` at its current earliest lock deadline unless it is queued at or before it."""
        deadline = entry.next_lock_deadline_ms()
        if deadline < 0 or entry.dropped:
            return
        queued = entry.timer_deadline_ms
        if 0 <= queued <= deadline:
            return
        entry.timer_deadline_ms = deadline
        self._seq += 1
        heapq.heappush(self._heap, (deadline, self._seq, entry))
        self._arm()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="share-lock-timer")
            self._arm()

    async def stop(self) -> None:
        task, self._task = self._task, None
        if self._timer is not None:
            self._timer.cancel()
            self._timer, self._timer_at = None, -1
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
        self._heap.clear()

    async def _run(self) -> None:
        while True:
            await self._due.wait()
            self._due.clear()
            try:
                await self.expire_due()
            except asyncio.CancelledError:
                raise
            except Exception:  # a broken pass must not stop the service; the next deadline retries
                log.exception("acquisition-lock timer pass failed")

    async def expire_due(self) -> int:
        """Expire every share-partition whose earliest lock deadline has passed; returns records expired."""
        async with self._pass:
            now = self._clock.now_ms()
            heap = self._heap
            due: list[TimedPartition] = []
            while heap and heap[0][0] <= now:
                deadline, _seq, entry = heapq.heappop(heap)
                if entry.timer_deadline_ms == deadline:
                    entry.timer_deadline_ms = -1
                if entry.dropped:
                    continue
                current = entry.next_lock_deadline_ms()
                if current < 0:
                    continue
                if current > now:
                    self.schedule(entry)  # acknowledged or renewed since it was queued
                elif entry not in due:
                    due.append(entry)
            self.passes += 1
            expired = 0
            if due:
                counts = await asyncio.gather(*(self._expire(entry) for entry in due), return_exceptions=True)
                for entry, count in zip(due, counts):
                    if isinstance(count, BaseException):
                        log.warning("expiring locks failed: %r", count)
                    else:
                        expired += count
                    remaining = entry.next_lock_deadline_ms()
                    if 0 <= remaining <= now:  # could not expire (not active): never spin on it
                        log.warning("share-partition %r still has locks due after expiry; not re-queued", entry)
                        continue
                    self.schedule(entry)  # its remaining locks
            self.expired_total += expired
            self._arm()
            return expired

    def _arm(self) -> None:
        if self._task is None or not self._heap:
            return
        top = self._heap[0][0]
        if self._timer is not None and self._timer_at <= top:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = top
        self._timer = call_at(self._clock, top, self._on_timer)

    def _on_timer(self) -> None:
        self._timer, self._timer_at = None, -1
        self._due.set()

    def _check(self) -> None:
        for deadline, _seq, entry in self._heap:
            assert entry.timer_deadline_ms == -1 or entry.timer_deadline_ms <= deadline or entry.dropped
        if self._task is not None and self._heap and not self._due.is_set():
            assert self._timer is not None and self._timer_at <= self._heap[0][0]
