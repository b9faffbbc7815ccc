"""SharePartition against the real coordinator rules (InMemoryPersister): the KIP-932 worked example,
initialization, two-phase persistence with rollback, fencing and lock expiry."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from persister import InMemoryPersister
from sharegroup import AcknowledgementBatch as Ack
from sharegroup import AcquiredRecords as Acq
from sharegroup import Errors, ManualClock, PartitionState, RecordState, RecordView, ShareError, ShareGroupConfig
from sharegroup import FetchedBatch as FB
from sharegroup import StateBatch as SB
from sharegroup.manager.share_partition import SharePartition, SharePartitionStatus

from .conftest import run

GROUP = "g1"
TOPIC = uuid.UUID("00000000-0000-0000-0000-0000000000a1")
ACCEPT, RELEASE, REJECT, GAP, RENEW = 1, 2, 3, 0, 4
LOCK_MS = 30_000


def make(persister, clock, **kw):
    kw.setdefault("config", ShareGroupConfig(record_lock_duration_ms=LOCK_MS))
    return SharePartition(GROUP, TOPIC, 0, persister=persister, clock=clock, **kw)


def durable(p):
    return p.state_of(GROUP, TOPIC, 0)


def check(sp):
    sp._check()


def test_kip_worked_example_step_by_step():
    """KIP-932's example: every step's in-memory and durable state."""

    async def main():
        clock = ManualClock(0)
        p = InMemoryPersister(clock=clock)
        p.seed(GROUP, TOPIC, 0, state_epoch=0, start_offset=100, state_batches=[])
        sp = make(p, clock)
        await sp.initialize()
        assert (sp.start_offset, sp.end_offset, sp.status) == (100, 100, SharePartitionStatus.ACTIVE)
        log = [FB(100, 109), FB(110, 112), FB(113, 118), FB(119, 119), FB(120, 120)]

        def fetch(offset):  # the log read from `offset`, starting at the producer batch holding it
            return [b for b in log if b.last_offset >= offset]

        # 1. fetch 100-109 and accept them: SPSO 110
        assert sp.acquire("A", fetch(100)[:1]) == [Acq(100, 109, 1)]
        await sp.acknowledge("A", [Ack(100, 109, (ACCEPT,))])
        assert (sp.start_offset, sp.end_offset) == (110, 110)
        assert durable(p) == PartitionState(0, 110, [])
        check(sp)

        # 2. fetch 110-119, split between three consumers
        clock.advance(0)
        assert sp.acquire("A", fetch(110)[:-1], max_records=3) == [Acq(110, 112, 1)]
        clock.advance(10_000)
        assert sp.acquire("B", fetch(sp.next_fetch_offset())[:-1], max_records=6) == [Acq(113, 118, 1)]
        assert sp.acquire("C", fetch(sp.next_fetch_offset())[:-1]) == [Acq(119, 119, 1)]
        assert (sp.start_offset, sp.end_offset, sp.in_flight_count) == (110, 120, 10)
        assert durable(p) == PartitionState(0, 110, [])  # acquisition writes nothing

        # 3. release 110
        await sp.acknowledge("A", [Ack(110, 110, (RELEASE,))])
        assert sp.record_state(110) == RecordView(RecordState.AVAILABLE, 1, "")
        assert durable(p) == PartitionState(0, 110, [SB(110, 110, 0, 1)])

        # 4. accept 119
        await sp.acknowledge("C", [Ack(119, 119, (ACCEPT,))])
        assert durable(p) == PartitionState(0, 110, [SB(110, 110, 0, 1), SB(119, 119, 2, 1)])

        # 5. fetch 110 and 120: 110 goes out at delivery count 2
        clock.advance(10_000)  # t = 20 s
        assert sp.next_fetch_offset() == 110
        assert sp.acquire("C", fetch(110)) == [Acq(110, 110, 2), Acq(120, 120, 1)]
        assert sp.end_offset == 121
        check(sp)

        # 6. the lock on 111-112 (taken at t = 0) times out at t = 30 s
        clock.advance(10_000)
        assert await sp.expire_locks() == 2
        assert sp.record_state(111) == RecordView(RecordState.AVAILABLE, 1, "")
        assert sp.record_state(113).state == RecordState.ACQUIRED
        assert durable(p) == PartitionState(0, 110, [SB(110, 112, 0, 1), SB(119, 119, 2, 1)])

        # 7. accept 113-118
        await sp.acknowledge("B", [Ack(113, 118, (ACCEPT,))])
        assert durable(p) == PartitionState(0, 110, [SB(110, 112, 0, 1), SB(113, 119, 2, 1)])

        # 8. fetch 111-112 at delivery count 2
        clock.advance(1_000)
        assert sp.next_fetch_offset() == 111
        assert sp.acquire("B", fetch(111)) == [Acq(111, 112, 2)]

        # 9. accept 110: SPSO 111
        await sp.acknowledge("C", [Ack(110, 110, (ACCEPT,))])
        assert sp.start_offset == 111
        assert durable(p) == PartitionState(0, 111, [SB(111, 112, 0, 1), SB(113, 119, 2, 1)])

        # 10. accept 111-112: everything up to 119 is done; only 120 is in flight
        await sp.acknowledge("B", [Ack(111, 112, (ACCEPT,))])
        assert (sp.start_offset, sp.end_offset, sp.in_flight_count) == (120, 121, 1)
        assert sp.state_batches() == [SB(120, 120, 1, 1)]
        assert durable(p) == PartitionState(0, 120, [])
        check(sp)

        # A new leader (failover) sees exactly the durable state: 120 comes back AVAILABLE (never written).
        sp2 = make(p, clock, leader_epoch=1)
        await sp2.initialize()
        assert (sp2.start_offset, sp2.end_offset) == (120, 120)
        assert sp2.acquire("D", fetch(120)) == [Acq(120, 120, 1)]

    run(main())


# ---------------------------------------------------------------- initialization


def test_initialize_maps_persisted_batches_and_gap_window():
    async def main():
        clock = ManualClock(0)
        p = InMemoryPersister(clock=clock)
        p.seed(GROUP, TOPIC, 0, state_epoch=3, start_offset=50,
               state_batches=[SB(50, 54, 2, 1), SB(60, 64, 0, 2)])
        sp = make(p, clock)
        await sp.initialize()
        assert sp.state_epoch == 3
        assert (sp.start_offset, sp.end_offset) == (55, 65)
        assert sp.record_state(57) is None  # a hole of the persisted-gap window: no record yet
        assert sp.acquire("a", [FB(55, 64)]) == [Acq(55, 59, 1), Acq(60, 64, 3)]
        check(sp)

    run(main())


@pytest.mark.parametrize("reset,expected", [("latest", 900), ("earliest", 10), ("by_duration:PT1M", 500)])
def test_initialize_resolves_an_uninitialized_start_offset(reset, expected):
    async def main():
        clock = ManualClock(1_000_000)
        p = InMemoryPersister(clock=clock)
        await p.initialize_state(GROUP, TOPIC, 0, state_epoch=1, start_offset=-1)
        asked = []

        def lookup(spec):
            asked.append(spec)
            return {"latest": 900, "earliest": 10}.get(spec, 500)

        sp = make(p, clock, config=ShareGroupConfig(auto_offset_reset=reset), offset_lookup=lookup)
        await sp.initialize()
        assert sp.start_offset == expected
        if reset.startswith("by_duration"):
            assert asked == [1_000_000 - 60_000]

    run(main())


def test_initialize_fails_when_the_offset_lookup_fails():
    async def main():
        p = InMemoryPersister()
        await p.initialize_state(GROUP, TOPIC, 0, state_epoch=1, start_offset=-1)

        def broken(spec):
            raise OSError("log unavailable")

        sp = make(p, ManualClock(0), offset_lookup=broken)
        with pytest.raises(ShareError) as info:
            await sp.initialize()
        assert info.value.error == Errors.UNKNOWN_SERVER_ERROR
        assert sp.status == SharePartitionStatus.FAILED
        with pytest.raises(ShareError) as info:
            sp.acquire("a", [FB(0, 0)])
        assert info.value.error == Errors.UNKNOWN_SERVER_ERROR

    run(main())


@pytest.mark.parametrize("error,expected,status", [
    (Errors.COORDINATOR_LOAD_IN_PROGRESS, Errors.COORDINATOR_NOT_AVAILABLE, SharePartitionStatus.FAILED),
    (Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE, SharePartitionStatus.FAILED),
    (Errors.COORDINATOR_NOT_AVAILABLE, Errors.COORDINATOR_NOT_AVAILABLE, SharePartitionStatus.FAILED),
    (Errors.FENCED_LEADER_EPOCH, Errors.NOT_LEADER_OR_FOLLOWER, SharePartitionStatus.FENCED),
    (Errors.FENCED_STATE_EPOCH, Errors.NOT_LEADER_OR_FOLLOWER, SharePartitionStatus.FENCED),
    (Errors.GROUP_ID_NOT_FOUND, Errors.GROUP_ID_NOT_FOUND, SharePartitionStatus.FAILED),
    (Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.UNKNOWN_TOPIC_OR_PARTITION, SharePartitionStatus.FAILED),
    (Errors.KAFKA_STORAGE_ERROR, Errors.UNKNOWN_SERVER_ERROR, SharePartitionStatus.FAILED),
    (Errors.UNKNOWN_SERVER_ERROR, Errors.UNKNOWN_SERVER_ERROR, SharePartitionStatus.FAILED),
])
def test_initialize_maps_persister_errors(error, expected, status):
    async def main():
        p = InMemoryPersister()
        p.seed(GROUP, TOPIC, 0, state_epoch=0, start_offset=0, state_batches=[])
        p.fail_next_reads(1, error)
        sp = make(p, ManualClock(0))
        with pytest.raises(ShareError) as info:
            await sp.initialize()
        assert info.value.error == expected
        assert sp.status == status
        if status is SharePartitionStatus.FAILED:  # a failed read may be retried
            await sp.initialize()
            assert sp.status == SharePartitionStatus.ACTIVE

    run(main())


def test_initialize_of_a_stale_leader_is_fenced():
    async def main():
        p = InMemoryPersister()
        p.seed(GROUP, TOPIC, 0, state_epoch=0, start_offset=0, state_batches=[], leader_epoch=5)
        sp = make(p, ManualClock(0), leader_epoch=4)
        with pytest.raises(ShareError) as info:
            await sp.initialize()
        assert info.value.error == Errors.NOT_LEADER_OR_FOLLOWER
        assert sp.status == SharePartitionStatus.FENCED

    run(main())


def test_initialize_of_an_uninitialized_key_fails():
    async def main():
        sp = make(InMemoryPersister(), ManualClock(0))
        with pytest.raises(ShareError) as info:
            await sp.initialize()
        assert info.value.error == Errors.UNKNOWN_SERVER_ERROR  # the coordinator's INVALID_REQUEST

    run(main())


def test_initialize_while_initializing_is_leader_not_available():
    """Kafka's initializedOrThrowException: a second caller while the read is in flight gets the
    retriable LEADER_NOT_AVAILABLE at once; only one read reaches the persister."""

    async def main():
        p = InMemoryPersister()
        p.seed(GROUP, TOPIC, 0, state_epoch=0, start_offset=7, state_batches=[])
        reads = []
        gate = asyncio.Event()
        original = p.read_state

        async def gated(*a, **kw):
            reads.append(a)
            await gate.wait()
            return await original(*a, **kw)

        p.read_state = gated
        sp = make(p, ManualClock(0))
        first = asyncio.ensure_future(sp.initialize())
        await asyncio.sleep(0)
        assert sp.status == SharePartitionStatus.INITIALIZING
        with pytest.raises(ShareError) as info:
            await sp.initialize()
        assert info.value.error == Errors.LEADER_NOT_AVAILABLE
        assert sp.status == SharePartitionStatus.INITIALIZING
        gate.set()
        await first
        assert (len(reads), sp.status, sp.start_offset) == (1, SharePartitionStatus.ACTIVE, 7)
        await sp.initialize()  # ACTIVE: returns without reading again
        assert len(reads) == 1

    run(main())


@pytest.mark.parametrize("fencing", [Errors.FENCED_LEADER_EPOCH, Errors.FENCED_STATE_EPOCH])
def test_initialize_of_a_fenced_share_partition_is_leader_not_available(fencing):
    """The fencing read reports NOT_LEADER_OR_FOLLOWER; every later initialize() answers
    LEADER_NOT_AVAILABLE without reading, and the share-partition stays FENCED."""

    async def main():
        p = InMemoryPersister()
        p.seed(GROUP, TOPIC, 0, state_epoch=0, start_offset=0, state_batches=[])
        p.fail_next_reads(1, fencing)
        sp = make(p, ManualClock(0))
        with pytest.raises(ShareError) as info:
            await sp.initialize()
        assert info.value.error == Errors.NOT_LEADER_OR_FOLLOWER
        reads = []
        original = p.read_state

        async def counting(*a, **kw):
            reads.append(a)
            return await original(*a, **kw)

        p.read_state = counting
        for _ in range(2):
            with pytest.raises(ShareError) as info:
                await sp.initialize()
            assert info.value.error == Errors.LEADER_NOT_AVAILABLE
            assert sp.status == SharePartitionStatus.FENCED
        assert reads == []

    run(main())


def test_initialize_after_a_fencing_write_is_leader_not_available():
    async def main():
        p, sp, clock = await active()
        sp.acquire("a", [FB(0, 9)])
        newer = make(p, clock, leader_epoch=1)
        await newer.initialize()
        with pytest.raises(ShareError) as info:
            await sp.acknowledge("a", [Ack(0, 9, (ACCEPT,))])
        assert info.value.error == Errors.NOT_LEADER_OR_FOLLOWER
        with pytest.raises(ShareError) as info:
            await sp.initialize()
        assert info.value.error == Errors.LEADER_NOT_AVAILABLE
        assert sp.status == SharePartitionStatus.FENCED

    run(main())


def test_operations_before_initialize_are_refused():
    async def main():
        sp = make(InMemoryPersister(), ManualClock(0))
        with pytest.raises(ShareError) as info:
            sp.acquire("a", [FB(0, 0)])
        assert info.value.error == Errors.LEADER_NOT_AVAILABLE
        with pytest.raises(ShareError) as info:
            await sp.acknowledge("a", [Ack(0, 0, (ACCEPT,))])
        assert info.value.error == Errors.LEADER_NOT_AVAILABLE

    run(main())


@pytest.mark.parametrize("kwargs", [dict(group_id=""), dict(partition=-1), dict(topic_id="abc"),
                                    dict(leader_epoch=-1)])
def test_bad_construction_is_a_value_error(kwargs):
    args = dict(group_id=GROUP, topic_id=TOPIC, partition=0)
    args.update({k: v for k, v in kwargs.items() if k in args})
    extra = {k: v for k, v in kwargs.items() if k not in args}
    with pytest.raises(ValueError):
        SharePartition(args["group_id"], args["topic_id"], args["partition"], persister=InMemoryPersister(), **extra)


# ---------------------------------------------------------------- two-phase persistence


async def active(clock=None, **kw):
    clock = clock or ManualClock(0)
    p = InMemoryPersister(clock=clock)
    p.seed(GROUP, TOPIC, 0, state_epoch=0, start_offset=0, state_batches=[])
    sp = make(p, clock, **kw)
    await sp.initialize()
    return p, sp, clock


@pytest.mark.parametrize("error,expected", [
    (Errors.UNKNOWN_SERVER_ERROR, Errors.UNKNOWN_SERVER_ERROR),
    (Errors.COORDINATOR_NOT_AVAILABLE, Errors.COORDINATOR_NOT_AVAILABLE),
    (Errors.KAFKA_STORAGE_ERROR, Errors.UNKNOWN_SERVER_ERROR),
])
def test_failed_acknowledge_write_rolls_everything_back(error, expected):
    async def main():
        p, sp, clock = await active()
        sp.acquire("a", [FB(0, 9)])
        before = (sp.state_batches(), sp.start_offset, durable(p))
        p.fail_next_writes(1, error)
        with pytest.raises(ShareError) as info:
            await sp.acknowledge("a", [Ack(0, 4, (ACCEPT,)), Ack(5, 9, (REJECT,))])
        assert info.value.error == expected
        assert (sp.state_batches(), sp.start_offset, durable(p)) == before
        assert sp.record_state(3) == RecordView(RecordState.ACQUIRED, 1, "a")
        check(sp)
        await sp.acknowledge("a", [Ack(0, 9, (ACCEPT,))])  # the member may try again
        assert sp.start_offset == 10

    run(main())


def test_records_in_a_pending_write_cannot_be_acknowledged_again():
    async def main():
        p, sp, clock = await active()
        sp.acquire("a", [FB(0, 9)])
        p.pause_writes()
        task = asyncio.ensure_future(sp.acknowledge("a", [Ack(0, 9, (ACCEPT,))]))
        await asyncio.sleep(0)
        assert sp.record_state(0).state == RecordState.ACKNOWLEDGED  # visible at once
        with pytest.raises(ShareError) as info:
            await sp.acknowledge("a", [Ack(0, 0, (REJECT,))])
        assert info.value.error == Errors.INVALID_RECORD_STATE
        assert sp.start_offset == 0  # not before the write is durable
        p.resume_writes()
        await task
        assert sp.start_offset == 10

    run(main())


def test_rollback_of_records_whose_lock_expired_meanwhile():
    async def main():
        p, sp, clock = await active()
        sp.acquire("a", [FB(0, 9)])
        p.pause_writes()
        p.fail_next_writes(1)
        task = asyncio.ensure_future(sp.acknowledge("a", [Ack(0, 9, (ACCEPT,))]))
        await asyncio.sleep(0)
        clock.advance(LOCK_MS)
        assert await sp.expire_locks() == 0  # the records await their write
        p.resume_writes()
        with pytest.raises(ShareError):
            await task
        assert sp.record_state(0) == RecordView(RecordState.AVAILABLE, 1, "")
        assert sp.next_fetch_offset() == 0
        # That expiry was never written: it is kept and written by the next timer tick.
        assert sp.unwritten_expiry_runs == [SB(0, 9, 0, 1)]
        assert await sp.expire_locks() == 0
        assert durable(p) == PartitionState(0, 0, [SB(0, 9, 0, 1)])
        check(sp)

    run(main())


def test_a_record_archived_at_the_limit_by_a_rollback_becomes_durable():
    async def main():
        p, sp, clock = await active(config=LIMIT2)
        sp.acquire("a", [FB(0, 4)])
        await sp.acknowledge("a", [Ack(0, 4, (RELEASE,))])
        assert sp.acquire("b", [FB(0, 4)]) == [Acq(0, 4, 2)]  # b's lock ends at 30 s
        clock.advance(10_000)
        assert sp.acquire("c", [FB(5, 9)]) == [Acq(5, 9, 1)]  # c's at 40 s
        p.pause_writes()
        p.fail_next_writes(1)
        task = asyncio.ensure_future(sp.acknowledge("b", [Ack(0, 4, (ACCEPT,))]))
        await asyncio.sleep(0)
        clock.advance(20_000)
        p.resume_writes()
        with pytest.raises(ShareError):
            await task
        # Rolled back with the lock expired at the delivery limit: archived, and the SPSO passed them.
        assert (sp.start_offset, sp.record_state(0)) == (5, None)
        assert durable(p) == PartitionState(0, 0, [SB(0, 4, 0, 1)])
        assert sp.unwritten_expiry_runs == [SB(0, 4, 4, 2)]
        assert await sp.expire_locks() == 0  # no lock due: the unwritten expiry is written
        assert durable(p) == PartitionState(0, 5, [])
        assert sp.unwritten_expiry_runs == []
        check(sp)

    run(main())


def test_cancelled_acknowledge_rolls_back():
    async def main():
        p, sp, clock = await active()
        sp.acquire("a", [FB(0, 9)])
        p.pause_writes()
        task = asyncio.ensure_future(sp.acknowledge("a", [Ack(0, 9, (ACCEPT,))]))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert sp.record_state(0) == RecordView(RecordState.ACQUIRED, 1, "a")
        p.resume_writes()
        check(sp)

    run(main())


def test_release_acquired_records_writes_and_rolls_back_on_failure():
    async def main():
        p, sp, clock = await active()
        sp.acquire("a", [FB(0, 4)])
        sp.acquire("b", [FB(5, 9)])
        p.fail_next_writes(1)
        with pytest.raises(ShareError):
            await sp.release_acquired_records("a")
        assert sp.record_state(0) == RecordView(RecordState.ACQUIRED, 1, "a")
        await sp.release_acquired_records("a")
        assert sp.record_state(0) == RecordView(RecordState.AVAILABLE, 1, "")
        assert durable(p).state_batches == [SB(0, 4, 0, 1)]
        await sp.release_acquired_records("nobody")  # nothing held: nothing written
        assert len(p.writes) == 2  # the failed one and the retry

    run(main())


def test_stale_leader_write_is_fenced_and_rolled_back():
    async def main():
        p, sp, clock = await active()
        sp.acquire("a", [FB(0, 9)])
        newer = make(p, clock, leader_epoch=1)
        await newer.initialize()  # the read persists leader epoch 1
        with pytest.raises(ShareError) as info:
            await sp.acknowledge("a", [Ack(0, 9, (ACCEPT,))])
        assert info.value.error == Errors.NOT_LEADER_OR_FOLLOWER
        assert sp.status == SharePartitionStatus.FENCED
        assert durable(p).start_offset == 0
        with pytest.raises(ShareError) as info:
            sp.acquire("a", [FB(10, 19)])
        assert info.value.error == Errors.NOT_LEADER_OR_FOLLOWER

    run(main())


def test_expiry_write_failure_is_counted_not_undone():
    async def main():
        p, sp, clock = await active()
        sp.acquire("a", [FB(0, 9)])
        clock.advance(LOCK_MS)
        p.fail_next_writes(1)
        assert await sp.expire_locks() == 10
        assert sp.expiry_write_failures == 1
        assert sp.record_state(0) == RecordView(RecordState.AVAILABLE, 1, "")
        assert sp.unwritten_expiry_runs == [SB(0, 9, 0, 1)]
        check(sp)

    run(main())


LIMIT2 = ShareGroupConfig(record_lock_duration_ms=LOCK_MS, delivery_count_limit=2)


async def archived_at_the_limit_by_a_failed_expiry(p, sp, clock):
    """0-9 delivered once; 5-9 released and delivered again to b, whose lock expires at the delivery
    limit (ARCHIVED, count 2) while the expiry write fails; a still holds 0-4 (renewed)."""
    assert sp.acquire("a", [FB(0, 9)]) == [Acq(0, 9, 1)]
    await sp.acknowledge("a", [Ack(5, 9, (RELEASE,))])
    clock.advance(10_000)
    assert sp.acquire("b", [FB(5, 9)]) == [Acq(5, 9, 2)]
    clock.advance(15_000)
    await sp.acknowledge("a", [Ack(0, 4, (RENEW,))])  # a's lock now ends at 55 s, b's at 40 s
    clock.advance(15_000)
    p.fail_next_writes(1)
    assert await sp.expire_locks() == 5
    assert sp.record_state(5) == RecordView(RecordState.ARCHIVED, 2, "")
    assert durable(p).state_batches == [SB(5, 9, 0, 1)]  # the failed write left the old state durable
    assert sp.unwritten_expiry_runs == [SB(5, 9, 4, 2)]


def test_failed_expiry_write_is_carried_by_the_next_acknowledgement():
    async def main():
        p, sp, clock = await active(config=LIMIT2)
        await archived_at_the_limit_by_a_failed_expiry(p, sp, clock)
        await sp.acknowledge("a", [Ack(1, 4, (ACCEPT,))])
        assert p.writes[-1].state_batches == [SB(1, 4, 2, 1), SB(5, 9, 4, 2)]
        assert durable(p) == PartitionState(0, 0, [SB(1, 4, 2, 1), SB(5, 9, 4, 2)])
        assert sp.unwritten_expiry_runs == []
        check(sp)

    run(main())


def test_failed_expiry_write_is_retried_by_the_next_timer_tick_until_it_succeeds():
    async def main():
        p, sp, clock = await active(config=LIMIT2)
        await archived_at_the_limit_by_a_failed_expiry(p, sp, clock)
        writes = len(p.writes)
        p.fail_next_writes(1)
        assert await sp.expire_locks() == 0  # nothing due: the kept runs are retried, and fail again
        assert (len(p.writes), sp.expiry_write_failures) == (writes + 1, 2)
        assert durable(p).state_batches == [SB(5, 9, 0, 1)]
        assert sp.unwritten_expiry_runs == [SB(5, 9, 4, 2)]
        assert await sp.expire_locks() == 0
        assert durable(p) == PartitionState(0, 0, [SB(5, 9, 4, 2)])
        assert sp.unwritten_expiry_runs == []
        assert await sp.expire_locks() == 0  # nothing left to retry: nothing written
        assert len(p.writes) == writes + 2
        check(sp)

    run(main())


def test_failed_expiry_write_at_the_start_offset_becomes_durable_by_the_next_start_offset():
    async def main():
        p, sp, clock = await active(config=LIMIT2)
        sp.acquire("a", [FB(0, 9)])
        await sp.acknowledge("a", [Ack(0, 9, (RELEASE,))])
        assert sp.acquire("b", [FB(0, 9)]) == [Acq(0, 9, 2)]
        clock.advance(LOCK_MS)
        p.fail_next_writes(1)
        assert await sp.expire_locks() == 10
        assert (sp.start_offset, durable(p)) == (10, PartitionState(0, 0, [SB(0, 9, 0, 1)]))
        assert await sp.expire_locks() == 0
        assert durable(p) == PartitionState(0, 10, [])  # archived at the limit: never redelivered
        assert sp.unwritten_expiry_runs == []
        check(sp)

    run(main())


def test_carried_expiry_runs_never_overwrite_a_newer_state():
    """A run of a failed expiry (AVAILABLE, count 1) is sent while it still is the durable form of the
    record (also once re-acquired); a newer release of the same offsets supersedes it."""

    async def main():
        p, sp, clock = await active()
        sp.acquire("a", [FB(0, 9)])
        clock.advance(LOCK_MS)
        p.fail_next_writes(1)
        assert await sp.expire_locks() == 10
        assert sp.acquire("b", [FB(0, 9)], max_records=5) == [Acq(0, 9, 2)]
        sp.acquire("c", [FB(10, 14)])
        p.pause_writes()
        task = asyncio.ensure_future(sp.acknowledge("c", [Ack(10, 14, (ACCEPT,))]))
        await asyncio.sleep(0)
        # Acquired 0-9 are persisted in their durable form: AVAILABLE with the count before this delivery.
        assert p.writes[-1].state_batches == [SB(0, 9, 0, 1), SB(10, 14, 2, 1)]
        p.resume_writes()
        await task
        assert durable(p) == PartitionState(0, 0, [SB(0, 9, 0, 1), SB(10, 14, 2, 1)])
        assert sp.unwritten_expiry_runs == []
        await sp.release_acquired_records("b")
        assert p.writes[-1].state_batches == [SB(0, 9, 0, 2)]
        assert durable(p) == PartitionState(0, 0, [SB(0, 9, 0, 2), SB(10, 14, 2, 1)])
        check(sp)

    run(main())


def test_a_cancelled_expiry_write_keeps_its_runs():
    async def main():
        p, sp, clock = await active()
        sp.acquire("a", [FB(0, 9)])
        clock.advance(LOCK_MS)
        p.pause_writes()
        task = asyncio.ensure_future(sp.expire_locks())
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        p.resume_writes()
        assert sp.unwritten_expiry_runs == [SB(0, 9, 0, 1)]
        assert await sp.expire_locks() == 0
        assert durable(p) == PartitionState(0, 0, [SB(0, 9, 0, 1)])
        assert sp.unwritten_expiry_runs == []
        check(sp)

    run(main())


def test_unwritten_expiry_runs_that_no_longer_match_are_not_sent_but_kept_until_covered():
    async def main():
        p, sp, clock = await active(config=LIMIT2)
        sp.acquire("a", [FB(0, 9)])
        clock.advance(LOCK_MS)
        p.fail_next_writes(1)
        assert await sp.expire_locks() == 10  # AVAILABLE/1 kept unwritten
        sp.acquire("b", [FB(0, 9)])
        p.pause_writes()
        p.fail_next_writes(1)
        task = asyncio.ensure_future(sp.acknowledge("b", [Ack(0, 9, (ACCEPT,))]))
        await asyncio.sleep(0)
        sp.acquire("c", [FB(10, 10)])
        other = asyncio.ensure_future(sp.acknowledge("c", [Ack(10, 10, (ACCEPT,))]))
        await asyncio.sleep(0)
        # 0-9 are ACKNOWLEDGED in transition: the old run does not match, so the second write leaves it out.
        assert p.writes[-1].state_batches == [SB(10, 10, 2, 1)]
        p.resume_writes()
        with pytest.raises(ShareError):
            await task  # rolled back: 0-9 are ACQUIRED by b again
        await other
        assert sp.unwritten_expiry_runs == [SB(0, 9, 0, 1)]  # the second write did not cover them
        await sp.acknowledge("b", [Ack(0, 9, (ACCEPT,))])
        assert durable(p) == PartitionState(0, 11, [])
        assert sp.unwritten_expiry_runs == []
        check(sp)

    run(main())


def test_acknowledge_errors_reach_the_caller_with_kafka_codes():
    async def main():
        p, sp, clock = await active()
        sp.acquire("a", [FB(0, 9)])
        for batches, code in [
            ([Ack(3, 2, (ACCEPT,))], Errors.INVALID_REQUEST),
            ([Ack(0, 20, (ACCEPT,))], Errors.INVALID_REQUEST),
            ([Ack(0, 1, (9,))], Errors.INVALID_REQUEST),
        ]:
            with pytest.raises(ShareError) as info:
                await sp.acknowledge("a", batches)
            assert info.value.error == code
        with pytest.raises(ShareError) as info:
            await sp.acknowledge("intruder", [Ack(0, 1, (ACCEPT,))])
        assert info.value.error == Errors.INVALID_RECORD_STATE
        assert p.writes == []

    run(main())


def test_acquire_validates_its_arguments():
    async def main():
        p, sp, clock = await active()
        for kwargs in (dict(max_records="5"), dict(batch_size=0), dict(fetch_offset=1.5)):
            with pytest.raises(ShareError) as info:
                sp.acquire("a", [FB(0, 9)], **kwargs)
            assert info.value.error == Errors.INVALID_REQUEST
        assert sp.end_offset == 0

    run(main())


def test_read_committed_partition_archives_aborted_records():
    async def main():
        from sharegroup import AbortedTransaction

        p, sp, clock = await active(config=ShareGroupConfig(isolation_level="read_committed"))
        got = sp.acquire("a", [FB(0, 4, 9, True), FB(5, 5, 9, True, True), FB(6, 8)],
                         aborted_transactions=[AbortedTransaction(9, 0)])
        assert got == [Acq(6, 8, 1)]
        assert sp.start_offset == 6

    run(main())


def test_log_start_offset_updates_are_validated():
    async def main():
        p, sp, clock = await active()
        sp.acquire("a", [FB(0, 9)])
        with pytest.raises(ShareError) as info:
            sp.update_log_start_offset(-5)
        assert info.value.error == Errors.INVALID_REQUEST
        sp.update_log_start_offset(3)
        assert sp.start_offset == 3

    run(main())
