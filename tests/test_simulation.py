"""Simulated time (`sharegroup.demo.simulated.simulation.VirtualTime`): tasks wake by time, then phase, then rank; real
awaits keep the clock still; a failing task stops the run; wake-ups round up to the tick."""

from __future__ import annotations

import asyncio

import pytest

from sharegroup.clock import ManualClock
from sharegroup.demo.simulated.simulation import Phase, VirtualTime

from .conftest import run


def test_virtual_time_wakes_by_time_then_phase_then_rank_and_waits_for_real_awaits():
    async def main():
        clock = ManualClock(1_000)
        vt = VirtualTime(clock, tick_ms=10)
        seen = []

        async def worker(name, plan):
            for delay, phase, io in plan:
                await vt.sleep(delay, phase)
                vt._check()
                if io:  # a real await (a write): time must not move meanwhile
                    before = clock.now_ms()
                    await asyncio.sleep(0.001)
                    assert clock.now_ms() == before
                seen.append((clock.now_ms() - 1_000, phase.name, name))

        vt.spawn(worker("b", [(5, Phase.ACQUIRE, False), (0, Phase.IO, True)]), rank=2, name="b")
        vt.spawn(worker("a", [(10, Phase.ACQUIRE, False), (30, Phase.IO, True)]), rank=1, name="a")
        vt.spawn(worker("p", [(10, Phase.PRODUCE, False)]), rank=3, name="p")
        settled = []
        await vt.run(lambda: (vt._check(), settled.append(vt.elapsed_ms)))
        return seen, vt.elapsed_ms, settled

    seen, elapsed, settled = run(main())
    # 5 ms rounds up to the 10 ms tick. At 10 ms the PRODUCE phase runs first, then ACQUIRE in rank order
    # (a before b); b's zero sleep then asks for the IO phase of the same instant, which runs next.
    assert seen == [(10, "PRODUCE", "p"), (10, "ACQUIRE", "a"), (10, "ACQUIRE", "b"), (10, "IO", "b"),
                    (40, "IO", "a")]
    assert elapsed == 40
    # Settled once at the start, once after each phase of 10 ms, and once at 40 ms when a finished.
    assert settled == [0, 10, 10, 10, 40]


def test_virtual_time_raises_what_a_task_raised():
    async def main():
        vt = VirtualTime(ManualClock(0))

        async def boom():
            await vt.sleep(10)
            raise RuntimeError("boom")

        async def forever():
            while True:
                await vt.sleep(1_000)

        vt.spawn(boom(), rank=0, name="boom")
        vt.spawn(forever(), rank=1, name="forever")
        try:
            await vt.run(lambda: None)
        finally:
            await vt.cancel_all()

    with pytest.raises(RuntimeError, match="boom"):
        run(main())


def test_only_spawned_tasks_may_sleep_and_the_tick_is_validated():
    async def main():
        vt = VirtualTime(ManualClock(0))
        with pytest.raises(RuntimeError, match="spawn"):
            await vt.sleep(10)
        vt._check()

    run(main())
    for bad in (0, -5, 2.5, True):
        with pytest.raises(ValueError):
            VirtualTime(ManualClock(0), tick_ms=bad)


class TimerClock(ManualClock):
    """A ManualClock that completes futures when `advance` reaches their time (as a clock timer would)."""

    def __init__(self) -> None:
        super().__init__(0)
        self.timers: list[tuple[int, asyncio.Future]] = []

    def advance(self, ms: int) -> int:
        now = super().advance(ms)
        for due, future in [t for t in self.timers if t[0] <= now]:
            self.timers.remove((due, future))
            future.set_result(f"timer at {due}")
        return now


def test_a_task_waiting_elsewhere_counts_as_waiting_until_woken_or_its_time_comes():
    async def main():
        clock = TimerClock()
        vt = VirtualTime(clock, tick_ms=10)
        loop = asyncio.get_running_loop()
        parked = loop.create_future()
        seen = []

        async def fetcher():
            with vt.waiting_elsewhere(500, Phase.ACQUIRE):  # parked until the producer wakes it (at 30)
                outcome = await parked
            seen.append((clock.now_ms(), outcome))
            timed = loop.create_future()
            clock.timers.append((200, timed))
            with vt.waiting_elsewhere(200):  # nobody wakes it early: time goes to its deadline
                outcome = await timed
            seen.append((clock.now_ms(), outcome))

        async def producer():
            await vt.sleep(30, Phase.PRODUCE)
            parked.set_result("woken")

        vt.spawn(fetcher(), rank=1, name="fetcher")
        vt.spawn(producer(), rank=0, name="producer")
        await vt.run(vt._check)
        vt._check()
        return seen, vt.elapsed_ms

    seen, elapsed = run(main())
    # Woken at 30 by the producer, not at its deadline of 500; then its timer fired when time reached 200.
    assert seen == [(30, "woken"), (200, "timer at 200")] and elapsed == 200
