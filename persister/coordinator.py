"""`ShareCoordinator`: the one implementation of the share coordinator's rules, over a RecordLog.

Every operation validates its request, builds at most one record per key, appends it to the log and,
once the append is durable, replays it; replaying is the only way the in-memory state changes, so
recovery (replaying the whole log on open) is the same code path as normal operation, and a failed
append leaves the state untouched. Operations on one key are serialised by a per-key hold taken before
validation and given up only once the operation's record has been replayed (or its append failed), so
two concurrent writes never both validate against the same state.

The write path is built for many concurrent share-partitions on one event loop: the hold is a dict
entry (a FIFO of futures only when contended), a delta is encoded from a per-key cached key, and over
the logs that offer it (`MemoryLog`, `SegmentLog`) the record is queued with a callback that replays it
and passes the hold on as soon as it is durable, whether or not its caller is still waiting (no task
per write). Recovery (`_replay_log`) folds the log per key and combines each key's deltas once.

The rules are Kafka's (coordinator-facts §1.2-1.3, §2.3-2.6) with the decisions noted where they
differ: see `_next_record`, `read_state`, `lowest_live_checkpoint_offset` and `checkpoint_idle_keys`.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import functools
import os
import uuid
from typing import Awaitable, Callable, Iterable, Sequence

import msgpack

from sharegroup.clock import Clock, SystemClock
from sharegroup.errors import Errors, ShareError
from sharegroup.types import DELIVERY_COUNT_MAX, RECORD_STATE_IDS, PartitionState, StateBatch, StateSummary

from .combiner import combine, is_canonical, merge_canonical
from .frame_codec import KIND_CHECKPOINT, KIND_DELTA, KeyTable, frame_codec
from .log_api import RecordLog
from .records import (
    ShareCheckpoint,
    ShareDelta,
    ShareRecord,
    StateKey,
    encode_key,
    encode_record,
    new_checkpoint,
    new_delta,
)
from .requests import DeleteItem, InitializeItem, PartitionResult, ReadItem, WriteItem
from .validation import (
    GROUP_ID_BYTES_MAX,
    INT32_MAX,
    INT64_MAX,
    check_delivery_complete_count,
    check_epoch,
    check_key,
    check_start_offset,
    check_state_batches,
    fast_state_batches,
)

__all__ = ["ShareCoordinator"]

RECORDS_PER_SNAPSHOT_MAX = 500  # share.coordinator.snapshot.update.records.per.snapshot is in [0, 500]
_UNINITIALIZED_EPOCH = 0


class _KeyState:
    """What the coordinator knows of one live key; every field but the caches is derived by replay alone.

    `state`: the merged current state, in checkpoint form (Kafka's ShareGroupOffset).
    `leader_epoch_max` / `state_epoch_max`: the highest epochs replayed (Kafka's leaderEpochMap and
    stateEpochMap): the fences. `deltas_since_checkpoint`: deltas replayed since the latest checkpoint
    (snapshotUpdateCount). `checkpoint_offset`: log offset of the latest checkpoint.
    `leader_fence_offset` / `state_fence_offset`: log offsets of the latest records carrying the fences.
    Caches (not part of `dump`): `canonical`, whether `state.state_batches` is in the combiner's output
    form (a checkpoint read from a log need not be), and `encoded_key`, the key's msgpack bytes.
    """

    __slots__ = (
        "state",
        "leader_epoch_max",
        "state_epoch_max",
        "deltas_since_checkpoint",
        "checkpoint_offset",
        "leader_fence_offset",
        "state_fence_offset",
        "canonical",
        "encoded_key",
    )

    def __init__(
        self,
        state: ShareCheckpoint,
        leader_epoch_max: int,
        state_epoch_max: int,
        deltas_since_checkpoint: int,
        checkpoint_offset: int,
        leader_fence_offset: int,
        state_fence_offset: int,
        canonical: bool,
    ) -> None:
        self.state = state
        self.leader_epoch_max = leader_epoch_max
        self.state_epoch_max = state_epoch_max
        self.deltas_since_checkpoint = deltas_since_checkpoint
        self.checkpoint_offset = checkpoint_offset
        self.leader_fence_offset = leader_fence_offset
        self.state_fence_offset = state_fence_offset
        self.canonical = canonical
        self.encoded_key: bytes | None = None

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

    def dump(self) -> tuple:
        """The replayed fields as one comparable tuple (the state as `dataclasses.astuple` gives it)."""
        return (
            dataclasses.astuple(self.state),
            self.leader_epoch_max,
            self.state_epoch_max,
            self.deltas_since_checkpoint,
            self.checkpoint_offset,
            self.leader_fence_offset,
            self.state_fence_offset,
        )

    def __repr__(self) -> str:
        return f"_KeyState{self.dump()!r}"


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
        # Keys held by an operation; the value is None, or a FIFO of the futures of operations waiting
        # for the key (created only when one has to wait).
        self._held: dict[StateKey, collections.deque | None] = {}
        self._append_floors: dict[int, int] = {}  # token -> log end offset when that append began
        self._next_token = 0
        self._commits: set[asyncio.Future] = set()  # append tasks over a log without `_enqueue`
        self._enqueued = 0  # records queued with `_enqueue` and not yet replayed or failed
        self._drained: asyncio.Future | None = None  # close() waits on it while _enqueued > 0
        self._closed = False
        # The log's synchronous queueing entry point, used when it promises to do just what `append`
        # does (a subclass that overrides `append`, say to delay it, keeps the generic path).
        enqueue = getattr(log, "_enqueue", None)
        if enqueue is not None and not getattr(type(log).append, "enqueue_equivalent", False):
            enqueue = None
        self._enqueue = enqueue
        self._pack = msgpack.Packer(use_bin_type=True).pack  # not thread-safe: one per coordinator
        self._encode_delta_frame = frame_codec().encode_delta_frame
        self._replay_log(log)

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
        key = _request_key(group_id, topic_id, partition)
        state_epoch = check_epoch(state_epoch, "state")
        start_offset = check_start_offset(start_offset)
        await self._hold(key)
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
            self._release(key)
            raise
        await self._append_and_replay(key, record)

    async def read_state(self, group_id: str, topic_id, partition: int, *, leader_epoch: int) -> PartitionState:
        """ReadShareGroupState: the stored state epoch, start offset and batches.

        A leader epoch above the stored state's is persisted first (a record with no batches, counting
        toward the deltas between checkpoints). Kafka compares with its max-seen map instead; comparing
        with the state's own epoch also re-persists the fence after a re-initialize reset it to 0, so a
        pruned log cannot forget it. Without a re-initialize the two agree.
        """
        self._check_active()
        key = _request_key(group_id, topic_id, partition)
        leader_epoch = check_epoch(leader_epoch, "leader")
        await self._hold(key)
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
            self._release(key)
            raise
        if record is None:
            self._release(key)
        else:
            current = await self._append_and_replay(key, record)
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
        key = _request_key(group_id, topic_id, partition)
        if not (type(leader_epoch) is int and 0 <= leader_epoch <= INT32_MAX):
            leader_epoch = check_epoch(leader_epoch, "leader")
        if not (type(state_epoch) is int and 0 <= state_epoch <= INT32_MAX):
            state_epoch = check_epoch(state_epoch, "state")
        if not (type(start_offset) is int and -1 <= start_offset <= INT64_MAX):
            start_offset = check_start_offset(start_offset)
        if not (type(delivery_complete_count) is int and -1 <= delivery_complete_count <= INT32_MAX):
            delivery_complete_count = check_delivery_complete_count(delivery_complete_count)
        batches = fast_state_batches(state_batches)
        held = self._held
        size = len(held)
        held.setdefault(key, None)  # takes the hold when the key is free (one hash of the key, not two)
        if len(held) == size:
            await self._wait_for_key(key)
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
            record = self._next_record(
                key_state,
                leader_epoch=key_state.state.leader_epoch,  # a write never changes the stored epochs
                start_offset=start_offset,
                delivery_complete_count=delivery_complete_count,
                state_batches=batches,
            )
        except BaseException:
            self._release(key)
            raise
        await self._append_and_replay(key, record, key_state)

    async def delete_state(self, group_id: str, topic_id, partition: int) -> None:
        """DeleteShareGroupState: a tombstone for a live key; nothing (and success) for an absent one."""
        self._check_active()
        key = _request_key(group_id, topic_id, partition)
        await self._hold(key)
        try:
            self._check_active()
            live = key in self._states
        except BaseException:
            self._release(key)
            raise
        if live:
            await self._append_and_replay(key, None)
        else:
            self._release(key)

    async def read_summary(self, group_id: str, topic_id, partition: int, *, leader_epoch: int) -> StateSummary:
        """ReadShareGroupStateSummary: epochs, start offset and delivery complete count; no fencing.

        An absent key is not an error: start offset and delivery complete count -1, epochs 0.
        """
        self._check_active()
        key = _request_key(group_id, topic_id, partition)
        if not isinstance(leader_epoch, int) or isinstance(leader_epoch, bool):
            raise ShareError(Errors.INVALID_REQUEST, "The leader epoch must be an int.")
        await self._hold(key)  # answers after pending operations on the key, as Kafka does
        try:
            self._check_active()
            key_state = self._states.get(key)
        finally:
            self._release(key)
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
        await self._hold(key)
        try:
            self._check_active()
            key_state = self._states.get(key)
            now_ms = self._clock.now_ms()
            record = None
            interval = self._cold_checkpoint_interval_ms
            if key_state is not None and now_ms - key_state.state.write_timestamp_ms >= interval:
                current = key_state.state
                record = dataclasses.replace(
                    current, checkpoint_epoch=current.checkpoint_epoch + 1, write_timestamp_ms=now_ms
                )
        except BaseException:
            self._release(key)
            raise
        if record is None:  # deleted or checkpointed while this one waited for the key
            self._release(key)
            return 0
        await self._append_and_replay(key, record)
        return 1

    async def close(self) -> None:
        """Refuse new operations (COORDINATOR_NOT_AVAILABLE), let appends in flight finish, and close the
        log if this coordinator opened it."""
        if self._closed:
            return
        self._closed = True
        while self._enqueued:
            if self._drained is None or self._drained.done():
                self._drained = asyncio.get_running_loop().create_future()
            await asyncio.shield(self._drained)
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
        if is_canonical(state_batches, new_start_offset):  # combine((), batches, start) would not change them
            batches = state_batches if type(state_batches) is tuple else tuple(state_batches)
        else:
            batches = tuple(combine((), state_batches, new_start_offset))
        return new_delta(current.checkpoint_epoch, leader_epoch, new_start_offset, delivery_complete_count, batches)

    # -- holding keys --------------------------------------------------------------------------------

    async def _hold(self, key: StateKey) -> None:
        """Take the hold on `key`, waiting behind the operations that hold or await it (FIFO). The
        holder gives it up with `_release`, or passes it to `_append_and_replay`, which releases it
        once the record has been replayed or its append failed."""
        if key in self._held:
            await self._wait_for_key(key)
        else:
            self._held[key] = None

    async def _wait_for_key(self, key: StateKey) -> None:
        waiters = self._held[key]
        if waiters is None:
            waiters = self._held[key] = collections.deque()
        waiter = asyncio.get_running_loop().create_future()
        waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release(key)  # the hold was handed over just as this waiter was cancelled: pass it on
            raise  # a cancelled waiter stays queued, done; `_release` skips it

    def _release(self, key: StateKey) -> None:
        """Give up the hold on `key`: hand it to the first waiter still waiting, or drop the entry."""
        waiters = self._held.pop(key)
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                self._held[key] = waiters
                return

    # -- appending and replaying -------------------------------------------------------------------

    async def _append_and_replay(
        self, key: StateKey, record: ShareRecord, key_state: _KeyState | None = None
    ) -> ShareCheckpoint | None:
        """Append `record` for `key`, whose hold the caller passes on; once it is durable, replay it and
        return the key's state after the replay. The hold is released only after the replay (or the
        failure of the append), even when the caller is cancelled meanwhile: a record that may be
        durable is always replayed before another operation on the key validates against the state.
        `key_state` is the key's current state, when the caller has it at hand.
        """
        enqueue = self._enqueue
        if enqueue is None:
            return await self._append_and_replay_in_task(key, record)
        log = self._log
        token = -1
        try:
            frames = [self._encode(key, record, key_state)]
            waiter = asyncio.get_running_loop().create_future()
            token = self._next_token
            self._next_token = token + 1
            self._append_floors[token] = log.end_offset
            self._enqueued += 1

            def appended(first_offset: int | None, error: BaseException | None) -> None:
                self._appended(key, record, token, waiter, first_offset, error)

            entries = [(key, record)]
            while not enqueue(entries, frames, appended):
                await log._wait_for_room()  # backpressure: the log's queue is full
        except BaseException as exc:
            # Nothing was queued (unless the log called back before raising, which released the key).
            if token == -1 or token in self._append_floors:
                if token != -1:
                    del self._append_floors[token]
                    self._enqueued -= 1
                self._release(key)
            raise _write_error(exc)
        return await waiter

    def _appended(
        self,
        key: StateKey,
        record: ShareRecord,
        token: int,
        waiter: asyncio.Future,
        first_offset: int | None,
        error: BaseException | None,
    ) -> None:
        """The log's callback for a record queued by `_append_and_replay`: replay it if it is durable,
        release the key and answer the caller, if it still waits."""
        state = None
        try:
            if error is None:
                state = self._replay(first_offset, key, record)
        except BaseException as exc:  # a replay that fails is a bug; the write must not look successful
            error = exc
        finally:
            del self._append_floors[token]
            self._release(key)
            self._enqueued -= 1
            if self._enqueued == 0 and self._drained is not None and not self._drained.done():
                self._drained.set_result(None)
        if waiter.done():  # the caller was cancelled: it asked not to hear the outcome
            return
        if error is None:
            waiter.set_result(state)
        elif isinstance(error, asyncio.CancelledError):
            waiter.cancel()
        else:
            waiter.set_exception(_write_error(error))

    def _encode(self, key: StateKey, record: ShareRecord, key_state: _KeyState | None = None) -> bytes:
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

    async def _append_and_replay_in_task(self, key: StateKey, record: ShareRecord) -> ShareCheckpoint | None:
        """`_append_and_replay` over a log without `_enqueue`: a task appends, replays and releases the
        key; it is shielded, and a cancelled caller still waits for it before it lets go."""
        task = asyncio.ensure_future(self._commit(key, record))
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

    async def _commit(self, key: StateKey, record: ShareRecord) -> ShareCheckpoint | None:
        token = self._next_token
        self._next_token += 1
        self._append_floors[token] = self._log.end_offset
        try:
            try:
                offsets = await self._log.append([(key, record)])
            except Exception as exc:
                raise _write_error(exc)
            if len(offsets) != 1:
                raise AssertionError(f"log returned {len(offsets)} offsets for 1 record")
            return self._replay(offsets[0], key, record)
        finally:
            del self._append_floors[token]
            self._release(key)

    def _replay(self, offset: int, key: StateKey, record: ShareRecord) -> ShareCheckpoint | None:
        """Apply one durable record to the in-memory state (coordinator-facts §2.4); return the key's
        state after it (None after a tombstone)."""
        key_state = self._states.get(key)
        if record is None:
            self._states.pop(key, None)
            return None
        if type(record) is ShareDelta or isinstance(record, ShareDelta):
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
                self._states[key] = _KeyState(state, leader_epoch, 0, 1, offset, offset, offset, True)
                return state
            old = key_state.state
            start_offset = old.start_offset if record.start_offset == -1 else record.start_offset
            leader_epoch = old.leader_epoch if record.leader_epoch == -1 else record.leader_epoch
            if key_state.canonical:
                batches = merge_canonical(old.state_batches, record.state_batches, start_offset)
            else:
                batches = tuple(combine(old.state_batches, record.state_batches, start_offset))
                key_state.canonical = True
            state = key_state.state = new_checkpoint(
                old.checkpoint_epoch,
                old.state_epoch,
                leader_epoch,
                start_offset,
                record.delivery_complete_count,
                old.create_timestamp_ms,
                old.write_timestamp_ms,
                batches,
            )
            if record.leader_epoch >= key_state.leader_epoch_max:
                key_state.leader_epoch_max = record.leader_epoch
                key_state.leader_fence_offset = offset
            key_state.deltas_since_checkpoint += 1
            return state
        if isinstance(record, ShareCheckpoint):
            canonical = is_canonical(record.state_batches)
            if key_state is None:
                self._states[key] = _KeyState(
                    record, record.leader_epoch, record.state_epoch, 0, offset, offset, offset, canonical
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
                key_state.canonical = canonical
                key_state.deltas_since_checkpoint = 0
                key_state.checkpoint_offset = offset
            return record
        raise TypeError(f"cannot replay a {type(record).__name__}")

    def _replay_log(self, log: RecordLog) -> None:
        """Rebuild the state from every record of `log`, exactly as replaying them one by one with
        `_replay` would (a test holds the two equal on random histories).

        A log that offers `_read_rows` (MemoryLog, SegmentLog) is replayed in bulk: its records arrive
        as decoded rows (persister.frame_codec) and are folded per key in one pass that keeps, for each
        live key, only what the state after the last record still depends on:

        - a tombstone forgets the key, so nothing before a key's last tombstone matters;
        - a checkpoint replaces the state but not the fences, which are maxima (with the offset of the
          latest record reaching them) over every record since the key was created, so each record
          still updates them, and the latest checkpoint (or the delta that created the key) becomes
          the base; the deltas before it are dropped;
        - the deltas after the base are combined once, at the end: `combine(base, d1 + ... + dm,
          s_m)`. That equals folding them one at a time (`combine(combine(base, d1, s_1), d2, s_2)`,
          ...) when the start offsets s_0 <= s_1 <= ... <= s_m never move backwards (s_0 the base's,
          s_i the start after delta i, a delta's -1 meaning "unchanged" and an unset start -1 being
          lowest): a batch's offset survives the fold iff it is at or above every s_i from the batch's
          delta on, i.e. at or above s_m, and its value is the highest (delivery count, state) of all
          batches covering it, which does not depend on their order (the combiner's priority is not
          recency). The coordinator never writes a start offset that moves backwards; a log that does
          (written by someone else) gets the one-at-a-time fold for that key.

        Runtime complexity: O(records) for the fold, plus one combine per live key over its latest
        base and the deltas after it (at most N + 1 records' batches when the log was written by a
        coordinator with the same N).
        """
        read_rows = getattr(log, "_read_rows", None)
        if read_rows is None:
            for entry in log.read_all():
                self._replay(entry.offset, entry.key, entry.record)
            return
        # Per key id, None or the key's fold: [base offset, base row, leader_epoch_max,
        # leader_fence_offset, state_epoch_max, state_fence_offset, rows of the deltas after the base,
        # offset of the record that created the state]. Lists of flat int tuples, not objects: this
        # loop runs once per record of the log.
        folds: list = []
        keys = KeyTable()
        for offset, rows in read_rows(keys):
            if len(folds) < len(keys.keys):
                folds += [None] * (len(keys.keys) - len(folds))
            for row in rows:
                key_id = row[0]
                fold = folds[key_id]
                kind = row[1]
                if kind == KIND_DELTA:  # (key id, kind, checkpoint_epoch, leader_epoch, start_offset, ...)
                    if fold is None:  # a delta starts the key (a log pruned by someone else)
                        leader_epoch = row[3] if row[3] > 0 else 0
                        folds[key_id] = [offset, row, leader_epoch, offset, 0, offset, [], offset]
                    else:
                        if row[3] >= fold[2]:
                            fold[2] = row[3]
                            fold[3] = offset
                        fold[6].append(row)
                elif kind == KIND_CHECKPOINT:  # (key id, kind, checkpoint_epoch, state_epoch, leader_epoch, ...)
                    if fold is None:
                        folds[key_id] = [offset, row, row[4], offset, row[3], offset, [], offset]
                    else:
                        if row[4] >= fold[2]:
                            fold[2] = row[4]
                            fold[3] = offset
                        if row[3] >= fold[4]:
                            fold[4] = row[3]
                            fold[5] = offset
                        fold[0] = offset
                        fold[1] = row
                        fold[6].clear()
                else:  # a tombstone forgets the key
                    folds[key_id] = None
                offset += 1
        # Insert the keys in the order their states were created, as one-by-one replay does.
        live = sorted((fold[7], key_id) for key_id, fold in enumerate(folds) if fold is not None)
        states = self._states
        for _created, key_id in live:
            states[keys.keys[key_id]] = _fold_key_state(*folds[key_id][:7])

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
        return {key: ks.dump() for key, ks in self._states.items()}

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
                assert state in RECORD_STATE_IDS and 0 <= count <= DELIVERY_COUNT_MAX, batch
                if previous is not None:
                    assert previous.last_offset < first, "batches must be sorted and disjoint"
                    assert not (
                        previous.last_offset + 1 == first
                        and previous.delivery_state == state
                        and previous.delivery_count == count
                    ), "touching batches with equal state and count must be coalesced"
                previous = batch
            assert not ks.canonical or is_canonical(s.state_batches), ("not canonical", ks)
        assert all(floor >= log_start for floor in self._append_floors.values()), "pruned past an append"
        for key, waiters in self._held.items():
            assert waiters is None or type(waiters) is collections.deque, (key, waiters)
        assert self._enqueued >= 0 and (self._enqueue is not None or self._enqueued == 0)
        assert len(self._append_floors) >= self._enqueued



def _unflatten(flat) -> tuple[StateBatch, ...]:
    it = iter(flat)
    return tuple(map(StateBatch, it, it, it, it))


def _fold_key_state(
    base_offset: int,
    base: tuple,
    leader_epoch_max: int,
    leader_fence_offset: int,
    state_epoch_max: int,
    state_fence_offset: int,
    deltas: list,
) -> _KeyState:
    """A key's replayed state from its fold (see `ShareCoordinator._replay_log`): the base row (its
    latest checkpoint, or the delta that created it), then the rows of the deltas after it, combined
    once when their start offsets never move backwards, one at a time otherwise."""
    if base[1] == KIND_CHECKPOINT:
        _, _, checkpoint_epoch, state_epoch, leader_epoch, start_offset, dcc, create_ms, write_ms, flat = base
        batches = _unflatten(flat)
        deltas_since_checkpoint = len(deltas)
        canonical = False  # a checkpoint read from a log is taken as it is, as `_replay` takes it
    else:  # the delta that started the key, replayed as `_replay` does
        _, _, checkpoint_epoch, leader_epoch, start_offset, dcc, flat = base
        state_epoch = create_ms = write_ms = 0
        leader_epoch = leader_epoch if leader_epoch > 0 else 0
        batches = tuple(combine((), _unflatten(flat), start_offset))
        deltas_since_checkpoint = 1 + len(deltas)
        canonical = True
    if deltas:
        base_start_offset = start_offset
        monotone = True
        for _, _, _, delta_leader_epoch, delta_start_offset, delta_dcc, _ in deltas:
            if delta_start_offset != -1:
                if delta_start_offset < start_offset:
                    monotone = False
                start_offset = delta_start_offset
            if delta_leader_epoch != -1:
                leader_epoch = delta_leader_epoch
            dcc = delta_dcc
        if monotone:
            flat_all = [x for delta in deltas for x in delta[6]]
            batches = tuple(combine(batches, _unflatten(flat_all), start_offset))
        else:
            start = base_start_offset
            for delta in deltas:
                if delta[4] != -1:
                    start = delta[4]
                batches = tuple(combine(batches, _unflatten(delta[6]), start))
        canonical = True
    if not canonical:
        canonical = is_canonical(batches)
    state = new_checkpoint(
        checkpoint_epoch, state_epoch, leader_epoch, start_offset, dcc, create_ms, write_ms, batches
    )
    return _KeyState(
        state,
        leader_epoch_max,
        state_epoch_max,
        deltas_since_checkpoint,
        base_offset,
        leader_fence_offset,
        state_fence_offset,
        canonical,
    )


def _request_key(group_id, topic_id, partition) -> StateKey:
    """The request's StateKey; plain values take a fast branch, anything else `check_key` (same errors)."""
    if (
        type(group_id) is str
        and type(topic_id) is uuid.UUID
        and type(partition) is int
        and 0 <= partition <= INT32_MAX
        and 0 < len(group_id) <= GROUP_ID_BYTES_MAX
        and group_id.isascii()  # then its UTF-8 form is as long as it is
    ):
        return StateKey(group_id, topic_id, partition)
    return check_key(group_id, topic_id, partition)


def _write_error(exc: BaseException) -> BaseException:
    """How a failed append reaches the caller: a ShareError as it is, any other error as
    UNKNOWN_SERVER_ERROR (as Kafka answers a failed write to the state topic)."""
    if isinstance(exc, ShareError) or not isinstance(exc, Exception):
        return exc
    error = ShareError(Errors.UNKNOWN_SERVER_ERROR, f"Unable to write share group state: {exc!r}")
    error.__cause__ = exc
    return error


async def _open_segment_log(log_dir: str | os.PathLike, **log_options) -> RecordLog:
    """Open the durable segment log in `log_dir` (persister/log.py, added by the segment-log issue)."""
    try:
        from .log import SegmentLog  # type: ignore[import-not-found]
    except ImportError as exc:
        raise NotImplementedError(
            "opening a state-log directory needs the segment log (persister/log.py), not available yet"
        ) from exc
    return await SegmentLog.open(log_dir, **log_options)
