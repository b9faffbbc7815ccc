"""The coordinator's write path over logs with `enqueue` (MemoryLog, SegmentLog): no task per write,
a per-key hold passed on by the log's callback, fast validation branches. What must hold:

- a cancelled caller never leaves its key free while its possibly-durable record is unreplayed: the
  next operation on the key validates against a state that includes it;
- a caller cancelled before its record was queued (waiting for its key, or for room in the log's
  queue) writes nothing and passes its key on;
- close() waits for every queued record, whether or not its caller still waits;
- the fast validation branches accept, normalise and refuse exactly as the validation functions do;
- a coordinator opened on a directory replays it in a worker thread, and a cancelled open releases it.
"""

from __future__ import annotations

import asyncio
import enum
import os
import threading
import uuid

import pytest

import persister.share_coordinator as coordinator_module
import persister.state_log_files as state_log_files
from persister import MemoryLog, ShareCheckpoint, ShareCoordinator, ShareDelta, StateKey
from persister.request_validation import (
    check_delivery_complete_count,
    check_epoch,
    check_key,
    check_start_offset,
    check_state_batches,
)
from sharegroup.clock import ManualClock
from sharegroup.errors import Errors, ShareError
from sharegroup.types import StateBatch

G = "group-w"
T = uuid.UUID("00000000-0000-0000-0000-00000000beef")
KEY = StateKey(G, T, 0)
AVAILABLE, ACKNOWLEDGED, ARCHIVED = 0, 2, 4


def run(coro):
    return asyncio.run(coro)


class FsyncGate:
    """Holds every fsync of segment logs on a threading.Event while `closed`; counts the fsyncs waiting."""

    def __init__(self, monkeypatch) -> None:
        self.event = threading.Event()
        self.event.set()
        self.waiting = 0
        real = state_log_files.fsync_file

        def gated(fd):
            self.waiting += 1
            try:
                assert self.event.wait(30), "test gate never opened"
            finally:
                self.waiting -= 1
            real(fd)

        monkeypatch.setattr(state_log_files, "fsync_file", gated)

    def close(self) -> None:
        self.event.clear()

    def open(self) -> None:
        self.event.set()

    async def until_waiting(self, n: int = 1) -> None:
        for _ in range(3000):
            if self.waiting >= n:
                return
            await asyncio.sleep(0.001)
        raise AssertionError("no fsync reached the gate")


async def open_coordinator(tmp_path, **options) -> ShareCoordinator:
    options.setdefault("fsync", True)
    return await ShareCoordinator.open(
        tmp_path / "log", snapshot_update_records_per_snapshot=500, clock=ManualClock(0), **options
    )


def write(coord, start_offset, batches=(), partition=0):
    return coord.write_state(
        G, T, partition, state_epoch=0, leader_epoch=0, start_offset=start_offset, state_batches=list(batches)
    )


def kinds(coord) -> str:
    return "".join("X" if e.record is None else "C" if isinstance(e.record, ShareCheckpoint) else "D"
                   for e in coord.log.read_all())


def assert_quiet(coord) -> None:
    """Nothing held, queued or in flight; the invariants hold; a fresh replay agrees."""
    coord._check()
    assert coord._pipeline.held == {} and coord._pipeline.queued == 0 and coord._pipeline.append_floors == {}
    assert ShareCoordinator(coord.log)._dump() == coord._dump()


async def settle(n: int = 20) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def test_the_fast_path_serves_memory_and_segment_logs_but_not_an_overridden_append(tmp_path):
    class Delayed(MemoryLog):
        async def append(self, entries):
            await asyncio.sleep(0)
            return await super().append(entries)

    async def main():
        segment = await open_coordinator(tmp_path, fsync=False)
        assert segment._pipeline.enqueue is not None and ShareCoordinator(MemoryLog())._pipeline.enqueue is not None
        assert ShareCoordinator(Delayed())._pipeline.enqueue is None
        await segment.close()

    run(main())


def test_a_write_cancelled_while_its_record_is_being_fsynced_is_replayed_before_the_next_one_validates(
    tmp_path, monkeypatch
):
    gate = FsyncGate(monkeypatch)

    async def main():
        coord = await open_coordinator(tmp_path)
        await coord.initialize_state(G, T, 0, state_epoch=0, start_offset=0)
        gate.close()
        first = asyncio.ensure_future(write(coord, 4, [StateBatch(4, 8, ARCHIVED, 1)]))
        await gate.until_waiting()
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first  # the caller lets go at once ...
        assert KEY in coord._pipeline.held and coord._pipeline.queued == 1  # ... but the key stays held by its record
        second = asyncio.ensure_future(write(coord, 6))
        await settle()
        assert not second.done() and coord.state(KEY).start_offset == 0
        gate.open()
        await second
        # The second write was validated against a state with the first one in it.
        assert coord.state(KEY).start_offset == 6
        assert coord.state(KEY).state_batches == (StateBatch(6, 8, ARCHIVED, 1),)
        assert kinds(coord) == "CDD"
        assert_quiet(coord)
        await coord.close()

    run(main())


def test_a_write_cancelled_while_waiting_for_its_key_writes_nothing_and_passes_the_key_on(tmp_path, monkeypatch):
    gate = FsyncGate(monkeypatch)

    async def main():
        coord = await open_coordinator(tmp_path)
        await coord.initialize_state(G, T, 0, state_epoch=0, start_offset=0)
        gate.close()
        first = asyncio.ensure_future(write(coord, 1))
        await gate.until_waiting()
        doomed = asyncio.ensure_future(write(coord, 2))
        last = asyncio.ensure_future(write(coord, 3))
        await settle()
        assert len(coord._pipeline.held[KEY]) == 2
        doomed.cancel()
        await settle()
        gate.open()
        await first
        await last
        assert doomed.cancelled()
        assert [e.record.start_offset for e in coord.log.read_all()] == [0, 1, 3]
        assert_quiet(coord)
        await coord.close()

    run(main())


def test_a_waiter_cancelled_just_as_the_key_is_handed_to_it_passes_it_on():
    async def main():
        coord = ShareCoordinator(MemoryLog(), clock=ManualClock(0))
        await coord.initialize_state(G, T, 0, state_epoch=0, start_offset=0)
        await coord._pipeline.hold(KEY)
        handed = asyncio.ensure_future(write(coord, 1))
        after = asyncio.ensure_future(write(coord, 2))
        await settle()
        coord._pipeline.release(KEY)  # the hold goes to `handed`, which has not run yet ...
        handed.cancel()  # ... and is cancelled before it does
        await after
        assert handed.cancelled()
        assert coord.state(KEY).start_offset == 2 and kinds(coord) == "CD"
        assert_quiet(coord)

    run(main())


def test_a_write_cancelled_while_the_log_queue_is_full_writes_nothing(tmp_path, monkeypatch):
    gate = FsyncGate(monkeypatch)

    async def main():
        coord = await open_coordinator(tmp_path, max_pending_appends=1)
        for partition in (0, 1):
            await coord.initialize_state(G, T, partition, state_epoch=0, start_offset=0)
        gate.close()
        first = asyncio.ensure_future(write(coord, 1))
        await gate.until_waiting()
        blocked = asyncio.ensure_future(write(coord, 5, partition=1))
        await settle()
        assert not blocked.done() and coord.log._space_waiters
        blocked.cancel()
        await settle()
        assert blocked.cancelled() and StateKey(G, T, 1) not in coord._pipeline.held
        gate.open()
        await first
        await write(coord, 7, partition=1)  # the key was released and the room passed on
        assert [e.record.start_offset for e in coord.log.read_all()] == [0, 0, 1, 7]
        assert_quiet(coord)
        await coord.close()

    run(main())


def test_close_waits_for_records_whose_callers_were_cancelled(tmp_path, monkeypatch):
    gate = FsyncGate(monkeypatch)

    async def main():
        coord = await open_coordinator(tmp_path)
        await coord.initialize_state(G, T, 0, state_epoch=0, start_offset=0)
        gate.close()
        doomed = asyncio.ensure_future(write(coord, 4))
        await gate.until_waiting()
        doomed.cancel()
        closing = asyncio.ensure_future(coord.close())
        await settle()
        assert not closing.done()
        with pytest.raises(ShareError) as info:
            await write(coord, 5)
        assert info.value.error is Errors.COORDINATOR_NOT_AVAILABLE
        gate.open()
        await closing
        reopened = await open_coordinator(tmp_path)
        assert reopened.state(KEY).start_offset == 4  # it was durable: the replay has it
        await reopened.close()

    run(main())


def test_a_failed_group_fails_every_write_in_it_and_releases_the_keys(tmp_path, monkeypatch):
    async def main():
        coord = await open_coordinator(tmp_path)
        for partition in range(3):
            await coord.initialize_state(G, T, partition, state_epoch=0, start_offset=0)
        before = coord._dump()

        real, failures = state_log_files.fsync_file, [OSError(5, "I/O error")]

        def fail_once(fd):  # the group's fsync fails; the undo's succeeds
            if failures:
                raise failures.pop()
            real(fd)

        monkeypatch.setattr(state_log_files, "fsync_file", fail_once)
        results = await asyncio.gather(*(write(coord, 3, partition=p) for p in range(3)), return_exceptions=True)
        assert all(isinstance(r, ShareError) and r.error is Errors.NOT_COORDINATOR for r in results)
        monkeypatch.undo()
        assert coord._dump() == before
        assert coord._pipeline.held == {} and coord._pipeline.queued == 0
        with pytest.raises(ShareError) as info:  # the log is offline until reopened
            await write(coord, 3)
        assert info.value.error is Errors.NOT_COORDINATOR
        assert coord._pipeline.held == {} and coord._pipeline.queued == 0
        await coord.close()
        coord = await open_coordinator(tmp_path)
        await write(coord, 3)
        assert coord.state(KEY).start_offset == 3
        await coord.close()

    run(main())


# -- fast validation branches ------------------------------------------------------------------------


class Epoch(enum.IntEnum):
    TWO = 2


class TopicId(uuid.UUID):
    pass


def reference_write(group_id, topic_id, partition, state_epoch, leader_epoch, start_offset, batches, dcc):
    """The request as the validation functions see it, in Kafka's order: normalised values or the error."""
    try:
        key = check_key(group_id, topic_id, partition)
        leader = check_epoch(leader_epoch, "leader")
        state = check_epoch(state_epoch, "state")
        start = check_start_offset(start_offset)
        count = check_delivery_complete_count(dcc)
        checked = check_state_batches(batches)
    except ShareError as exc:
        return exc
    return key, state, leader, start, checked, count


GOOD = dict(group_id=G, topic_id=T, partition=0, state_epoch=0, leader_epoch=2, start_offset=3,
            batches=[StateBatch(3, 5, ACKNOWLEDGED, 1)], dcc=-1)


@pytest.mark.parametrize(
    "change",
    [
        {},
        dict(partition=True),
        dict(partition=2**31),
        dict(partition=-1),
        dict(topic_id=TopicId(int=T.int)),
        dict(topic_id=str(T)),
        dict(group_id="grüppe"),
        dict(group_id="\ud800"),
        dict(group_id=""),
        dict(group_id="x" * 40_000),
        dict(group_id="ü" * 20_000),
        dict(group_id=b"g"),
        dict(leader_epoch=Epoch.TWO),
        dict(leader_epoch=-1),
        dict(leader_epoch=2**31),
        dict(leader_epoch=2.0),
        dict(state_epoch=True),
        dict(start_offset=-2),
        dict(start_offset=2**63),
        dict(start_offset=Epoch.TWO),
        dict(dcc=1.0),
        dict(dcc=2**31),
        dict(dcc=Epoch.TWO),
        dict(batches=[(3, 5, ACKNOWLEDGED, 1)]),
        dict(batches=lambda: (b for b in [StateBatch(3, 5, 2, 1)])),  # a generator (one per use)
        dict(batches=[StateBatch(3, 5, 5, 1)]),
        dict(batches=[StateBatch(True, 5, 2, 1)]),
        dict(batches=[StateBatch(3, 5, Epoch.TWO, 1)]),
        dict(batches=[StateBatch(5, 3, 2, 1)]),
        dict(batches=[StateBatch(3, 5, 2, 2**15)]),
        dict(batches=None),
        dict(batches="nope"),
        dict(batches=[StateBatch(4, 9, 2, 1), StateBatch(3, 5, 4, 2)]),  # unsorted, overlapping: combined
    ],
)
def test_write_state_validates_exactly_as_the_validation_functions(change):
    request = {**GOOD, **change}
    make_batches = request["batches"] if callable(request["batches"]) else lambda: request["batches"]

    async def main():
        coord = ShareCoordinator(MemoryLog(), clock=ManualClock(0))
        await coord.initialize_state(G, T, 0, state_epoch=0, start_offset=0)
        expected = reference_write(**{**request, "batches": make_batches()})
        call = coord.write_state(
            request["group_id"], request["topic_id"], request["partition"], state_epoch=request["state_epoch"],
            leader_epoch=request["leader_epoch"], start_offset=request["start_offset"],
            state_batches=make_batches(), delivery_complete_count=request["dcc"],
        )
        if isinstance(expected, ShareError):
            with pytest.raises(ShareError) as info:
                await call
            assert (info.value.error, info.value.message) == (expected.error, expected.message)
            return
        key, state_epoch, leader_epoch, start_offset, batches, dcc = expected
        if key != KEY:  # a valid key that was never initialized
            with pytest.raises(ShareError) as info:
                await call
            assert info.value.error is Errors.INVALID_REQUEST
            return
        await call
        twin = ShareCoordinator(MemoryLog(), clock=ManualClock(0))
        await twin.initialize_state(G, T, 0, state_epoch=0, start_offset=0)
        await twin.write_state(G, T, 0, state_epoch=state_epoch, leader_epoch=leader_epoch,
                               start_offset=start_offset, state_batches=batches, delivery_complete_count=dcc)
        assert coord._dump() == twin._dump()
        assert list(coord.log.read_all())[1:] == list(twin.log.read_all())[1:]
        entry = list(coord.log.read_all())[-1]
        assert type(entry.record) is ShareDelta and all(
            type(x) is int for b in entry.record.state_batches for x in b
        )
        coord._check()

    run(main())


# -- open ------------------------------------------------------------------------------------------


def test_open_replays_a_directory_in_a_worker_thread_and_a_log_instance_on_the_loop(tmp_path, monkeypatch):
    threads = []
    real = coordinator_module.replay_log

    def spy(log):
        threads.append(threading.current_thread() is threading.main_thread())
        return real(log)

    monkeypatch.setattr(coordinator_module, "replay_log", spy)

    async def main():
        coord = await open_coordinator(tmp_path, fsync=False)
        await coord.close()
        await ShareCoordinator.open(MemoryLog())

    run(main())
    assert threads == [False, True]


def test_a_cancelled_open_closes_the_log_after_the_replay_finished(tmp_path, monkeypatch):
    started, release = threading.Event(), threading.Event()
    real = coordinator_module.replay_log

    def slow(log):
        started.set()
        assert release.wait(30)
        return real(log)

    async def main():
        coord = await open_coordinator(tmp_path, fsync=False)
        await coord.initialize_state(G, T, 0, state_epoch=0, start_offset=7)
        await coord.close()
        monkeypatch.setattr(coordinator_module, "replay_log", slow)
        opening = asyncio.ensure_future(open_coordinator(tmp_path, fsync=False))
        while not started.is_set():
            await asyncio.sleep(0.001)
        opening.cancel()
        await settle()
        assert not opening.done()  # it waits for the replay, which still reads the log
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await opening
        monkeypatch.undo()
        reopened = await open_coordinator(tmp_path, fsync=False)  # the directory lock was released
        assert reopened.state(KEY).start_offset == 7
        await reopened.close()

    run(main())
    assert os.path.isdir(tmp_path / "log")
