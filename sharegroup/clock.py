"""Time sources: the `Clock` protocol, the wall clock and a manual clock for deterministic tests."""

from __future__ import annotations

import asyncio
import heapq
import time
from typing import Callable, Protocol, runtime_checkable

__all__ = ["Clock", "SystemClock", "ManualClock", "ClockTimer", "call_at"]


@runtime_checkable
class Clock(Protocol):
    """Anything that tells the current time in milliseconds since the epoch."""

    def now_ms(self) -> int: ...


class SystemClock:
    """The wall clock (`time.time_ns`), in whole milliseconds."""

    __slots__ = ()

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def call_at(self, when_ms: int, callback: Callable[[], None]) -> "ClockTimer":
        """Run `callback` on the running event loop once the wall clock reaches `when_ms` (or soon after).

        The loop's timer runs on a monotonic clock, so the callback may see `now_ms()` a little before
        `when_ms`; callers re-check the time and re-arm for what is not yet due.
        """
        delay_s = max(0, when_ms - self.now_ms()) / 1000
        return ClockTimer(asyncio.get_running_loop().call_later(delay_s, callback))


class ManualClock:
    """A clock that moves only when a test calls `advance`, so time-dependent behaviour is deterministic."""

    __slots__ = ("_now_ms", "_timers", "_timer_seq")

    def __init__(self, start_ms: int = 0) -> None:
        if start_ms < 0:
            raise ValueError("start_ms must be >= 0")
        self._now_ms = int(start_ms)
        self._timers: list[tuple[int, int, ClockTimer]] = []
        self._timer_seq = 0

    def now_ms(self) -> int:
        return self._now_ms

    def advance(self, ms: int) -> int:
        """Move time forward by `ms` (never backwards) and return the new time."""
        if ms < 0:
            raise ValueError("a clock never moves backwards")
        self._now_ms += int(ms)
        self._fire_due()
        return self._now_ms

    def call_at(self, when_ms: int, callback: Callable[[], None]) -> "ClockTimer":
        """Run `callback` when `advance` moves the time to `when_ms` or later (at once if already due).

        Callbacks run synchronously inside `advance`, in deadline order, so a test that advances the
        clock decides exactly when timers fire; they should only wake tasks (set a future or an event).
        """
        timer = ClockTimer(None, callback)
        if when_ms <= self._now_ms:
            timer._fire()
            return timer
        self._timer_seq += 1
        heapq.heappush(self._timers, (int(when_ms), self._timer_seq, timer))
        return timer

    @property
    def pending_timers(self) -> int:
        """Timers armed, not yet fired and not cancelled."""
        return sum(1 for _when, _seq, timer in self._timers if timer._callback is not None)

    def _fire_due(self) -> None:
        timers = self._timers
        while timers and timers[0][0] <= self._now_ms:
            heapq.heappop(timers)[2]._fire()


class ClockTimer:
    """A callback armed with a clock's `call_at`; `cancel()` stops it if it has not run yet."""

    __slots__ = ("_handle", "_callback")

    def __init__(self, handle: asyncio.TimerHandle | None, callback: Callable[[], None] | None = None) -> None:
        self._handle = handle
        self._callback = callback

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._callback = None

    @property
    def cancelled(self) -> bool:
        return self._callback is None and (self._handle is None or self._handle.cancelled())

    def _fire(self) -> None:
        callback, self._callback = self._callback, None
        if callback is not None:
            callback()


def call_at(clock: Clock, when_ms: int, callback: Callable[[], None]) -> ClockTimer:
    """Arm `callback` for `when_ms` on `clock`: its own `call_at` when it has one (ManualClock,
    SystemClock), else the running event loop's timer measured against `clock.now_ms()`."""
    own = getattr(clock, "call_at", None)
    if own is not None:
        return own(when_ms, callback)
    delay_s = max(0, when_ms - clock.now_ms()) / 1000
    return ClockTimer(asyncio.get_running_loop().call_later(delay_s, callback))
