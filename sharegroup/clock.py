"""Time sources: the `Clock` protocol, the wall clock and a manual clock for deterministic tests."""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "SystemClock", "ManualClock"]


@runtime_checkable
class Clock(Protocol):
    """Anything that tells the current time in milliseconds since the epoch."""

    def now_ms(self) -> int: ...


class SystemClock:
    """The wall clock (`time.time_ns`), in whole milliseconds."""

    __slots__ = ()

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that moves only when a test calls `advance`, so time-dependent behaviour is deterministic."""

    __slots__ = ("_now_ms",)

    def __init__(self, start_ms: int = 0) -> None:
        if start_ms < 0:
            raise ValueError("start_ms must be >= 0")
        self._now_ms = int(start_ms)

    def now_ms(self) -> int:
        return self._now_ms

    def advance(self, ms: int) -> int:
        """Move time forward by `ms` (never backwards) and return the new time."""
        if ms < 0:
            raise ValueError("a clock never moves backwards")
        self._now_ms += int(ms)
        return self._now_ms
