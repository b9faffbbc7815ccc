"""SharePartitionManager benchmarks: the manager's overhead per ShareFetch, and long polling at scale.

1. A ShareFetch acquiring 500 records over 10 partitions (50 new records each) through the manager
   (request checks, session, rotation, log reads, acquisition, lock timer, response with batch handles)
   against the bare calls a broker would otherwise make for the same group (log read + `acquire` per
   partition). Both run inside one event-loop turn; acknowledgements and appends happen between rounds.
2. 10,000 idle waiting fetches (one per partition) and one append: the time until the one fetch waiting
   on that partition has its response; memory per waiting fetch (tracemalloc) and the proof that idle
   waiters cost nothing (one clock timer armed for all of them).

Both twins run side by side (ratios within one run are what matter). `--benchmark-disable` runs each
once, quickly.
"""

from __future__ import annotations

import asyncio
import gc
import tracemalloc
import uuid

import pytest

from persister import InMemoryPersister
from sharegroup.manager import share_partition as partition_module
from sharegroup.clock import ManualClock
from sharegroup.config import BrokerConfig, ShareGroupConfig
from sharegroup.manager import SharePartitionManager
from sharegroup.topics.memory_logs import InMemoryPartitionLogs
from sharegroup.manager.share_partition import SharePartition
from sharegroup.share_messages import FetchPartition, FetchTopic, ShareFetchRequest
from sharegroup.types import AcknowledgementBatch

GROUP = "bench"
TOPIC = uuid.UUID("00000000-0000-0000-0000-00000000be01")
PARTITIONS = 10
PER_PARTITION = 50
LOCK_MS = 30_000
WAITERS = 10_000


class Config:
    def group_config(self, group_id):
        return ShareGroupConfig(record_lock_duration_ms=LOCK_MS, partition_max_record_locks=10_000)


@pytest.fixture
def with_twin(twin, monkeypatch):
    """SharePartitions built during the test use this tracker twin."""
    monkeypatch.setattr(partition_module, "InFlightTracker", twin)
    return twin


def _world(partitions: int, *, sessions: int = 2000):
    clock = ManualClock(1_000_000)
    persister = InMemoryPersister(clock=clock)
    logs = InMemoryPartitionLogs()
    for p in range(partitions):
        logs.create_partition(TOPIC, p)
        persister.seed(GROUP, TOPIC, p, state_epoch=0, start_offset=0, state_batches=[])
    mgr = SharePartitionManager(persister=persister, logs=logs, coordinator=Config(), clock=clock,
                                config=BrokerConfig(max_share_sessions=sessions))
    logs.subscribe(mgr.on_append)
    return clock, persister, logs, mgr


# -- 1. overhead per ShareFetch ----------------------------------------------------------------------


@pytest.mark.benchmark(group="ShareFetch of 500 records over 10 partitions")
def test_manager_share_fetch(benchmark, with_twin):
    loop = asyncio.new_event_loop()
    clock, _persister, logs, mgr = _world(PARTITIONS)
    all_parts = tuple(FetchPartition(p) for p in range(PARTITIONS))
    state = {"epoch": 0, "last": None}

    def setup():
        last = state["last"]
        if last is not None:  # accept what the previous round got, so windows stay small
            for _t, data in last.partitions():
                sp = mgr.share_partition(GROUP, TOPIC, data.partition_index)
                acks = [AcknowledgementBatch(a[0], a[1], (1,)) for a in data.acquired_records]
                loop.run_until_complete(sp.acknowledge("member-1", acks))
        for p in range(PARTITIONS):
            logs.append(TOPIC, p, PER_PARTITION, clock.now_ms())

    def fetch():
        epoch = state["epoch"]
        request = ShareFetchRequest(GROUP, "member-1", epoch, max_wait_ms=0, max_records=500,
                                    topics=(FetchTopic(TOPIC, all_parts),) if epoch == 0 else ())
        state["last"] = loop.run_until_complete(mgr.share_fetch(request))
        state["epoch"] = epoch + 1

    benchmark.pedantic(fetch, setup=setup, rounds=200, warmup_rounds=5)
    assert state["last"].acquired_count == PARTITIONS * PER_PARTITION
    loop.run_until_complete(mgr.close())
    loop.close()


@pytest.mark.benchmark(group="ShareFetch of 500 records over 10 partitions")
def test_bare_share_partition_calls(benchmark, with_twin):
    loop = asyncio.new_event_loop()
    clock = ManualClock(1_000_000)
    persister = InMemoryPersister(clock=clock)
    logs = InMemoryPartitionLogs()
    sps = []
    for p in range(PARTITIONS):
        logs.create_partition(TOPIC, p)
        persister.seed(GROUP, TOPIC, p, state_epoch=0, start_offset=0, state_batches=[])
        sp = SharePartition(GROUP, TOPIC, p, persister=persister, config=Config().group_config(GROUP), clock=clock)
        loop.run_until_complete(sp.initialize())
        sps.append(sp)
    state = {"last": None}

    def setup():
        if state["last"] is not None:
            for sp, got in state["last"]:
                acks = [AcknowledgementBatch(a[0], a[1], (1,)) for a in got]
                loop.run_until_complete(sp.acknowledge("member-1", acks))
        for p in range(PARTITIONS):
            logs.append(TOPIC, p, PER_PARTITION, clock.now_ms())

    async def bare():
        budget = 500
        out = []
        for p, sp in enumerate(sps):
            offset = sp.next_fetch_offset()
            read = logs.read(TOPIC, p, offset, 1 << 20)
            got = sp.acquire("member-1", read.batches, max_records=budget, fetch_offset=offset,
                             aborted_transactions=read.aborted_transactions)
            budget -= sum(last - first + 1 for first, last, _dc in got)
            out.append((sp, got))
        return out

    def fetch():
        state["last"] = loop.run_until_complete(bare())

    benchmark.pedantic(fetch, setup=setup, rounds=200, warmup_rounds=5)
    assert sum(last - first + 1 for _sp, got in state["last"] for first, last, _dc in got) == 500
    loop.close()


# -- 2. 10,000 idle waiting fetches -------------------------------------------------------------------


async def _park_all(mgr, clock, waiters: int):
    """Open one session per partition (member-i on partition i), then park one waiting fetch each."""
    for i in range(waiters):
        request = ShareFetchRequest(GROUP, f"member-{i}", 0, max_wait_ms=0,
                                    topics=(FetchTopic(TOPIC, (FetchPartition(i),)),))
        await mgr.share_fetch(request)
    epochs = dict.fromkeys(range(waiters), 1)
    return epochs


def _waiting_fetch(loop, mgr, member: int, epoch: int):
    request = ShareFetchRequest(GROUP, f"member-{member}", epoch, max_wait_ms=600_000)
    return loop.create_task(mgr.share_fetch(request))


async def _until_parked(mgr, count: int) -> None:
    for _ in range(100):
        if mgr.waiting_fetch_count == count:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"{mgr.waiting_fetch_count} fetches parked, expected {count}")


def _waiters_for_run(config) -> int:
    # With --benchmark-disable (a smoke run) a tenth of the waiters keeps the suite quick.
    disabled = config.getoption("benchmark_disable", False) and not config.getoption("benchmark_enable", False)
    return WAITERS // 10 if disabled else WAITERS


@pytest.mark.benchmark(group="10,000 idle waiting fetches, one append")
def test_one_append_wakes_the_one_waiting_fetch(benchmark, with_twin, request):
    waiters = _waiters_for_run(request.config)
    loop = asyncio.new_event_loop()
    clock, _persister, logs, mgr = _world(waiters, sessions=waiters)
    epochs = loop.run_until_complete(_park_all(mgr, clock, waiters))
    tasks = {i: _waiting_fetch(loop, mgr, i, epochs[i]) for i in range(waiters)}
    loop.run_until_complete(_until_parked(mgr, waiters))
    assert clock.pending_timers == 1  # one clock timer for every idle waiter: nothing runs while idle
    state = {"round": 0}
    target = waiters // 2

    def setup():
        member = target
        if tasks[member].done():  # re-park the fetch the previous round answered
            epochs[member] += 1
            tasks[member] = _waiting_fetch(loop, mgr, member, epochs[member])
            loop.run_until_complete(_until_parked(mgr, waiters))

    async def wake():
        logs.append(TOPIC, target, 1, clock.now_ms())
        return await tasks[target]

    def run_round():
        response = loop.run_until_complete(wake())
        state["round"] += 1
        state["acquired"] = response.acquired_count

    benchmark.pedantic(run_round, setup=setup, rounds=50, warmup_rounds=2)
    assert state["acquired"] == 1
    assert mgr.waiting_fetch_count == waiters - 1  # every other fetch still waits
    loop.run_until_complete(mgr.close())
    loop.run_until_complete(asyncio.gather(*tasks.values()))
    loop.close()


@pytest.mark.benchmark(group="manager: memory per idle waiting ShareFetch")
def test_memory_per_idle_waiting_fetch(request, benchmark, capsys):
    """tracemalloc: bytes per parked ShareFetch (its task and coroutine frames included) and per
    purgatory entry alone. The measure runs once through `benchmark.pedantic` only so that the bytes go
    to `benchmark.extra_info` (and `make bench`'s JSON); that round's time is not a result."""
    waiters = _waiters_for_run(request.config)
    loop = asyncio.new_event_loop()
    clock, _persister, _logs, mgr = _world(waiters, sessions=waiters)
    epochs = loop.run_until_complete(_park_all(mgr, clock, waiters))
    purgatory = mgr._purgatory

    def measure():
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.take_snapshot()
            tasks = [_waiting_fetch(loop, mgr, i, epochs[i]) for i in range(waiters)]
            loop.run_until_complete(_until_parked(mgr, waiters))
            gc.collect()
            after = tracemalloc.take_snapshot()
            per_fetch = sum(s.size_diff for s in after.compare_to(before, "filename")) / waiters
            before = tracemalloc.take_snapshot()

            async def watch_only():
                return [purgatory.watch(GROUP, [(TOPIC, waiters + i)], 10**12) for i in range(waiters)]

            entries = loop.run_until_complete(watch_only())
            after = tracemalloc.take_snapshot()
            per_entry = sum(s.size_diff for s in after.compare_to(before, "filename")) / waiters
        finally:
            tracemalloc.stop()
        return tasks, entries, per_fetch, per_entry

    tasks, entries, per_fetch, per_entry = benchmark.pedantic(measure, rounds=1, iterations=1)
    benchmark.extra_info.update({"waiters": waiters, "bytes_per_waiting_fetch": round(per_fetch),
                                 "bytes_per_purgatory_entry": round(per_entry)})
    with capsys.disabled():
        print(f"\n{waiters} idle waiting ShareFetch requests: {per_fetch:.0f} bytes each (task, coroutine "
              f"frames, future, purgatory entry); purgatory entry alone: {per_entry:.0f} bytes")
    assert per_fetch < 8192 and per_entry < 1024
    for waiter in entries:
        purgatory.cancel(waiter)
    loop.run_until_complete(mgr.close())
    loop.run_until_complete(asyncio.gather(*tasks))
    loop.close()
