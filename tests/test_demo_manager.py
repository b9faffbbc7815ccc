"""The demo's SharePartitionManager on simulated time (`sharegroup.demo.simulated.manager`): a long-polling fetch
waits in simulated time, wakes on an append in the acquisition phase of that instant, and otherwise
answers exactly at its MaxWaitMs; lock-timer passes expire locks when the demo runs them."""

from __future__ import annotations

import asyncio
import uuid

from persister import InMemoryPersister
from sharegroup.clock import ManualClock
from sharegroup.config import ShareGroupConfig
from sharegroup.demo.simulated.manager import DemoGroupConfigs, SimulatedShareManager
from sharegroup.demo.simulated.simulation import Phase, VirtualTime
from sharegroup.topics.memory_logs import InMemoryPartitionLogs
from sharegroup.share_messages import FetchPartition, FetchTopic, ShareFetchRequest
from sharegroup.types import AcquiredRecords

from .conftest import run

TOPIC = uuid.UUID("00000000-0000-0000-0000-0000000000d1")
GROUP = "g"
HANG_GUARD_S = 30  # a run that cannot settle (a wait simulated time does not know of) fails, not hangs


def simulated_broker(clock: ManualClock, virtual_time: VirtualTime):
    persister = InMemoryPersister(clock=clock)
    logs = InMemoryPartitionLogs()
    logs.create_partition(TOPIC, 0)
    persister.seed(GROUP, TOPIC, 0, state_epoch=0, start_offset=0, state_batches=[])
    manager = SimulatedShareManager(
        virtual_time=virtual_time, persister=persister, logs=logs, clock=clock,
        coordinator=DemoGroupConfigs(ShareGroupConfig(record_lock_duration_ms=1_000)),
    )
    logs.subscribe(manager.on_append)
    return manager, logs


def test_a_long_poll_waits_in_simulated_time_wakes_on_append_and_otherwise_at_max_wait():
    async def main():
        clock = ManualClock(0)
        vt = VirtualTime(clock, tick_ms=10)
        manager, logs = simulated_broker(clock, vt)
        answers = []

        async def consumer():
            opened = await manager.share_fetch(ShareFetchRequest(
                GROUP, "m", 0, max_wait_ms=0, max_records=0, topics=(FetchTopic(TOPIC, (FetchPartition(0),)),)))
            assert opened.error_code == 0
            for epoch, max_wait_ms in ((1, 500), (2, 300)):
                await vt.sleep(0, Phase.ACQUIRE)
                response = await manager.share_fetch(ShareFetchRequest(GROUP, "m", epoch, max_wait_ms=max_wait_ms))
                data = response.partition(TOPIC, 0)
                answers.append((clock.now_ms(), [] if data is None else list(data.acquired_records)))

        async def producer():
            await vt.sleep(120, Phase.PRODUCE)
            logs.append(TOPIC, 0, 5, clock.now_ms())
            await vt.sleep(0, Phase.IO)  # later in the same instant: before its acquisition phase
            logs.append(TOPIC, 0, 2, clock.now_ms())

        vt.spawn(producer(), rank=0, name="producer")
        vt.spawn(consumer(), rank=1, name="consumer")
        await asyncio.wait_for(vt.run(vt._check), HANG_GUARD_S)
        manager._check()
        waiting = manager.waiting_fetch_count
        await manager.close()
        return answers, vt.elapsed_ms, waiting

    answers, elapsed, waiting = run(main())
    # The first fetch parked at 0; woken by the append at 120, it acquired in that instant's acquisition
    # phase, so it got the batch appended in the I/O phase too. The second found nothing and was
    # answered at its MaxWaitMs, 300 ms later. Time never ran ahead of what the tasks needed.
    assert answers == [(120, [AcquiredRecords(0, 6, 1)]), (420, [])]
    assert elapsed == 420 and waiting == 0


def test_the_lock_timer_pass_runs_when_the_demo_runs_it():
    async def main():
        clock = ManualClock(0)
        vt = VirtualTime(clock, tick_ms=10)
        manager, logs = simulated_broker(clock, vt)
        logs.append(TOPIC, 0, 3, 0)
        seen = []

        async def consumer():
            response = await manager.share_fetch(ShareFetchRequest(
                GROUP, "m", 0, max_wait_ms=0, topics=(FetchTopic(TOPIC, (FetchPartition(0),)),)))
            seen.append(list(response.partition(TOPIC, 0).acquired_records))

        async def timer():
            await vt.sleep(0)
            while (deadline := manager.lock_timer.next_deadline_ms) >= 0:
                await vt.sleep_until(deadline)
                seen.append((clock.now_ms(), await manager.expire_due_locks()))

        vt.spawn(consumer(), rank=0, name="consumer")
        vt.spawn(timer(), rank=1, name="timer")
        await asyncio.wait_for(vt.run(lambda: None), HANG_GUARD_S)
        state = manager.share_partition(GROUP, TOPIC, 0).state_batches()
        await manager.close()
        return seen, state

    seen, state = run(main())
    assert seen == [[AcquiredRecords(0, 2, 1)], (1_000, 3)]  # expired at the lock duration, all three
    assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in state] == [(0, 2, 0, 1)]
