"""Storage faults of the share-state log (SPEC §14): SegmentLog, the share coordinator over it and the
LocalPersister, as Kafka handles a failed log dir.

A write, fsync or segment creation error is logged at ERROR naming the file and the error; the group's
appends fail (nothing not durable is acknowledged) and the log goes offline, refusing every later
append and prune until it is reopened. A refused record is never read back: it is cut before the
appends are answered, or, when the cut fails, a `failed-write` file makes the next open cut it; only
when that file cannot be written either may a restart find it (the documented limit, tested too).
The share coordinator answers a write the log refused NOT_COORDINATOR (Kafka's answer to
KAFKA_STORAGE_ERROR from its state topic); the share-partition leader reports COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import uuid

import pytest

import persister.state_log_files as state_log_files
from persister import LocalPersister, LogWriteError, SegmentLog, ShareCheckpoint, ShareDelta, StateKey, read_log
from persister.state_log import segment_file_name
from persister.state_log_files import FAILED_WRITE_FILE
from sharegroup import AcknowledgementBatch as Ack
from sharegroup import FetchedBatch as FB
from sharegroup import RecordState, ShareGroupConfig
from sharegroup.clock import ManualClock
from sharegroup.errors import Errors, ShareError
from sharegroup.manager.share_partition import SharePartition
from sharegroup.types import PartitionState, StateBatch

from .conftest import run

TOPIC = uuid.UUID("00000000-0000-0000-0000-00000000fa17")
G = "group-faults"


def enospc() -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def eio() -> OSError:
    return OSError(errno.EIO, os.strerror(errno.EIO))


def entry(i: int):
    key = StateKey(G, TOPIC, i % 7)
    if i % 5 == 0:
        return key, ShareCheckpoint(i, 0, 0, i, 0, 1_000, 1_000, [StateBatch(i, i + 4, 2, 1)])
    return key, ShareDelta(0, 0, i, i, [StateBatch(i, i + 3, 2, 1)])


async def fill(path, n: int, **options) -> SegmentLog:
    options.setdefault("fsync", True)
    log = await SegmentLog.open(path, **options)
    for i in range(n):
        assert await log.append([entry(i)]) == [i]
    return log


def offsets_of(path) -> list[int]:
    return [e.offset for e in read_log(path)]


def errors_logged(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]


def half_write_then_enospc(monkeypatch) -> None:
    real = state_log_files.write_all

    def half(fd, data):
        real(fd, bytes(data)[: len(data) // 2])
        raise enospc()

    monkeypatch.setattr(state_log_files, "write_all", half)


def fsync_failing(monkeypatch, times: int | None) -> list[int]:
    """Make the data fsync fail `times` times (None: always); returns the list of failed descriptors."""
    real = state_log_files.fsync_file
    failed: list[int] = []

    def fsync(fd):
        if times is None or len(failed) < times:
            failed.append(fd)
            raise eio()
        real(fd)

    monkeypatch.setattr(state_log_files, "fsync_file", fsync)
    return failed


def no_truncate(monkeypatch) -> None:
    def ftruncate(fd, length):
        raise eio()

    monkeypatch.setattr(os, "ftruncate", ftruncate)


# -- SegmentLog ------------------------------------------------------------------------------------


FAULTS = {"write ENOSPC": "ENOSPC (No space left on device)", "fsync EIO": "EIO (Input/output error)"}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_fault_fails_the_group_cuts_it_back_and_takes_the_log_offline(tmp_path, monkeypatch, caplog, fault):
    async def main():
        log = await fill(tmp_path, 5)
        size = log.size_bytes()
        caplog.set_level(logging.ERROR, logger="persister.log")
        if fault.startswith("write"):
            half_write_then_enospc(monkeypatch)
        else:
            fsync_failing(monkeypatch, times=1)  # the group's fsync; the cut-back's works
        results = await asyncio.gather(*(log.append([entry(i)]) for i in range(5, 25)), return_exceptions=True)
        monkeypatch.undo()
        assert all(isinstance(r, LogWriteError) for r in results), results
        code = errno.ENOSPC if fault.startswith("write") else errno.EIO
        assert all(isinstance(r.__cause__, OSError) and r.__cause__.errno == code for r in results)
        assert FAULTS[fault] in str(results[0])

        segment = str(tmp_path / segment_file_name(0))
        logged = errors_logged(caplog)
        assert any(segment in m and FAULTS[fault] in m and "offline" in m for m in logged), logged
        # Nothing of the group stays, on disk or in the log.
        assert log.size_bytes() == size == os.path.getsize(segment)
        assert log.end_offset == 5 and [e.offset for e in log.read_all()] == list(range(5))
        log._check()
        # Offline until reopened, however healthy the disk is now.
        with pytest.raises(LogWriteError, match="offline"):
            await log.append([entry(5)])
        with pytest.raises(LogWriteError, match="offline"):
            log.enqueue([entry(5)], [b"x"], lambda *a: None)
        with pytest.raises(LogWriteError, match="offline"):
            await log.delete_below(3)
        await log.close()

        log = await SegmentLog.open(tmp_path, fsync=True)
        assert log.end_offset == 5 and await log.append([entry(5)]) == [5]
        await log.close()
        assert offsets_of(tmp_path) == list(range(6))

    run(main())


def test_a_group_that_fails_after_rolling_removes_its_new_segment(tmp_path, monkeypatch, caplog):
    async def main():
        log = await fill(tmp_path, 15, segment_bytes=1024, fsync=False)
        segments = log.segments
        real = state_log_files.write_all
        calls = []

        def fail_second_write(fd, data):
            calls.append(len(data))
            if len(calls) == 2:
                raise enospc()
            real(fd, data)

        monkeypatch.setattr(state_log_files, "write_all", fail_second_write)
        caplog.set_level(logging.ERROR, logger="persister.log")
        big = [(StateKey(G, TOPIC, i), ShareCheckpoint(i, 0, 0, i, 0, 1, 1, [StateBatch(10 * b, 10 * b + 4, 2, 1)
                                                                              for b in range(20)])) for i in range(10)]
        results = await asyncio.gather(*(log.append([e]) for e in big), return_exceptions=True)
        monkeypatch.undo()
        assert len(calls) == 2 and all(isinstance(r, LogWriteError) for r in results)
        assert log.segments == segments
        assert sorted(n for n in os.listdir(tmp_path) if n.endswith(".log")) == [
            os.path.basename(s.path) for s in segments]
        assert os.path.getsize(segments[-1].path) == segments[-1].size_bytes
        first, = errors_logged(caplog)[:1]
        named = first.split(" ")[4]  # "state log: write of <the new segment> failed: ENOSPC ..."
        assert first.startswith("state log: write of") and "ENOSPC" in first
        assert os.path.dirname(named) == str(tmp_path) and named.endswith(".log") and not os.path.exists(named)
        await log.close()
        log = await SegmentLog.open(tmp_path, segment_bytes=1024, fsync=False)
        assert log.segments == segments and await log.append([entry(15)]) == [15]
        await log.close()

    run(main())


def test_records_whose_cut_back_fails_are_cut_by_the_next_open(tmp_path, monkeypatch, caplog):
    """The writes succeeded and the fsync failed: the whole frames are on disk. The truncation fails
    too, so a failed-write file marks the acknowledged end; neither the running log, nor read_log, nor
    the next open takes the refused records (without the file, recovery would find valid frames)."""

    async def main():
        log = await fill(tmp_path, 5)
        size = log.size_bytes()
        caplog.set_level(logging.WARNING, logger="persister.log")
        fsync_failing(monkeypatch, times=1)
        no_truncate(monkeypatch)
        results = await asyncio.gather(*(log.append([entry(i)]) for i in range(5, 25)), return_exceptions=True)
        monkeypatch.undo()
        assert all(isinstance(r, LogWriteError) for r in results)
        segment = str(tmp_path / segment_file_name(0))
        assert os.path.getsize(segment) > size  # the refused frames, whole
        assert os.path.exists(tmp_path / FAILED_WRITE_FILE)
        logged = errors_logged(caplog)
        assert any(m.startswith(f"state log: fsync of {segment} failed: EIO") for m in logged), logged
        assert any(m.startswith(f"state log: truncate of {segment} failed: EIO") for m in logged), logged
        assert any(FAILED_WRITE_FILE in m and "next open cuts" in m for m in logged), logged
        assert log.end_offset == 5 and [e.offset for e in log.read_all()] == list(range(5))
        assert offsets_of(tmp_path) == list(range(5))  # the audit's read honours the mark too
        await log.close()

        log = await SegmentLog.open(tmp_path, fsync=True)
        assert log.end_offset == 5 and os.path.getsize(segment) == size
        assert not os.path.exists(tmp_path / FAILED_WRITE_FILE)
        assert any("refused before the restart" in r.getMessage() for r in caplog.records
                   if r.levelno == logging.WARNING)
        assert await log.append([entry(5)]) == [5]
        await log.close()
        assert offsets_of(tmp_path) == list(range(6))

    run(main())


def test_when_the_disk_refuses_the_cut_and_the_failed_write_file_a_restart_may_keep_the_records(
        tmp_path, monkeypatch, caplog):
    """The documented limit: the fsync fails for good and the truncation fails, so nothing can record
    that the records were refused. They are never read while the log runs; an ERROR says what a
    restart may do; recovery then finds whole valid frames and keeps them, as after a crash."""

    async def main():
        log = await fill(tmp_path, 5)
        caplog.set_level(logging.ERROR, logger="persister.log")
        fsync_failing(monkeypatch, times=None)
        no_truncate(monkeypatch)
        with pytest.raises(LogWriteError):
            await log.append([entry(5)])
        monkeypatch.undo()
        assert any("could not be cut back nor marked" in m and "may find them" in m for m in errors_logged(caplog))
        assert [e.offset for e in log.read_all()] == list(range(5))
        await log.close()
        log = await SegmentLog.open(tmp_path, fsync=True)
        assert log.end_offset == 6
        await log.close()

    run(main())


def test_a_failed_prune_takes_the_log_offline_and_moves_nothing(tmp_path, monkeypatch, caplog):
    async def main():
        log = await fill(tmp_path, 80, segment_bytes=1024)
        segments = log.segments
        caplog.set_level(logging.ERROR, logger="persister.log")
        fsync_failing(monkeypatch, times=1)  # the start offset file's fsync
        with pytest.raises(LogWriteError, match="EIO"):
            await log.delete_below(segments[2].base_offset)
        monkeypatch.undo()
        assert log.start_offset == 0 and log.segments == segments
        tmp = str(tmp_path / "log-start-offset.tmp")
        assert any(m.startswith(f"state log: write of {tmp} failed: EIO") for m in errors_logged(caplog))
        with pytest.raises(LogWriteError, match="offline"):
            await log.append([entry(80)])
        await log.close()
        log = await SegmentLog.open(tmp_path, segment_bytes=1024)
        assert (log.start_offset, log.end_offset) == (0, 80)
        await log.close()

    run(main())


def test_a_failed_delete_of_pruned_segments_takes_the_log_offline(tmp_path, monkeypatch, caplog):
    async def main():
        log = await fill(tmp_path, 80, segment_bytes=1024)
        segments = log.segments

        def fail_to_delete(log_dir, paths, fsync):
            raise OSError(errno.EACCES, os.strerror(errno.EACCES), paths[0])

        monkeypatch.setattr(state_log_files, "delete_files", fail_to_delete)
        caplog.set_level(logging.ERROR, logger="persister.log")
        assert await log.delete_below(segments[2].base_offset) == segments[2].base_offset  # the start is durable
        monkeypatch.undo()
        assert any(m.startswith(f"state log: delete of {segments[0].path} failed: EACCES") for m in errors_logged(caplog))
        with pytest.raises(LogWriteError, match="offline"):
            await log.append([entry(80)])
        await log.close()

    run(main())


# -- the share coordinator and the share-partition leader over it ---------------------------------


async def open_persister(path, **options) -> LocalPersister:
    options.setdefault("fsync", True)
    options.setdefault("clock", ManualClock(0))
    return await LocalPersister.open(path, **options)


async def write(p, partition: int, start_offset: int, batches=None) -> None:
    batches = batches if batches is not None else [StateBatch(start_offset, start_offset + 2, 2, 1)]
    await p.write_state(G, TOPIC, partition, state_epoch=0, leader_epoch=0, start_offset=start_offset,
                        state_batches=batches, delivery_complete_count=-1)


def test_a_persister_write_the_log_refuses_answers_not_coordinator_and_changes_nothing(tmp_path, monkeypatch, caplog):
    async def main():
        p = await open_persister(tmp_path, snapshot_update_records_per_snapshot=1)
        await p.initialize_state(G, TOPIC, 0, state_epoch=0, start_offset=0)
        await p.initialize_state(G, TOPIC, 1, state_epoch=0, start_offset=0)
        await write(p, 0, 0)
        dump, end, size = p.coordinator._dump(), p.log.end_offset, p.log.size_bytes()
        caplog.set_level(logging.ERROR, logger="persister.log")
        fsync_failing(monkeypatch, times=1)
        results = await asyncio.gather(
            write(p, 0, 3, batches=[StateBatch(3, 9, 4, 2)]),
            write(p, 1, 5),
            p.read_state(G, TOPIC, 1, leader_epoch=4),  # a higher leader epoch is written too
            p.delete_state(G, TOPIC, 1),
            return_exceptions=True,
        )
        monkeypatch.undo()
        assert all(isinstance(r, ShareError) and r.error is Errors.NOT_COORDINATOR for r in results), results
        assert "KAFKA_STORAGE_ERROR" in results[0].message and "EIO (Input/output error)" in results[0].message
        assert any(str(tmp_path / segment_file_name(0)) in m for m in errors_logged(caplog))
        assert p.coordinator._dump() == dump and (p.log.end_offset, p.log.size_bytes()) == (end, size)
        p.coordinator._check()
        assert p.coordinator._pipeline.held == {} and p.coordinator._pipeline.queued == 0
        # Refused until a restart; what was acknowledged stays readable.
        with pytest.raises(ShareError) as info:
            await write(p, 0, 3)
        assert info.value.error is Errors.NOT_COORDINATOR and "offline" in info.value.message
        assert await p.read_state(G, TOPIC, 0, leader_epoch=0) == PartitionState(0, 0, [StateBatch(0, 2, 2, 1)])
        await p.close()

        p = await open_persister(tmp_path, snapshot_update_records_per_snapshot=1)
        assert p.coordinator._dump() == dump
        await write(p, 0, 3, batches=[StateBatch(3, 9, 4, 2)])  # the checkpoint that was due is still due
        assert [type(e.record).__name__ for e in p.log.read_all()] == [
            "ShareCheckpoint", "ShareCheckpoint", "ShareDelta", "ShareCheckpoint"]
        await p.close()

    run(main())


def test_the_share_partition_leader_reports_coordinator_not_available_and_rolls_back(tmp_path, monkeypatch):
    async def main():
        clock = ManualClock(0)
        p = await open_persister(tmp_path, clock=clock)
        await p.initialize_state(G, TOPIC, 0, state_epoch=0, start_offset=0)
        sp = SharePartition(G, TOPIC, 0, persister=p, clock=clock,
                            config=ShareGroupConfig(record_lock_duration_ms=30_000))
        await sp.initialize()
        sp.acquire("member", [FB(0, 9)])
        fsync_failing(monkeypatch, times=1)
        with pytest.raises(ShareError) as info:
            await sp.acknowledge("member", [Ack(0, 9, (1,))])
        monkeypatch.undo()
        assert info.value.error is Errors.COORDINATOR_NOT_AVAILABLE
        assert sp.start_offset == 0 and sp.record_state(3).state is RecordState.ACQUIRED
        sp._check()
        await p.close()

    run(main())
