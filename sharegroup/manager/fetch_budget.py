"""The log side of a ShareFetch, as Kafka's delayed share fetch reads it: which share-partitions can
acquire at all, how MaxBytes is split over them (the UNIFORM strategy), how each read is cut to the
whole producer batches within its byte limit (the first partition with data always gets at least one
batch, as Kafka's log read does), and the partition read itself.

Kafka reads the log of every acquirable partition of a request in order, each up to
min(its UNIFORM share, what the request's MaxBytes has left); records past that limit are neither
shipped nor acquired, so MaxBytes worth 3.5 batches delivers 3 of them.
"""

from __future__ import annotations

import random
from typing import Callable, Sequence

from ..errors import Errors, ShareError
from ..logs import LogRead, PartitionLogs
from .partitions import DROPPING_ERRORS, SharePartitionEntry
from .share_partition import SharePartition
from .sessions import TopicPartition

__all__ = ["ByteBudget", "can_acquire_records", "read_partitions", "read_partition", "sync_log_start",
           "uniform_partition_max_bytes"]

Drop = Callable[[SharePartitionEntry, Errors], None]


def can_acquire_records(sp: SharePartition) -> bool:
    """Kafka's canAcquireRecords: AVAILABLE records wait inside the in-flight window, or the window has
    room under `partition_max_record_locks`. A share-partition that cannot acquire is not read."""
    return sp.next_fetch_offset() < sp.end_offset or sp.in_flight_count < sp.config.partition_max_record_locks


def uniform_partition_max_bytes(request_max_bytes: int, acquirable: int, read: int,
                                rng: random.Random | None = None) -> list[int]:
    """Kafka's UNIFORM split of the request's MaxBytes (R) over the `read` partitions being read, of
    `acquirable` (A) acquirable ones: R >= A gives each R // A; else R >= read gives each R // read;
    else R of them, chosen at random, get 1 byte and the others 0."""
    if request_max_bytes <= 0 or acquirable <= 0 or read <= 0:
        raise ValueError(f"no split of {request_max_bytes} bytes over {read} of {acquirable} partitions")
    if request_max_bytes >= acquirable:
        return [request_max_bytes // acquirable] * read
    if request_max_bytes >= read:
        return [request_max_bytes // read] * read
    ones = set((rng or random).sample(range(read), request_max_bytes))
    return [1 if i in ones else 0 for i in range(read)]


class ByteBudget:
    """What one pass over a request's partitions has left of its MaxBytes (Kafka's limitBytes), and
    whether the next read must still return a batch larger than its limit (Kafka's minOneMessage: true
    until a partition's read returned data)."""

    __slots__ = ("remaining", "min_one")

    def __init__(self, max_bytes: int) -> None:
        self.remaining = max_bytes
        self.min_one = True

    def limit(self, partition_max_bytes: int) -> int:
        return max(0, min(partition_max_bytes, self.remaining))

    def cut(self, read: LogRead, limit: int) -> tuple[LogRead, int]:
        """The read cut to the leading whole batches within `limit` bytes (at least one while `min_one`),
        and the bytes it takes from the request: up to `limit` of what the log had from the fetch
        position on, as Kafka counts the slice it read (a partial last batch included)."""
        batches = read.batches
        kept = 0
        taken = 0
        for batch in batches:
            if taken + batch.size_bytes > limit and not (self.min_one and kept == 0):
                break
            taken += batch.size_bytes
            kept += 1
        total = taken + sum(b.size_bytes for b in batches[kept:])
        consumed = max(taken, min(limit, total))
        self.remaining = max(0, self.remaining - consumed)
        if kept:
            self.min_one = False
        if kept < len(batches):
            read = read._replace(batches=batches[:kept])
        return read, consumed


def sync_log_start(logs: PartitionLogs, entry: SharePartitionEntry) -> None:
    """Push a log start offset that retention moved into the share-partition (records below it archived)."""
    log_start = logs.log_start_offset(entry.topic_id, entry.partition)
    if log_start > entry.log_start_offset:
        if log_start > entry.sp.start_offset:
            entry.sp.update_log_start_offset(log_start)
        entry.log_start_offset = log_start


def read_partition(logs: PartitionLogs, entry: SharePartitionEntry, max_bytes: int, drop: Drop) -> LogRead | ShareError:
    """Read batch headers from the share-partition's next fetch offset, pushing a moved log start into
    it first; a fetch offset retention deleted meanwhile is moved up once and read again. An error that
    makes the share-partition unusable drops it (`drop`)."""
    sp = entry.sp
    read_committed = sp.config.read_committed
    for attempt in (0, 1):
        try:
            sync_log_start(logs, entry)
            return logs.read(entry.topic_id, entry.partition, sp.next_fetch_offset(), max_bytes,
                             read_committed=read_committed)
        except ShareError as exc:
            if exc.error is Errors.OFFSET_OUT_OF_RANGE and attempt == 0:
                continue
            if exc.error in DROPPING_ERRORS:
                drop(entry, exc.error)
            return exc
    raise AssertionError("unreachable")


def read_partitions(logs: PartitionLogs, acquirable: Sequence[tuple[TopicPartition, SharePartitionEntry]],
                    max_bytes: int, drop: Drop) -> tuple[dict[TopicPartition, LogRead | ShareError], int]:
    """Read the acquirable partitions in order, each cut to its byte limit; returns the reads and the
    bytes they took from the request (Kafka's estimate of what a fetch would return, for MinBytes)."""
    reads: dict[TopicPartition, LogRead | ShareError] = {}
    if not acquirable:
        return reads, 0
    limits = uniform_partition_max_bytes(max_bytes, len(acquirable), len(acquirable))
    budget = ByteBudget(max_bytes)
    taken = 0
    for (tp, entry), partition_max_bytes in zip(acquirable, limits):
        limit = budget.limit(partition_max_bytes)
        if limit == 0 and not budget.min_one:
            continue  # nothing left of MaxBytes for it: it acquires nothing this time
        read = read_partition(logs, entry, limit, drop)
        if isinstance(read, ShareError):
            reads[tp] = read
            continue
        reads[tp], consumed = budget.cut(read, limit)
        taken += consumed
    return reads, taken
