"""ShareCoordinator: validation and fencing with exact error codes, record rules, checkpoint counting,
replay equivalence, pruning, idle checkpoints, batched RPCs, failed appends and concurrency.

A conformance suite: every test that lets `open_coordinator` choose the log runs twice, over a MemoryLog
and over the durable SegmentLog (a fresh directory, fsync off, 1 KiB segments so that appends roll
segments and pruning deletes files). Tests that build their own MemoryLog run once."""

from __future__ import annotations

import asyncio
import itertools
import random
import sys
import uuid

import pytest

from persister import (
    DeleteItem,
    InitializeItem,
    MemoryLog,
    PartitionResult,
    ReadItem,
    ShareCheckpoint,
    ShareCoordinator,
    ShareDelta,
    StateKey,
    WriteItem,
    combine,
)
from sharegroup.clock import ManualClock
from sharegroup.errors import Errors, ShareError
from sharegroup.types import PartitionState, StateBatch, StateSummary

G = "group-a"
T = uuid.UUID("00000000-0000-0000-0000-0000000000aa")
T2 = uuid.UUID("00000000-0000-0000-0000-0000000000bb")
KEY = StateKey(G, T, 0)
AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4


def run(coro):
    return asyncio.run(coro)


# Set by the `log_kind` fixture: the directory under which `open_coordinator` opens segment logs, or None
# for a MemoryLog.
_segment_log_root = None
_segment_log_names = itertools.count()


@pytest.fixture(autouse=True, params=["memory", "segment"])
def log_kind(request, tmp_path, monkeypatch):
    """Run each test over a MemoryLog and over a SegmentLog; `memory_log_only` tests run once."""
    if request.param == "segment":
        reason = getattr(request.function, "memory_log_only", None)
        if reason is not None:
            pytest.skip(f"MemoryLog only: {reason}")
        monkeypatch.setattr(sys.modules[__name__], "_segment_log_root", tmp_path)
    return request.param


def memory_log_only(reason: str):
    """Mark a test that builds its own log (so it would run the same twice)."""

    def mark(test):
        test.memory_log_only = reason
        return test

    return mark


async def open_coordinator(n=500, *, log=None, clock=None, interval_ms=300_000) -> ShareCoordinator:
    options = dict(
        snapshot_update_records_per_snapshot=n,
        cold_checkpoint_interval_ms=interval_ms,
        clock=clock if clock is not None else ManualClock(1_000),
    )
    if log is None and _segment_log_root is not None:
        log_dir = _segment_log_root / f"state-log-{next(_segment_log_names)}"
        return await ShareCoordinator.open(log_dir, fsync=False, segment_bytes=1024, **options)
    return await ShareCoordinator.open(log if log is not None else MemoryLog(), **options)


def records(coord: ShareCoordinator) -> list:
    return [entry.record for entry in coord.log.read_all()]


def kinds(coord: ShareCoordinator) -> str:
    """The log as a string: C checkpoint, D delta, X tombstone."""
    return "".join("X" if r is None else "C" if isinstance(r, ShareCheckpoint) else "D" for r in records(coord))


async def write(coord, *, partition=0, state_epoch=0, leader_epoch=0, start_offset=-1, batches=(), dcc=-1, topic=T):
    await coord.write_state(
        G,
        topic,
        partition,
        state_epoch=state_epoch,
        leader_epoch=leader_epoch,
        start_offset=start_offset,
        state_batches=list(batches),
        delivery_complete_count=dcc,
    )


async def expect(error: Errors, coro):
    with pytest.raises(ShareError) as info:
        await coro
    assert info.value.error is error, info.value
    return info.value


def assert_replays_identically(coord: ShareCoordinator) -> None:
    coord._check()
    fresh = ShareCoordinator(coord.log, snapshot_update_records_per_snapshot=coord.snapshot_update_records_per_snapshot)
    fresh._check()
    assert fresh._dump() == coord._dump()


# -- configuration --------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [-1, 501, 1.5, True, "3"])
def test_records_per_snapshot_out_of_range_is_a_value_error(n):
    with pytest.raises(ValueError):
        run(open_coordinator(n))


@pytest.mark.parametrize("n", [0, 1, 500])
def test_records_per_snapshot_bounds_are_accepted(n):
    assert run(open_coordinator(n)).snapshot_update_records_per_snapshot == n


def test_cold_interval_must_be_positive():
    with pytest.raises(ValueError):
        run(open_coordinator(interval_ms=0))


@memory_log_only("passes log instances")
def test_open_refuses_non_logs_and_log_options_with_an_instance():
    with pytest.raises(TypeError):
        run(ShareCoordinator.open(object()))
    with pytest.raises(TypeError):
        run(ShareCoordinator.open(MemoryLog(), fsync=False))


# -- stateless validation: INVALID_REQUEST, before any look at stored state ------------------------

BAD_KEYS = [
    ("", T, 0),
    (None, T, 0),
    (G, None, 0),
    (G, str(T), 0),
    (G, T, -1),
    (G, T, True),
    (G, T, "0"),
    (G, T, 2**31),
]
BAD_BATCHES = [
    [(5, 4, AVAILABLE, 1)],
    [(-1, 4, AVAILABLE, 1)],
    [(0, 4, 5, 1)],  # 5 is no record state (3 is ARCHIVING)
    [(0, 4, 5, 1)],
    [(0, 4, -1, 1)],
    [(0, 4, True, 1)],
    [(0, 4, AVAILABLE, -1)],
    [(0, 4, AVAILABLE, 2**15)],
    [(0, 4, AVAILABLE)],
    [(0, 4.0, AVAILABLE, 1)],
    None,
    "abc",
]


@pytest.mark.parametrize("group_id, topic_id, partition", BAD_KEYS)
def test_bad_keys_are_invalid_request_for_every_rpc(group_id, topic_id, partition):
    async def main():
        coord = await open_coordinator()
        for coro in (
            coord.initialize_state(group_id, topic_id, partition, state_epoch=0, start_offset=0),
            coord.read_state(group_id, topic_id, partition, leader_epoch=0),
            coord.write_state(
                group_id, topic_id, partition, state_epoch=0, leader_epoch=0, start_offset=0, state_batches=[]
            ),
            coord.delete_state(group_id, topic_id, partition),
            coord.read_summary(group_id, topic_id, partition, leader_epoch=0),
        ):
            await expect(Errors.INVALID_REQUEST, coro)
        assert len(coord.log) == 0

    run(main())


@pytest.mark.parametrize("batches", BAD_BATCHES)
def test_bad_batches_are_invalid_request_even_when_the_epochs_would_be_fenced(batches):
    async def main():
        coord = await open_coordinator()
        await coord.initialize_state(G, T, 0, state_epoch=5, start_offset=0)
        await coord.read_state(G, T, 0, leader_epoch=5)
        before = len(coord.log)
        await expect(
            Errors.INVALID_REQUEST,
            coord.write_state(G, T, 0, state_epoch=1, leader_epoch=1, start_offset=0, state_batches=batches),
        )
        assert len(coord.log) == before

    run(main())


def test_every_record_state_is_accepted_and_combined_by_count_then_state():
    """Kafka's share coordinator stores what a leader writes without judging the delivery states (its
    tests write runs in ACQUIRED): every RecordState id is accepted, in deltas and in checkpoints, and
    overlaps are combined by the usual priority, higher delivery count first, then higher state."""

    async def main():
        coord = await open_coordinator(n=2)
        await coord.initialize_state(G, T, 0, state_epoch=0, start_offset=0)
        await write(coord, batches=[(0, 9, ACQUIRED, 1)])
        await write(coord, batches=[(5, 14, ACQUIRED, 2)])  # higher count wins on 5..9
        assert kinds(coord) == "CDD"
        assert records(coord)[1].state_batches == (StateBatch(0, 9, ACQUIRED, 1),)
        # The third write is a checkpoint (N = 2): equal counts, the higher state wins on each side.
        await write(coord, batches=[(0, 2, AVAILABLE, 1), (3, 4, ACKNOWLEDGED, 1), (14, 16, ARCHIVED, 2)])
        assert kinds(coord) == "CDDC"
        expected = [
            StateBatch(0, 2, ACQUIRED, 1),
            StateBatch(3, 4, ACKNOWLEDGED, 1),
            StateBatch(5, 13, ACQUIRED, 2),
            StateBatch(14, 16, ARCHIVED, 2),
        ]
        assert records(coord)[3].state_batches == tuple(expected)
        assert await coord.read_state(G, T, 0, leader_epoch=0) == PartitionState(0, 0, expected)
        assert_replays_identically(coord)

    run(main())


@pytest.mark.parametrize(
    "field, value",
    [
        ("leader_epoch", -1),
        ("state_epoch", -1),
        ("leader_epoch", 2**31),
        ("start_offset", -2),
        ("start_offset", 2**63),
        ("dcc", -2),
        ("dcc", 2**31),
        ("start_offset", None),
    ],
)
def test_bad_write_fields_are_invalid_request(field, value):
    async def main():
        coord = await open_coordinator()
        await coord.initialize_state(G, T, 0, state_epoch=0, start_offset=0)
        await expect(Errors.INVALID_REQUEST, write(coord, **{field: value}))
        assert kinds(coord) == "C"

    run(main())


def test_negative_epochs_and_offsets_refused_on_read_and_initialize():
    async def main():
        coord = await open_coordinator()
        await expect(Errors.INVALID_REQUEST, coord.initialize_state(G, T, 0, state_epoch=-1, start_offset=0))
        await expect(Errors.INVALID_REQUEST, coord.initialize_state(G, T, 0, state_epoch=0, start_offset=-2))
        await coord.initialize_state(G, T, 0, state_epoch=0, start_offset=0)
        await expect(Errors.INVALID_REQUEST, coord.read_state(G, T, 0, leader_epoch=-1))
        assert kinds(coord) == "C"

    run(main())


# -- uninitialized keys ---------------------------------------------------------------------------


def test_read_and_write_of_an_uninitialized_key_are_invalid_request():
    async def main():
        coord = await open_coordinator()
        error = await expect(Errors.INVALID_REQUEST, coord.read_state(G, T, 0, leader_epoch=0))
        assert "uninitialized" in error.message
        await expect(Errors.INVALID_REQUEST, write(coord, batches=[(0, 1, AVAILABLE, 1)]))
        assert len(coord.log) == 0 and coord.keys() == []

    run(main())


def test_summary_of_an_absent_key_is_not_an_error():
    async def main():
        coord = await open_coordinator()
        assert await coord.read_summary(G, T, 0, leader_epoch=0) == StateSummary(0, 0, -1, -1)
        assert len(coord.log) == 0

    run(main())


# -- initialize -----------------------------------------------------------------------------------


def test_initialize_writes_a_fresh_checkpoint():
    async def main():
        clock = ManualClock(5_000)
        coord = await open_coordinator(clock=clock)
        await coord.initialize_state(G, T, 0, state_epoch=3, start_offset=-1)
        await coord.initialize_state(G, T, 1, state_epoch=3, start_offset=42)
        assert records(coord) == [
            ShareCheckpoint(0, 3, 0, -1, -1, 5_000, 5_000, ()),
            ShareCheckpoint(0, 3, 0, 42, 0, 5_000, 5_000, ()),
        ]
        assert await coord.read_state(G, T, 1, leader_epoch=0) == PartitionState(3, 42, [])
        assert await coord.read_summary(G, T, 0, leader_epoch=0) == StateSummary(3, 0, -1, -1)

    run(main())


def test_initialize_with_equal_epoch_resets_state_and_bumps_checkpoint_epoch():
    async def main():
        coord = await open_coordinator()
        await coord.initialize_state(G, T, 0, state_epoch=2, start_offset=10)
        await coord.read_state(G, T, 0, leader_epoch=4)
        await write(coord, state_epoch=2, leader_epoch=4, start_offset=20, batches=[(20, 29, ACKNOWLEDGED, 1)], dcc=10)
        await coord.initialize_state(G, T, 0, state_epoch=2, start_offset=5)  # lower start: a reset, not a write
        assert await coord.read_summary(G, T, 0, leader_epoch=0) == StateSummary(2, 0, 5, 0)
        assert coord.state(KEY).checkpoint_epoch == 1 and coord.state(KEY).state_batches == ()
        await expect(Errors.FENCED_STATE_EPOCH, coord.initialize_state(G, T, 0, state_epoch=1, start_offset=0))
        await coord.initialize_state(G, T, 0, state_epoch=3, start_offset=0)
        assert coord.state(KEY).checkpoint_epoch == 2
        assert_replays_identically(coord)

    run(main())


def test_initialize_keeps_the_leader_epoch_fence_and_the_next_read_repersists_it():
    async def main():
        coord = await open_coordinator()
        await coord.initialize_state(G, T, 0, state_epoch=1, start_offset=0)
        await coord.read_state(G, T, 0, leader_epoch=5)
        await coord.initialize_state(G, T, 0, state_epoch=1, start_offset=0)
        assert (await coord.read_summary(G, T, 0, leader_epoch=0)).leader_epoch == 0
        await expect(Errors.FENCED_LEADER_EPOCH, coord.read_state(G, T, 0, leader_epoch=4))
        await expect(Errors.FENCED_LEADER_EPOCH, write(coord, state_epoch=1, leader_epoch=4))
        before = len(coord.log)
        await coord.read_state(G, T, 0, leader_epoch=5)  # equal to the fence, above the state's 0
        assert len(coord.log) == before + 1
        assert (await coord.read_summary(G, T, 0, leader_epoch=0)).leader_epoch == 5

    run(main())


# -- fencing --------------------------------------------------------------------------------------


def test_write_fencing_order_and_equal_epochs_pass():
    async def main():
        coord = await open_coordinator()
        await coord.initialize_state(G, T, 0, state_epoch=5, start_offset=0)
        await coord.read_state(G, T, 0, leader_epoch=5)
        n = len(coord.log)
        # Leader epoch is checked before state epoch.
        await expect(Errors.FENCED_LEADER_EPOCH, write(coord, state_epoch=4, leader_epoch=4))
        await expect(Errors.FENCED_STATE_EPOCH, write(coord, state_epoch=4, leader_epoch=5))
        assert len(coord.log) == n
        await write(coord, state_epoch=5, leader_epoch=5)
        await write(coord, state_epoch=9, leader_epoch=9)  # higher passes but changes no stored epoch
        assert await coord.read_summary(G, T, 0, leader_epoch=0) == StateSummary(5, 5, 0, -1)
        await coord.read_state(G, T, 0, leader_epoch=6)  # so a leader epoch 6 is still fine to read
        await expect(Errors.FENCED_LEADER_EPOCH, coord.read_state(G, T, 0, leader_epoch=5))

    run(main())


def test_summary_and_delete_do_not_fence():
    async def main():
        coord = await open_coordinator()
        await coord.initialize_state(G, T, 0, state_epoch=5, start_offset=3)
        await coord.read_state(G, T, 0, leader_epoch=7)
        assert await coord.read_summary(G, T, 0, leader_epoch=0) == StateSummary(5, 7, 3, 0)
        await coord.delete_state(G, T, 0)
        assert coord.keys() == []

    run(main())


def test_read_persists_only_a_higher_leader_epoch():
    async def main():
        coord = await open_coordinator()
        await coord.initialize_state(G, T, 0, state_epoch=0, start_offset=0)
        await coord.read_state(G, T, 0, leader_epoch=0)
        assert kinds(coord) == "C"
        await write(coord, batches=[(0, 4, ACKNOWLEDGED, 1)], dcc=5)
        state = await coord.read_state(G, T, 0, leader_epoch=2)
        assert state == PartitionState(0, 0, [StateBatch(0, 4, ACKNOWLEDGED, 1)])
        assert kinds(coord) == "CDD"
        assert records(coord)[-1] == ShareDelta(0, 2, 0, 5, ())
        await coord.read_state(G, T, 0, leader_epoch=2)
        assert kinds(coord) == "CDD"

    run(main())


# -- write semantics ------------------------------------------------------------------------------


def test_start_offset_never_moves_backwards_and_minus_one_leaves_it():
    async def main():
        coord = await open_coordinator()
        await coord.initialize_state(G, T, 0, state_epoch=0, start_offset=0)
        await write(coord, start_offset=10, batches=[(10, 19, ACKNOWLEDGED, 1)])
        await write(coord, start_offset=5, batches=[(5, 12, AVAILABLE, 3)])  # a late, out-of-order write
        assert records(coord)[-1] == ShareDelta(0, 0, 10, -1, [StateBatch(10, 12, AVAILABLE, 3)])
        assert coord.state(KEY).start_offset == 10
        await write(coord, start_offset=-1)
        assert coord.state(KEY).start_offset == 10
        await write(coord, start_offset=15)
        assert (await coord.read_state(G, T, 0, leader_epoch=0)) == PartitionState(
            0, 15, [StateBatch(15, 19, ACKNOWLEDGED, 1)]
        )

    run(main())


def test_delta_holds_the_request_batches_combined_and_pruned():
    async def main():
        coord = await open_coordinator()
        await coord.initialize_state(G, T, 0, state_epoch=0, start_offset=0)
        batches = [(0, 9, AVAILABLE, 1), (5, 6, ARCHIVED, 1), (7, 9, AVAILABLE, 1)]
        await write(coord, start_offset=3, batches=batches, dcc=2)
        assert records(coord)[-1] == ShareDelta(
            0, 0, 3, 2, [StateBatch(3, 4, AVAILABLE, 1), StateBatch(5, 6, ARCHIVED, 1), StateBatch(7, 9, AVAILABLE, 1)]
        )
        assert coord.state(KEY).delivery_complete_count == 2
        await write(coord)  # delivery complete count -1 (a v0 write) is stored as sent
        assert coord.state(KEY).delivery_complete_count == -1

    run(main())


def test_checkpoint_holds_the_full_combined_state():
    async def main():
        coord = await open_coordinator(n=1, clock=ManualClock(7))
        await coord.initialize_state(G, T, 0, state_epoch=1, start_offset=0)
        await write(coord, state_epoch=1, start_offset=0, batches=[(0, 9, AVAILABLE, 1)])
        await write(coord, state_epoch=1, start_offset=2, batches=[(5, 14, ARCHIVED, 1)], dcc=3)
        assert kinds(coord) == "CDC"
        assert records(coord)[-1] == ShareCheckpoint(
            1, 1, 0, 2, 3, 7, 7, [StateBatch(2, 4, AVAILABLE, 1), StateBatch(5, 14, ARCHIVED, 1)]
        )

    run(main())


# -- checkpoint counting --------------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 3, 7])
def test_exactly_n_deltas_between_checkpoints(n):
    async def main():
        coord = await open_coordinator(n)
        await coord.initialize_state(G, T, 0, state_epoch=0, start_offset=0)
        for i in range(3 * (n + 1) + 2):
            await write(coord, start_offset=i, batches=[(i, i + 2, AVAILABLE, 1)])
        log = kinds(coord)
        assert log == "C" + ("D" * n + "C") * 3 + "D" * min(2, n) + ("C" if n < 2 else "") * (2 - min(2, n))
        runs = log.split("C")[1:-1]
        assert all(len(run) == n for run in runs)
        assert_replays_identically(coord)

    run(main())


def test_every_write_is_a_checkpoint_with_zero():
    async def main():
        coord = await open_coordinator(0)
        await coord.initialize_state(G, T, 0, state_epoch=0, start_offset=0)
        await coord.read_state(G, T, 0, leader_epoch=1)
        for _ in range(3):
            await write(coord, leader_epoch=1)
        assert kinds(coord) == "CCCCC"
        assert [r.checkpoint_epoch for r in records(coord)] == [0, 1, 2, 3, 4]

    run(main())


def test_a_leader_epoch_raising_read_counts_toward_n():
    async def main():
        coord = await open_coordinator(2)
        await coord.initialize_state(G, T, 0, state_epoch=0, start_offset=0)
        await coord.read_state(G, T, 0, leader_epoch=1)
        await write(coord, leader_epoch=1)
        await coord.read_state(G, T, 0, leader_epoch=2)  # the third record: a checkpoint with no new batches
        assert kinds(coord) == "CDDC"
        assert records(coord)[-1].leader_epoch == 2

    run(main())


def test_every_checkpoint_restarts_the_delta_count():
    async def main():
        clock = ManualClock(0)
        coord = await open_coordinator(3, clock=clock)
        await coord.initialize_state(G, T, 0, state_epoch=0, start_offset=0)
        await write(coord)
        await write(coord)
        await coord.initialize_state(G, T, 0, state_epoch=0, start_offset=0)
        for _ in range(4):
            await write(coord)
        assert kinds(coord) == "CDDCDDDC"
        clock.advance(300_000)
        await write(coord)
        assert await coord.checkpoint_idle_keys() == 1
        for _ in range(4):
            await write(coord)
        assert kinds(coord) == "CDDCDDDCDCDDDC"

    run(main())


# -- delete ---------------------------------------------------------------------------------------


def test_delete_writes_one_tombstone_and_is_idempotent():
    async def main():
        coord = await open_coordinator()
        await coord.delete_state(G, T, 0)
        assert len(coord.log) == 0
        await coord.initialize_state(G, T, 0, state_epoch=0, start_offset=0)
        await coord.delete_state(G, T, 0)
        await coord.delete_state(G, T, 0)
        assert kinds(coord) == "CX"
        assert coord.state(KEY) is None
        await expect(Errors.INVALID_REQUEST, coord.read_state(G, T, 0, leader_epoch=0))
        assert await coord.read_summary(G, T, 0, leader_epoch=0) == StateSummary(0, 0, -1, -1)
        await coord.initialize_state(G, T, 0, state_epoch=0, start_offset=0)  # a new life starts at epoch 0
        assert coord.state(KEY).checkpoint_epoch == 0
        assert_replays_identically(coord)

    run(main())


# -- replay ---------------------------------------------------------------------------------------


class Model:
    """What each key's state must be, computed without records: every write combined in, in order."""

    def __init__(self):
        self.keys: dict[StateKey, dict] = {}

    def initialize(self, key, state_epoch, start_offset):
        old = self.keys.get(key)
        if old is not None and old["state_epoch_max"] > state_epoch:
            return Errors.FENCED_STATE_EPOCH
        leader_max = old["leader_epoch_max"] if old else 0
        self.keys[key] = dict(
            state_epoch=state_epoch,
            state_epoch_max=max(state_epoch, old["state_epoch_max"] if old else 0),
            leader_epoch=0,
            leader_epoch_max=leader_max,
            start_offset=start_offset,
            dcc=-1 if start_offset == -1 else 0,
            batches=[],
        )
        return Errors.NONE

    def write(self, key, state_epoch, leader_epoch, start_offset, batches, dcc):
        s = self.keys.get(key)
        if s is None:
            return Errors.INVALID_REQUEST
        if s["leader_epoch_max"] > leader_epoch:
            return Errors.FENCED_LEADER_EPOCH
        if s["state_epoch_max"] > state_epoch:
            return Errors.FENCED_STATE_EPOCH
        s["start_offset"] = max(s["start_offset"], start_offset)
        s["batches"] = combine(s["batches"], batches, s["start_offset"])
        s["dcc"] = dcc
        return Errors.NONE

    def read(self, key, leader_epoch):
        s = self.keys.get(key)
        if s is None:
            return Errors.INVALID_REQUEST
        if s["leader_epoch_max"] > leader_epoch:
            return Errors.FENCED_LEADER_EPOCH
        s["leader_epoch"] = max(s["leader_epoch"], leader_epoch)
        s["leader_epoch_max"] = max(s["leader_epoch_max"], leader_epoch)
        return Errors.NONE

    def delete(self, key):
        self.keys.pop(key, None)
        return Errors.NONE


async def random_workload(coord: ShareCoordinator, rng: random.Random, steps: int, clock: ManualClock) -> Model:
    """Random operations on a few keys, checked against the model and `_check()` after every step, and
    against a fresh replay of the log every 20 steps."""
    model = Model()
    keys = [StateKey(G, T, 0), StateKey(G, T, 1), StateKey("group-b", T2, 3)]
    for step in range(steps):
        if step % 20 == 19:
            assert_replays_identically(coord)
        key = rng.choice(keys)
        op = rng.random()
        error = Errors.NONE
        try:
            if op < 0.12:
                se, so = rng.randint(0, 4), rng.choice([-1, rng.randint(0, 60)])
                expected = model.initialize(key, se, so)
                await coord.initialize_state(*key, state_epoch=se, start_offset=so)
            elif op < 0.65:
                se, le = rng.randint(0, 4), rng.randint(0, 4)
                so = rng.choice([-1, rng.randint(0, 80)])
                batches = []
                for _ in range(rng.randint(0, 4)):
                    first = rng.randint(0, 90)
                    batches.append((first, first + rng.randint(0, 9), rng.choice([0, 2, 4]), rng.randint(0, 5)))
                dcc = rng.randint(-1, 20)
                expected = model.write(key, se, le, so, batches, dcc)
                await coord.write_state(
                    *key,
                    state_epoch=se,
                    leader_epoch=le,
                    start_offset=so,
                    state_batches=batches,
                    delivery_complete_count=dcc,
                )
            elif op < 0.85:
                le = rng.randint(0, 5)
                expected = model.read(key, le)
                await coord.read_state(*key, leader_epoch=le)
            elif op < 0.92:
                expected = model.delete(key)
                await coord.delete_state(*key)
            elif op < 0.95:
                expected = Errors.NONE
                clock.advance(rng.randint(0, 200_000))
                await coord.checkpoint_idle_keys()
            else:
                expected = Errors.NONE
                await coord.prune()
        except ShareError as exc:
            error = exc.error
        assert error is expected
        coord._check()
        for k in keys:
            m, state = model.keys.get(k), coord.state(k)
            assert (m is None) == (state is None)
            if m is not None:
                got = (state.state_epoch, state.leader_epoch, state.start_offset, state.delivery_complete_count)
                assert got == (m["state_epoch"], m["leader_epoch"], m["start_offset"], m["dcc"])
                assert list(state.state_batches) == m["batches"]
    return model


@pytest.mark.parametrize("seed", range(30))
def test_random_workload_matches_model_and_replays_identically(seed):
    async def main():
        rng = random.Random(seed)
        clock = ManualClock(0)
        n = rng.choice([0, 1, 2, 5, 500])
        coord = await open_coordinator(n, clock=clock, interval_ms=250_000)
        await random_workload(coord, rng, 300, clock)
        assert_replays_identically(coord)
        await coord.prune()
        assert_replays_identically(coord)
        for state_key in coord.keys():  # exactly: no key ever has more than N deltas after its checkpoint
            assert coord._states[state_key].deltas_since_checkpoint <= n

    run(main())


@memory_log_only("writes records with MemoryLog.append_now")
def test_replay_of_a_delta_for_an_unknown_key_builds_state_like_kafka():
    async def main():
        log = MemoryLog()
        log.append_now([(KEY, ShareDelta(2, 3, 10, 1, [(12, 14, ARCHIVED, 1)]))])
        coord = await open_coordinator(log=log)
        coord._check()
        assert coord.state(KEY) == ShareCheckpoint(2, 0, 3, 10, 1, 0, 0, [StateBatch(12, 14, ARCHIVED, 1)])
        assert coord.lowest_live_checkpoint_offset() == 0  # it pins the log until a checkpoint comes

    run(main())


# -- pruning --------------------------------------------------------------------------------------


def test_a_leader_epoch_fence_survives_reinitialize_prune_and_replay():
    async def main():
        coord = await open_coordinator(1)
        await coord.initialize_state(G, T, 0, state_epoch=1, start_offset=0)  # 0
        await coord.read_state(G, T, 0, leader_epoch=5)  # 1: the fence, in a delta
        await write(coord, state_epoch=1, leader_epoch=5)  # 2: a checkpoint carrying it
        await coord.initialize_state(G, T, 0, state_epoch=1, start_offset=0)  # 3: leader epoch back to 0
        await coord.initialize_state(G, T, 1, state_epoch=1, start_offset=0)  # 4
        assert coord.lowest_live_checkpoint_offset() == 2  # the record still carrying the fence
        assert await coord.prune() == 2
        fresh = ShareCoordinator(coord.log)
        await expect(Errors.FENCED_LEADER_EPOCH, fresh.read_state(G, T, 0, leader_epoch=4))
        await fresh.read_state(G, T, 0, leader_epoch=5)  # re-persists the fence in the state
        assert fresh.lowest_live_checkpoint_offset() == 3
        assert_replays_identically(fresh)

    run(main())


def test_prune_deletes_below_the_lowest_live_checkpoint():
    async def main():
        coord = await open_coordinator(1)
        await coord.initialize_state(G, T, 0, state_epoch=0, start_offset=0)  # 0
        await coord.initialize_state(G, T, 1, state_epoch=0, start_offset=0)  # 1
        await write(coord, partition=0)  # 2 D
        await write(coord, partition=0)  # 3 C
        await write(coord, partition=1)  # 4 D
        assert coord.lowest_live_checkpoint_offset() == 1
        assert await coord.prune() == 1
        await write(coord, partition=1)  # 5 C
        assert coord.lowest_live_checkpoint_offset() == 3
        assert await coord.prune() == 3
        assert coord.log.start_offset == 3 and kinds(coord) == "CDC"
        assert_replays_identically(coord)

    run(main())


def test_tombstoned_keys_do_not_pin_and_no_live_key_prunes_everything():
    async def main():
        coord = await open_coordinator()
        await coord.initialize_state(G, T, 0, state_epoch=0, start_offset=0)  # 0
        await coord.initialize_state(G, T, 1, state_epoch=0, start_offset=0)  # 1
        await coord.delete_state(G, T, 0)  # 2
        assert coord.lowest_live_checkpoint_offset() == 1
        assert await coord.prune() == 1
        await coord.delete_state(G, T, 1)  # 3
        assert coord.lowest_live_checkpoint_offset() is None
        assert await coord.prune() == 4 == coord.log.end_offset
        assert_replays_identically(coord)

    run(main())


def test_a_cold_key_pins_the_log_until_it_is_checkpointed_again():
    async def main():
        clock = ManualClock(0)
        coord = await open_coordinator(1, clock=clock)
        await coord.initialize_state(G, T, 0, state_epoch=0, start_offset=0)  # cold key at offset 0
        await coord.initialize_state(G, T, 1, state_epoch=0, start_offset=0)
        for _ in range(10):
            await write(coord, partition=1)
        assert await coord.prune() == 0
        clock.advance(300_000)
        await write(coord, partition=1)
        assert await coord.checkpoint_idle_keys() == 2  # both checkpoints are old; the hot one had deltas
        assert await coord.prune() == coord.log.end_offset - 2
        assert_replays_identically(coord)

    run(main())


# -- idle checkpoints -----------------------------------------------------------------------------


def test_idle_checkpoints_rewrite_old_keys_once_per_interval():
    async def main():
        clock = ManualClock(0)
        coord = await open_coordinator(clock=clock)
        await coord.initialize_state(G, T, 0, state_epoch=1, start_offset=0)
        await coord.initialize_state(G, T, 1, state_epoch=1, start_offset=0)
        await coord.initialize_state(G, T, 2, state_epoch=1, start_offset=0)
        await write(coord, state_epoch=1, batches=[(0, 4, ARCHIVED, 1)], dcc=5)
        await coord.delete_state(G, T, 2)
        clock.advance(299_999)
        assert await coord.checkpoint_idle_keys() == 0
        clock.advance(1)
        before = coord.state(KEY)
        assert await coord.checkpoint_idle_keys() == 2
        after = coord.state(KEY)
        assert after == ShareCheckpoint(
            before.checkpoint_epoch + 1, 1, 0, 0, 5, before.create_timestamp_ms, 300_000, before.state_batches
        )
        assert records(coord)[-1] == coord.state(StateKey(G, T, 1))
        assert await coord.checkpoint_idle_keys() == 0  # just written
        clock.advance(300_000)
        assert await coord.checkpoint_idle_keys() == 0  # nothing changed anywhere since the last round
        await write(coord, partition=1, state_epoch=1)
        clock.advance(300_000)
        assert await coord.checkpoint_idle_keys() == 2
        assert_replays_identically(coord)

    run(main())


# -- batched RPCs ---------------------------------------------------------------------------------


def test_batched_rpcs_return_one_result_per_item_in_order():
    async def main():
        coord = await open_coordinator()
        results = await coord.initialize_states(
            G, [InitializeItem(T, 0, 1, 0), InitializeItem(T, 1, 1, 0), (T2, 0, 1, -1), InitializeItem(T, -1, 1, 0)]
        )
        assert [r.error for r in results] == [Errors.NONE] * 3 + [Errors.INVALID_REQUEST]
        await coord.read_state(G, T, 1, leader_epoch=3)
        results = await coord.write_states(
            G,
            [
                WriteItem(T, 0, 1, 0, 5, [(5, 9, ACKNOWLEDGED, 1)], 5),
                WriteItem(T, 1, 1, 2, 5, []),  # fenced leader epoch
                WriteItem(T, 2, 1, 0, 5, []),  # uninitialized
                WriteItem(T2, 0, 0, 0, 0, []),  # fenced state epoch
                WriteItem(T, 0, 1, 0, 7, [(7, 12, AVAILABLE, 2)], 6),  # the same key again, applied after
            ],
        )
        assert [(r.topic_id, r.partition, r.error) for r in results] == [
            (T, 0, Errors.NONE),
            (T, 1, Errors.FENCED_LEADER_EPOCH),
            (T, 2, Errors.INVALID_REQUEST),
            (T2, 0, Errors.FENCED_STATE_EPOCH),
            (T, 0, Errors.NONE),
        ]
        assert all(r.message for r in results if r.error is not Errors.NONE)
        reads = await coord.read_states(G, [ReadItem(T, 0, 0), (T, 1, 2), ReadItem(T, 9, 0)])
        assert reads[0] == PartitionResult(
            T, 0, Errors.NONE, "", PartitionState(1, 7, [StateBatch(7, 12, AVAILABLE, 2)])
        )
        assert reads[1].error is Errors.FENCED_LEADER_EPOCH and reads[1].data is None
        assert reads[2].error is Errors.INVALID_REQUEST
        summaries = await coord.read_summaries(G, [ReadItem(T, 0, 0), ReadItem(T, 9, 0)])
        assert [r.data for r in summaries] == [StateSummary(1, 0, 7, 6), StateSummary(0, 0, -1, -1)]
        deletes = await coord.delete_states(G, [DeleteItem(T, 0), DeleteItem(T, 9), (T2, 0)])
        assert [r.error for r in deletes] == [Errors.NONE] * 3
        assert sorted(coord.keys()) == [StateKey(G, T, 1)]
        assert await coord.write_states(G, []) == []
        coord._check()

    run(main())


# -- failed appends -------------------------------------------------------------------------------


@memory_log_only("MemoryLog's fail hook (test_state_log_faults has the SegmentLog twin)")
def test_a_failed_append_leaves_state_and_log_unchanged():
    async def main():
        failure = {"exc": None}
        log = MemoryLog(fail_hook=lambda entries: failure["exc"])
        coord = await open_coordinator(1, log=log)
        await coord.initialize_state(G, T, 0, state_epoch=0, start_offset=0)
        await write(coord, batches=[(0, 4, AVAILABLE, 1)])
        snapshot, size = coord._dump(), len(log)
        failure["exc"] = OSError("disk on fire")
        error = await expect(Errors.UNKNOWN_SERVER_ERROR, write(coord, start_offset=3, batches=[(3, 9, ARCHIVED, 2)]))
        assert "disk on fire" in error.message
        await expect(Errors.UNKNOWN_SERVER_ERROR, coord.read_state(G, T, 0, leader_epoch=4))
        await expect(Errors.UNKNOWN_SERVER_ERROR, coord.initialize_state(G, T, 1, state_epoch=0, start_offset=0))
        failure["exc"] = ShareError(Errors.KAFKA_STORAGE_ERROR, "no space")
        await expect(Errors.KAFKA_STORAGE_ERROR, coord.delete_state(G, T, 0))
        assert coord._dump() == snapshot and len(log) == size
        coord._check()
        failure["exc"] = None
        await write(coord, start_offset=3, batches=[(3, 9, ARCHIVED, 2)])  # the due checkpoint is still due
        assert kinds(coord) == "CDC"
        assert_replays_identically(coord)

    run(main())


# -- concurrency ----------------------------------------------------------------------------------


class YieldingLog(MemoryLog):
    """A MemoryLog whose appends suspend (as a durable log's do) and may wait for a gate."""

    def __init__(self):
        super().__init__()
        self.gate: asyncio.Event | None = None

    async def append(self, entries):
        for _ in range(3):
            await asyncio.sleep(0)
        if self.gate is not None:
            await self.gate.wait()
        return await super().append(entries)


@memory_log_only("a gated YieldingLog")
def test_concurrent_writes_to_one_key_are_serialised():
    async def main():
        coord = await open_coordinator(2, log=YieldingLog())
        await coord.initialize_state(G, T, 0, state_epoch=0, start_offset=0)
        writes = [write(coord, start_offset=i, batches=[(i, i + 5, AVAILABLE, i % 3)]) for i in range(12)]
        writes.append(coord.read_state(G, T, 0, leader_epoch=1))
        await asyncio.gather(*writes)
        coord._check()
        log = kinds(coord)
        assert log == "C" + "DDC" * 4 + "D"
        expected = []
        for i in range(12):
            expected = combine(expected, [(i, i + 5, AVAILABLE, i % 3)], i)
        assert list(coord.state(KEY).state_batches) == expected
        assert_replays_identically(coord)

    run(main())


@memory_log_only("a gated YieldingLog")
def test_concurrent_initializes_of_a_new_key_get_successive_checkpoint_epochs():
    async def main():
        coord = await open_coordinator(log=YieldingLog())
        await asyncio.gather(*(coord.initialize_state(G, T, 0, state_epoch=0, start_offset=0) for _ in range(4)))
        assert [r.checkpoint_epoch for r in records(coord)] == [0, 1, 2, 3]

    run(main())


@memory_log_only("a gated YieldingLog")
def test_a_cancelled_write_whose_append_went_through_is_still_replayed():
    async def main():
        log = YieldingLog()
        coord = await open_coordinator(log=log)
        await coord.initialize_state(G, T, 0, state_epoch=0, start_offset=0)
        log.gate = asyncio.Event()
        task = asyncio.ensure_future(write(coord, start_offset=4, batches=[(4, 8, ARCHIVED, 1)]))
        follower = asyncio.ensure_future(write(coord, start_offset=6))
        for _ in range(10):
            await asyncio.sleep(0)
        task.cancel()
        for _ in range(3):
            await asyncio.sleep(0)
        assert not task.done()  # it holds the key until its append has been replayed
        log.gate.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        await follower
        assert coord.state(KEY).start_offset == 6 and kinds(coord) == "CDD"
        assert list(coord.state(KEY).state_batches) == [StateBatch(6, 8, ARCHIVED, 1)]
        assert_replays_identically(coord)

    run(main())


@memory_log_only("a gated YieldingLog")
def test_prune_never_passes_an_append_in_flight():
    async def main():
        log = YieldingLog()
        coord = await open_coordinator(log=log)
        await coord.initialize_state(G, T, 0, state_epoch=0, start_offset=0)
        await coord.delete_state(G, T, 0)
        log.gate = asyncio.Event()
        pending = asyncio.ensure_future(coord.initialize_state(G, T, 1, state_epoch=0, start_offset=0))
        for _ in range(10):
            await asyncio.sleep(0)
        assert coord.last_redundant_offset() == 2  # no live key, but an append starting at 2 is in flight
        log.gate.set()
        await pending
        assert await coord.prune() == 2
        assert coord.keys() == [StateKey(G, T, 1)]
        assert_replays_identically(coord)

    run(main())


# -- lifecycle and invariants ---------------------------------------------------------------------


@memory_log_only("a borrowed MemoryLog")
def test_a_closed_coordinator_is_not_available_and_leaves_a_borrowed_log_open():
    async def main():
        log = MemoryLog()
        coord = await open_coordinator(log=log)
        await coord.initialize_state(G, T, 0, state_epoch=0, start_offset=0)
        await coord.close()
        await coord.close()
        assert coord.closed and not log.closed
        for coro in (
            coord.initialize_state(G, T, 0, state_epoch=0, start_offset=0),
            coord.read_state(G, T, 0, leader_epoch=0),
            write(coord),
            coord.delete_state(G, T, 0),
            coord.read_summary(G, T, 0, leader_epoch=0),
            coord.prune(),
            coord.checkpoint_idle_keys(),
        ):
            await expect(Errors.COORDINATOR_NOT_AVAILABLE, coro)

    run(main())


def test_check_catches_a_broken_invariant():
    async def main():
        coord = await open_coordinator()
        await coord.initialize_state(G, T, 0, state_epoch=0, start_offset=0)
        await write(coord, batches=[(0, 4, AVAILABLE, 1), (6, 9, AVAILABLE, 1)])
        coord._check()
        key_state = coord._states[KEY]
        key_state.state = ShareCheckpoint(0, 0, 0, 0, 0, 0, 0, [(0, 4, AVAILABLE, 1), (5, 9, AVAILABLE, 1)])
        with pytest.raises(AssertionError):
            coord._check()

    run(main())
