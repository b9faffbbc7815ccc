"""The group coordinator's records and where they go (Kafka's share-group records in __consumer_offsets).

Every change of a share group is a list of `Record(key, value)` appended to a `RecordSink`; applying
the records is the only way the coordinator's in-memory state moves, so rebuilding from
`read_all()` after a restart is the same code path as normal operation. A `value` of None is a
tombstone: it deletes what its key names. Keys and values are immutable tuples of plain data (str, int,
UUID, tuples), so a durable sink can encode them as they are. Each key carries Kafka's record type
(`record_type`, the apiKey of the record in __consumer_offsets); keys are frozen dataclasses rather than
tuples so that keys of different record types never compare equal.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import ClassVar, NamedTuple, Protocol, Sequence, Union, runtime_checkable

from ..errors import Errors, ShareError
from .classic.records import CLASSIC_VALUE_TYPES

__all__ = [
    "TopicPartitions",
    "TopicMetadata",
    "ShareGroupMemberMetadataKey",
    "ShareGroupMemberMetadataValue",
    "ShareGroupMetadataKey",
    "ShareGroupMetadataValue",
    "ShareGroupTargetAssignmentMetadataKey",
    "ShareGroupTargetAssignmentMetadataValue",
    "ShareGroupTargetAssignmentMemberKey",
    "ShareGroupTargetAssignmentMemberValue",
    "ShareGroupCurrentMemberAssignmentKey",
    "ShareGroupCurrentMemberAssignmentValue",
    "ShareGroupStatePartitionMetadataKey",
    "ShareGroupStatePartitionMetadataValue",
    "RecordKey",
    "RecordValue",
    "Record",
    "RecordSink",
    "MemoryRecordSink",
]


class TopicPartitions(NamedTuple):
    """Partitions of one topic, ascending (an assignment entry)."""

    topic_id: uuid.UUID
    partitions: tuple[int, ...]


class TopicMetadata(NamedTuple):
    """One topic of the share-partition metadata: its id, its name when recorded, and partitions."""

    topic_id: uuid.UUID
    topic_name: str
    partitions: tuple[int, ...]


# -- keys and values (record types 10..15, as Kafka numbers them) ------------------------------------


@dataclass(frozen=True, slots=True)
class ShareGroupMemberMetadataKey:
    group_id: str
    member_id: str
    record_type: ClassVar[int] = 10


class ShareGroupMemberMetadataValue(NamedTuple):
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ShareGroupMetadataKey:
    group_id: str
    record_type: ClassVar[int] = 11


class ShareGroupMetadataValue(NamedTuple):
    epoch: int
    metadata_hash: int


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMetadataKey:
    group_id: str
    record_type: ClassVar[int] = 12


class ShareGroupTargetAssignmentMetadataValue(NamedTuple):
    """`assignment_timestamp_ms` is -1 when the next computation may run at once (no rate limit)."""

    assignment_epoch: int
    assignment_timestamp_ms: int


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMemberKey:
    group_id: str
    member_id: str
    record_type: ClassVar[int] = 13


class ShareGroupTargetAssignmentMemberValue(NamedTuple):
    topic_partitions: tuple[TopicPartitions, ...]


@dataclass(frozen=True, slots=True)
class ShareGroupCurrentMemberAssignmentKey:
    group_id: str
    member_id: str
    record_type: ClassVar[int] = 14


class ShareGroupCurrentMemberAssignmentValue(NamedTuple):
    member_epoch: int
    previous_member_epoch: int
    assigned_partitions: tuple[TopicPartitions, ...]


@dataclass(frozen=True, slots=True)
class ShareGroupStatePartitionMetadataKey:
    group_id: str
    record_type: ClassVar[int] = 15


class ShareGroupStatePartitionMetadataValue(NamedTuple):
    """The share-partition lifecycle of a group: which partitions are initializing, initialized, deleting.

    Kafka records only topic ids and names for deleting topics; we keep their partitions too, so a
    retried deletion deletes exactly the state that was initialized.
    """

    initializing_topics: tuple[TopicMetadata, ...]
    initialized_topics: tuple[TopicMetadata, ...]
    deleting_topics: tuple[TopicMetadata, ...]


RecordKey = Union[
    ShareGroupMemberMetadataKey,
    ShareGroupMetadataKey,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupStatePartitionMetadataKey,
]
RecordValue = Union[
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataValue,
    ShareGroupTargetAssignmentMetadataValue,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupStatePartitionMetadataValue,
]

# key type -> the value type it must carry (None is always allowed: a tombstone)
VALUE_TYPES: dict[type, type] = {
    ShareGroupMemberMetadataKey: ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey: ShareGroupMetadataValue,
    ShareGroupTargetAssignmentMetadataKey: ShareGroupTargetAssignmentMetadataValue,
    ShareGroupTargetAssignmentMemberKey: ShareGroupTargetAssignmentMemberValue,
    ShareGroupCurrentMemberAssignmentKey: ShareGroupCurrentMemberAssignmentValue,
    ShareGroupStatePartitionMetadataKey: ShareGroupStatePartitionMetadataValue,
}
# Classic groups and committed offsets (record types 1 and 2) go to the same sink.
VALUE_TYPES.update(CLASSIC_VALUE_TYPES)


class Record(NamedTuple):
    """One change: a key and its new value, or None (a tombstone)."""

    key: RecordKey
    value: RecordValue | None


# -- sinks ---------------------------------------------------------------------------------------------


@runtime_checkable
class RecordSink(Protocol):
    """Where the coordinator's records go. `append` completes once the records are durable (for a
    durable sink) and raises on failure, in which case none of them count; `read_all` returns every
    appended record in order."""

    async def append(self, records: Sequence[Record]) -> None: ...

    def read_all(self) -> list[Record]: ...


class MemoryRecordSink:
    """Records kept in a list; `fail_next_appends` makes appends fail for tests."""

    def __init__(self) -> None:
        self._records: list[Record] = []
        self._failures_left = 0
        self._failure = Errors.UNKNOWN_SERVER_ERROR
        self.appends = 0  # successful append calls, for tests and benchmarks

    async def append(self, records: Sequence[Record]) -> None:
        if self._failures_left > 0:
            self._failures_left -= 1
            raise ShareError(self._failure, "injected record append failure")
        self._records.extend(records)
        self.appends += 1

    def read_all(self) -> list[Record]:
        return list(self._records)

    def __len__(self) -> int:
        return len(self._records)

    def fail_next_appends(self, n: int, error: Errors | int = Errors.KAFKA_STORAGE_ERROR) -> None:
        """The next `n` appends fail with ShareError(error) and store nothing."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"n must be an int >= 0, not {n!r}")
        self._failures_left, self._failure = n, Errors(error)
