"""`InMemoryPartitionLogs`: topic-partition logs held in memory, for tests, the demo and embedders that
keep no log of their own. Implements the `PartitionLogs` protocol (sharegroup/logs.py).

Offsets are dense from each log's start offset; each append is one producer batch. Transactions are
modelled as Kafka stores them: transactional batches of a producer stay open until a control batch
(commit or abort marker) closes them, an open transaction holds the last stable offset back, and an
aborted one is listed in reads for read_committed consumers.
"""

from __future__ import annotations

import bisect
import uuid
from collections.abc import Callable
from typing import NamedTuple

from sharegroup.errors import Errors, ShareError
from sharegroup.logs import LogBatch, LogRead
from sharegroup.types import AbortedTransaction

__all__ = ["InMemoryPartitionLogs", "PartitionLog"]

AppendListener = Callable[[uuid.UUID, int, int], None]


class _Aborted(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the abort marker's offset


class PartitionLog:
    """The log of one topic-partition: batch headers with offsets, timestamps and sizes.

    Fetch and timestamp look-up are O(log batches) plus the batches returned. Batch timestamps must not
    decrease, so a timestamp look-up is a binary search.
    """

    def __init__(self, log_start_offset: int = 0) -> None:
        if isinstance(log_start_offset, bool) or not isinstance(log_start_offset, int) or log_start_offset < 0:
            raise ValueError(f"log_start_offset must be an int >= 0, got {log_start_offset!r}")
        self._bases: list[int] = []
        self._batches: list[LogBatch] = []
        self._timestamps: list[int] = []
        self._start = log_start_offset
        self._end = log_start_offset
        self._open_txn_first: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self._aborted: list[_Aborted] = []

    @property
    def log_start_offset(self) -> int:
        return self._start

    @property
    def log_end_offset(self) -> int:
        """The offset the next record will get (one past the last record)."""
        return self._end

    @property
    def last_stable_offset(self) -> int:
        return min(self._open_txn_first.values(), default=self._end)

    def append(self, record_count: int, timestamp_ms: int, *, producer_id: int = -1,
               is_transactional: bool = False, size_bytes: int | None = None, records: object = None) -> LogBatch:
        """Append one producer batch of `record_count` records; returns its stored form."""
        if isinstance(record_count, bool) or not isinstance(record_count, int) or record_count < 1:
            raise ValueError(f"a batch holds at least one record, got {record_count!r}")
        if is_transactional and producer_id < 0:
            raise ValueError("a transactional batch needs a producer id >= 0")
        if is_transactional:
            self._open_txn_first.setdefault(producer_id, self._end)
        size = 61 + 10 * record_count if size_bytes is None else size_bytes
        return self._put(record_count, timestamp_ms, producer_id, is_transactional, False, size, records)

    def end_transaction(self, producer_id: int, *, commit: bool, timestamp_ms: int) -> LogBatch:
        """Write the commit or abort marker (a one-record control batch) closing `producer_id`'s open
        transaction."""
        first = self._open_txn_first.get(producer_id)
        if first is None:
            raise ShareError(Errors.INVALID_TXN_STATE, f"producer {producer_id} has no open transaction")
        marker = self._put(1, timestamp_ms, producer_id, True, True, 61, None)
        del self._open_txn_first[producer_id]
        if not commit:
            self._aborted.append(_Aborted(producer_id, first, marker.base_offset))
        return marker

    def _put(self, record_count: int, timestamp_ms: int, producer_id: int, is_transactional: bool,
             is_control: bool, size_bytes: int, records: object) -> LogBatch:
        if self._timestamps and timestamp_ms < self._timestamps[-1]:
            raise ValueError(f"batch timestamps must not decrease: {timestamp_ms} < {self._timestamps[-1]}")
        batch = LogBatch(self._end, self._end + record_count - 1, producer_id, is_transactional, is_control,
                         size_bytes, records)
        self._bases.append(batch.base_offset)
        self._batches.append(batch)
        self._timestamps.append(timestamp_ms)
        self._end += record_count
        return batch

    def delete_records(self, before_offset: int) -> int:
        """Move the log start offset up to `before_offset` (Kafka's DeleteRecords); batches wholly below it
        are dropped. Returns the new log start offset."""
        if before_offset < 0 or before_offset > self._end:
            raise ShareError(Errors.OFFSET_OUT_OF_RANGE,
                             f"offset {before_offset} outside the log [{self._start}, {self._end}]")
        if before_offset <= self._start:
            return self._start
        self._start = before_offset
        keep = bisect.bisect_right(self._bases, before_offset) - 1
        if keep > 0 and self._batches[keep - 1].last_offset < before_offset:
            del self._bases[:keep], self._batches[:keep], self._timestamps[:keep]
        self._aborted = [a for a in self._aborted if a.last_offset >= before_offset]
        return self._start

    def read(self, fetch_offset: int, max_bytes: int, *, read_committed: bool = False) -> LogRead:
        if fetch_offset < self._start or fetch_offset > self._end:
            raise ShareError(Errors.OFFSET_OUT_OF_RANGE,
                             f"fetch offset {fetch_offset} outside the log [{self._start}, {self._end}]")
        limit = self.last_stable_offset if read_committed else self._end
        out: list[LogBatch] = []
        if fetch_offset < limit:
            i = max(0, bisect.bisect_right(self._bases, fetch_offset) - 1)
            taken = 0
            batches = self._batches
            while i < len(batches) and batches[i].base_offset < limit and (not out or taken < max_bytes):
                batch = batches[i]
                if batch.last_offset >= fetch_offset:
                    out.append(batch)
                    taken += batch.size_bytes
                i += 1
        aborted: tuple[AbortedTransaction, ...] = ()
        if read_committed and out:
            last = out[-1].last_offset
            aborted = tuple(AbortedTransaction(a.producer_id, a.first_offset) for a in self._aborted
                            if a.first_offset <= last and a.last_offset >= fetch_offset)
        return LogRead(tuple(out), aborted, self._start, self._end, self.last_stable_offset)

    def offset_for(self, spec: object) -> int:
        if spec == "earliest":
            return self._start
        if spec == "latest":
            return self._end
        if isinstance(spec, bool) or not isinstance(spec, int):
            raise ValueError(f"an offset look-up takes 'earliest', 'latest' or a timestamp in ms, got {spec!r}")
        i = bisect.bisect_left(self._timestamps, spec)
        return self._bases[i] if i < len(self._bases) else self._end


class InMemoryPartitionLogs:
    """Every topic-partition log of one broker, in memory. `append` notifies subscribers (for example a
    `SharePartitionManager.on_append`) with (topic_id, partition, new log end offset)."""

    def __init__(self) -> None:
        self._logs: dict[tuple[uuid.UUID, int], PartitionLog] = {}
        self._listeners: list[AppendListener] = []

    def create_partition(self, topic_id: uuid.UUID, partition: int, *, log_start_offset: int = 0) -> PartitionLog:
        key = (topic_id, partition)
        if key in self._logs:
            raise ShareError(Errors.INVALID_REQUEST, f"partition {topic_id}-{partition} exists already")
        log = self._logs[key] = PartitionLog(log_start_offset)
        return log

    def log(self, topic_id: uuid.UUID, partition: int) -> PartitionLog:
        return self._log(topic_id, partition)

    def subscribe(self, listener: AppendListener) -> None:
        """Call `listener(topic_id, partition, log_end_offset)` after every append."""
        self._listeners.append(listener)

    def append(self, topic_id: uuid.UUID, partition: int, record_count: int, timestamp_ms: int, *,
               producer_id: int = -1, is_transactional: bool = False, size_bytes: int | None = None,
               records: object = None) -> LogBatch:
        log = self._log(topic_id, partition)
        batch = log.append(record_count, timestamp_ms, producer_id=producer_id,
                           is_transactional=is_transactional, size_bytes=size_bytes, records=records)
        self._notify(topic_id, partition, log)
        return batch

    def end_transaction(self, topic_id: uuid.UUID, partition: int, producer_id: int, *, commit: bool,
                        timestamp_ms: int) -> LogBatch:
        log = self._log(topic_id, partition)
        marker = log.end_transaction(producer_id, commit=commit, timestamp_ms=timestamp_ms)
        self._notify(topic_id, partition, log)
        return marker

    def _notify(self, topic_id: uuid.UUID, partition: int, log: PartitionLog) -> None:
        for listener in self._listeners:
            listener(topic_id, partition, log.log_end_offset)

    # -- the PartitionLogs protocol ------------------------------------------------------------------

    def has_partition(self, topic_id: uuid.UUID, partition: int) -> bool:
        return (topic_id, partition) in self._logs

    def log_start_offset(self, topic_id: uuid.UUID, partition: int) -> int:
        return self._log(topic_id, partition).log_start_offset

    def log_end_offset(self, topic_id: uuid.UUID, partition: int) -> int:
        return self._log(topic_id, partition).log_end_offset

    def last_stable_offset(self, topic_id: uuid.UUID, partition: int) -> int:
        return self._log(topic_id, partition).last_stable_offset

    def read(self, topic_id: uuid.UUID, partition: int, fetch_offset: int, max_bytes: int, *,
             read_committed: bool = False) -> LogRead:
        return self._log(topic_id, partition).read(fetch_offset, max_bytes, read_committed=read_committed)

    def offset_for(self, topic_id: uuid.UUID, partition: int, spec: object) -> int:
        return self._log(topic_id, partition).offset_for(spec)

    def _log(self, topic_id: uuid.UUID, partition: int) -> PartitionLog:
        log = self._logs.get((topic_id, partition))
        if log is None:
            raise ShareError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"no log for {topic_id}-{partition}")
        return log
