"""SharePartition: the share-partition leader of one (group, topic, partition).

It owns an in-flight tracker (layer 1) and reaches durable state only through the `Persister`
protocol. Acknowledgements and releases are two-phase: the tracker applies them at once (marked in
transition), the write goes to the persister, and the outcome commits or rolls them back. Lock
expiry is one-phase: states change at once and a failed write is logged and counted, never undone;
its runs are kept and carried by the next write of the share-partition (or retried by the next
`expire_locks`) until one succeeds, so a record archived at the delivery limit by expiry always
becomes durable (Kafka forgets a failed expiry write; we do not). A rollback that finds a lock
expired meanwhile is such an unwritten expiry too.

Dead-letter queues (KIP-1191, `dead_letters.py`): with a `DeadLetterSink` whose `enabled(group)` says
yes at the transition, REJECT and the delivery count limit move records to ARCHIVING. Once that state is
written (or, for lock expiry, once its write was tried) the records go to the sink in a background
task; when the sink is done, written or failed, they become ARCHIVED, written like a lock expiry. A new
leader hands the ARCHIVING records it loads to the sink again (at-least-once into the DLQ). The tasks
are bounded by the in-flight window: ARCHIVING records hold the start offset.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import uuid
from typing import Callable, Sequence

from ..clock import Clock, SystemClock
from ..config import ShareGroupConfig
from ..errors import Errors, ShareError
from ..persistence import Persister
from ..tracker import InFlightTracker
from .dead_letters import DeadLetterBatch, DeadLetterSink, dead_letter_batches
from .unwritten_runs import UnwrittenRuns, coalesce
from ..types import (
    AbortedTransaction,
    AcknowledgementBatch,
    AcquiredRecords,
    FetchedBatch,
    RecordState,
    RecordView,
    StateBatch,
    TrackerWrite,
)

__all__ = ["SharePartition", "SharePartitionStatus", "map_persister_error"]

log = logging.getLogger(__name__)

OffsetLookup = Callable[[object], int]


class SharePartitionStatus(enum.Enum):
    """Lifecycle of a share-partition leader, as Kafka's SharePartitionState."""

    EMPTY = "EMPTY"
    INITIALIZING = "INITIALIZING"
    ACTIVE = "ACTIVE"
    FAILED = "FAILED"
    FENCED = "FENCED"


# The member itself, looked up once: reading an enum member through its class costs as much as a small
# tracker call on the acknowledgement hot path.
_ACTIVE = SharePartitionStatus.ACTIVE

_COORDINATOR_ERRORS = frozenset({Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE,
                                 Errors.COORDINATOR_LOAD_IN_PROGRESS})
_FENCING_ERRORS = frozenset({Errors.FENCED_LEADER_EPOCH, Errors.FENCED_STATE_EPOCH})
_PASSED_THROUGH = frozenset({Errors.GROUP_ID_NOT_FOUND, Errors.UNKNOWN_TOPIC_OR_PARTITION})


def map_persister_error(error: Errors) -> Errors:
    """The code a share-partition leader reports for a persister error (Kafka's fetchPersisterError)."""
    if error in _COORDINATOR_ERRORS:
        return Errors.COORDINATOR_NOT_AVAILABLE
    if error in _FENCING_ERRORS:
        return Errors.NOT_LEADER_OR_FOLLOWER
    if error in _PASSED_THROUGH:
        return error
    return Errors.UNKNOWN_SERVER_ERROR


class SharePartition:
    """In-flight records of one share group on one topic-partition, kept durable via a Persister."""

    def __init__(
        self,
        group_id: str,
        topic_id: uuid.UUID,
        partition: int,
        *,
        persister: Persister,
        config: ShareGroupConfig | None = None,
        clock: Clock | None = None,
        leader_epoch: int = 0,
        offset_lookup: OffsetLookup | None = None,
        dead_letters: DeadLetterSink | None = None,
    ) -> None:
        if not isinstance(group_id, str) or not group_id:
            raise ValueError("group_id must be a non-empty string")
        if not isinstance(topic_id, uuid.UUID):
            raise ValueError("topic_id must be a uuid.UUID")
        if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
            raise ValueError("partition must be an integer >= 0")
        if isinstance(leader_epoch, bool) or not isinstance(leader_epoch, int) or leader_epoch < 0:
            raise ValueError("leader_epoch must be an integer >= 0")
        self.group_id = group_id
        self.topic_id = topic_id
        self.partition = partition
        self.leader_epoch = leader_epoch
        self.config = config if config is not None else ShareGroupConfig()
        self._persister = persister
        self._clock = clock if clock is not None else SystemClock()
        self._offset_lookup = offset_lookup
        self._tracker = InFlightTracker(
            0,
            record_lock_duration_ms=self.config.record_lock_duration_ms,
            delivery_count_limit=self.config.delivery_count_limit,
            partition_max_record_locks=self.config.partition_max_record_locks,
            record_limit_mode=self.config.acquire_mode == "record_limit",
        )
        self._status = SharePartitionStatus.EMPTY
        self._state_epoch = 0
        self.expiry_write_failures = 0
        self.archive_write_failures = 0  # failed writes of ARCHIVING -> ARCHIVED (kept like expiry runs)
        self._unwritten = UnwrittenRuns()
        self._dead_letters = dead_letters
        self._dead_letter_tasks: set[asyncio.Task] = set()

    # ------------------------------------------------------------------ state

    @property
    def status(self) -> SharePartitionStatus:
        return self._status

    @property
    def state_epoch(self) -> int:
        return self._state_epoch

    @property
    def start_offset(self) -> int:
        return self._tracker.start_offset

    @property
    def end_offset(self) -> int:
        return self._tracker.end_offset

    @property
    def in_flight_count(self) -> int:
        return self._tracker.in_flight_count

    @property
    def delivery_complete_count(self) -> int:
        return self._tracker.delivery_complete_count

    @property
    def tracker(self) -> InFlightTracker:
        """The layer-1 tracker (read-only use: tests call its `_check()`)."""
        return self._tracker

    def next_fetch_offset(self) -> int:
        return self._tracker.next_fetch_offset()

    def next_lock_deadline_ms(self) -> int:
        """When a timer service should next call `expire_locks` (-1: no lock held)."""
        return self._tracker.next_lock_deadline_ms()

    def record_state(self, offset: int) -> RecordView | None:
        return self._tracker.record_state(offset)

    def state_batches(self) -> list[StateBatch]:
        return self._tracker.state_batches()

    @property
    def unwritten_expiry_runs(self) -> list[StateBatch]:
        """Runs of failed lock-expiry writes not yet carried by a successful write (normally empty)."""
        return self._unwritten.batches()

    def _check(self) -> None:
        self._tracker._check()
        self._unwritten._check()

    # ------------------------------------------------------------------ initialization

    async def initialize(self) -> None:
        """Read durable state and build the window.

        As Kafka's `initializedOrThrowException`: an ACTIVE share-partition returns at once; one that is
        INITIALIZING (another caller's read is in flight) or FENCED raises LEADER_NOT_AVAILABLE and stays
        as it is, so the caller answers the fetch with a retriable code and tries again later. A FENCED
        share-partition never reads again: a newer leader owns the state (the error that fenced it was
        reported as NOT_LEADER_OR_FOLLOWER). EMPTY and FAILED ones read the state (again).
        """
        status = self._status
        if status is SharePartitionStatus.ACTIVE:
            return
        if status is SharePartitionStatus.INITIALIZING or status is SharePartitionStatus.FENCED:
            raise ShareError(Errors.LEADER_NOT_AVAILABLE, f"share-partition is {status.value}")
        self._status = SharePartitionStatus.INITIALIZING
        try:
            await self._do_initialize()
        except BaseException as exc:
            if self._status is not SharePartitionStatus.FENCED:
                self._status = SharePartitionStatus.FAILED
            if isinstance(exc, ShareError):
                raise
            if isinstance(exc, Exception):
                raise ShareError(Errors.UNKNOWN_SERVER_ERROR, f"initialization failed: {exc!r}") from exc
            raise
        self._status = SharePartitionStatus.ACTIVE
        # A new leader finishes the dead-letter writes its predecessor left ARCHIVING, whatever the gate says
        # now (so they always reach ARCHIVED); the cause is derived from the delivery count, as in Kafka.
        self._hand_over(self._tracker.state_batches())

    async def _do_initialize(self) -> None:
        try:
            state = await self._persister.read_state(
                self.group_id, self.topic_id, self.partition, leader_epoch=self.leader_epoch
            )
        except ShareError as exc:
            raise self._persister_failure(exc, "read share-partition state") from None
        start = state.start_offset
        if start < 0:
            start = self._resolve_start_offset()
        self._state_epoch = state.state_epoch
        try:
            self._tracker.load(start, state.state_batches)
        except ShareError as exc:
            raise ShareError(Errors.UNKNOWN_SERVER_ERROR, f"persisted state is unusable: {exc.message}") from None

    def _resolve_start_offset(self) -> int:
        """Start offset -1 (never consumed): apply share.auto.offset.reset through the offset lookup."""
        if self._offset_lookup is None:
            raise ShareError(
                Errors.UNKNOWN_SERVER_ERROR,
                "start offset is uninitialized (-1) and no offset_lookup was given to resolve "
                f"share.auto.offset.reset={self.config.auto_offset_reset}",
            )
        duration_ms = self.config.auto_offset_reset_duration_ms
        spec: object = self.config.auto_offset_reset if duration_ms is None else self._clock.now_ms() - duration_ms
        try:
            offset = int(self._offset_lookup(spec))
        except Exception as exc:
            raise ShareError(Errors.UNKNOWN_SERVER_ERROR, f"offset lookup for {spec!r} failed: {exc!r}") from None
        if offset < 0:
            raise ShareError(Errors.UNKNOWN_SERVER_ERROR, f"offset lookup for {spec!r} returned {offset}")
        return offset

    def _persister_failure(self, exc: ShareError, what: str) -> ShareError:
        code = map_persister_error(exc.error)
        if code is Errors.NOT_LEADER_OR_FOLLOWER:
            self._status = SharePartitionStatus.FENCED
        return ShareError(code, f"{what}: {exc.error.name} {exc.message}".rstrip())

    def _require_active(self) -> None:
        status = self._status
        if status is SharePartitionStatus.ACTIVE:
            return
        if status is SharePartitionStatus.FENCED:
            raise ShareError(Errors.NOT_LEADER_OR_FOLLOWER, "share-partition leader is fenced")
        if status is SharePartitionStatus.FAILED:
            raise ShareError(Errors.UNKNOWN_SERVER_ERROR, "share-partition failed to initialize")
        raise ShareError(Errors.LEADER_NOT_AVAILABLE, f"share-partition is {status.value}")

    # ------------------------------------------------------------------ acquisition

    def acquire(
        self,
        member_id: str,
        fetched: Sequence[FetchedBatch],
        *,
        max_records: int = 500,
        fetch_offset: int | None = None,
        batch_size: int | None = None,
        aborted_transactions: Sequence[AbortedTransaction] = (),
    ) -> list[AcquiredRecords]:
        """Acquire records of the fetched producer batches for `member_id`; nothing is persisted."""
        if self._status is not _ACTIVE:
            self._require_active()
        if type(max_records) is not int or fetch_offset is not None or batch_size is not None:
            self._check_acquire_arguments(max_records, fetch_offset, batch_size)
        return self._tracker.acquire(
            member_id,
            fetched,
            max_records,
            self._clock.now_ms(),
            -1 if fetch_offset is None else fetch_offset,
            0 if batch_size is None else batch_size,
            aborted_transactions,
            self.config.read_committed,
        )

    @staticmethod
    def _check_acquire_arguments(max_records: object, fetch_offset: object, batch_size: object) -> None:
        for name, value in (("max_records", max_records), ("fetch_offset", fetch_offset), ("batch_size", batch_size)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ShareError(Errors.INVALID_REQUEST, f"{name} must be an integer, got {value!r}")
        if batch_size is not None and batch_size <= 0:
            raise ShareError(Errors.INVALID_REQUEST, f"batch_size must be > 0, got {batch_size}")

    # ------------------------------------------------------------------ acknowledgement

    async def acknowledge(self, member_id: str, batches: Sequence[AcknowledgementBatch]) -> None:
        """Apply acknowledgements all-or-nothing and wait until they are durable.

        The hot path of every acknowledgement: one coroutine (this one) around the persister's write
        when no unwritten expiry runs are carried, failures mapped by `_failed_write`. The clock is read
        once: a commit does not look at the time (`complete` uses it only to roll back, which
        `_failed_write` does with a fresh reading)."""
        if self._status is not _ACTIVE:
            self._require_active()
        now_ms = self._clock.now_ms()
        sink = self._dead_letters
        dead_letter = sink is not None and sink.enabled(self.group_id)
        if sink is not None:
            self._tracker.dead_letter_queue = dead_letter
        pending = self._tracker.begin_acknowledge(member_id, batches, now_ms)
        transition_id, state_batches, start_offset, delivery_complete_count = pending
        if not transition_id:
            return
        try:
            if self._unwritten._pieces:
                await self._write(pending)
            else:
                await self._persister.write_state(
                    self.group_id, self.topic_id, self.partition, state_epoch=self._state_epoch,
                    leader_epoch=self.leader_epoch, start_offset=start_offset, state_batches=state_batches,
                    delivery_complete_count=delivery_complete_count)
        except BaseException as exc:
            raise self._failed_write(pending, exc, "write acknowledgements")
        self._tracker.complete(transition_id, True, now_ms)
        if dead_letter:  # only a transition made with the gate on has ARCHIVING records
            self._hand_over(state_batches, batches)

    async def release_acquired_records(self, member_id: str) -> None:
        """Release every record `member_id` holds (member left or its share session closed)."""
        self._require_active()
        self._gate_dead_letters()
        pending = self._tracker.begin_release(member_id, self._clock.now_ms())
        await self._persist_pending(pending, "write released records")
        self._hand_over(pending.state_batches)

    async def _persist_pending(self, pending: TrackerWrite, what: str) -> None:
        transition_id = pending.transition_id
        if transition_id == 0:
            return
        try:
            await self._write(pending)
        except BaseException as exc:
            raise self._failed_write(pending, exc, what)
        self._tracker.complete(transition_id, True, self._clock.now_ms())

    def _failed_write(self, pending: TrackerWrite, exc: BaseException, what: str) -> BaseException:
        """Roll `pending` back and return what to raise: a persister `ShareError` mapped to the leader's
        code (its context suppressed), any other exception as UNKNOWN_SERVER_ERROR caused by it, and a
        cancellation (or other BaseException) as itself: the write may not have landed."""
        self._roll_back(pending)
        if isinstance(exc, ShareError):
            mapped = self._persister_failure(exc, what)
            mapped.__suppress_context__ = True
            return mapped
        if isinstance(exc, Exception):
            error = ShareError(Errors.UNKNOWN_SERVER_ERROR, f"{what}: {exc!r}")
            error.__cause__ = exc
            return error
        return exc

    def _roll_back(self, pending: TrackerWrite) -> None:
        """Undo a failed two-phase write. A record whose lock expired while the write was pending comes
        back AVAILABLE (or ARCHIVED at the delivery limit) rather than ACQUIRED: that is a lock expiry
        nobody wrote, so its runs join the unwritten expiry runs (carried by the next write).
        O(offsets of the failed write)."""
        self._tracker.complete(pending.transition_id, False, self._clock.now_ms())
        expired: list[StateBatch] = []
        start_offset = self._tracker.start_offset
        for batch in pending.state_batches:
            for offset in range(batch.first_offset, batch.last_offset + 1):
                view = self._tracker.record_state(offset)
                if view is None:
                    if offset < start_offset:  # archived at the limit and already passed by the SPSO
                        expired.append(StateBatch(offset, offset, int(RecordState.ARCHIVED), batch.delivery_count))
                elif view.state is not RecordState.ACQUIRED:
                    expired.append(StateBatch(offset, offset, int(view.state), view.delivery_count))
        if expired:
            self._unwritten.add(coalesce(expired))

    async def _write(self, pending: TrackerWrite) -> None:
        """Write `pending`'s runs plus the unwritten expiry runs that still describe the current state.

        The carried runs never overlap `pending`'s own runs (those are newer), and only runs whose
        (state, delivery count) still equal the durable form of the record's current state are sent,
        so a carried run can never overwrite a newer state. On success, every unwritten run this write
        covered (sent, superseded by an own run, or below its start offset) is forgotten; runs added by
        expiries that failed while it was in flight are kept.
        """
        own = pending.state_batches
        carried: list[StateBatch] = []
        sequence = self._unwritten.sequence
        if self._unwritten._pieces:
            carried = self._unwritten.still_current(self._tracker.state_batches(), own, pending.start_offset)
        batches = sorted([*own, *carried]) if carried else own
        await self._persister.write_state(
            self.group_id,
            self.topic_id,
            self.partition,
            state_epoch=self._state_epoch,
            leader_epoch=self.leader_epoch,
            start_offset=pending.start_offset,
            state_batches=batches,
            delivery_complete_count=pending.delivery_complete_count,
        )
        if self._unwritten._pieces:
            self._unwritten.forget(batches, pending.start_offset, sequence)

    # ------------------------------------------------------------------ locks and log start

    async def expire_locks(self) -> int:
        """Expire the locks due at the clock's now; returns the number of records that expired.

        The new states hold whatever the write's outcome. A failed write is logged, counted in
        `expiry_write_failures`, and its runs are kept (`unwritten_expiry_runs`): the next write of
        this share-partition carries them, and every call here retries them even when no lock is due,
        until a write succeeds.
        """
        if self._status is not _ACTIVE:
            return 0
        self._gate_dead_letters()
        count, pending = self._tracker.expire_locks(self._clock.now_ms())
        # One phase: the records expired to ARCHIVING go to the sink whatever the write's outcome (a failed
        # write's runs are carried by the next write; a crash before it only redelivers them).
        self._hand_over(pending.state_batches)
        retry = bool(self._unwritten) and self._unwritten.needs_write(self._tracker.state_batches(), pending.start_offset)
        if pending.state_batches or retry:
            try:
                await self._write(pending)
            except BaseException as exc:  # one-phase by design: the states stay, the runs are kept
                self.expiry_write_failures += 1
                self._unwritten.add(pending.state_batches)
                if not isinstance(exc, Exception):
                    raise  # cancelled: the runs are kept all the same
                if isinstance(exc, ShareError):
                    self._persister_failure(exc, "write expired locks")
                log.warning("share-partition %s:%s:%d: expired-lock write failed (%d runs kept for the next "
                            "write): %r", self.group_id, self.topic_id, self.partition,
                            len(self._unwritten.batches()), exc)
        return count

    # ------------------------------------------------------------------ dead-letter queues (KIP-1191)

    def _gate_dead_letters(self) -> None:
        """Read the group's dead-letter gate before a transition (Kafka evaluates it per transition)."""
        if self._dead_letters is not None:
            self._tracker.dead_letter_queue = self._dead_letters.enabled(self.group_id)

    @property
    def dead_letters_in_flight(self) -> int:
        """Dead-letter hand-overs not finished yet (each a background task)."""
        return len(self._dead_letter_tasks)

    def _hand_over(self, runs: Sequence[StateBatch], acknowledgements: Sequence[Sequence] | None = None) -> None:
        """Start the dead-letter write of the ARCHIVING records among `runs` (durable or tried)."""
        batches = dead_letter_batches(self.group_id, self.topic_id, self.partition, runs,
                                      self._tracker.delivery_count_limit, acknowledgements)
        if not batches:
            return
        task = asyncio.get_running_loop().create_task(self._dead_letter(batches))
        self._dead_letter_tasks.add(task)
        task.add_done_callback(self._dead_letter_tasks.discard)

    async def _dead_letter(self, batches: list[DeadLetterBatch]) -> None:
        """Write `batches` to the sink (none: nothing to write), then archive them: ARCHIVING -> ARCHIVED,
        written one-phase like a lock expiry (a failed write is counted and its runs carried)."""
        sink = self._dead_letters
        if sink is not None:
            try:
                await sink.write(batches)
            except Exception:  # the sink logs and counts its own failures; this is a bug in it
                log.exception("share-partition %s:%s:%d: dead-letter sink failed; the records are archived anyway",
                              self.group_id, self.topic_id, self.partition)
        if self._status is not _ACTIVE:
            return  # fenced or failed: the next leader replays the ARCHIVING records
        runs: list[StateBatch] = []
        done: TrackerWrite | None = None
        for b in batches:
            done = self._tracker.complete_archiving(b.first_offset, b.last_offset)
            runs += done.state_batches
        if done is None or not runs:
            return  # reset or archived meanwhile
        try:
            await self._write(TrackerWrite(0, runs, done.start_offset, done.delivery_complete_count))
        except BaseException as exc:
            self.archive_write_failures += 1
            self._unwritten.add(runs)
            if not isinstance(exc, Exception):
                raise
            if isinstance(exc, ShareError):
                self._persister_failure(exc, "write archived records")
            log.warning("share-partition %s:%s:%d: archived-record write failed (kept for the next write): %r",
                        self.group_id, self.topic_id, self.partition, exc)

    def cancel_dead_letters(self) -> None:
        """Stop the dead-letter hand-overs (the broker is closing): their records stay ARCHIVING, durable, and
        the next leader writes them again."""
        for task in list(self._dead_letter_tasks):
            task.cancel()

    def update_log_start_offset(self, log_start_offset: int) -> None:
        """Retention moved the log start offset: archive AVAILABLE records below it."""
        if isinstance(log_start_offset, bool) or not isinstance(log_start_offset, int) or log_start_offset < 0:
            raise ShareError(Errors.INVALID_REQUEST, f"log start offset must be an integer >= 0, got {log_start_offset!r}")
        self._require_active()
        self._tracker.update_log_start_offset(log_start_offset)
