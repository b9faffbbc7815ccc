"""Simulated time for asyncio tasks: `VirtualTime` runs cooperating tasks on a `ManualClock` and jumps
the clock ahead whenever every task waits.

Used by the demo (and usable by tests) to run minutes of simulated work in a fraction of a second,
deterministically: lock expiry and session time-outs cost no waiting, and the order in which tasks wake
is a function of their wake-up times, phases and ranks only, never of the machine's speed.
It depends on nothing but the clock (layer 0), so any layer's tests may use it.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import heapq
from typing import Callable, Coroutine, Iterator

from ...clock import ManualClock

__all__ = ["DEFAULT_TICK_MS", "Phase", "VirtualTime"]

DEFAULT_TICK_MS = 20


class Phase(enum.IntEnum):
    """What a task does when it wakes; at one instant the phases run in this order."""

    PRODUCE = 0
    IO = 1  # acknowledgements, heartbeats, lock expiry: everything that writes
    ACQUIRE = 2


class VirtualTime:
    """Runs cooperating asyncio tasks on a ManualClock: once every task waits, time jumps ahead.

    Tasks started with `spawn` wait with `sleep`/`sleep_until`; real awaits (a durable write) keep the
    clock still, so a write takes no simulated time. `run` wakes the tasks due next, by phase: at one
    instant all due tasks of the lowest phase wake together, in rank order, and the next phase wakes only
    once they all wait again. Acquisitions therefore never race a write in flight, which makes a run a
    function of its inputs, while the writes of one phase still share group commits. Wake-ups are rounded
    up to `tick_ms` from the clock's start, so tasks due at about the same time wake together.

    Waking the next tasks costs O(log waiting tasks) (a heap of wake-ups).
    """

    def __init__(self, clock: ManualClock, *, tick_ms: int = DEFAULT_TICK_MS) -> None:
        if isinstance(tick_ms, bool) or not isinstance(tick_ms, int) or tick_ms < 1:
            raise ValueError(f"tick_ms must be an int >= 1, got {tick_ms!r}")
        self.clock = clock
        self._origin_ms = clock.now_ms()
        self._tick_ms = tick_ms
        # (wake_ms, phase, rank, sequence number, future): the sequence number keeps equal keys in
        # the order they went to sleep and the futures out of the comparison.
        self._wake_ups: list[tuple[int, int, int, int, asyncio.Future]] = []
        self._sleeps = 0
        self._ranks: dict[asyncio.Task, int] = {}
        self._live_tasks = 0
        self._waiting_tasks = 0
        self._settled = asyncio.Event()
        self._failure: BaseException | None = None

    @property
    def elapsed_ms(self) -> int:
        """Simulated milliseconds since this VirtualTime was created."""
        return self.clock.now_ms() - self._origin_ms

    def spawn(self, coro: Coroutine, *, rank: int, name: str) -> asyncio.Task:
        """Start a task that takes part in simulated time; `rank` orders it among tasks due together."""
        self._live_tasks += 1
        task = asyncio.get_running_loop().create_task(self._guard(coro), name=name)
        self._ranks[task] = rank
        return task

    async def _guard(self, coro: Coroutine) -> None:
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # stop the run: `run` raises it
            if self._failure is None:
                self._failure = exc
            self._settled.set()
        finally:
            self._live_tasks -= 1
            task = asyncio.current_task()
            if task is not None:
                self._ranks.pop(task, None)
            self._maybe_settled()

    async def sleep(self, ms: int, phase: Phase = Phase.IO) -> None:
        """Wait `ms` simulated milliseconds (0: the given phase of this instant)."""
        await self.sleep_until(self.clock.now_ms() + max(0, int(ms)), phase)

    async def sleep_until(self, wake_ms: int, phase: Phase = Phase.IO) -> None:
        """Wait until the clock reads `wake_ms` (rounded up to the tick), then wake in `phase`."""
        future = self._wake_up_at(wake_ms, phase)
        try:
            await future
        finally:
            self._stop_waiting(future)

    @contextlib.contextmanager
    def waiting_elsewhere(self, until_ms: int, phase: Phase = Phase.IO) -> Iterator[None]:
        """Count the current task as waiting while it awaits, inside this block, something that only
        simulated events complete: another task's action, or a timer armed with the clock's `call_at`
        for `until_ms` or earlier (a long-polling fetch waits so). Time moves on as if the task slept
        until `until_ms`; a timer due by then fires when the clock gets there, and the task runs again.
        Awaiting anything else inside the block (real I/O) would let time move during it: don't."""
        future = self._wake_up_at(until_ms, phase)
        try:
            yield
        finally:
            self._stop_waiting(future)

    def _wake_up_at(self, wake_ms: int, phase: Phase) -> asyncio.Future:
        """Queue a wake-up for the current task and count it as waiting (it awaits next, or is inside
        `waiting_elsewhere`)."""
        now = self.clock.now_ms()
        ticks = -(-(max(wake_ms, now) - self._origin_ms) // self._tick_ms)
        wake_ms = max(now, self._origin_ms + ticks * self._tick_ms)
        task = asyncio.current_task()
        rank = None if task is None else self._ranks.get(task)
        if rank is None:
            raise RuntimeError("VirtualTime waits are only for tasks started with VirtualTime.spawn")
        future = asyncio.get_running_loop().create_future()
        self._sleeps += 1
        heapq.heappush(self._wake_ups, (wake_ms, int(phase), rank, self._sleeps, future))
        self._waiting_tasks += 1
        self._maybe_settled()
        return future

    def _stop_waiting(self, future: asyncio.Future) -> None:
        if not future.done():  # woken by something else (or cancelled) before its time: no longer waits
            future.cancel()
            self._waiting_tasks -= 1

    def _maybe_settled(self) -> None:
        if self._waiting_tasks >= self._live_tasks:
            self._settled.set()

    async def run(self, on_settled: Callable[[], None]) -> None:
        """Drive the spawned tasks until all have finished; `on_settled` runs whenever they all wait
        (before time moves on). Raises the first exception a task raised."""
        while True:
            await self._settled.wait()
            self._settled.clear()
            if self._failure is not None:
                raise self._failure
            if self._waiting_tasks < self._live_tasks:  # a stale wake-up: someone still runs
                continue
            on_settled()
            if self._live_tasks == 0:
                return
            self._wake_next()

    def _wake_next(self) -> None:
        wake_ups = self._wake_ups
        while wake_ups and wake_ups[0][4].done():
            heapq.heappop(wake_ups)
        if not wake_ups:
            raise RuntimeError("every task waits but none has a wake-up time")
        wake_ms, phase = wake_ups[0][0], wake_ups[0][1]
        now = self.clock.now_ms()
        if wake_ms > now:
            self.clock.advance(wake_ms - now)
        while wake_ups and wake_ups[0][0] == wake_ms and wake_ups[0][1] == phase:
            future = heapq.heappop(wake_ups)[4]
            if not future.done():
                future.set_result(None)
                self._waiting_tasks -= 1
        self._maybe_settled()

    def _check(self) -> None:
        """Every task counted once: live tasks are the spawned ones not finished, and the waiting ones
        are exactly those with a pending wake-up."""
        assert 0 <= self._waiting_tasks <= self._live_tasks, (self._waiting_tasks, self._live_tasks)
        assert len(self._ranks) == self._live_tasks, (len(self._ranks), self._live_tasks)
        pending = sum(1 for wake_up in self._wake_ups if not wake_up[4].done())
        assert pending == self._waiting_tasks, (pending, self._waiting_tasks)

    async def cancel_all(self) -> None:
        """Cancel every task still running and wait for them to finish."""
        tasks = [t for t in self._ranks if not t.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
