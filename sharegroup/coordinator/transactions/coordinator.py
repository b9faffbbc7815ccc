"""Kafka's transaction coordinator for one node, at transaction version 1 (the protocol every client runs
unless the broker finalizes `transaction.version` 2, which serve does not advertise).

State per transactional id (`TransactionMetadata`), moved only by records appended to a `RecordSink`
(durable before any answer; see records.py). The rules are Kafka's (TransactionCoordinator,
TransactionMetadata):

- InitProducerId: a new id gets a fresh producer id at epoch 0; a known one has its epoch bumped, which
  fences the previous producer instance. An Ongoing transaction of the previous epoch is aborted first
  (PrepareAbort at epoch + 1, markers, CompleteAbort), then the epoch is bumped again for the caller. A
  supplied producer id and epoch (KIP-360) must be the current ones (or a retry of the last bump), else
  PRODUCER_FENCED. An epoch of 32766 or more is exhausted: the producer id is rotated (epoch 0).
- AddPartitionsToTxn / AddOffsetsToTxn move the id to Ongoing (the start time is set by the first add);
  TxnOffsetCommit keeps offsets pending in the state record; EndTxn writes PrepareCommit or PrepareAbort,
  then the COMMIT/ABORT markers to every partition (through a `MarkerWriter`), applies or drops the
  pending offsets (through `TransactionalOffsets`), then writes CompleteCommit or CompleteAbort. Unlike
  Kafka, the markers are written before EndTxn is answered when they succeed at once (a local append),
  so the producer's next transaction never meets CONCURRENT_TRANSACTIONS; when one fails the decision
  stays durable as Prepare* and `run_periodic_jobs` retries it.
- A transition in flight makes every other request for the id CONCURRENT_TRANSACTIONS (retriable).
- Timeouts (`abort_timed_out`): an Ongoing transaction older than its timeout (from its first add) is
  fenced and aborted like an InitProducerId does. Expiry (`expire_transactional_ids`): an id idle in
  Empty or Complete* for `transactional.id.expiration.ms` is removed (a tombstone).
- Recovery (`load`): the latest record of each id is its state; transactions caught in PrepareCommit or
  PrepareAbort are completed (markers re-sent, which partitions accept again harmlessly); Ongoing ones
  stay and time out.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import re
from typing import Callable, Iterable, Iterator, Protocol, Sequence

from ...clock import Clock
from ...errors import Errors, ShareError
from ..records import Record
from .records import OFFSETS_TOPIC, STATE_NAMES, PendingOffset, TransactionLogKey, TransactionLogValue, TxnState

__all__ = ["TransactionCoordinator", "TransactionMetadata", "MarkerWriter", "TransactionalOffsets",
           "TransactionSink", "EXHAUSTED_EPOCH", "offsets_partition_for"]

log = logging.getLogger(__name__)

EXHAUSTED_EPOCH = 32766  # Kafka's isEpochExhausted bound (32767 stays in reserve for a fence)
_PREPARED = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
_SETTLED = (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
TopicPartition = tuple[str, int]


class TransactionSink(Protocol):
    """Where transitions go (a durable compacted sink in serve): `append` returns once they are durable."""

    async def append(self, records: Sequence[Record]) -> None: ...

    def read_all(self) -> list[Record]: ...


class MarkerWriter(Protocol):
    """Writes one COMMIT or ABORT control batch to a partition (WriteTxnMarkers). A partition that no
    longer exists is skipped silently; other failures raise ShareError."""

    async def write_marker(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                           commit: bool) -> None: ...


class TransactionalOffsets(Protocol):
    """The group coordinator as TxnOffsetCommit uses it."""

    async def validate_transactional_offsets(self, group_id: str, member_id: str, group_instance_id: str | None,
                                             generation_id: int,
                                             partitions: Sequence[tuple[str, int, str | None]]
                                             ) -> dict[TopicPartition, Errors]:
        """KIP-447 member checks (group-level refusals raise ShareError); per partition NONE or
        OFFSET_METADATA_TOO_LARGE. `partitions` are (topic, partition, metadata)."""
        ...

    async def commit_transactional_offsets(self, group_id: str, offsets: Sequence[PendingOffset]) -> None:
        """Make a committed transaction's offsets the group's committed offsets."""
        ...


def offsets_partition_for(group_id: str, num_partitions: int) -> int:
    """The `__consumer_offsets` partition of a group: Java's String.hashCode, Kafka's Utils.abs, modulo."""
    h = 0
    for unit in _utf16_units(group_id):
        h = (31 * h + unit) & 0xFFFFFFFF
    if h >= 1 << 31:
        h -= 1 << 32
    h = 0 if h == -(1 << 31) else abs(h)
    return h % num_partitions


def _utf16_units(text: str) -> Iterator[int]:
    data = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        yield (data[i] << 8) | data[i + 1]


@dataclasses.dataclass(frozen=True, slots=True)
class TransactionMetadata:
    """One transactional id's state (replaced whole by each transition)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition] = frozenset()
    pending_offsets: tuple[PendingOffset, ...] = ()
    start_ms: int = -1
    last_update_ms: int = -1
    previous_producer_id: int = -1
    last_producer_epoch: int = -1  # the epoch before the last bump (a retried InitProducerId); not persisted

    @property
    def state_name(self) -> str:
        return STATE_NAMES[self.state]

    def to_value(self) -> TransactionLogValue:
        return TransactionLogValue(self.producer_id, self.producer_epoch, self.timeout_ms, int(self.state),
                                   tuple(sorted(self.partitions)), self.last_update_ms, self.start_ms,
                                   self.previous_producer_id, tuple(sorted(tuple(o) for o in self.pending_offsets)))

    @classmethod
    def from_value(cls, transactional_id: str, value: TransactionLogValue) -> "TransactionMetadata":
        return cls(transactional_id, value.producer_id, value.producer_epoch, value.timeout_ms, TxnState(value.state),
                   frozenset((str(t), int(p)) for t, p in value.partitions),
                   tuple(PendingOffset(*o) for o in value.pending_offsets), value.start_ms, value.last_update_ms,
                   value.previous_producer_id)


def _fenced(message: str) -> ShareError:
    return ShareError(Errors.PRODUCER_FENCED, message)


class TransactionCoordinator:
    """Every transactional id of the broker; see the module docstring. Call `await load()` first."""

    def __init__(self, sink: TransactionSink, markers: MarkerWriter, new_producer_id: Callable[[], int], clock: Clock,
                 *, max_timeout_ms: int = 900_000, id_expiration_ms: int = 604_800_000,
                 offsets_partitions: int = 50, offsets: TransactionalOffsets | None = None) -> None:
        self._sink = sink
        self._markers = markers
        self._new_producer_id = new_producer_id
        self._clock = clock
        self.max_timeout_ms = max_timeout_ms
        self.id_expiration_ms = id_expiration_ms
        self.offsets_partitions = offsets_partitions
        self.offsets = offsets
        self._txns: dict[str, TransactionMetadata] = {}
        self._busy: set[str] = set()  # ids with a transition in flight (Kafka's pending state)
        self.loaded = False

    # -- loading -------------------------------------------------------------------------------------

    async def load(self) -> int:
        """Rebuild every id from the sink, then complete the transactions caught between prepare and
        complete; returns how many were completed."""
        for record in self._sink.read_all():
            key = record.key
            if not isinstance(key, TransactionLogKey) or not (
                    record.value is None or isinstance(record.value, TransactionLogValue)):
                raise ValueError(f"not a transaction state record: {record!r}")
            if record.value is None:  # a tombstone: the id expired
                self._txns.pop(key.transactional_id, None)
            else:
                self._txns[key.transactional_id] = TransactionMetadata.from_value(key.transactional_id, record.value)
        self.loaded = True
        completed = 0
        for meta in list(self._txns.values()):
            if meta.state in _PREPARED:
                with self._exclusive(meta.transactional_id):
                    if await self._complete(meta) is not None:
                        completed += 1
        return completed

    # -- reading -------------------------------------------------------------------------------------

    def get(self, transactional_id: str) -> TransactionMetadata | None:
        return self._txns.get(transactional_id)

    def __len__(self) -> int:
        return len(self._txns)

    def transactions(self) -> list[TransactionMetadata]:
        return list(self._txns.values())

    def list_transactions(self, states: Iterable[str] = (), producer_ids: Iterable[int] = (), duration_ms: int = -1,
                          pattern: str | None = None) -> tuple[list[TransactionMetadata], list[str]]:
        """ListTransactions: (the ids that pass every filter, the state filters no state is named).
        An invalid `pattern` raises ShareError(INVALID_REGULAR_EXPRESSION)."""
        known = set(STATE_NAMES.values()) - {"Dead"}
        wanted = set(states)
        unknown = sorted(wanted - known)
        pids = set(producer_ids)
        regex = None
        if pattern:
            try:
                regex = re.compile(pattern)
            except re.error as exc:
                raise ShareError(Errors.INVALID_REGULAR_EXPRESSION,
                                 f"invalid regular expression {pattern!r}: {exc}") from None
        now = self._clock.now_ms()
        out = []
        for meta in self._txns.values():
            if wanted and meta.state_name not in wanted:
                continue
            if pids and meta.producer_id not in pids:
                continue
            if duration_ms >= 0 and not (meta.start_ms >= 0 and now - meta.start_ms > duration_ms):
                continue
            if regex is not None and not regex.fullmatch(meta.transactional_id):
                continue
            out.append(meta)
        return out, unknown

    def unstable_offsets(self, group_id: str) -> set[TopicPartition]:
        """The partitions of `group_id` with a transactional offset not yet committed or aborted
        (OffsetFetch with RequireStable answers UNSTABLE_OFFSET_COMMIT for them)."""
        return {(o.topic, o.partition) for meta in self._txns.values() if meta.pending_offsets
                for o in meta.pending_offsets if o.group_id == group_id}

    def verify_partition(self, transactional_id: str, producer_id: int, producer_epoch: int,
                         topic: str, partition: int) -> Errors:
        """KIP-890 verification: whether (topic, partition) is in this producer's ongoing transaction.
        INVALID_PRODUCER_ID_MAPPING, INVALID_PRODUCER_EPOCH, CONCURRENT_TRANSACTIONS or
        TRANSACTION_ABORTABLE when it is not; NONE when it is."""
        meta = self._txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return Errors.INVALID_PRODUCER_ID_MAPPING
        if meta.producer_epoch != producer_epoch:
            return Errors.INVALID_PRODUCER_EPOCH
        if meta.state in _PREPARED or transactional_id in self._busy:
            return Errors.CONCURRENT_TRANSACTIONS
        if meta.state is not TxnState.ONGOING or (topic, partition) not in meta.partitions:
            return Errors.TRANSACTION_ABORTABLE
        return Errors.NONE

    # -- InitProducerId ------------------------------------------------------------------------------

    async def init_producer_id(self, transactional_id: str, timeout_ms: int, producer_id: int = -1,
                               producer_epoch: int = -1) -> tuple[int, int]:
        """(producer id, epoch) for a transactional producer; see the module docstring. Raises ShareError:
        INVALID_REQUEST, INVALID_TRANSACTION_TIMEOUT, CONCURRENT_TRANSACTIONS, PRODUCER_FENCED."""
        if not transactional_id:
            raise ShareError(Errors.INVALID_REQUEST, "the transactional id must not be empty")
        if not 0 < timeout_ms <= self.max_timeout_ms:
            raise ShareError(Errors.INVALID_TRANSACTION_TIMEOUT,
                             f"transaction timeout {timeout_ms} ms is not in [1, transaction.max.timeout.ms "
                             f"{self.max_timeout_ms}]")
        if (producer_id == -1) != (producer_epoch == -1):
            raise ShareError(Errors.INVALID_REQUEST, "the producer id and epoch must both be given or both be -1")
        with self._exclusive(transactional_id):
            meta = self._txns.get(transactional_id)
            if meta is None:
                meta = TransactionMetadata(transactional_id, self._new_producer_id(), -1, timeout_ms, TxnState.EMPTY)
            elif producer_id != -1 and not (
                    meta.producer_epoch == -1 or producer_id == meta.producer_id
                    or (producer_id == meta.previous_producer_id and producer_epoch >= EXHAUSTED_EPOCH)):
                raise _fenced(f"producer {producer_id} is not the current producer of {transactional_id!r}")
            if meta.state in _PREPARED:
                completed = await self._complete(meta)
                if completed is None:
                    raise ShareError(Errors.CONCURRENT_TRANSACTIONS, "the previous transaction is still completing")
                meta = completed
            if meta.state is TxnState.ONGOING:
                completed = await self._fence_and_abort(meta)
                if completed is None:
                    raise ShareError(Errors.CONCURRENT_TRANSACTIONS, "the fenced transaction is still being aborted")
                meta = completed
            if meta.producer_epoch >= EXHAUSTED_EPOCH and producer_epoch in (-1, meta.producer_epoch):
                new = dataclasses.replace(meta, producer_id=self._new_producer_id(), producer_epoch=0,
                                          previous_producer_id=meta.producer_id,
                                          last_producer_epoch=meta.producer_epoch if producer_epoch != -1 else -1)
            elif producer_epoch == -1:
                new = dataclasses.replace(meta, producer_epoch=meta.producer_epoch + 1, last_producer_epoch=-1)
            elif producer_epoch == meta.producer_epoch or meta.producer_epoch == -1:
                new = dataclasses.replace(meta, producer_epoch=meta.producer_epoch + 1,
                                          last_producer_epoch=meta.producer_epoch)
            elif producer_epoch == meta.last_producer_epoch and meta.last_producer_epoch >= 0:
                return meta.producer_id, meta.producer_epoch  # a retry of a bump that succeeded
            else:
                raise _fenced(f"epoch {producer_epoch} of {transactional_id!r} is not the current epoch "
                              f"{meta.producer_epoch}")
            new = dataclasses.replace(new, state=TxnState.EMPTY, timeout_ms=timeout_ms, partitions=frozenset(),
                                      pending_offsets=(), start_ms=-1)
            new = await self._write(new)
            return new.producer_id, new.producer_epoch

    # -- AddPartitionsToTxn / AddOffsetsToTxn / TxnOffsetCommit --------------------------------------

    def _current(self, transactional_id: str, producer_id: int, producer_epoch: int) -> TransactionMetadata:
        """The id's state, for a request of its current producer (Kafka's order of checks)."""
        meta = self._txns.get(transactional_id)
        if meta is None:
            raise ShareError(Errors.INVALID_PRODUCER_ID_MAPPING, f"unknown transactional id {transactional_id!r}")
        if transactional_id in self._busy:
            raise ShareError(Errors.CONCURRENT_TRANSACTIONS, f"a transition of {transactional_id!r} is in progress")
        if meta.producer_id != producer_id:
            raise ShareError(Errors.INVALID_PRODUCER_ID_MAPPING,
                             f"producer {producer_id} is not the producer of {transactional_id!r}")
        if meta.producer_epoch != producer_epoch:
            raise _fenced(f"epoch {producer_epoch} of {transactional_id!r} is not the current epoch "
                          f"{meta.producer_epoch}: a newer producer instance fenced this one")
        return meta

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: Iterable[TopicPartition]) -> None:
        """AddPartitionsToTxn (and AddOffsetsToTxn's offsets partition): Ongoing with the union of the sets."""
        meta = self._current(transactional_id, producer_id, producer_epoch)
        if meta.state in _PREPARED:
            raise ShareError(Errors.CONCURRENT_TRANSACTIONS, f"{transactional_id!r} is completing its transaction")
        wanted = frozenset(partitions)
        if meta.state is TxnState.ONGOING and wanted <= meta.partitions:
            return
        with self._exclusive(transactional_id):
            if meta.state is TxnState.ONGOING:
                new = dataclasses.replace(meta, partitions=meta.partitions | wanted)
            else:
                new = dataclasses.replace(meta, state=TxnState.ONGOING, partitions=wanted, pending_offsets=(),
                                          start_ms=self._clock.now_ms())
            await self._write(new)

    def offsets_partition(self, group_id: str) -> TopicPartition:
        return OFFSETS_TOPIC, offsets_partition_for(group_id, self.offsets_partitions)

    async def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str) -> None:
        """AddOffsetsToTxn: the group's `__consumer_offsets` partition joins the transaction."""
        await self.add_partitions(transactional_id, producer_id, producer_epoch, [self.offsets_partition(group_id)])

    async def txn_offset_commit(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str,
                                offsets: Sequence[PendingOffset], *, member_id: str = "",
                                group_instance_id: str | None = None, generation_id: int = -1,
                                abortable: bool = False) -> dict[TopicPartition, Errors]:
        """TxnOffsetCommit: check the producer, that AddOffsetsToTxn added the group (else INVALID_TXN_STATE,
        TRANSACTION_ABORTABLE when `abortable`), the group member (KIP-447); keep the accepted offsets
        pending in the transaction. Returns each partition's outcome; group-level refusals raise."""
        if self.offsets is None:
            raise ShareError(Errors.COORDINATOR_NOT_AVAILABLE, "this broker has no group coordinator")
        try:
            meta = self._current(transactional_id, producer_id, producer_epoch)
        except ShareError as exc:
            if exc.error == Errors.PRODUCER_FENCED:  # the partition-side verification's answer
                raise ShareError(Errors.INVALID_PRODUCER_EPOCH, exc.message) from None
            raise
        if meta.state in _PREPARED:
            raise ShareError(Errors.CONCURRENT_TRANSACTIONS, f"{transactional_id!r} is completing its transaction")
        if meta.state is not TxnState.ONGOING or self.offsets_partition(group_id) not in meta.partitions:
            raise ShareError(Errors.TRANSACTION_ABORTABLE if abortable else Errors.INVALID_TXN_STATE,
                             f"group {group_id!r} is not part of the ongoing transaction of {transactional_id!r}")
        with self._exclusive(transactional_id):
            results = await self.offsets.validate_transactional_offsets(
                group_id, member_id, group_instance_id, generation_id,
                [(o.topic, o.partition, o.metadata) for o in offsets])
            accepted = {(o.topic, o.partition): o for o in offsets
                        if results.get((o.topic, o.partition), Errors.NONE) == Errors.NONE}
            if accepted:
                meta = self._txns[transactional_id]
                kept = tuple(o for o in meta.pending_offsets
                             if o.group_id != group_id or (o.topic, o.partition) not in accepted)
                await self._write(dataclasses.replace(meta, pending_offsets=kept + tuple(accepted.values())))
            return results

    # -- EndTxn ----------------------------------------------------------------------------------------

    async def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                              commit: bool) -> None:
        """EndTxn (transaction version 1): see Kafka's table of states and outcomes."""
        meta = self._txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            raise ShareError(Errors.INVALID_PRODUCER_ID_MAPPING,
                             f"producer {producer_id} is not the producer of {transactional_id!r}")
        if meta.producer_epoch != producer_epoch:
            raise _fenced(f"epoch {producer_epoch} of {transactional_id!r} is not the current epoch "
                          f"{meta.producer_epoch}")
        if transactional_id in self._busy:
            raise ShareError(Errors.CONCURRENT_TRANSACTIONS, f"a transition of {transactional_id!r} is in progress")
        outcome = "commit" if commit else "abort"
        state = meta.state
        if state is TxnState.ONGOING:
            with self._exclusive(transactional_id):
                prepared = await self._write(dataclasses.replace(
                    meta, state=TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT))
                await self._complete(prepared)  # when a marker fails, run_periodic_jobs finishes it
            return
        same = (state in (TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT)) == commit
        if state in _PREPARED and same:
            raise ShareError(Errors.CONCURRENT_TRANSACTIONS, f"the {outcome} of {transactional_id!r} is in progress")
        if state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT) and same:
            return  # a retried EndTxn of a transaction already completed
        raise ShareError(Errors.INVALID_TXN_STATE,
                         f"cannot {outcome} the transaction of {transactional_id!r} in state {meta.state_name}")

    # -- the coordinator's own jobs --------------------------------------------------------------------

    async def abort_timed_out(self) -> list[str]:
        """Fence and abort every Ongoing transaction past its timeout (from its first add); retry the
        completion of prepared transactions whose markers failed. Returns the ids aborted."""
        now = self._clock.now_ms()
        aborted = []
        for transactional_id in list(self._txns):
            meta = self._txns.get(transactional_id)  # as it is now: an earlier abort of this pass awaited
            if meta is None or transactional_id in self._busy:
                continue
            try:
                if meta.state is TxnState.ONGOING and meta.start_ms + meta.timeout_ms < now:
                    with self._exclusive(meta.transactional_id):
                        log.info("transaction of %r timed out after %d ms: aborting", meta.transactional_id,
                                 now - meta.start_ms)
                        await self._fence_and_abort(meta)
                    aborted.append(meta.transactional_id)
                elif meta.state in _PREPARED:
                    with self._exclusive(meta.transactional_id):
                        await self._complete(meta)
            except ShareError as exc:  # one id's failure (a busy id, a failed write) must not stop the pass
                log.warning("transaction of %r: %s; retried at the next pass", meta.transactional_id, exc.message)
        return aborted

    async def expire_transactional_ids(self) -> list[str]:
        """Remove ids idle in Empty or Complete* for `transactional.id.expiration.ms` (tombstones)."""
        cutoff = self._clock.now_ms() - self.id_expiration_ms
        gone = [m.transactional_id for m in self._txns.values()
                if m.state in _SETTLED and m.last_update_ms <= cutoff and m.transactional_id not in self._busy]
        if gone:
            self._busy.update(gone)  # an InitProducerId meanwhile waits (CONCURRENT_TRANSACTIONS) for the tombstone
            try:
                await self._sink.append([Record(TransactionLogKey(tid), None) for tid in gone])
            finally:
                self._busy.difference_update(gone)
            for tid in gone:
                del self._txns[tid]
            log.info("transactional ids expired: %s", ", ".join(gone))
        return gone

    # -- transitions -----------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _exclusive(self, transactional_id: str) -> Iterator[None]:
        if transactional_id in self._busy:
            raise ShareError(Errors.CONCURRENT_TRANSACTIONS, f"a transition of {transactional_id!r} is in progress")
        self._busy.add(transactional_id)
        try:
            yield
        finally:
            self._busy.discard(transactional_id)

    async def _write(self, new: TransactionMetadata) -> TransactionMetadata:
        """Make `new` the id's state once its record is durable (a failed append changes nothing)."""
        new = dataclasses.replace(new, last_update_ms=self._clock.now_ms())
        try:
            await self._sink.append([Record(TransactionLogKey(new.transactional_id), new.to_value())])
        except ShareError as exc:
            if exc.error in (Errors.KAFKA_STORAGE_ERROR, Errors.NOT_LEADER_OR_FOLLOWER):
                raise ShareError(Errors.NOT_COORDINATOR, exc.message) from exc
            raise
        self._txns[new.transactional_id] = new
        return new

    async def _fence_and_abort(self, meta: TransactionMetadata) -> TransactionMetadata | None:
        """Abort an Ongoing transaction at epoch + 1 (fencing its producer): PrepareAbort, markers,
        CompleteAbort. None when the markers are not all written yet (retried later)."""
        epoch = meta.producer_epoch + 1 if meta.producer_epoch < 32767 else meta.producer_epoch
        prepared = await self._write(dataclasses.replace(meta, state=TxnState.PREPARE_ABORT, producer_epoch=epoch,
                                                         last_producer_epoch=-1))
        return await self._complete(prepared)

    async def _complete(self, meta: TransactionMetadata) -> TransactionMetadata | None:
        """Write the markers of a prepared transaction to every partition (concurrently), apply (commit) or
        drop (abort) its pending offsets, then write Complete*. None when a marker failed (the state stays
        prepared)."""
        commit = meta.state is TxnState.PREPARE_COMMIT
        targets = [(topic, partition) for topic, partition in sorted(meta.partitions) if topic != OFFSETS_TOPIC]
        outcomes = await asyncio.gather(*(self._markers.write_marker(topic, partition, meta.producer_id,
                                                                     meta.producer_epoch, commit)
                                          for topic, partition in targets), return_exceptions=True)
        failed = []
        for (topic, partition), outcome in zip(targets, outcomes):
            if outcome is None:
                continue
            if not isinstance(outcome, ShareError):
                raise outcome  # a bug, not a refusal
            if outcome.error in (Errors.INVALID_PRODUCER_EPOCH, Errors.TRANSACTION_COORDINATOR_FENCED,
                                 Errors.UNKNOWN_TOPIC_OR_PARTITION):
                log.warning("%r: %s marker for %s-%d dropped: %s", meta.transactional_id,
                            "COMMIT" if commit else "ABORT", topic, partition, outcome.message)
                continue
            failed.append((topic, partition, outcome))
        if failed:
            for topic, partition, exc in failed:
                log.warning("%r: writing the %s marker to %s-%d failed (%s); retried later", meta.transactional_id,
                            "COMMIT" if commit else "ABORT", topic, partition, exc.message)
            return None
        if commit and meta.pending_offsets and self.offsets is not None:
            groups: dict[str, list[PendingOffset]] = {}
            for o in meta.pending_offsets:
                groups.setdefault(o.group_id, []).append(o)
            try:
                for group_id, offsets in groups.items():
                    await self.offsets.commit_transactional_offsets(group_id, offsets)
            except ShareError as exc:
                log.warning("%r: committing the transaction's offsets failed (%s); retried later",
                            meta.transactional_id, exc.message)
                return None
        return await self._write(dataclasses.replace(
            meta, state=TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT, partitions=frozenset(),
            pending_offsets=()))
