"""Tracker benchmarks, both twins side by side in one pytest-benchmark group, seeded workloads.

Run with `make bench`. Targets for the native twin: whole-batch cycle <= 2 us; per-offset acks one
offset per call >= 20x the twin; one 500-type acknowledgement >= 50M offsets/s; 100k records in 1k
batches expiring <= 2 ms. The memory targets (<= 16 bytes per per-offset record, <= 200 bytes per whole
batch) are asserted by the tests at the end of this file. The window sweep runs the whole-batch cycle,
single-offset acknowledgements and `next_fetch_offset` with 10^3 ... 10^6 records in flight: flat rows
mean the cost of an operation does not grow with the window. With `--benchmark-disable` (as `make test` runs it) every
benchmark runs once, in seconds.
"""

from __future__ import annotations

import asyncio
import random
import tracemalloc
import uuid

import pytest

from sharegroup import AcknowledgementBatch, FetchedBatch, ManualClock, ShareGroupConfig
from sharegroup.tracker import pure_tracker_class

BATCH = 500
LOCK_MS = 30_000


def new(twin, **kw):
    kw.setdefault("partition_max_record_locks", 10_000_000)
    return twin(0, record_lock_duration_ms=LOCK_MS, **kw)


@pytest.mark.benchmark(group="whole-batch cycle (acquire 500, accept whole, SPSO advances)")
def test_whole_batch_cycle(benchmark, twin):
    t = new(twin)
    state = {"base": 0}
    accept = (1,)

    def cycle():
        base = state["base"]
        t.acquire("member-1", [FetchedBatch(base, base + BATCH - 1)], BATCH, 0)
        w = t.begin_acknowledge("member-1", [AcknowledgementBatch(base, base + BATCH - 1, accept)], 0)
        t.complete(w[0], True, 0)
        state["base"] = base + BATCH

    benchmark(cycle)
    assert t.start_offset == state["base"] and t.in_flight_count == 0


def _drain(t, member, base):
    """Re-acquire and accept whatever was released in [base, base + BATCH) so the window stays small."""
    got = t.acquire(member, [FetchedBatch(base, base + BATCH - 1)], BATCH, 0)
    if got:
        w = t.begin_acknowledge(member, [AcknowledgementBatch(g[0], g[1], (1,)) for g in got], 0)
        t.complete(w[0], True, 0)


@pytest.mark.benchmark(group="per-offset acknowledgement, one offset per call (500 calls a round)")
def test_per_offset_ack_one_per_call(benchmark, twin):
    t = new(twin)
    rng = random.Random(7)
    types = [rng.choice((1, 1, 1, 2, 3)) for _ in range(BATCH)]
    state = {"base": 0}

    def setup():
        # Untimed: re-acquire and accept what the previous round released, then acquire a fresh batch.
        base = state["base"]
        if base:
            _drain(t, "m", base - BATCH)
        state["base"] = base + BATCH
        t.acquire("m", [FetchedBatch(base, base + BATCH - 1)], BATCH, 0)
        # The requests arrive decoded (the wire layer builds these objects): prebuilt, untimed.
        requests = [[AcknowledgementBatch(base + i, base + i, (types[i],))] for i in range(BATCH)]
        return (requests,), {}

    def acks(requests):
        begin, complete = t.begin_acknowledge, t.complete
        for req in requests:
            complete(begin("m", req, 0)[0], True, 0)

    benchmark.pedantic(acks, setup=setup, rounds=40, warmup_rounds=2)
    benchmark.extra_info["acks_per_round"] = BATCH
    _drain(t, "m", state["base"] - BATCH)
    assert t.in_flight_count == 0


@pytest.mark.parametrize("failure_pct", [2, 10])
@pytest.mark.benchmark(group="one acknowledgement with 500 per-offset types")
def test_ack_500_per_offset_types(benchmark, twin, failure_pct):
    t = new(twin)
    rng = random.Random(11)
    # Mostly ACCEPT; failure_pct % of the records RELEASE or REJECT, as a consumer with some failures sends.
    types = tuple(rng.choice((2, 3)) if rng.random() < failure_pct / 100 else 1 for _ in range(BATCH))
    state = {"base": 0}

    def setup():
        base = state["base"]
        if base:
            _drain(t, "m", base - BATCH)
        state["base"] = base + BATCH
        t.acquire("m", [FetchedBatch(base, base + BATCH - 1)], BATCH, 0)
        return (AcknowledgementBatch(base, base + BATCH - 1, types),), {}

    def ack(request):
        w = t.begin_acknowledge("m", [request], 0)
        t.complete(w[0], True, 0)

    benchmark.pedantic(ack, setup=setup, rounds=300, warmup_rounds=5)
    benchmark.extra_info["offsets_per_call"] = BATCH


@pytest.mark.benchmark(group="lock-expiry storm: 100k records in 1k batches")
def test_lock_expiry_storm(benchmark, twin):
    state = {}

    def setup():
        t = new(twin)
        for i in range(1000):
            t.acquire("m%d" % (i % 7), [FetchedBatch(i * 100, i * 100 + 99)], 100, 0)
        state["t"] = t
        return (t,), {}

    def storm(t):
        n, _w = t.expire_locks(LOCK_MS)
        assert n == 100_000

    benchmark.pedantic(storm, setup=setup, rounds=15, warmup_rounds=1)


# ---------------------------------------------------------------- window-size sweep

WINDOWS = [10 ** 3, 10 ** 4, 10 ** 5, 10 ** 6]


def _held_window(twin, size):
    """A tracker holding `size` acquired records in batches of BATCH at [0, size)."""
    t = new(twin)
    for base in range(0, size, BATCH):
        t.acquire("m", [FetchedBatch(base, base + BATCH - 1)], BATCH, 0)
    assert t.in_flight_count == size
    return t


@pytest.mark.parametrize("window", WINDOWS, ids=lambda w: f"window={w:.0e}")
def test_sweep_whole_batch_cycle(benchmark, twin, window):
    """Steady state with `window` records in flight: accept the oldest batch (the SPSO advances past
    it) and acquire a new one at the end, as a consumer lagging by `window` records does."""
    benchmark.group = f"sweep: whole-batch cycle with {window:.0e} records in flight"
    t = _held_window(twin, window)
    state = {"head": 0}
    accept = (1,)

    def cycle():
        head = state["head"]
        w = t.begin_acknowledge("m", [AcknowledgementBatch(head, head + BATCH - 1, accept)], 0)
        t.complete(w[0], True, 0)
        tail = head + window
        t.acquire("m", [FetchedBatch(tail, tail + BATCH - 1)], BATCH, 0)
        state["head"] = head + BATCH

    benchmark(cycle)
    assert t.start_offset == state["head"] and t.in_flight_count == window


@pytest.mark.parametrize("window", WINDOWS, ids=lambda w: f"window={w:.0e}")
def test_sweep_per_offset_ack(benchmark, twin, window):
    """Steady state with `window` records in flight: accept the oldest batch one offset per call (its
    entry splits to per-offset state, the SPSO advances by one each call); a new batch is acquired at
    the end in the untimed setup."""
    benchmark.group = f"sweep: per-offset acks, one offset per call (500 a round), {window:.0e} in flight"
    t = _held_window(twin, window)
    state = {"head": 0}
    accept = (1,)

    def setup():
        head = state["head"]
        state["head"] = head + BATCH
        tail = head + window
        t.acquire("m", [FetchedBatch(tail, tail + BATCH - 1)], BATCH, 0)
        return ([[AcknowledgementBatch(head + i, head + i, accept)] for i in range(BATCH)],), {}

    def acks(requests):
        begin, complete = t.begin_acknowledge, t.complete
        for req in requests:
            complete(begin("m", req, 0)[0], True, 0)

    benchmark.pedantic(acks, setup=setup, rounds=30, warmup_rounds=2)
    benchmark.extra_info["acks_per_round"] = BATCH
    assert t.start_offset == state["head"] and t.in_flight_count == window


@pytest.mark.parametrize("window", WINDOWS, ids=lambda w: f"window={w:.0e}")
def test_sweep_next_fetch_offset_walk(benchmark, twin, window):
    """The worst case of `next_fetch_offset` with `window` acquired records in flight: a record near the
    start was released, fetched (the walk stops there) and re-acquired, so the next call walks every
    entry to the end offset. Repeated calls with nothing released start where the last walk ended and
    cost O(1); this is the walk a redelivery near the start costs once."""
    benchmark.group = f"sweep: next_fetch_offset walk over {window:.0e} acquired records (batches of 500)"
    t = _held_window(twin, window)
    state = {"round": 0}

    def setup():
        offset = state["round"] % BATCH
        state["round"] += 1
        w = t.begin_acknowledge("m", [AcknowledgementBatch(offset, offset, (2,))], 0)
        t.complete(w[0], True, 0)
        assert t.next_fetch_offset() == offset
        t.acquire("m", [FetchedBatch(0, BATCH - 1)], 1, 0)
        return (), {}

    assert benchmark.pedantic(t.next_fetch_offset, setup=setup, rounds=200, warmup_rounds=2) == window


# ---------------------------------------------------------------- memory targets (tests, not timings)
# Each runs its measure once through `benchmark.pedantic` only so that the bytes it asserts go to
# `benchmark.extra_info` and so into `make bench`'s JSON; that round's time (building the window under
# tracemalloc) is not a result.


def _traced(fn):
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        keep = fn()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return after - before, keep


def _native_only(twin):
    if twin is pure_tracker_class():
        pytest.skip("the memory targets are the native twin's; the pure twin keeps Python objects "
                    "(an entry is a slotted object, per-offset state is bytearrays and arrays)")


@pytest.mark.benchmark(group="memory: bytes per offset in per-offset state (1M offsets)")
def test_memory_per_split_offset_is_at_most_16_bytes(benchmark, twin):
    """1M offsets in 1k producer batches, each split to per-offset state by a one-offset ack."""
    _native_only(twin)
    offsets = 1_000_000

    def per_offset_window():
        t = new(twin)
        for i in range(1000):
            base = i * 1000
            t.acquire("m", [FetchedBatch(base, base + 999)], 1000, 0)
            t.complete(t.begin_acknowledge("m", [AcknowledgementBatch(base + 999, base + 999, (1,))], 0)[0],
                       True, 0)
        return t

    used, t = benchmark.pedantic(_traced, args=(per_offset_window,), rounds=1, iterations=1)
    benchmark.extra_info["bytes_per_split_offset"] = round(used / offsets, 2)
    assert t.in_flight_count == offsets
    assert t.record_state(offsets - 1).state == 2 and t.record_state(offsets - 2).state == 1
    print(f"\n{twin.__module__}: {used / offsets:.2f} bytes per split offset")
    assert used / offsets <= 16


@pytest.mark.benchmark(group="memory: bytes per whole-batch entry (10k entries)")
def test_memory_per_whole_batch_entry_is_at_most_200_bytes(benchmark, twin):
    """10k whole producer batches of 10 records each, acquired and held at batch level."""
    _native_only(twin)
    batches = 10_000

    def whole_batches():
        t = new(twin)
        for i in range(batches):
            t.acquire("m", [FetchedBatch(i * 10, i * 10 + 9)], 10, 0)
        return t

    used, t = benchmark.pedantic(_traced, args=(whole_batches,), rounds=1, iterations=1)
    benchmark.extra_info["bytes_per_whole_batch_entry"] = round(used / batches, 1)
    assert t.in_flight_count == batches * 10
    print(f"\n{twin.__module__}: {used / batches:.1f} bytes per whole-batch entry")
    assert used / batches <= 200


@pytest.mark.benchmark(group="SharePartition: acquire + async acknowledge through InMemoryPersister")
def test_share_partition_cycle(benchmark):
    from persister import InMemoryPersister
    from sharegroup.manager.share_partition import SharePartition

    topic = uuid.UUID(int=1)
    clock = ManualClock(0)
    p = InMemoryPersister(clock=clock)
    p.seed("g", topic, 0, state_epoch=0, start_offset=0, state_batches=[])
    sp = SharePartition("g", topic, 0, persister=p, clock=clock, config=ShareGroupConfig())
    loop = asyncio.new_event_loop()
    loop.run_until_complete(sp.initialize())
    state = {"base": 0}

    def cycle():
        base = state["base"]
        sp.acquire("m", [FetchedBatch(base, base + BATCH - 1)], max_records=BATCH)
        loop.run_until_complete(sp.acknowledge("m", [AcknowledgementBatch(base, base + BATCH - 1, (1,))]))
        state["base"] = base + BATCH

    benchmark(cycle)
    loop.close()
    assert sp.start_offset == state["base"]
