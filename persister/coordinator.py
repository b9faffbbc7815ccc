"""`ShareCoordinator`: the one implementation of the share coordinator's rules, over a RecordLog.

Every operation validates its request, builds at most one record per key, appends it to the log and,
once the append is durable, replays it; replaying is the only way the in-memory state changes, so
recovery (replaying the whole log on open) is the same code path as normal operation, and a failed
append leaves the state untouched. Operations on one key are serialised by a per-key lock held from
validation to replay, so two concurrent writes never both validate against the same state.

The rules are Kafka's (coordinator-facts §1.2-1.3, §2.3-2.6) with the decisions noted where they
differ: see `_next_record`, `read_state`, `lowest_live_checkpoint_offset` and `checkpoint_idle_keys`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
from typing import AsyncIterator, Awaitable, Callable, Iterable, Sequence

from sharegroup.clock import Clock, SystemClock
from sharegroup.errors import Errors, ShareError
from sharegroup.types import PartitionState, StateBatch, StateSummary

from .combiner import combine
from .log_api import RecordLog
from .records import ShareCheckpoint, ShareDelta, ShareRecord, StateKey
from .requests import DeleteItem, InitializeItem, PartitionResult, ReadItem, WriteItem
from .validation import (
    PERSISTED_DELIVERY_STATES,
    check_delivery_complete_count,
    check_epoch,
    check_key,
    check_start_offset,
    check_state_batches,
)

__all__ = ["ShareCoordinator"]

RECORDS_PER_SNAPSHOT_MAX = 500  # share.coordinator.snapshot.update.records.per.snapshot is in [0, 500]
_UNINITIALIZED_EPOCH = 0


@dataclasses.dataclass(slots=True)
class _KeyState:
    """What the coordinator knows of one live key; every field is derived by replay alone."""

    state: ShareCheckpoint  # the merged current state, in checkpoint form (Kafka's ShareGroupOffset)
    leader_epoch_max: int  # highest leader epoch replayed (Kafka's leaderEpochMap): the fence
    state_epoch_max: int  # highest state epoch replayed (Kafka's stateEpochMap): the fence
    deltas_since_checkpoint: int  # deltas replayed since the latest checkpoint (snapshotUpdateCount)
    checkpoint_offset: int  # log offset of the latest checkpoint
    leader_fence_offset: int  # log offset of the latest record carrying leader_epoch_max
    state_fence_offset: int  # log offset of the latest record carrying state_epoch_max

    @property
    def pin_offset(self) -> int:
        """The lowest log offset this key still needs on replay: its latest checkpoint, or an older
        record that set a fence the state no longer carries (a re-initialize resets the leader epoch to
        0 but keeps the fence, which must survive pruning)."""
        pin = self.checkpoint_offset
        if self.leader_epoch_max > self.state.leader_epoch:
            pin = min(pin, self.leader_fence_offset)
        if self.state_epoch_max > self.state.state_epoch:
            pin = min(pin, self.state_fence_offset)
        return pin


class _KeyLocks:
    """One asyncio.Lock per key that has an operation running or waiting; dropped when unused."""

    __slots__ = ("_locks",)

    def __init__(self) -> None:
        self._locks: dict[StateKey, list] = {}  # key -> [lock, operations holding or awaiting it]

    @contextlib.asynccontextmanager
    async def hold(self, key: StateKey) -> AsyncIterator[None]:
        entry = self._locks.get(key)
        if entry is None:
            entry = self._locks[key] = [asyncio.Lock(), 0]
        entry[1] += 1
        try:
            async with entry[0]:
                yield
        finally:
            entry[1] -= 1
            if entry[1] == 0:
                del self._locks[key]

    def _check(self) -> None:
        for _lock, users in self._locks.values():
            assert users > 0, "a lock nobody holds or awaits must have been dropped"


class ShareCoordinator:
    """Share-group state for many share-partitions: validation, fencing, combining, checkpointing.

    Build it with `await ShareCoordinator.open(log, ...)`; it owns (and closes) only a log it opened
    itself from a directory. `snapshot_update_records_per_snapshot` (0..500) is the number of deltas
    between two checkpoints of a key; `cold_checkpoint_interval_ms` is how old a key's latest checkpoint
    may get before `checkpoint_idle_keys` writes a fresh one.
    """

    def __init__(
        self,
        log: RecordLog,
        *,
        snapshot_update_records_per_snapshot: int = 500,
        cold_checkpoint_interval_ms: int = 300_000,
        clock: Clock = SystemClock(),
        owns_log: bool = False,
    ) -> None:
        """Replay `log` into a new coordinator (synchronously; prefer `open`)."""
        n = snapshot_update_records_per_snapshot
        if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= RECORDS_PER_SNAPSHOT_MAX:
            raise ValueError(
                "share.coordinator.snapshot.update.records.per.snapshot must be an int in "
                f"[0, {RECORDS_PER_SNAPSHOT_MAX}], not {n!r}"
            )
        interval = cold_checkpoint_interval_ms
        if not isinstance(interval, int) or isinstance(interval, bool) or interval < 1:
            raise ValueError(f"cold_checkpoint_interval_ms must be an int >= 1, not {interval!r}")
        if not isinstance(log, RecordLog):
            raise TypeError(f"log must be a RecordLog, not {type(log).__name__}")
        self._log = log
        self._owns_log = owns_log
        self._records_per_checkpoint = n
        self._cold_checkpoint_interval_ms = interval
        self._clock = clock
        self._states: dict[StateKey, _KeyState] = {}
        self._locks = _KeyLocks()
        self._append_floors: dict[int, int] = {}  # token -> log end offset when that append began
        self._next_token = 0
        self._commits: set[asyncio.Future] = set()
        self._closed = False
        for entry in log.read_all():
            self._replay(entry.offset, entry.key, entry.record)

    @classmethod
    async def open(
        cls,
        log: RecordLog | str | os.PathLike,
        *,
        snapshot_update_records_per_snapshot: int = 500,
        cold_checkpoint_interval_ms: int = 300_000,
        clock: Clock = SystemClock(),
        **log_options,
    ) -> ShareCoordinator:
        """Open a coordinator over `log`, a RecordLog or a state-log directory, replaying it fully.

        `log_options` (such as fsync, segment_bytes) go to the segment log opened for a directory; they
        are refused with a RecordLog instance, which the caller keeps owning.
        """
        owns_log = isinstance(log, (str, os.PathLike))
        if owns_log:
            log = await _open_segment_log(log, **log_options)
        elif log_options:
            raise TypeError(f"log options {sorted(log_options)} apply only when opening a log directory")
        try:
            return cls(
                log,
                snapshot_update_records_per_snapshot=snapshot_update_records_per_snapshot,
                cold_checkpoint_interval_ms=cold_checkpoint_interval_ms,
                clock=clock,
                owns_log=owns_log,
            )
        except BaseException:
            if owns_log:
                await log.close()
            raise

    # -- properties --------------------------------------------------------------------------------

    @property
    def log(self) -> RecordLog:
        return self._log

    @property
    def snapshot_update_records_per_snapshot(self) -> int:
        return self._records_per_checkpoint

    @property
    def cold_checkpoint_interval_ms(self) -> int:
        return self._cold_checkpoint_interval_ms

    @property
    def closed(self) -> bool:
        return self._closed

    def keys(self) -> list[StateKey]:
        """The live keys (initialized and not deleted)."""
        return list(self._states)

    def state(self, key: StateKey) -> ShareCheckpoint | None:
        """The current merged state of `key` in checkpoint form, or None when it has no state."""
        key_state = self._states.get(key)
        return None if key_state is None else key_state.state

    # -- the Persister protocol --------------------------------------------------------------------

    async def initialize_state(
        self, group_id: str, topic_id, partition: int, *, state_epoch: int, start_offset: int
    ) -> None:
        """InitializeShareGroupState: write a fresh checkpoint, discarding any previous state.

        Fenced (FENCED_STATE_EPOCH) when the stored state epoch is greater; an equal epoch resets the
        state, which is how altering offsets works.
        """
        self._check_active()
        key = check_key(group_id, topic_id, partition)
        state_epoch = check_epoch(state_epoch, "state")
        start_offset = check_start_offset(start_offset)
        async with self._locks.hold(key):
            self._check_active()
            key_state = self._states.get(key)
            if key_state is not None and key_state.state_epoch_max > state_epoch:
                raise ShareError(
                    Errors.FENCED_STATE_EPOCH,
                    f"Initialize with state epoch {state_epoch} below the stored {key_state.state_epoch_max}.",
                )
            now_ms = self._clock.now_ms()
            record = ShareCheckpoint(
                checkpoint_epoch=0 if key_state is None else key_state.state.checkpoint_epoch + 1,
                state_epoch=state_epoch,
                leader_epoch=_UNINITIALIZED_EPOCH,
                start_offset=start_offset,
                delivery_complete_count=-1 if start_offset == -1 else 0,
                create_timestamp_ms=now_ms,
                write_timestamp_ms=now_ms,
                state_batches=(),
            )
            await self._append_and_replay([(key, record)])

    async def read_state(self, group_id: str, topic_id, partition: int, *, leader_epoch: int) -> PartitionState:
        """ReadShareGroupState: the stored state epoch, start offset and batches.

        A leader epoch above the stored state's is persisted first (a record with no batches, counting
        toward the deltas between checkpoints). Kafka compares with its max-seen map instead; comparing
        with the state's own epoch also re-persists the fence after a re-initialize reset it to 0, so a
        pruned log cannot forget it. Without a re-initialize the two agree.
        """
        self._check_active()
        key = check_key(group_id, topic_id, partition)
        leader_epoch = check_epoch(leader_epoch, "leader")
        async with self._locks.hold(key):
            self._check_active()
            key_state = self._initialized(key, "Read")
            self._check_leader_epoch(key_state, leader_epoch)
            current = key_state.state
            if leader_epoch > current.leader_epoch:
                record = self._next_record(
                    key_state,
                    leader_epoch=leader_epoch,
                    start_offset=current.start_offset,
                    delivery_complete_count=current.delivery_complete_count,
                    state_batches=(),
                )
                await self._append_and_replay([(key, record)])
                current = self._states[key].state
            return PartitionState(current.state_epoch, current.start_offset, list(current.state_batches))

    async def write_state(
        self,
        group_id: str,
        topic_id,
        partition: int,
        *,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        state_batches: Sequence[StateBatch],
        delivery_complete_count: int = -1,
    ) -> None:
        """WriteShareGroupState: one delta (or, every N deltas, a checkpoint) of the request's batches.

        The start offset never moves backwards (-1 leaves it unchanged) and the stored epochs never
        change; FENCED_LEADER_EPOCH / FENCED_STATE_EPOCH when a stored epoch is greater.
        """
        self._check_active()
        key = check_key(group_id, topic_id, partition)
        leader_epoch = check_epoch(leader_epoch, "leader")
        state_epoch = check_epoch(state_epoch, "state")
        start_offset = check_start_offset(start_offset)
        delivery_complete_count = check_delivery_complete_count(delivery_complete_count)
        batches = check_state_batches(state_batches)
        async with self._locks.hold(key):
            self._check_active()
            key_state = self._initialized(key, "Write")
            self._check_leader_epoch(key_state, leader_epoch)
            if key_state.state_epoch_max > state_epoch:
                raise ShareError(
                    Errors.FENCED_STATE_EPOCH,
                    f"Write with state epoch {state_epoch} below the stored {key_state.state_epoch_max}.",
                )
            record = self._next_record(
                key_state,
                leader_epoch=key_state.state.leader_epoch,  # a write never changes the stored epochs
                start_offset=start_offset,
                delivery_complete_count=delivery_complete_count,
                state_batches=batches,
            )
            await self._append_and_replay([(key, record)])

    async def delete_state(self, group_id: str, topic_id, partition: int) -> None:
        """DeleteShareGroupState: a tombstone for a live key; nothing (and success) for an absent one."""
        self._check_active()
        key = check_key(group_id, topic_id, partition)
        async with self._locks.hold(key):
            self._check_active()
            if key in self._states:
                await self._append_and_replay([(key, None)])

    async def read_summary(self, group_id: str, topic_id, partition: int, *, leader_epoch: int) -> StateSummary:
        """ReadShareGroupStateSummary: epochs, start offset and delivery complete count; no fencing.

        An absent key is not an error: start offset and delivery complete count -1, epochs 0.
        """
        self._check_active()
        key = check_key(group_id, topic_id, partition)
        if not isinstance(leader_epoch, int) or isinstance(leader_epoch, bool):
            raise ShareError(Errors.INVALID_REQUEST, "The leader epoch must be an int.")
        async with self._locks.hold(key):  # answers after pending operations on the key, as Kafka does
            self._check_active()
            key_state = self._states.get(key)
            if key_state is None:
                return StateSummary(state_epoch=0, leader_epoch=0, start_offset=-1, delivery_complete_count=-1)
            s = key_state.state
            return StateSummary(s.state_epoch, s.leader_epoch, s.start_offset, s.delivery_complete_count)

    # -- batched RPC shape -------------------------------------------------------------------------

    async def write_states(self, group_id: str, items: Iterable[WriteItem]) -> list[PartitionResult]:
        """WriteShareGroupState for many partitions of one group; one result per item, in order."""
        items = [item if isinstance(item, WriteItem) else WriteItem(*item) for item in items]
        return await self._per_partition(
            items,
            lambda it: self.write_state(
                group_id,
                it.topic_id,
                it.partition,
                state_epoch=it.state_epoch,
                leader_epoch=it.leader_epoch,
                start_offset=it.start_offset,
                state_batches=it.state_batches,
                delivery_complete_count=it.delivery_complete_count,
            ),
        )

    async def read_states(self, group_id: str, items: Iterable[ReadItem]) -> list[PartitionResult]:
        """ReadShareGroupState for many partitions; `data` holds each PartitionState."""
        items = [item if isinstance(item, ReadItem) else ReadItem(*item) for item in items]
        return await self._per_partition(
            items, lambda it: self.read_state(group_id, it.topic_id, it.partition, leader_epoch=it.leader_epoch)
        )

    async def read_summaries(self, group_id: str, items: Iterable[ReadItem]) -> list[PartitionResult]:
        """ReadShareGroupStateSummary for many partitions; `data` holds each StateSummary."""
        items = [item if isinstance(item, ReadItem) else ReadItem(*item) for item in items]
        return await self._per_partition(
            items, lambda it: self.read_summary(group_id, it.topic_id, it.partition, leader_epoch=it.leader_epoch)
        )

    async def initialize_states(self, group_id: str, items: Iterable[InitializeItem]) -> list[PartitionResult]:
        """InitializeShareGroupState for many partitions of one group."""
        items = [item if isinstance(item, InitializeItem) else InitializeItem(*item) for item in items]
        return await self._per_partition(
            items,
            lambda it: self.initialize_state(
                group_id, it.topic_id, it.partition, state_epoch=it.state_epoch, start_offset=it.start_offset
            ),
        )

    async def delete_states(self, group_id: str, items: Iterable[DeleteItem]) -> list[PartitionResult]:
        """DeleteShareGroupState for many partitions of one group."""
        items = [item if isinstance(item, DeleteItem) else DeleteItem(*item) for item in items]
        return await self._per_partition(items, lambda it: self.delete_state(group_id, it.topic_id, it.partition))

    async def _per_partition(
        self, items: list, operation: Callable[[object], Awaitable[object]]
    ) -> list[PartitionResult]:
        """Run one operation per item concurrently (same-key items queue on the key lock in item order)
        and turn each outcome into a PartitionResult; the log may group the appends into one."""

        async def one(item) -> PartitionResult:
            try:
                data = await operation(item)
            except ShareError as exc:
                return PartitionResult(item.topic_id, item.partition, exc.error, exc.message)
            return PartitionResult(item.topic_id, item.partition, Errors.NONE, "", data)

        if len(items) == 1:
            return [await one(items[0])]
        return list(await asyncio.gather(*(one(item) for item in items)))

    # -- pruning and idle checkpoints --------------------------------------------------------------

    def lowest_live_checkpoint_offset(self) -> int | None:
        """The lowest log offset of any live key's latest checkpoint, or None when no key is live.

        Tombstoned keys are gone from the map, so they never pin it (KAFKA-19695). A key whose epoch
        fence is above what its checkpoint carries (only after a re-initialize, until the next read)
        counts at the record that set the fence instead, so pruning never forgets a fence. O(keys).
        """
        return min((key_state.pin_offset for key_state in self._states.values()), default=None)

    def last_redundant_offset(self) -> int:
        """Exclusive bound below which every record is redundant: each live key has its full state in a
        checkpoint at or above it. Appends still in flight hold it at the log end they started from."""
        bound = self.lowest_live_checkpoint_offset()
        if bound is None:
            bound = self._log.end_offset
        if self._append_floors:
            bound = min(bound, min(self._append_floors.values()))
        return bound

    async def prune(self) -> int:
        """Ask the log to delete everything below `last_redundant_offset()`; return the log start offset."""
        self._check_active()
        bound = self.last_redundant_offset()
        if bound > self._log.start_offset:
            return await self._log.delete_below(bound)
        return self._log.start_offset

    async def checkpoint_idle_keys(self) -> int:
        """Re-checkpoint every key whose latest checkpoint is `cold_checkpoint_interval_ms` old or older,
        so that it stops pinning the prune point; return how many checkpoints were written.

        "Last write" is the checkpoint's write timestamp, as in Kafka: deltas carry no time, and a key
        that only receives deltas pins the log just as much as an idle one. The new checkpoint has the
        same content, the next checkpoint epoch, the same create time and write time now. When nothing
        has changed since the previous round (every key's latest checkpoint is such a cold one with no
        delta after it), nothing is written, so an idle coordinator does not rewrite itself forever.
        """
        self._check_active()
        if all(
            ks.deltas_since_checkpoint == 0 and ks.state.create_timestamp_ms != ks.state.write_timestamp_ms
            for ks in self._states.values()
        ):
            return 0
        now_ms = self._clock.now_ms()
        idle = [
            key
            for key, ks in self._states.items()
            if now_ms - ks.state.write_timestamp_ms >= self._cold_checkpoint_interval_ms
        ]
        if not idle:
            return 0
        written = await asyncio.gather(*(self._checkpoint_if_idle(key) for key in idle))
        return sum(written)

    async def _checkpoint_if_idle(self, key: StateKey) -> int:
        async with self._locks.hold(key):
            self._check_active()
            key_state = self._states.get(key)
            now_ms = self._clock.now_ms()
            if key_state is None or now_ms - key_state.state.write_timestamp_ms < self._cold_checkpoint_interval_ms:
                return 0  # deleted or checkpointed while this one waited for the key
            current = key_state.state
            record = dataclasses.replace(
                current, checkpoint_epoch=current.checkpoint_epoch + 1, write_timestamp_ms=now_ms
            )
            await self._append_and_replay([(key, record)])
            return 1

    async def close(self) -> None:
        """Refuse new operations (COORDINATOR_NOT_AVAILABLE), let appends in flight finish, and close the
        log if this coordinator opened it."""
        if self._closed:
            return
        self._closed = True
        if self._commits:
            await asyncio.gather(*self._commits, return_exceptions=True)
        if self._owns_log:
            await self._log.close()

    # -- the rules ---------------------------------------------------------------------------------

    def _check_active(self) -> None:
        if self._closed:
            raise ShareError(Errors.COORDINATOR_NOT_AVAILABLE, "Share coordinator is not available.")

    def _initialized(self, key: StateKey, operation: str) -> _KeyState:
        key_state = self._states.get(key)
        if key_state is None:
            raise ShareError(
                Errors.INVALID_REQUEST, f"{operation} operation on uninitialized share partition not allowed."
            )
        return key_state

    @staticmethod
    def _check_leader_epoch(key_state: _KeyState, leader_epoch: int) -> None:
        if key_state.leader_epoch_max > leader_epoch:
            raise ShareError(
                Errors.FENCED_LEADER_EPOCH,
                f"Leader epoch {leader_epoch} is below the stored {key_state.leader_epoch_max}.",
            )

    def _next_record(
        self,
        key_state: _KeyState,
        *,
        leader_epoch: int,
        start_offset: int,
        delivery_complete_count: int,
        state_batches: Sequence[StateBatch],
    ) -> ShareRecord:
        """The one record a write (or an epoch-raising read) produces (coordinator-facts §2.3).

        A checkpoint of the full combined state once the key has had N deltas since its latest
        checkpoint, else a delta of the request's batches combined among themselves and pruned by the
        new start offset, which is never below the stored one. Unlike Kafka, the delta count restarts
        at every checkpoint (initialize and idle ones too), so it is a pure function of the log and
        "N deltas since the last checkpoint" holds literally.
        """
        current = key_state.state
        new_start_offset = max(start_offset, current.start_offset)
        if key_state.deltas_since_checkpoint >= self._records_per_checkpoint:
            now_ms = self._clock.now_ms()
            return ShareCheckpoint(
                checkpoint_epoch=current.checkpoint_epoch + 1,
                state_epoch=current.state_epoch,
                leader_epoch=leader_epoch,
                start_offset=new_start_offset,
                delivery_complete_count=delivery_complete_count,
                create_timestamp_ms=now_ms,
                write_timestamp_ms=now_ms,
                state_batches=combine(current.state_batches, state_batches, new_start_offset),
            )
        return ShareDelta(
            checkpoint_epoch=current.checkpoint_epoch,
            leader_epoch=leader_epoch,
            start_offset=new_start_offset,
            delivery_complete_count=delivery_complete_count,
            state_batches=combine((), state_batches, new_start_offset),
        )

    # -- appending and replaying -------------------------------------------------------------------

    async def _append_and_replay(self, entries: list[tuple[StateKey, ShareRecord]]) -> list[int]:
        """Append, then replay once durable. Shielded: a cancelled caller still waits for the records it
        may already have made durable to be replayed before it lets go of the key."""
        task = asyncio.ensure_future(self._commit(entries))
        self._commits.add(task)
        task.add_done_callback(self._commits.discard)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            while not task.done():
                try:
                    await asyncio.shield(task)
                except asyncio.CancelledError:
                    pass
            if not task.cancelled():
                task.exception()  # retrieved: the caller's cancellation is what it asked for
            raise

    async def _commit(self, entries: list[tuple[StateKey, ShareRecord]]) -> list[int]:
        token = self._next_token
        self._next_token += 1
        self._append_floors[token] = self._log.end_offset
        try:
            try:
                offsets = await self._log.append(entries)
            except ShareError:
                raise
            except Exception as exc:
                raise ShareError(
                    Errors.UNKNOWN_SERVER_ERROR, f"Unable to write share group state: {exc!r}"
                ) from exc
            if len(offsets) != len(entries):
                raise AssertionError(f"log returned {len(offsets)} offsets for {len(entries)} records")
            for offset, (key, record) in zip(offsets, entries):
                self._replay(offset, key, record)
            return offsets
        finally:
            del self._append_floors[token]

    def _replay(self, offset: int, key: StateKey, record: ShareRecord) -> None:
        """Apply one durable record to the in-memory state (coordinator-facts §2.4)."""
        key_state = self._states.get(key)
        if record is None:
            self._states.pop(key, None)
        elif isinstance(record, ShareCheckpoint):
            if key_state is None:
                self._states[key] = _KeyState(
                    record, record.leader_epoch, record.state_epoch, 0, offset, offset, offset
                )
            else:
                # ">=": the latest record carrying a fence is the one replay must keep, and it only
                # moves forward, so a key's pin never drops below a bound already pruned to.
                if record.leader_epoch >= key_state.leader_epoch_max:
                    key_state.leader_epoch_max = record.leader_epoch
                    key_state.leader_fence_offset = offset
                if record.state_epoch >= key_state.state_epoch_max:
                    key_state.state_epoch_max = record.state_epoch
                    key_state.state_fence_offset = offset
                key_state.state = record
                key_state.deltas_since_checkpoint = 0
                key_state.checkpoint_offset = offset
        elif isinstance(record, ShareDelta):
            if key_state is None:
                # Only a log pruned by someone else starts a key with a delta; Kafka builds the state
                # from it (state epoch and timestamps 0). It pins pruning here until a checkpoint.
                leader_epoch = max(record.leader_epoch, 0)
                state = ShareCheckpoint(
                    record.checkpoint_epoch,
                    0,
                    leader_epoch,
                    record.start_offset,
                    record.delivery_complete_count,
                    0,
                    0,
                    combine((), record.state_batches, record.start_offset),
                )
                self._states[key] = _KeyState(state, leader_epoch, 0, 1, offset, offset, offset)
                return
            old = key_state.state
            start_offset = old.start_offset if record.start_offset == -1 else record.start_offset
            leader_epoch = old.leader_epoch if record.leader_epoch == -1 else record.leader_epoch
            key_state.state = ShareCheckpoint(
                old.checkpoint_epoch,
                old.state_epoch,
                leader_epoch,
                start_offset,
                record.delivery_complete_count,
                old.create_timestamp_ms,
                old.write_timestamp_ms,
                combine(old.state_batches, record.state_batches, start_offset),
            )
            if record.leader_epoch >= key_state.leader_epoch_max:
                key_state.leader_epoch_max = record.leader_epoch
                key_state.leader_fence_offset = offset
            key_state.deltas_since_checkpoint += 1
        else:
            raise TypeError(f"cannot replay a {type(record).__name__}")

    # -- test support ------------------------------------------------------------------------------

    def _seed(
        self,
        group_id: str,
        topic_id,
        partition: int,
        *,
        state_epoch: int,
        start_offset: int,
        state_batches: Sequence[StateBatch],
        leader_epoch: int = 0,
        delivery_complete_count: int = -1,
    ) -> ShareCheckpoint:
        """Write a checkpoint of the given state straight to a log with a synchronous `append_now`
        (MemoryLog), bypassing fencing; for test set-up. Returns the checkpoint written."""
        append_now = getattr(self._log, "append_now", None)
        if append_now is None:
            raise TypeError("seeding needs a log with a synchronous append_now (MemoryLog)")
        self._check_active()
        key = check_key(group_id, topic_id, partition)
        state_epoch = check_epoch(state_epoch, "state")
        leader_epoch = check_epoch(leader_epoch, "leader")
        start_offset = check_start_offset(start_offset)
        delivery_complete_count = check_delivery_complete_count(delivery_complete_count)
        batches = check_state_batches(state_batches)
        key_state = self._states.get(key)
        now_ms = self._clock.now_ms()
        record = ShareCheckpoint(
            checkpoint_epoch=0 if key_state is None else key_state.state.checkpoint_epoch + 1,
            state_epoch=state_epoch,
            leader_epoch=leader_epoch,
            start_offset=start_offset,
            delivery_complete_count=delivery_complete_count,
            create_timestamp_ms=now_ms,
            write_timestamp_ms=now_ms,
            state_batches=combine((), batches, start_offset),
        )
        (offset,) = append_now([(key, record)])
        self._replay(offset, key, record)
        return record

    def _dump(self) -> dict[StateKey, tuple]:
        """Everything replay derives, per key, in a comparable form (for replay-equivalence tests)."""
        return {key: dataclasses.astuple(ks) for key, ks in self._states.items()}

    def _check(self) -> None:
        """Assert every invariant of the in-memory state (tests call it after each step)."""
        log_start, log_end = self._log.start_offset, self._log.end_offset
        assert 0 <= log_start <= log_end
        for key, ks in self._states.items():
            assert type(key) is StateKey and key.partition >= 0, key
            s = ks.state
            assert type(s) is ShareCheckpoint, s
            assert s.checkpoint_epoch >= 0 and s.state_epoch >= 0 and s.leader_epoch >= 0, s
            assert ks.leader_epoch_max >= s.leader_epoch and ks.state_epoch_max >= s.state_epoch, ks
            assert ks.deltas_since_checkpoint >= 0, ks
            assert log_start <= ks.checkpoint_offset < log_end, (ks.checkpoint_offset, log_start, log_end)
            assert log_start <= ks.pin_offset <= ks.checkpoint_offset, ks
            assert ks.leader_fence_offset < log_end and ks.state_fence_offset < log_end, ks
            assert s.start_offset >= -1 and s.delivery_complete_count >= -1, s
            previous = None
            for batch in s.state_batches:
                first, last, state, count = batch
                assert type(batch) is StateBatch and 0 <= first <= last, batch
                assert s.start_offset == -1 or first >= s.start_offset, (batch, s.start_offset)
                assert state in PERSISTED_DELIVERY_STATES and 0 <= count <= 2**15 - 1, batch
                if previous is not None:
                    assert previous.last_offset < first, "batches must be sorted and disjoint"
                    assert not (
                        previous.last_offset + 1 == first
                        and previous.delivery_state == state
                        and previous.delivery_count == count
                    ), "touching batches with equal state and count must be coalesced"
                previous = batch
        assert all(floor >= log_start for floor in self._append_floors.values()), "pruned past an append"
        self._locks._check()


async def _open_segment_log(log_dir: str | os.PathLike, **log_options) -> RecordLog:
    """Open the durable segment log in `log_dir` (persister/log.py, added by the segment-log issue)."""
    try:
        from .log import SegmentLog  # type: ignore[import-not-found]
    except ImportError as exc:
        raise NotImplementedError(
            "opening a state-log directory needs the segment log (persister/log.py), not available yet"
        ) from exc
    return await SegmentLog.open(log_dir, **log_options)
