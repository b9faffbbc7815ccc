"""`ShareCoordinator`: the share coordinator's requests and rules over a RecordLog.

Every operation validates its request, builds at most one record per key, appends it to the log and,
once the append is durable, replays it; replaying is the only way the in-memory state changes, so
recovery (replaying the whole log on open) is the same code path as normal operation, and a failed
append leaves the state untouched. The coordinator is four modules, one concern each:

- this one: the requests (the Persister protocol, the batched RPC shape) and the rules that turn a
  request into a record (validation, fencing, the checkpoint count: `_next_record`);
- `persister.append_pipeline`: per-key holds, appends, and replay once a record is durable;
- `persister.state_replay`: how a record changes a key's state, and the replay of a whole log on open
  (shared with the audit);
- `persister.pruning`: which offsets are redundant and which keys are cold.

The invariants of the replayed state, asserted by `_check` in tests, are in `persister.state_invariants`.

The rules are those of Kafka's share coordinator (request validation and fencing, one record per
write, a checkpoint every N deltas, replay, pruning) with the decisions noted where they
differ: see `_next_record`, `read_state`, `persister.pruning` and `checkpoint_idle_keys`.
"""

from __future__ import annotations

import asyncio
import functools
import os
from typing import Iterable, Sequence

import msgpack

from sharegroup.clock import Clock, SystemClock
from sharegroup.errors import Errors, ShareError
from sharegroup.types import PartitionState, StateBatch, StateSummary

from . import pruning
from .append_pipeline import AppendPipeline
from .combiner import combine, is_canonical, merge_canonical
from .frame_codec import frame_codec
from .request_validation import (
    INT32_MAX,
    INT64_MAX,
    RECORDS_PER_SNAPSHOT_MAX,
    check_delivery_complete_count,
    check_epoch,
    check_key,
    check_start_offset,
    check_state_batches,
    fast_state_batches,
    request_key,
)
from .state_invariants import check_key_states
from .state_log import SegmentLog
from .state_log_api import RecordLog
from .state_records import ShareCheckpoint, ShareDelta, ShareRecord, StateKey, encode_key, encode_record, new_delta
from .state_replay import KeyState, apply_record, replay_log, replay_record
from .state_requests import DeleteItem, InitializeItem, PartitionResult, ReadItem, WriteItem, as_items, per_partition

__all__ = ["ShareCoordinator"]

_UNINITIALIZED_EPOCH = 0


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
        self._closed = False
        self._pack = msgpack.Packer(use_bin_type=True).pack  # not thread-safe: one per coordinator
        self._encode_delta_frame = frame_codec().encode_delta_frame
        self._pipeline = AppendPipeline(log, self._replay, self._encode)
        self._states: dict[StateKey, KeyState] = replay_log(log)

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
            log = await SegmentLog.open(log, **log_options)
        elif log_options:
            raise TypeError(f"log options {sorted(log_options)} apply only when opening a log directory")
        build = functools.partial(
            cls,
            log,
            snapshot_update_records_per_snapshot=snapshot_update_records_per_snapshot,
            cold_checkpoint_interval_ms=cold_checkpoint_interval_ms,
            clock=clock,
            owns_log=owns_log,
        )
        try:
            if not owns_log:
                return build()  # a log the caller holds may be appended to by it: replay on the loop
            # Nobody else can touch a log this call opened until it returns, so the replay (seconds for
            # a long log) runs in a worker thread and the event loop stays responsive meanwhile.
            building = asyncio.get_running_loop().run_in_executor(None, build)
            try:
                return await asyncio.shield(building)
            except asyncio.CancelledError:
                while not building.done():  # the log stays in use until the replay has finished
                    try:
                        await asyncio.shield(building)
                    except asyncio.CancelledError:
                        pass
                raise
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
        key = request_key(group_id, topic_id, partition)
        state_epoch = check_epoch(state_epoch, "state")
        start_offset = check_start_offset(start_offset)
        await self._pipeline.hold(key)
        try:
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
        except BaseException:
            self._pipeline.release(key)
            raise
        await self._pipeline.append_and_replay(key, record)

    async def read_state(self, group_id: str, topic_id, partition: int, *, leader_epoch: int) -> PartitionState:
        """ReadShareGroupState: the stored state epoch, start offset and batches.

        A leader epoch above the stored state's is persisted first (a record with no batches, counting
        toward the deltas between checkpoints). Kafka compares with its max-seen map instead; comparing
        with the state's own epoch also re-persists the fence after a re-initialize reset it to 0, so a
        pruned log cannot forget it. Without a re-initialize the two agree.
        """
        self._check_active()
        key = request_key(group_id, topic_id, partition)
        leader_epoch = check_epoch(leader_epoch, "leader")
        await self._pipeline.hold(key)
        try:
            self._check_active()
            key_state = self._initialized(key, "Read")
            self._check_leader_epoch(key_state, leader_epoch)
            current = key_state.state
            record = None
            if leader_epoch > current.leader_epoch:
                record = self._next_record(
                    key_state,
                    leader_epoch=leader_epoch,
                    start_offset=current.start_offset,
                    delivery_complete_count=current.delivery_complete_count,
                    state_batches=(),
                )
        except BaseException:
            self._pipeline.release(key)
            raise
        if record is None:
            self._pipeline.release(key)
        else:
            current = await self._pipeline.append_and_replay(key, record)
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

        The hot path of the coordinator: the checks below take a fast branch for plain ints and fall
        back to the validation functions (same errors, same order) for anything else.
        """
        if self._closed:
            self._check_active()
        key = request_key(group_id, topic_id, partition)
        if not (type(leader_epoch) is int and 0 <= leader_epoch <= INT32_MAX):
            leader_epoch = check_epoch(leader_epoch, "leader")
        if not (type(state_epoch) is int and 0 <= state_epoch <= INT32_MAX):
            state_epoch = check_epoch(state_epoch, "state")
        if not (type(start_offset) is int and -1 <= start_offset <= INT64_MAX):
            start_offset = check_start_offset(start_offset)
        if not (type(delivery_complete_count) is int and -1 <= delivery_complete_count <= INT32_MAX):
            delivery_complete_count = check_delivery_complete_count(delivery_complete_count)
        batches, canonical = fast_state_batches(state_batches)
        held = self._pipeline.held
        size = len(held)
        held.setdefault(key, None)  # takes the hold when the key is free (one hash of the key, not two)
        if len(held) == size:
            await self._pipeline.wait_for_key(key)
        try:
            if self._closed:
                self._check_active()
            key_state = self._states.get(key)
            if key_state is None:
                key_state = self._initialized(key, "Write")
            if key_state.leader_epoch_max > leader_epoch:
                self._check_leader_epoch(key_state, leader_epoch)
            if key_state.state_epoch_max > state_epoch:
                raise ShareError(
                    Errors.FENCED_STATE_EPOCH,
                    f"Write with state epoch {state_epoch} below the stored {key_state.state_epoch_max}.",
                )
            # A write never changes the stored epochs (positional arguments: the hot path).
            record = self._next_record(
                key_state, key_state.state.leader_epoch, start_offset, delivery_complete_count, batches, canonical
            )
        except BaseException:
            self._pipeline.release(key)
            raise
        await self._pipeline.append_and_replay(key, record, key_state)

    async def delete_state(self, group_id: str, topic_id, partition: int) -> None:
        """DeleteShareGroupState: a tombstone for a live key; nothing (and success) for an absent one."""
        self._check_active()
        key = request_key(group_id, topic_id, partition)
        await self._pipeline.hold(key)
        try:
            self._check_active()
            live = key in self._states
        except BaseException:
            self._pipeline.release(key)
            raise
        if live:
            await self._pipeline.append_and_replay(key, None)
        else:
            self._pipeline.release(key)

    async def read_summary(self, group_id: str, topic_id, partition: int, *, leader_epoch: int) -> StateSummary:
        """ReadShareGroupStateSummary: epochs, start offset and delivery complete count; no fencing.

        An absent key is not an error: start offset and delivery complete count -1, epochs 0.
        """
        self._check_active()
        key = request_key(group_id, topic_id, partition)
        if not isinstance(leader_epoch, int) or isinstance(leader_epoch, bool):
            raise ShareError(Errors.INVALID_REQUEST, "The leader epoch must be an int.")
        await self._pipeline.hold(key)  # answers after pending operations on the key, as Kafka does
        try:
            self._check_active()
            key_state = self._states.get(key)
        finally:
            self._pipeline.release(key)
        if key_state is None:
            return StateSummary(state_epoch=0, leader_epoch=0, start_offset=-1, delivery_complete_count=-1)
        s = key_state.state
        return StateSummary(s.state_epoch, s.leader_epoch, s.start_offset, s.delivery_complete_count)

    # -- batched RPC shape -------------------------------------------------------------------------

    async def write_states(self, group_id: str, items: Iterable[WriteItem]) -> list[PartitionResult]:
        """WriteShareGroupState for many partitions of one group; one result per item, in order."""
        return await per_partition(
            as_items(items, WriteItem),
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
        return await per_partition(
            as_items(items, ReadItem), lambda it: self.read_state(group_id, it.topic_id, it.partition, leader_epoch=it.leader_epoch)
        )

    async def read_summaries(self, group_id: str, items: Iterable[ReadItem]) -> list[PartitionResult]:
        """ReadShareGroupStateSummary for many partitions; `data` holds each StateSummary."""
        return await per_partition(
            as_items(items, ReadItem), lambda it: self.read_summary(group_id, it.topic_id, it.partition, leader_epoch=it.leader_epoch)
        )

    async def initialize_states(self, group_id: str, items: Iterable[InitializeItem]) -> list[PartitionResult]:
        """InitializeShareGroupState for many partitions of one group."""
        return await per_partition(
            as_items(items, InitializeItem),
            lambda it: self.initialize_state(
                group_id, it.topic_id, it.partition, state_epoch=it.state_epoch, start_offset=it.start_offset
            ),
        )

    async def delete_states(self, group_id: str, items: Iterable[DeleteItem]) -> list[PartitionResult]:
        """DeleteShareGroupState for many partitions of one group."""
        return await per_partition(
            as_items(items, DeleteItem), lambda it: self.delete_state(group_id, it.topic_id, it.partition)
        )

    # -- pruning and idle checkpoints --------------------------------------------------------------

    def lowest_live_checkpoint_offset(self) -> int | None:
        """The lowest log offset of any live key's latest checkpoint (or epoch fence), None when no key
        is live (`persister.pruning.lowest_live_checkpoint_offset`). O(keys)."""
        return pruning.lowest_live_checkpoint_offset(self._states.values())

    def last_redundant_offset(self) -> int:
        """Exclusive bound below which every record is redundant: each live key has its full state in a
        checkpoint at or above it. Appends still in flight hold it at the log end they started from."""
        return pruning.last_redundant_offset(
            self._states.values(), self._log.end_offset, self._pipeline.lowest_floor
        )

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

        The new checkpoint has the same content, the next checkpoint epoch, the same create time and
        write time now (`persister.pruning.cold_checkpoint`). When nothing has changed since the
        previous round, nothing is written, so an idle coordinator does not rewrite itself forever.
        """
        self._check_active()
        if pruning.all_cold_and_unchanged(self._states.values()):
            return 0
        idle = pruning.cold_keys(self._states, self._clock.now_ms(), self._cold_checkpoint_interval_ms)
        if not idle:
            return 0
        written = await asyncio.gather(*(self._checkpoint_if_idle(key) for key in idle))
        return sum(written)

    async def _checkpoint_if_idle(self, key: StateKey) -> int:
        await self._pipeline.hold(key)
        try:
            self._check_active()
            interval = self._cold_checkpoint_interval_ms
            record = pruning.cold_checkpoint(self._states.get(key), self._clock.now_ms(), interval)
        except BaseException:
            self._pipeline.release(key)
            raise
        if record is None:  # deleted or checkpointed while this one waited for the key
            self._pipeline.release(key)
            return 0
        await self._pipeline.append_and_replay(key, record)
        return 1

    async def close(self) -> None:
        """Refuse new operations (COORDINATOR_NOT_AVAILABLE), let appends in flight finish, and close the
        log if this coordinator opened it."""
        if self._closed:
            return
        self._closed = True
        await self._pipeline.drain()
        if self._owns_log:
            await self._log.close()

    # -- the rules ---------------------------------------------------------------------------------

    def _check_active(self) -> None:
        if self._closed:
            raise ShareError(Errors.COORDINATOR_NOT_AVAILABLE, "Share coordinator is not available.")

    def _initialized(self, key: StateKey, operation: str) -> KeyState:
        key_state = self._states.get(key)
        if key_state is None:
            raise ShareError(
                Errors.INVALID_REQUEST, f"{operation} operation on uninitialized share partition not allowed."
            )
        return key_state

    @staticmethod
    def _check_leader_epoch(key_state: KeyState, leader_epoch: int) -> None:
        if key_state.leader_epoch_max > leader_epoch:
            raise ShareError(
                Errors.FENCED_LEADER_EPOCH,
                f"Leader epoch {leader_epoch} is below the stored {key_state.leader_epoch_max}.",
            )

    def _next_record(
        self,
        key_state: KeyState,
        leader_epoch: int,
        start_offset: int,
        delivery_complete_count: int,
        state_batches: Sequence[StateBatch],
        canonical: bool | None = None,
    ) -> ShareRecord:
        """The one record a write (or an epoch-raising read) produces, as Kafka's coordinator decides it.

        A checkpoint of the full combined state once the key has had N deltas since its latest
        checkpoint, else a delta of the request's batches combined among themselves and pruned by the
        new start offset, which is never below the stored one. Unlike Kafka, the delta count restarts
        at every checkpoint (initialize and idle ones too), so it is a pure function of the log and
        "N deltas since the last checkpoint" holds literally. `canonical` is
        `is_canonical(state_batches)` when the caller knows it (None: not known).
        """
        current = key_state.state
        new_start_offset = start_offset if start_offset > current.start_offset else current.start_offset
        if key_state.deltas_since_checkpoint >= self._records_per_checkpoint:
            now_ms = self._clock.now_ms()
            if key_state.canonical:
                combined = merge_canonical(current.state_batches, state_batches, new_start_offset)
            else:
                combined = combine(current.state_batches, state_batches, new_start_offset)
            return ShareCheckpoint(
                checkpoint_epoch=current.checkpoint_epoch + 1,
                state_epoch=current.state_epoch,
                leader_epoch=leader_epoch,
                start_offset=new_start_offset,
                delivery_complete_count=delivery_complete_count,
                create_timestamp_ms=now_ms,
                write_timestamp_ms=now_ms,
                state_batches=combined,
            )
        if canonical is None:
            canonical = is_canonical(state_batches, new_start_offset)
        elif canonical and state_batches and new_start_offset != -1:
            # Sorted and disjoint: only the first batch can lie below the start offset.
            canonical = state_batches[0].first_offset >= new_start_offset
        if canonical:  # combine((), batches, start) would not change them
            batches = state_batches if type(state_batches) is tuple else tuple(state_batches)
        else:
            batches = tuple(combine((), state_batches, new_start_offset))
        return new_delta(current.checkpoint_epoch, leader_epoch, new_start_offset, delivery_complete_count, batches)

    # -- replaying ---------------------------------------------------------------------------------

    def _replay(
        self, offset: int, key: StateKey, record: ShareRecord, key_state: KeyState | None = None
    ) -> ShareCheckpoint | None:
        """Apply one durable record to the in-memory state (`persister.state_replay`); return the key's state
        after it (None after a tombstone). The append pipeline calls it once a record is durable.

        `key_state` is the key's state that `write_state` validated the record against: the key has been
        held since, so it is still the key's entry, and a delta applies to it in place without a second
        look-up. Such a delta was built by `_next_record` in the combiner's output form, which its
        replay need not check again.
        """
        if key_state is not None and type(record) is ShareDelta:
            apply_record(key_state, offset, record, canonical_delta=True)
            return key_state.state
        return replay_record(self._states, offset, key, record)

    def _encode(self, key: StateKey, record: ShareRecord, key_state: KeyState | None = None) -> bytes:
        """The record's frame; a delta (most writes) is built from the key's cached msgpack bytes."""
        if type(record) is ShareDelta:
            if key_state is None:
                key_state = self._states.get(key)
            if key_state is not None:
                encoded_key = key_state.encoded_key
                if encoded_key is None:
                    encoded_key = key_state.encoded_key = encode_key(key)
                return self._encode_delta_frame(encoded_key, record, self._pack)
        return encode_record(key, record)

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
        return {key: key_state.dump() for key, key_state in self._states.items()}

    def _check(self) -> None:
        """Assert every invariant of the in-memory state (tests call it after each step)."""
        log_start, log_end = self._log.start_offset, self._log.end_offset
        assert 0 <= log_start <= log_end
        check_key_states(self._states, log_start, log_end)
        self._pipeline._check(log_start)
