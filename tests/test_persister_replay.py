"""Bulk recovery (`persister.replay_log` over a log's decoded rows) equals replaying the same
records one by one with `_replay`, on random histories: tombstones and keys coming back, checkpoints
that re-initialize (lower leader epoch, the fences surviving), deltas with "unchanged" (-1) fields,
start offsets that move backwards (which a coordinator never writes, but a log may hold), checkpoints
whose batches are not in canonical form, and logs pruned so that keys begin with a delta.

The one-by-one replay is the definition (it is what every write does); the bulk path folds the log per
key and combines each key's deltas once (see `persister.state_replay.replay_rows` for why that is the same thing)."""

from __future__ import annotations

import asyncio
import random
import uuid

import pytest

from persister import (
    BulkRecordLog,
    LogEntry,
    MemoryLog,
    RecordLog,
    SegmentLog,
    ShareCheckpoint,
    ShareCoordinator,
    ShareDelta,
    StateKey,
    apply_record,
    replay_log,
    replay_record,
)
from persister.combiner import is_canonical
from sharegroup.types import StateBatch

KEYS = [StateKey(g, uuid.UUID(int=i), p) for i, (g, p) in enumerate([("a", 0), ("a", 1), ("b", 0), ("c", 5)])]


class EntriesOnly:
    """A RecordLog over another log that offers only `read_all`: the coordinator replays it one record at
    a time (the generic path), which is the reference here."""

    def __init__(self, log) -> None:
        self._log = log

    @property
    def start_offset(self) -> int:
        return self._log.start_offset

    @property
    def end_offset(self) -> int:
        return self._log.end_offset

    async def append(self, entries):
        return await self._log.append(entries)

    def read_all(self):
        return self._log.read_all()

    async def delete_below(self, offset: int) -> int:
        return await self._log.delete_below(offset)

    async def close(self) -> None:
        pass


def random_batches(rng: random.Random, around: int, canonical_only: bool) -> list[StateBatch]:
    batches = []
    for _ in range(rng.choice([0, 1, 1, 2, 3, 6])):
        first = max(0, around + rng.randint(-8, 25))
        batches.append(StateBatch(first, first + rng.randint(0, 6), rng.choice([0, 1, 2, 4]), rng.randint(0, 3)))
    if canonical_only or rng.random() < 0.5:
        from persister import combine

        return combine((), batches, -1)
    return batches  # unsorted, overlapping, touching equal runs: taken as they are by a checkpoint


def random_history(rng: random.Random, length: int, hostile: bool) -> list[tuple[StateKey, object]]:
    """Records as a log may hold them. `hostile`: also what a coordinator never writes (start offsets
    moving backwards, non-canonical batches, leader epoch -1 in a checkpoint)."""
    starts = {key: -1 for key in KEYS}
    history = []
    for _ in range(length):
        key = rng.choice(KEYS)
        roll = rng.random()
        start = starts[key]
        if roll < 0.06:
            history.append((key, None))
            starts[key] = -1
        elif roll < 0.3:
            new_start = rng.choice([-1, max(0, start), max(0, start) + rng.randint(0, 10)])
            if hostile and rng.random() < 0.2:
                new_start = max(-1, start - rng.randint(1, 10))
            leader_epoch = rng.choice([0, 1, 2, 3, 5] + ([-1] if hostile else []))
            history.append((key, ShareCheckpoint(
                rng.randint(0, 4), rng.choice([0, 1, 1, 2, 3]), leader_epoch, new_start, rng.randint(-1, 9),
                rng.randint(0, 1000), rng.randint(0, 1000),
                random_batches(rng, max(0, new_start), canonical_only=not hostile),
            )))
            starts[key] = new_start
        else:
            new_start = rng.choice([-1, -1, max(0, start), max(0, start) + rng.randint(0, 6)])
            if hostile and rng.random() < 0.15:
                new_start = max(0, start - rng.randint(1, 10))
            if new_start != -1:
                starts[key] = new_start
            history.append((key, ShareDelta(
                rng.randint(0, 4), rng.choice([-1, -1, 0, 1, 2, 3, 4]), new_start, rng.randint(-1, 9),
                random_batches(rng, max(0, starts[key]), canonical_only=not hostile),
            )))
    return history


def assert_bulk_equals_one_by_one(log) -> ShareCoordinator:
    bulk = ShareCoordinator(log, snapshot_update_records_per_snapshot=3)
    reference = ShareCoordinator(EntriesOnly(log), snapshot_update_records_per_snapshot=3)
    assert bulk._dump() == reference._dump()
    assert bulk.keys() == reference.keys()  # the same insertion order too
    for coord in (bulk, reference):
        for key_state in coord._states.values():
            assert not key_state.canonical or is_canonical(key_state.state.state_batches)
    return bulk


@pytest.mark.parametrize("hostile", [False, True], ids=["coordinator-like", "hostile"])
@pytest.mark.parametrize("seed", range(40))
def test_bulk_replay_of_a_memory_log_equals_one_by_one(seed, hostile):
    rng = random.Random(seed)
    log = MemoryLog()
    log.append_now(random_history(rng, rng.randint(1, 120), hostile))
    assert_bulk_equals_one_by_one(log)
    for _ in range(3):  # prune at random points: keys then begin with a delta, or lose their tombstone
        asyncio.run(log.delete_below(rng.randint(log.start_offset, log.end_offset)))
        assert_bulk_equals_one_by_one(log)


@pytest.mark.parametrize("seed", range(12))
def test_bulk_replay_of_a_segment_log_equals_one_by_one(tmp_path, seed):
    async def main():
        rng = random.Random(1000 + seed)
        log = await SegmentLog.open(tmp_path / "log", fsync=False, segment_bytes=1024)
        history = random_history(rng, 300, hostile=seed % 2 == 1)
        for i in range(0, len(history), 7):
            await log.append(history[i : i + 7])
        assert_bulk_equals_one_by_one(log)
        for _ in range(3):
            await log.delete_below(rng.randint(log.start_offset, log.end_offset))
            assert_bulk_equals_one_by_one(log)
        await log.close()
        reopened = await SegmentLog.open(tmp_path / "log", fsync=False, segment_bytes=1024)
        assert_bulk_equals_one_by_one(reopened)
        await reopened.close()

    asyncio.run(main())


def test_deltas_are_combined_once_only_while_start_offsets_move_forward():
    """The deferred combine needs start offsets that never move backwards; a log whose start offset
    does move back is replayed one delta at a time and still agrees."""
    key = KEYS[0]
    log = MemoryLog()
    log.append_now([
        (key, ShareCheckpoint(0, 0, 0, 0, 0, 0, 0, [StateBatch(0, 9, 2, 1)])),
        (key, ShareDelta(0, -1, 8, 1, [StateBatch(8, 12, 4, 2)])),
        (key, ShareDelta(0, -1, 3, 1, [StateBatch(3, 4, 0, 1)])),  # backwards: 5..7 stay pruned
    ])
    coord = assert_bulk_equals_one_by_one(log)
    # Combined at once, 3..7 would still hold the checkpoint's acknowledged run, which outranks the
    # last delta's available one on 3..4; one at a time, 3..7 were pruned by the start offset 8 first.
    assert coord.state(key).state_batches == (StateBatch(3, 4, 0, 1), StateBatch(8, 12, 4, 2))
    assert coord.state(key).start_offset == 3


def test_a_fence_from_before_a_reinitializing_checkpoint_survives_bulk_replay():
    key = KEYS[1]
    log = MemoryLog()
    log.append_now([
        (key, ShareCheckpoint(0, 1, 0, 0, 0, 0, 0, [])),
        (key, ShareDelta(0, 7, -1, 0, [])),  # leader epoch 7: the fence
        (key, ShareCheckpoint(1, 1, 0, 5, 0, 0, 0, [])),  # re-initialize: epoch back to 0
        (key, ShareDelta(1, -1, 6, 1, [StateBatch(6, 6, 2, 1)])),
    ])
    coord = assert_bulk_equals_one_by_one(log)
    key_state = coord._states[key]
    assert (key_state.leader_epoch_max, key_state.leader_fence_offset) == (7, 1)
    assert key_state.pin_offset == 1 and key_state.deltas_since_checkpoint == 1


def test_a_key_deleted_and_created_again_is_replayed_from_its_new_start():
    log = MemoryLog()
    a, b = KEYS[0], KEYS[2]
    log.append_now([
        (a, ShareCheckpoint(0, 9, 9, 0, 0, 0, 0, [])),
        (b, ShareCheckpoint(0, 0, 0, 0, 0, 0, 0, [])),
        (a, None),
        (a, ShareDelta(3, 2, 4, 1, [StateBatch(4, 5, 2, 1)])),  # a pruned-log style start: a delta
        (a, ShareDelta(3, -1, -1, 2, [StateBatch(6, 6, 0, 1)])),
    ])
    coord = assert_bulk_equals_one_by_one(log)
    assert coord.keys() == [b, a]
    assert coord._states[a].dump()[1:] == (2, 0, 2, 3, 3, 3)  # fences and pins from the delta that began it


def test_an_entries_only_log_is_replayed_one_record_at_a_time():
    log = MemoryLog()
    log.append_now([(KEYS[0], ShareCheckpoint(0, 0, 0, 0, 0, 0, 0, []))])
    wrapper = EntriesOnly(log)
    assert not hasattr(wrapper, "read_rows")
    assert list(wrapper.read_all()) == [LogEntry(0, KEYS[0], ShareCheckpoint(0, 0, 0, 0, 0, 0, 0, []))]
    assert ShareCoordinator(wrapper)._dump() == ShareCoordinator(log)._dump()


@pytest.mark.parametrize("seed", range(10))
def test_the_public_replay_functions_are_the_coordinators_replay(seed):
    """`replay_log` (bulk), `replay_record` (one record at a time) and `apply_record` (one key, as the
    audit uses it) give what the coordinator itself derives from the same log."""
    log = MemoryLog()
    log.append_now(random_history(random.Random(seed), 150, hostile=seed % 2 == 1))
    expected = ShareCoordinator(log)._dump()
    assert {key: key_state.dump() for key, key_state in replay_log(log).items()} == expected
    one_by_one: dict = {}
    per_key: dict = {}
    for entry in log.read_all():
        replay_record(one_by_one, entry.offset, entry.key, entry.record)
        per_key[entry.key] = apply_record(per_key.get(entry.key), entry.offset, entry.record)
    assert {key: key_state.dump() for key, key_state in one_by_one.items()} == expected
    assert {key: key_state.dump() for key, key_state in per_key.items() if key_state is not None} == expected


def test_the_fast_paths_are_declared_by_the_bulk_record_log_protocol(tmp_path):
    async def main():
        segment = await SegmentLog.open(tmp_path, fsync=False)
        try:
            assert isinstance(segment, BulkRecordLog) and isinstance(MemoryLog(), BulkRecordLog)
            assert isinstance(EntriesOnly(MemoryLog()), RecordLog)
            assert not isinstance(EntriesOnly(MemoryLog()), BulkRecordLog)
        finally:
            await segment.close()

    asyncio.run(main())
