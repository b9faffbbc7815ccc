"""The records of share groups (Kafka's ShareGroup* records in __consumer_offsets, record types 10..15).

They go to the coordinator's `RecordSink` and follow its rules (see `coordinator/records.py`): a
`Record(key, value)`, None as a tombstone, keys frozen dataclasses carrying Kafka's record type
(`record_type`), values NamedTuples of plain data (str, int, UUID, tuples).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

from ..records import TopicPartitions

__all__ = [
    "SHARE_VALUE_TYPES",
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
]


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


# key type -> the value type it must carry (None is always allowed: a tombstone)
SHARE_VALUE_TYPES: dict[type, type] = {
    ShareGroupMemberMetadataKey: ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey: ShareGroupMetadataValue,
    ShareGroupTargetAssignmentMetadataKey: ShareGroupTargetAssignmentMetadataValue,
    ShareGroupTargetAssignmentMemberKey: ShareGroupTargetAssignmentMemberValue,
    ShareGroupCurrentMemberAssignmentKey: ShareGroupCurrentMemberAssignmentValue,
    ShareGroupStatePartitionMetadataKey: ShareGroupStatePartitionMetadataValue,
}
