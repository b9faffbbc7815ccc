"""SharePartition benchmarks: the public API (acquire, `await acknowledge`) over both tracker twins, and
the native tracker's own cycle as the floor, side by side in one pytest-benchmark group.

    python -m pytest bench/bench_partition.py --benchmark-enable -q

Targets: the whole-batch cycle (acquire 500 + await acknowledge ACCEPT) through SharePartition within 2x
of the tracker's own cycle; one acknowledgement of 500 per-offset types with 40 % RELEASE/REJECT and
single-offset acknowledge calls >= 10x faster native than pure. The persister here completes every
write at once (it keeps nothing), so what is timed is the share-partition's own work: the tracker, the
state batches it builds, the wrapper. The coroutine is driven by hand (`send(None)`): it never suspends,
so no event loop time is counted; the 500 single-offset calls of a round are awaited in turn by one such
coroutine.
"""

from __future__ import annotations

import random
import uuid

import pytest

import sharegroup.manager.share_partition as partition_module
from persister import InMemoryPersister
from sharegroup import AcknowledgementBatch, FetchedBatch, ManualClock, ShareGroupConfig
from sharegroup.manager.share_partition import SharePartition

BATCH = 500
LOCK_MS = 30_000
TOPIC = uuid.UUID("00000000-0000-0000-0000-0000000000b1")


class _DiscardingPersister(InMemoryPersister):
    """Initializes like the in-memory persister; every write succeeds at once and is not kept."""

    async def write_state(self, group_id, topic_id, partition, *, state_epoch, leader_epoch, start_offset,
                          state_batches, delivery_complete_count) -> None:
        return None


def _run(coro):
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    raise AssertionError("the share-partition suspended on a persister that never waits")


def _partition(twin) -> SharePartition:
    """A SharePartition over `twin`'s tracker class, initialized at offset 0."""
    persister = _DiscardingPersister()
    persister.seed("g", TOPIC, 0, state_epoch=0, start_offset=0, state_batches=[])
    real = partition_module.InFlightTracker
    partition_module.InFlightTracker = twin
    try:
        sp = SharePartition("g", TOPIC, 0, persister=persister, clock=ManualClock(0),
                            config=ShareGroupConfig(record_lock_duration_ms=LOCK_MS,
                                                    partition_max_record_locks=10_000))
    finally:
        partition_module.InFlightTracker = real
    _run(sp.initialize())
    assert type(sp.tracker) is twin
    return sp


@pytest.mark.benchmark(group="whole-batch cycle: SharePartition (acquire 500 + await acknowledge) vs tracker")
@pytest.mark.parametrize("through", ["tracker", "share-partition"])
def test_whole_batch_cycle(benchmark, twin, through):
    accept = (1,)
    state = {"base": 0}
    if through == "tracker":
        t = twin(0, record_lock_duration_ms=LOCK_MS, partition_max_record_locks=10_000)

        def cycle():
            base = state["base"]
            t.acquire("m", [FetchedBatch(base, base + BATCH - 1)], BATCH, 0)
            w = t.begin_acknowledge("m", [AcknowledgementBatch(base, base + BATCH - 1, accept)], 0)
            t.complete(w[0], True, 0)
            state["base"] = base + BATCH
    else:
        sp = _partition(twin)
        t = sp.tracker

        def cycle():
            base = state["base"]
            sp.acquire("m", [FetchedBatch(base, base + BATCH - 1)])
            _run(sp.acknowledge("m", [AcknowledgementBatch(base, base + BATCH - 1, accept)]))
            state["base"] = base + BATCH

    benchmark(cycle)
    assert t.start_offset == state["base"] and t.in_flight_count == 0


def _drain(sp: SharePartition, base: int) -> None:
    """Re-acquire and accept what was released in [base, base + BATCH) so the window stays small."""
    got = sp.acquire("m", [FetchedBatch(base, base + BATCH - 1)])
    if got:
        _run(sp.acknowledge("m", [AcknowledgementBatch(g[0], g[1], (1,)) for g in got]))


@pytest.mark.benchmark(group="SharePartition: one acknowledgement of 500 per-offset types, 40 % RELEASE/REJECT")
def test_ack_500_per_offset_types(benchmark, twin):
    sp = _partition(twin)
    rng = random.Random(40)
    types = tuple(rng.choice((2, 3)) if rng.random() < 0.40 else 1 for _ in range(BATCH))
    state = {"base": 0}

    def setup():
        base = state["base"]
        if base:
            _drain(sp, base - BATCH)
        state["base"] = base + BATCH
        sp.acquire("m", [FetchedBatch(base, base + BATCH - 1)])
        return (AcknowledgementBatch(base, base + BATCH - 1, types),), {}

    def ack(request):
        _run(sp.acknowledge("m", [request]))

    benchmark.pedantic(ack, setup=setup, rounds=200, warmup_rounds=5)
    benchmark.extra_info["offsets_per_call"] = BATCH


@pytest.mark.benchmark(group="SharePartition: single-offset acknowledge calls (500 a round)")
def test_single_offset_acknowledge(benchmark, twin):
    sp = _partition(twin)
    rng = random.Random(7)
    types = [rng.choice((1, 1, 1, 2, 3)) for _ in range(BATCH)]
    state = {"base": 0}

    def setup():
        base = state["base"]
        if base:
            _drain(sp, base - BATCH)
        state["base"] = base + BATCH
        sp.acquire("m", [FetchedBatch(base, base + BATCH - 1)])
        return ([[AcknowledgementBatch(base + i, base + i, (types[i],))] for i in range(BATCH)],), {}

    def acks(requests):
        # Awaited one after another from one coroutine, as a caller (the manager) awaits them; driving
        # each call by hand would time a StopIteration per call, about half the native tracker's work.
        acknowledge = sp.acknowledge

        async def one_by_one():
            for request in requests:
                await acknowledge("m", request)

        _run(one_by_one())

    benchmark.pedantic(acks, setup=setup, rounds=30, warmup_rounds=2)
    benchmark.extra_info["acks_per_round"] = BATCH
