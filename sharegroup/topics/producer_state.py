"""Idempotent producers and transactions of one partition log, as Kafka's ProducerStateManager keeps them.

`ProducerStateManager` holds, per producer id, the producer epoch and the sequence ranges and offsets of
its last five batches. A produce is checked batch by batch, as Kafka's broker does:

1. A batch with the current epoch whose (first, last) sequence equals one of the last five batches is a
   *duplicate* (a retry of a batch already written): nothing is appended and the answer carries the
   original offsets. Kafka's broker answers such a retry with NONE and those offsets (the early
   idempotent brokers of Kafka 0.11 answered DUPLICATE_SEQUENCE_NUMBER instead; clients take both as
   success), so `AppendResult.duplicate` is information, not an error.
2. An epoch below the current one: INVALID_PRODUCER_EPOCH (47; Kafka 2.7+ sends this rather than
   PRODUCER_FENCED on produce).
3. A new (higher) epoch must start at sequence 0, unless the producer had no epoch yet:
   OUT_OF_ORDER_SEQUENCE_NUMBER (45).
4. Same epoch: the first sequence must follow the last one (INT32_MAX wraps to 0), else
   OUT_OF_ORDER_SEQUENCE_NUMBER.

An unknown producer id (never seen, whose batches all went below the log start, or expired: idle for
`producer.id.expiration.ms` by its batches' timestamps, with no open transaction) is accepted with
any sequence, as Kafka has done since KIP-360 (2.5): UNKNOWN_PRODUCER_ID (59) is no longer a produce
answer. The check computes its updates on copies, so a refused produce changes nothing; `apply` commits
them once the batches are queued for writing.

`TransactionIndex` tracks, per producer, the first offset of its open transaction (transactional data
batches open one; a control batch closes it), the aborted transactions (producer id, first offset and
the abort marker's offset) and so the last stable offset: the first offset of the earliest open
transaction, or the log end when none is open. Both structures are rebuilt on open by replaying the
batch headers of the log.
"""

from __future__ import annotations

import bisect
from collections import deque
from typing import NamedTuple, Sequence

from sharegroup.errors import Errors, ShareError
from sharegroup.types import AbortedTransaction

from .record_batch import CONTROL_ABORT, BatchHeader

__all__ = ["BatchMetadata", "ProducerEntry", "ProducerStateManager", "TransactionIndex", "RETAINED_BATCHES"]

RETAINED_BATCHES = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN (max.in.flight.requests.per.connection)
_INT32_MAX = 2**31 - 1


class BatchMetadata(NamedTuple):
    """Sequence range and offsets of one batch a producer wrote."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


class ProducerEntry:
    """One producer's state in one partition: epoch, last batches, the offset and the (max) timestamp
    of its last batch."""

    __slots__ = ("epoch", "batches", "last_offset", "last_timestamp")

    def __init__(self, epoch: int = -1, batches: Sequence[BatchMetadata] = (), last_offset: int = -1,
                 last_timestamp: int = -1) -> None:
        self.epoch = epoch
        self.batches: deque[BatchMetadata] = deque(batches, maxlen=RETAINED_BATCHES)
        self.last_offset = last_offset
        self.last_timestamp = last_timestamp

    def copy(self) -> ProducerEntry:
        return ProducerEntry(self.epoch, self.batches, self.last_offset, self.last_timestamp)

    def duplicate_of(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.epoch:
            return None
        first, last = header.base_sequence, header.last_sequence
        for meta in self.batches:
            if meta.first_seq == first and meta.last_seq == last:
                return meta
        return None


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)


class ProducerStateManager:
    """Per-producer sequence state of one partition (see the module docstring for the rules)."""

    def __init__(self) -> None:
        self._producers: dict[int, ProducerEntry] = {}

    def __len__(self) -> int:
        return len(self._producers)

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self._producers.get(producer_id)

    def items(self) -> list[tuple[int, ProducerEntry]]:
        """Every producer with its entry (DescribeProducers)."""
        return list(self._producers.items())

    def check(self, headers: Sequence[BatchHeader], base_offsets: Sequence[int]
              ) -> tuple[BatchMetadata | None, dict[int, ProducerEntry]]:
        """Check the batches of one produce, to be written at `base_offsets`. Returns (the original
        batch when the produce is a duplicate, else None; the updated entries to `apply`). Raises
        ShareError for an epoch or sequence fault. Changes nothing itself."""
        updates: dict[int, ProducerEntry] = {}
        for header, base in zip(headers, base_offsets):
            pid = header.producer_id
            if pid < 0:
                continue
            current = self._producers.get(pid)
            if current is not None and pid not in updates:
                duplicate = current.duplicate_of(header)
                if duplicate is not None:
                    return duplicate, {}
            entry = updates.get(pid)
            if entry is None:
                entry = updates[pid] = current.copy() if current is not None else ProducerEntry()
            epoch, seq = header.producer_epoch, header.base_sequence
            if epoch < entry.epoch:
                raise ShareError(Errors.INVALID_PRODUCER_EPOCH,
                                 f"producer {pid}: epoch {epoch} is older than the current epoch {entry.epoch}")
            if epoch != entry.epoch:
                if seq != 0 and entry.epoch != -1:
                    raise ShareError(Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                     f"producer {pid}: new epoch {epoch} must start at sequence 0, got {seq}")
                entry.epoch = epoch
                entry.batches.clear()
            elif entry.batches and not _in_sequence(entry.batches[-1].last_seq, seq):
                raise ShareError(Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                 f"producer {pid} epoch {epoch}: sequence {seq} does not follow "
                                 f"{entry.batches[-1].last_seq}")
            elif not entry.batches and seq != 0:
                # Same epoch but no batch remembered (only a marker was written): Kafka expects 0.
                raise ShareError(Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                 f"producer {pid} epoch {epoch}: expected sequence 0, got {seq}")
            last = base + header.last_offset_delta
            entry.batches.append(BatchMetadata(seq, header.last_sequence, base, last))
            entry.last_offset = last
            entry.last_timestamp = header.max_timestamp
        return None, updates

    def apply(self, updates: dict[int, ProducerEntry]) -> None:
        self._producers.update(updates)

    def restore(self, producer_id: int, entry: ProducerEntry | None) -> None:
        """Put back a producer's entry as it was before a refused append (None: it had none)."""
        if entry is None:
            self._producers.pop(producer_id, None)
        else:
            self._producers[producer_id] = entry

    def replay(self, header: BatchHeader) -> None:
        """Recovery: take a stored batch (offsets assigned) as written, without checks."""
        pid = header.producer_id
        if pid < 0:
            return
        entry = self._producers.get(pid)
        if entry is None:
            entry = self._producers[pid] = ProducerEntry()
        if header.producer_epoch != entry.epoch:
            entry.epoch = header.producer_epoch
            entry.batches.clear()
        if not header.is_control:
            entry.batches.append(BatchMetadata(header.base_sequence, header.last_sequence, header.base_offset,
                                               header.last_offset))
        entry.last_offset = header.last_offset
        entry.last_timestamp = header.max_timestamp

    def remove_expired(self, now_ms: int, expiration_ms: int, open_transactions: dict[int, int]) -> int:
        """Forget producers idle for `expiration_ms` (by their last batch's timestamp) without an open
        transaction, as Kafka's `producer.id.expiration.ms` does; returns how many. This bounds the
        state a stream of short-lived producers leaves behind."""
        gone = [pid for pid, e in self._producers.items()
                if now_ms - e.last_timestamp >= expiration_ms and pid not in open_transactions]
        for pid in gone:
            del self._producers[pid]
        return len(gone)

    def truncate_head(self, log_start_offset: int) -> None:
        """Forget producers whose last batch lies wholly below the new log start (as Kafka does)."""
        gone = [pid for pid, e in self._producers.items() if e.last_offset < log_start_offset]
        for pid in gone:
            del self._producers[pid]


class _Aborted(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the abort marker's offset


class TransactionIndex:
    """Open and aborted transactions of one partition log, for the last stable offset and read_committed."""

    def __init__(self) -> None:
        self._open: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self._aborted: list[_Aborted] = []  # in marker order, so sorted by last_offset
        self._aborted_last: list[int] = []

    def on_batch(self, header: BatchHeader, control_type: int | None = None) -> None:
        """Take one published batch (offsets assigned); `control_type` is the marker type of a control
        batch (CONTROL_ABORT or CONTROL_COMMIT)."""
        if not header.is_transactional or header.producer_id < 0:
            return
        pid = header.producer_id
        if not header.is_control:
            self._open.setdefault(pid, header.base_offset)
            return
        first = self._open.pop(pid, header.base_offset)
        if control_type == CONTROL_ABORT:
            self._aborted.append(_Aborted(pid, first, header.base_offset))
            self._aborted_last.append(header.base_offset)

    def is_open(self, producer_id: int) -> bool:
        """Whether `producer_id` has an open transaction in this partition."""
        return producer_id in self._open

    def first_unstable_offset(self) -> int | None:
        return min(self._open.values(), default=None)

    def open_transactions(self) -> dict[int, int]:
        return dict(self._open)

    def aborted_between(self, fetch_offset: int, last_offset: int) -> tuple[AbortedTransaction, ...]:
        """Aborted transactions overlapping [fetch_offset, last_offset], in marker order."""
        i = bisect.bisect_left(self._aborted_last, fetch_offset)
        return tuple(AbortedTransaction(a.producer_id, a.first_offset) for a in self._aborted[i:]
                     if a.first_offset <= last_offset)

    def truncate_head(self, log_start_offset: int) -> None:
        """Drop aborted transactions whose marker lies below the new log start."""
        i = bisect.bisect_left(self._aborted_last, log_start_offset)
        if i:
            del self._aborted[:i], self._aborted_last[:i]
