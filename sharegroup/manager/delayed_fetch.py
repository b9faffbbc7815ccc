"""Long polling: ShareFetch requests waiting for records (Kafka's DelayedShareFetch and its purgatory).

A fetch that acquired nothing parks a `FetchWaiter` here, watched under each topic-partition it
fetches, until an event may have made records acquirable on one of them or its MaxWaitMs passes:

- `wake_partition(topic, partition)`: the log grew (an append), for every group;
- `wake_share_partition(group, topic, partition)`: records of one share-partition became available
  (a release, an acknowledgement, a lock expiry, a member leaving) or the share-partition was dropped.

A woken waiter's fetch simply tries again (and may park again until the same deadline). Nothing runs
while waiters are idle: they are entries in a dict per topic-partition plus one entry in a deadline
heap, and one clock timer is armed for the earliest deadline of all of them. Waking costs O(waiters on
that topic-partition); the timeout path costs O(log waiters) each.
"""

from __future__ import annotations

import asyncio
import enum
import heapq
import uuid
from typing import Callable, Sequence

from ..clock import Clock, ClockTimer, call_at

__all__ = ["DelayedFetchPurgatory", "FetchWaiter", "WaitOutcome"]

LogKey = tuple[uuid.UUID, int]


class WaitOutcome(enum.Enum):
    WOKEN = "woken"  # an event on a watched partition: try again
    EXPIRED = "expired"  # MaxWaitMs passed
    CLOSED = "closed"  # the manager is closing


class FetchWaiter:
    """One parked fetch: the partitions it watches, its deadline and the future its fetch awaits."""

    __slots__ = ("group_id", "keys", "deadline_ms", "future", "pending")

    def __init__(self, group_id: str, keys: Sequence[LogKey], deadline_ms: int, future: asyncio.Future) -> None:
        self.group_id = group_id
        self.keys = keys
        self.deadline_ms = deadline_ms
        self.future = future
        self.pending = True  # parked: not yet woken, expired, closed or cancelled


class DelayedFetchPurgatory:
    """Parked fetches indexed by topic-partition, with one clock timer for their deadlines."""

    def __init__(self, clock: Clock, on_expired: Callable[[int], None] | None = None) -> None:
        self._clock = clock
        self._on_expired = on_expired
        self._watchers: dict[LogKey, dict[FetchWaiter, None]] = {}
        self._deadlines: list[tuple[int, int, FetchWaiter]] = []
        self._seq = 0
        self._live = 0
        self._timer: ClockTimer | None = None
        self._timer_at = -1
        self.expired_total = 0

    def __len__(self) -> int:
        """Fetches parked now (Kafka's share-fetch purgatory size)."""
        return self._live

    def watch(self, group_id: str, keys: Sequence[LogKey], deadline_ms: int) -> FetchWaiter:
        """Park a fetch of `group_id` on `keys` until woken or `deadline_ms`; await `waiter.future`."""
        waiter = FetchWaiter(group_id, tuple(keys), deadline_ms, asyncio.get_running_loop().create_future())
        watchers = self._watchers
        for key in waiter.keys:
            bucket = watchers.get(key)
            if bucket is None:
                bucket = watchers[key] = {}
            bucket[waiter] = None
        self._live += 1
        self._seq += 1
        heapq.heappush(self._deadlines, (deadline_ms, self._seq, waiter))
        if len(self._deadlines) > 2 * self._live + 64:
            self._compact()
        self._arm()
        return waiter

    def wake_partition(self, topic_id: uuid.UUID, partition: int) -> int:
        """Wake every fetch watching this topic-partition (new data in the log); returns how many."""
        bucket = self._watchers.get((topic_id, partition))
        if not bucket:
            return 0
        woken = list(bucket)
        for waiter in woken:
            self._complete(waiter, WaitOutcome.WOKEN)
        return len(woken)

    def wake_share_partition(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        """Wake the fetches of `group_id` watching this topic-partition; returns how many."""
        bucket = self._watchers.get((topic_id, partition))
        if not bucket:
            return 0
        woken = [w for w in bucket if w.group_id == group_id]
        for waiter in woken:
            self._complete(waiter, WaitOutcome.WOKEN)
        return len(woken)

    def cancel(self, waiter: FetchWaiter) -> None:
        """Forget a waiter whose fetch stopped waiting for another reason (cancelled)."""
        self._complete(waiter, None)

    def close(self) -> int:
        """Answer every parked fetch with CLOSED and disarm the timer; returns how many there were."""
        waiters = {w for bucket in self._watchers.values() for w in bucket}
        waiters.update(w for _d, _s, w in self._deadlines if w.pending)
        for waiter in waiters:
            self._complete(waiter, WaitOutcome.CLOSED)
        self._deadlines.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer, self._timer_at = None, -1
        return len(waiters)

    def _complete(self, waiter: FetchWaiter, outcome: WaitOutcome | None) -> None:
        if not waiter.pending:
            return
        waiter.pending = False
        self._live -= 1
        watchers = self._watchers
        for key in waiter.keys:
            bucket = watchers.get(key)
            if bucket is not None:
                bucket.pop(waiter, None)
                if not bucket:
                    del watchers[key]
        waiter.keys = ()
        future = waiter.future
        if not future.done():  # a cancelled fetch cancelled its future already
            if outcome is not None:
                future.set_result(outcome)
            else:
                future.cancel()

    # -- deadlines --------------------------------------------------------------------------------------

    def _arm(self) -> None:
        heap = self._deadlines
        while heap and not heap[0][2].pending:
            heapq.heappop(heap)
        if not heap:
            return
        top = heap[0][0]
        if self._timer is not None and self._timer_at <= top:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = top
        self._timer = call_at(self._clock, top, self._on_timer)

    def _on_timer(self) -> None:
        self._timer, self._timer_at = None, -1
        now = self._clock.now_ms()
        heap = self._deadlines
        expired = 0
        while heap and heap[0][0] <= now:
            waiter = heapq.heappop(heap)[2]
            if waiter.pending:
                self._complete(waiter, WaitOutcome.EXPIRED)
                expired += 1
        if expired:
            self.expired_total += expired
            if self._on_expired is not None:
                self._on_expired(expired)
        self._arm()

    def _compact(self) -> None:
        self._deadlines = [item for item in self._deadlines if item[2].pending]
        heapq.heapify(self._deadlines)

    def _check(self) -> None:
        live = {w for bucket in self._watchers.values() for w in bucket}
        assert all(w.pending and not w.future.done() for w in live)
        pending = {w for _d, _s, w in self._deadlines if w.pending}
        assert live <= pending, "every watched waiter has a deadline"
        assert len(pending) == self._live, (len(pending), self._live)
        if pending:
            assert self._timer is not None and self._timer_at <= min(w.deadline_ms for w in pending)
