"""InMemoryPersister: the Persister protocol over the one ShareCoordinator, and its test controls."""

from __future__ import annotations

import asyncio
import uuid

import pytest

import persister
from persister import InMemoryPersister, MemoryLog, ShareCheckpoint, ShareCoordinator, StateKey, WriteRequest
from sharegroup.clock import ManualClock
from sharegroup.errors import Errors, ShareError
from sharegroup.persistence import Persister
from sharegroup.types import PartitionState, StateBatch, StateSummary

G = "group-a"
T = uuid.UUID("00000000-0000-0000-0000-0000000000cc")
AVAILABLE, ACKNOWLEDGED, ARCHIVED = 0, 2, 4


def run(coro):
    return asyncio.run(coro)


async def write(p, *, start_offset=0, batches=(), state_epoch=0, leader_epoch=0, partition=0, dcc=-1):
    await p.write_state(
        G,
        T,
        partition,
        state_epoch=state_epoch,
        leader_epoch=leader_epoch,
        start_offset=start_offset,
        state_batches=list(batches),
        delivery_complete_count=dcc,
    )


async def settle():
    """Let every ready task run until it blocks (no sleeping: only yields to the loop)."""
    for _ in range(20):
        await asyncio.sleep(0)


def test_public_names():
    for name in (
        "combine ShareCheckpoint ShareDelta StateKey LogEntry ShareCoordinator MemoryLog InMemoryPersister "
        "PartitionResult WriteItem ReadItem InitializeItem DeleteItem RecordLog CorruptLogError WriteRequest"
    ).split():
        assert name in persister.__all__ and hasattr(persister, name), name
    error = persister.CorruptLogError("/tmp/x/00000.log", 17, "CRC mismatch")
    assert (error.path, error.offset) == ("/tmp/x/00000.log", 17) and "CRC" in str(error)
    assert isinstance(MemoryLog(), persister.RecordLog)


def test_is_a_persister_and_runs_the_coordinators_rules():
    async def main():
        p = InMemoryPersister(snapshot_update_records_per_snapshot=2, clock=ManualClock(0))
        assert isinstance(p, Persister) and isinstance(p.coordinator, ShareCoordinator)
        with pytest.raises(ShareError) as info:
            await p.read_state(G, T, 0, leader_epoch=0)
        assert info.value.error is Errors.INVALID_REQUEST
        assert await p.read_summary(G, T, 0, leader_epoch=0) == StateSummary(0, 0, -1, -1)
        await p.initialize_state(G, T, 0, state_epoch=1, start_offset=0)
        assert await p.read_state(G, T, 0, leader_epoch=2) == PartitionState(1, 0, [])
        await write(p, state_epoch=1, leader_epoch=2, start_offset=3, batches=[(3, 7, ACKNOWLEDGED, 1)], dcc=4)
        assert p.state_of(G, T, 0) == PartitionState(1, 3, [StateBatch(3, 7, ACKNOWLEDGED, 1)])
        assert p.summary_of(G, T, 0) == StateSummary(1, 2, 3, 4)
        with pytest.raises(ShareError) as info:
            await write(p, state_epoch=1, leader_epoch=1)
        assert info.value.error is Errors.FENCED_LEADER_EPOCH
        await p.delete_state(G, T, 0)
        assert p.state_of(G, T, 0) is None
        p.coordinator._check()
        await p.close()
        with pytest.raises(ShareError) as info:
            await p.read_summary(G, T, 0, leader_epoch=0)
        assert info.value.error is Errors.COORDINATOR_NOT_AVAILABLE

    run(main())


def test_seed_writes_a_checkpoint_outside_an_event_loop():
    p = InMemoryPersister(clock=ManualClock(9))
    batches = [(5, 12, ARCHIVED, 1), (12, 20, AVAILABLE, 2)]
    p.seed(G, T, 0, state_epoch=3, start_offset=10, state_batches=batches, leader_epoch=4)
    expected = [StateBatch(10, 11, ARCHIVED, 1), StateBatch(12, 20, AVAILABLE, 2)]
    assert p.state_of(G, T, 0) == PartitionState(3, 10, expected)
    entries = list(p.log.read_all())
    assert len(entries) == 1 and isinstance(entries[0].record, ShareCheckpoint)
    assert entries[0].record.leader_epoch == 4 and entries[0].record.create_timestamp_ms == 9
    p.seed(G, T, 0, state_epoch=3, start_offset=0, state_batches=[])
    assert p.coordinator.state(StateKey(G, T, 0)).checkpoint_epoch == 1
    assert p.writes == []
    with pytest.raises(ShareError):
        p.seed(G, T, 0, state_epoch=0, start_offset=0, state_batches=[(0, 1, 5, 1)])  # 5 is no record state

    async def main():
        with pytest.raises(ShareError) as info:
            await p.read_state(G, T, 0, leader_epoch=3)  # the seeded leader epoch 4 fences
        assert info.value.error is Errors.FENCED_LEADER_EPOCH
        assert (await p.read_state(G, T, 0, leader_epoch=4)).state_epoch == 3

    run(main())


def test_writes_records_every_request_in_order_even_failed_ones():
    async def main():
        p = InMemoryPersister()
        await p.initialize_state(G, T, 0, state_epoch=0, start_offset=0)
        await write(p, batches=[(0, 1, ARCHIVED, 1)], dcc=2)
        with pytest.raises(ShareError):
            await write(p, partition=5)  # uninitialized
        assert p.writes == [
            WriteRequest(G, T, 0, 0, 0, 0, [StateBatch(0, 1, ARCHIVED, 1)], 2),
            WriteRequest(G, T, 5, 0, 0, 0, [], -1),
        ]
        p.writes.clear()
        assert p.writes == []

    run(main())


def test_fail_next_writes_fails_at_the_append_and_leaves_state_unchanged():
    async def main():
        p = InMemoryPersister(snapshot_update_records_per_snapshot=1)
        await p.initialize_state(G, T, 0, state_epoch=0, start_offset=0)
        await write(p, batches=[(0, 4, AVAILABLE, 1)])
        before, size = p.state_of(G, T, 0), len(p.log)
        p.fail_next_writes(2, Errors.KAFKA_STORAGE_ERROR)
        for _ in range(2):
            with pytest.raises(ShareError) as info:
                await write(p, start_offset=2, batches=[(2, 9, ARCHIVED, 2)])
            assert info.value.error is Errors.KAFKA_STORAGE_ERROR
        assert p.state_of(G, T, 0) == before and len(p.log) == size
        assert await p.read_state(G, T, 0, leader_epoch=1) == before  # reads and their records unaffected
        await write(p, start_offset=2, leader_epoch=1, batches=[(2, 9, ARCHIVED, 2)])
        assert p.state_of(G, T, 0) == PartitionState(0, 2, [StateBatch(2, 9, ARCHIVED, 2)])
        assert len(p.writes) == 4
        p.coordinator._check()

    run(main())


def test_a_failing_write_that_is_also_invalid_reports_the_validation_error():
    async def main():
        p = InMemoryPersister()
        await p.initialize_state(G, T, 0, state_epoch=3, start_offset=0)
        p.fail_next_writes(1)
        with pytest.raises(ShareError) as info:
            await write(p, state_epoch=2)
        assert info.value.error is Errors.FENCED_STATE_EPOCH
        await write(p, state_epoch=3)  # the armed failure was used up by that write

    run(main())


def test_fail_next_reads_covers_read_state_and_read_summary():
    async def main():
        p = InMemoryPersister()
        await p.initialize_state(G, T, 0, state_epoch=0, start_offset=0)
        p.fail_next_reads(2, Errors.COORDINATOR_NOT_AVAILABLE)
        for coro in (p.read_state(G, T, 0, leader_epoch=7), p.read_summary(G, T, 0, leader_epoch=0)):
            with pytest.raises(ShareError) as info:
                await coro
            assert info.value.error is Errors.COORDINATOR_NOT_AVAILABLE
        assert p.summary_of(G, T, 0).leader_epoch == 0  # the failed read persisted nothing
        assert (await p.read_state(G, T, 0, leader_epoch=7)).start_offset == 0
        p.fail_next_reads(1)
        with pytest.raises(ShareError) as info:
            await p.read_state(G, T, 0, leader_epoch=7)
        assert info.value.error is Errors.UNKNOWN_SERVER_ERROR

    run(main())


def test_fail_next_initializes_and_deletes():
    async def main():
        p = InMemoryPersister()
        p.fail_next_initializes(1, Errors.COORDINATOR_LOAD_IN_PROGRESS)
        with pytest.raises(ShareError) as info:
            await p.initialize_state(G, T, 0, state_epoch=0, start_offset=0)
        assert info.value.error is Errors.COORDINATOR_LOAD_IN_PROGRESS and p.state_of(G, T, 0) is None
        await p.initialize_state(G, T, 0, state_epoch=0, start_offset=0)
        p.fail_next_deletes(1)
        with pytest.raises(ShareError):
            await p.delete_state(G, T, 0)
        assert p.state_of(G, T, 0) is not None
        with pytest.raises(ValueError):
            p.fail_next_writes(-1)

    run(main())


def test_paused_writes_are_recorded_and_pending_until_resumed_in_order():
    async def main():
        p = InMemoryPersister()
        await p.initialize_state(G, T, 0, state_epoch=0, start_offset=0)
        p.pause_writes()
        first = asyncio.ensure_future(write(p, start_offset=2, batches=[(2, 5, ACKNOWLEDGED, 1)]))
        second = asyncio.ensure_future(write(p, start_offset=4, batches=[(4, 8, AVAILABLE, 1)]))
        await settle()
        assert [w.start_offset for w in p.writes] == [2, 4]
        assert not first.done() and not second.done()
        assert p.state_of(G, T, 0) == PartitionState(0, 0, [])  # only completed writes show
        assert (await p.read_state(G, T, 0, leader_epoch=0)).start_offset == 0  # reads are not paused
        p.resume_writes()
        await asyncio.gather(first, second)
        assert p.state_of(G, T, 0) == PartitionState(
            0, 4, [StateBatch(4, 5, ACKNOWLEDGED, 1), StateBatch(6, 8, AVAILABLE, 1)]
        )
        await write(p, start_offset=9)  # not paused any more
        assert p.state_of(G, T, 0).start_offset == 9

    run(main())


def test_a_paused_write_can_be_cancelled_and_failures_apply_after_resume():
    async def main():
        p = InMemoryPersister()
        await p.initialize_state(G, T, 0, state_epoch=0, start_offset=0)
        p.pause_writes()
        p.fail_next_writes(1)
        doomed = asyncio.ensure_future(write(p, start_offset=3))
        cancelled = asyncio.ensure_future(write(p, start_offset=5))
        await settle()
        cancelled.cancel()
        await settle()
        p.resume_writes()
        with pytest.raises(ShareError):
            await doomed
        assert cancelled.cancelled()
        assert p.state_of(G, T, 0).start_offset == 0 and len(p.writes) == 2

    run(main())


def test_close_resumes_paused_writes_which_then_fail_cleanly():
    async def main():
        p = InMemoryPersister()
        await p.initialize_state(G, T, 0, state_epoch=0, start_offset=0)
        p.pause_writes()
        pending = asyncio.ensure_future(write(p, start_offset=3))
        await settle()
        await p.close()
        with pytest.raises(ShareError) as info:
            await pending
        assert info.value.error is Errors.COORDINATOR_NOT_AVAILABLE

    run(main())


def test_a_fresh_coordinator_over_the_same_log_sees_the_same_state():
    async def main():
        clock = ManualClock(0)
        p = InMemoryPersister(snapshot_update_records_per_snapshot=3, clock=clock)
        p.seed(G, T, 1, state_epoch=1, start_offset=0, state_batches=[(0, 9, AVAILABLE, 1)])
        await p.initialize_state(G, T, 0, state_epoch=1, start_offset=0)
        for i in range(10):
            await write(p, state_epoch=1, start_offset=i, batches=[(i, i + 3, ACKNOWLEDGED if i % 2 else ARCHIVED, 1)])
        clock.advance(300_000)
        assert await p.coordinator.checkpoint_idle_keys() == 2
        await p.coordinator.prune()
        fresh = ShareCoordinator(p.log, snapshot_update_records_per_snapshot=3)
        assert fresh._dump() == p.coordinator._dump()

    run(main())


def test_persister_imports_only_layer_zero_of_sharegroup():
    import subprocess
    import sys

    code = "import sys, persister; print(' '.join(sorted(m for m in sys.modules if m.startswith('sharegroup'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    layer_zero = {"sharegroup", "sharegroup.types", "sharegroup.errors", "sharegroup.clock", "sharegroup.persistence",
                  "sharegroup.config", "sharegroup._twins"}
    assert set(out) <= layer_zero, set(out) - layer_zero
