"""LocalPersister: the coordinator over the durable SegmentLog. Every coordinator rule is also checked
over a SegmentLog by tests/test_persister_coordinator.py (run over both logs); here: restarts (close and
reopen gives equal state), pruning then reopening, failed fsyncs, group commit across share-partitions,
the directory lock and the Persister protocol."""

from __future__ import annotations

import asyncio
import os
import random
import uuid

import pytest
from prometheus_client import CollectorRegistry

from persister import (
    CorruptLogError,
    LocalPersister,
    LogLockedError,
    MemoryLog,
    SegmentLog,
    ShareCoordinator,
    read_log,
)
from persister.state_log import segment_file_name
from sharegroup.clock import ManualClock
from sharegroup.errors import Errors, ShareError
from sharegroup.persistence import Persister
from sharegroup.types import PartitionState, StateBatch, StateSummary

from .conftest import run
from .test_persister_coordinator import random_workload

G = "group-local"
T = uuid.UUID("00000000-0000-0000-0000-0000000010ca")
ACKNOWLEDGED, ARCHIVED = 2, 4


async def open_persister(path, **options) -> LocalPersister:
    options.setdefault("fsync", False)
    options.setdefault("segment_bytes", 1024)
    options.setdefault("clock", ManualClock(0))
    return await LocalPersister.open(path, **options)


async def write(p, partition, start_offset, *, state_epoch=0, leader_epoch=0, batches=None, dcc=-1):
    if batches is None:
        batches = [StateBatch(start_offset, start_offset + 2, ACKNOWLEDGED, 1)]
    await p.write_state(
        G,
        T,
        partition,
        state_epoch=state_epoch,
        leader_epoch=leader_epoch,
        start_offset=start_offset,
        state_batches=batches,
        delivery_complete_count=dcc,
    )


def test_local_persister_is_a_persister_over_a_segment_log(tmp_path):
    async def main():
        p = await open_persister(tmp_path / "state")
        assert isinstance(p, Persister)
        assert isinstance(p.log, SegmentLog) and p.log_dir == str(tmp_path / "state")
        await p.initialize_state(G, T, 0, state_epoch=1, start_offset=10)
        await write(p, 0, 12, state_epoch=1, dcc=2)
        state = PartitionState(1, 12, [StateBatch(12, 14, ACKNOWLEDGED, 1)])
        assert await p.read_state(G, T, 0, leader_epoch=3) == state
        assert await p.read_summary(G, T, 0, leader_epoch=0) == StateSummary(1, 3, 12, 2)
        assert p.state_of(G, T, 0) == state
        assert p.summary_of(G, T, 0) == StateSummary(1, 3, 12, 2)
        with pytest.raises(ShareError) as info:
            await write(p, 0, 20, state_epoch=1, leader_epoch=2)
        assert info.value.error is Errors.FENCED_LEADER_EPOCH
        await p.delete_state(G, T, 0)
        assert p.state_of(G, T, 0) is None and p.summary_of(G, T, 0) is None
        await p.close()
        assert p.closed
        with pytest.raises(ShareError) as info:
            await p.read_summary(G, T, 0, leader_epoch=0)
        assert info.value.error is Errors.COORDINATOR_NOT_AVAILABLE
        with pytest.raises(TypeError):
            LocalPersister(await ShareCoordinator.open(MemoryLog()))

    run(main())


def test_options_reach_the_log_and_bad_ones_are_refused(tmp_path):
    async def main():
        p = await LocalPersister.open(tmp_path / "a", fsync=False, segment_bytes=4096, max_pending_appends=8)
        assert (p.log.fsync, p.log.segment_bytes) == (False, 4096)
        await p.close()
        with pytest.raises(ValueError):
            await LocalPersister.open(tmp_path / "b", segment_bytes=100)
        with pytest.raises(ValueError):
            await LocalPersister.open(tmp_path / "c", snapshot_update_records_per_snapshot=501)
        await (await LocalPersister.open(tmp_path / "c")).close()  # the refused open released the directory
        with pytest.raises(TypeError):
            await LocalPersister.open(tmp_path / "d", no_such_option=1)

    run(main())


@pytest.mark.parametrize("seed", range(6))
def test_close_and_reopen_gives_equal_state(tmp_path, seed):
    async def main():
        rng = random.Random(seed)
        clock = ManualClock(0)
        n = rng.choice([0, 1, 3, 500])
        p = await open_persister(tmp_path, snapshot_update_records_per_snapshot=n, clock=clock,
                                 cold_checkpoint_interval_ms=250_000)
        await random_workload(p.coordinator, rng, 200, clock)
        dump, start, end = p.coordinator._dump(), p.log.start_offset, p.log.end_offset
        await p.close()
        p = await open_persister(tmp_path, snapshot_update_records_per_snapshot=n, clock=clock)
        assert p.coordinator._dump() == dump and (p.log.start_offset, p.log.end_offset) == (start, end)
        p.coordinator._check()
        # Pruned, then reopened: still equal, and reading the log from disk agrees.
        await p.prune()
        dump, start = p.coordinator._dump(), p.log.start_offset
        await p.close()
        assert [e.offset for e in read_log(tmp_path)] == list(range(start, end))
        p = await open_persister(tmp_path, snapshot_update_records_per_snapshot=n, clock=clock)
        assert p.coordinator._dump() == dump and p.log.start_offset == start
        for key in p.coordinator.keys():  # and it goes on working (from a clean slate, as the model does)
            await p.delete_state(*key)
        await random_workload(p.coordinator, rng, 50, clock)
        await p.close()

    run(main())


def test_prune_bounds_what_a_reopen_replays_by_live_keys_times_n(tmp_path):
    async def main():
        n, keys = 3, 10
        p = await open_persister(tmp_path, snapshot_update_records_per_snapshot=n)
        for partition in range(keys):
            await p.initialize_state(G, T, partition, state_epoch=0, start_offset=0)
        for round_ in range(40):
            await asyncio.gather(*(write(p, partition, round_) for partition in range(keys)))
        assert p.log.end_offset == keys * 41
        segments_before = len(p.log.segments)
        start = await p.prune()
        assert len(p.log) <= keys * (n + 1)  # records a reopen replays
        assert len(p.log.segments) < segments_before
        assert {os.path.basename(s.path) for s in p.log.segments} == {
            name for name in os.listdir(tmp_path) if name.endswith(".log")
        }
        dump = p.coordinator._dump()
        await p.close()
        p = await open_persister(tmp_path, snapshot_update_records_per_snapshot=n)
        assert p.log.start_offset == start and p.coordinator._dump() == dump
        assert len(list(p.log.read_all())) <= keys * (n + 1)
        await p.close()

    run(main())


def test_idle_keys_are_rewritten_so_a_prune_can_pass_them_and_the_restart_agrees(tmp_path):
    async def main():
        clock = ManualClock(0)
        p = await open_persister(tmp_path, snapshot_update_records_per_snapshot=2, clock=clock)
        await p.initialize_state(G, T, 0, state_epoch=0, start_offset=0)  # goes idle
        await p.initialize_state(G, T, 1, state_epoch=0, start_offset=0)
        for i in range(60):
            await write(p, 1, i)
        assert await p.prune() == 0  # the idle key pins offset 0
        clock.advance(300_000)
        assert await p.checkpoint_idle_keys() == 2
        assert await p.prune() == p.log.end_offset - 2
        dump = p.coordinator._dump()
        await p.close()
        p = await open_persister(tmp_path, snapshot_update_records_per_snapshot=2, clock=clock)
        assert p.coordinator._dump() == dump and len(p.log) == 2
        await p.close()

    run(main())


def test_writes_of_many_share_partitions_share_group_commits(tmp_path):
    async def main():
        p = await open_persister(tmp_path, fsync=True, segment_bytes=1 << 20)
        await asyncio.gather(*(p.initialize_state(G, T, i, state_epoch=0, start_offset=0) for i in range(64)))
        before_groups, before_fsyncs = p.log.group_commits, p.log.fsync_count

        async def partition(i):
            for k in range(5):
                await write(p, i, k)

        await asyncio.gather(*(partition(i) for i in range(64)))
        groups, fsyncs = p.log.group_commits - before_groups, p.log.fsync_count - before_fsyncs
        assert groups <= 64 * 5 // 10 and fsyncs <= groups  # far fewer fsyncs than writes
        assert all(p.state_of(G, T, i).start_offset == 4 for i in range(64))
        await p.close()

    run(main())


def test_a_torn_tail_left_by_a_crash_is_dropped_on_restart(tmp_path):
    async def main():
        p = await open_persister(tmp_path)
        await p.initialize_state(G, T, 0, state_epoch=0, start_offset=0)
        for i in range(30):
            await write(p, 0, i)
        dump, end = p.coordinator._dump(), p.log.end_offset
        last = p.log.segments[-1].path
        await p.close()
        with open(last, "ab") as f:  # half of a frame, as a crash in the middle of a write leaves it
            f.write(bytes.fromhex("0000004c1234abcd0100"))
        p = await open_persister(tmp_path)
        assert p.coordinator._dump() == dump and p.log.end_offset == end
        await write(p, 0, 30)
        await p.close()

    run(main())


def test_the_directory_is_locked_while_open_and_corruption_is_reported(tmp_path):
    async def main():
        p = await open_persister(tmp_path, segment_bytes=1024)
        with pytest.raises(LogLockedError):
            await open_persister(tmp_path)
        await p.initialize_state(G, T, 0, state_epoch=0, start_offset=0)
        for i in range(60):
            await write(p, 0, i)
        first = p.log.segments[0]
        await p.close()
        with open(first.path, "r+b") as f:
            f.seek(20)
            byte = f.read(1)
            f.seek(20)
            f.write(bytes([byte[0] ^ 1]))
        with pytest.raises(CorruptLogError) as info:
            await open_persister(tmp_path)
        assert info.value.path == first.path and info.value.offset == 0

    run(main())


def test_recovery_is_measured(tmp_path):
    registry = CollectorRegistry()

    async def main():
        p = await open_persister(tmp_path, metrics_registry=registry)
        await p.initialize_state(G, T, 0, state_epoch=0, start_offset=0)
        await p.close()
        p = await open_persister(tmp_path, metrics_registry=registry)
        await p.close()
        return p

    p = run(main())
    labels = {"log": str(tmp_path)}
    assert registry.get_sample_value("sharegroup_persister_recovery_seconds_count", {**labels, "stage": "scan"}) == 2
    assert registry.get_sample_value("sharegroup_persister_recovery_seconds_count", {**labels, "stage": "replay"}) == 2
    assert registry.get_sample_value("sharegroup_persister_recovered_records", labels) == 1
    assert p.replay_seconds >= 0
