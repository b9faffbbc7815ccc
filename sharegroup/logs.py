"""The `PartitionLogs` protocol: what a share-partition leader needs from the topic logs it serves.

A broker embeds the engine beside its own log storage. The share path never decompresses or parses
records: it reads producer batch *headers* (first and last offset, producer id, transactional and
control bits, size) and hands the consumer the batch bytes the log already holds, by an opaque handle.
Layer 0: plain data and a protocol, no I/O.
"""

from __future__ import annotations

import uuid
from typing import NamedTuple, Protocol, runtime_checkable

from sharegroup.types import AbortedTransaction, FetchedBatch

__all__ = ["LogBatch", "LogRead", "PartitionLogs"]


class LogBatch(NamedTuple):
    """One producer record batch as stored in a topic log: its header plus a handle to its bytes.

    `records` is whatever the log uses to hand the stored bytes to the wire without copying or
    re-encoding them (bytes, a memoryview, a file range); the share path passes it through untouched.
    """

    base_offset: int
    last_offset: int
    producer_id: int = -1
    is_transactional: bool = False
    is_control: bool = False
    size_bytes: int = 0
    records: object = None

    @property
    def header(self) -> FetchedBatch:
        """The header the share-partition leader works on (it never opens the records)."""
        return FetchedBatch(self.base_offset, self.last_offset, self.producer_id, self.is_transactional,
                            self.is_control)


class LogRead(NamedTuple):
    """The answer to one partition read: whole batches from the one holding the fetch offset on, the
    aborted transactions among them (for read_committed), and the log's offsets at the time of the read."""

    batches: tuple[LogBatch, ...]
    aborted_transactions: tuple[AbortedTransaction, ...]
    log_start_offset: int
    high_watermark: int
    last_stable_offset: int


@runtime_checkable
class PartitionLogs(Protocol):
    """Read access to the topic-partition logs of one broker (Kafka's ReplicaManager, seen from the
    share path). Unknown partitions raise `ShareError(UNKNOWN_TOPIC_OR_PARTITION)`."""

    def has_partition(self, topic_id: uuid.UUID, partition: int) -> bool:
        """Whether this broker holds (leads) the partition."""
        ...

    def log_start_offset(self, topic_id: uuid.UUID, partition: int) -> int: ...

    def log_end_offset(self, topic_id: uuid.UUID, partition: int) -> int:
        """The offset the next appended record gets (Kafka's high watermark on a single replica)."""
        ...

    def last_stable_offset(self, topic_id: uuid.UUID, partition: int) -> int:
        """The first offset of the earliest open transaction, or the log end when none is open."""
        ...

    def read(self, topic_id: uuid.UUID, partition: int, fetch_offset: int, max_bytes: int, *,
             read_committed: bool = False) -> LogRead:
        """Whole batches from the batch containing `fetch_offset`, about `max_bytes` worth (always at
        least one batch when there is any, as Kafka does); with `read_committed` only up to the last
        stable offset. An offset outside [log start, log end] raises `ShareError(OFFSET_OUT_OF_RANGE)`."""
        ...

    def offset_for(self, topic_id: uuid.UUID, partition: int, spec: object) -> int:
        """'earliest' → log start, 'latest' → log end, an int timestamp in ms → the first offset of the
        first batch stamped at or after it (the log end when none is)."""
        ...
