"""The records of KIP-848 consumer groups (Kafka's ConsumerGroup* records in __consumer_offsets).

They go to the same `RecordSink` as the share-group records and follow the same rules (see
`coordinator/records.py`): a `Record(key, value)`, None as a tombstone, keys frozen dataclasses carrying Kafka's
record type, values NamedTuples of plain data. Kafka's record types: 3 group metadata, 5 member
metadata, 6 target assignment metadata, 7 target assignment member, 8 current member assignment, 16
regular expression. (Type 4, the old subscription metadata, was replaced by the metadata hash.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, NamedTuple

from ..records import TopicPartitions

__all__ = [
    "CONSUMER_VALUE_TYPES",
    "ConsumerGroupCurrentMemberAssignmentKey",
    "ConsumerGroupCurrentMemberAssignmentValue",
    "ConsumerGroupMemberMetadataKey",
    "ConsumerGroupMemberMetadataValue",
    "ConsumerGroupMetadataKey",
    "ConsumerGroupMetadataValue",
    "ConsumerGroupRegularExpressionKey",
    "ConsumerGroupRegularExpressionValue",
    "ConsumerGroupTargetAssignmentMemberKey",
    "ConsumerGroupTargetAssignmentMemberValue",
    "ConsumerGroupTargetAssignmentMetadataKey",
    "ConsumerGroupTargetAssignmentMetadataValue",
]


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataKey:
    group_id: str
    record_type: ClassVar[int] = 3


class ConsumerGroupMetadataValue(NamedTuple):
    epoch: int
    metadata_hash: int


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataKey:
    group_id: str
    member_id: str
    record_type: ClassVar[int] = 5


class ConsumerGroupMemberMetadataValue(NamedTuple):
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataKey:
    group_id: str
    record_type: ClassVar[int] = 6


class ConsumerGroupTargetAssignmentMetadataValue(NamedTuple):
    assignment_epoch: int


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberKey:
    group_id: str
    member_id: str
    record_type: ClassVar[int] = 7


class ConsumerGroupTargetAssignmentMemberValue(NamedTuple):
    topic_partitions: tuple[TopicPartitions, ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentKey:
    group_id: str
    member_id: str
    record_type: ClassVar[int] = 8


class ConsumerGroupCurrentMemberAssignmentValue(NamedTuple):
    """`state` is Kafka's MemberState byte (see `group.MemberState`). A member's partitions are
    `assigned_partitions` plus `partitions_pending_revocation` (still owned until it revokes them)."""

    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: tuple[TopicPartitions, ...]
    partitions_pending_revocation: tuple[TopicPartitions, ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionKey:
    group_id: str
    regular_expression: str
    record_type: ClassVar[int] = 16


class ConsumerGroupRegularExpressionValue(NamedTuple):
    """The topics a subscription regex matched when it was last resolved."""

    topics: tuple[str, ...]
    version: int
    timestamp_ms: int


# key type -> the value type it must carry (None is always allowed: a tombstone)
CONSUMER_VALUE_TYPES: dict[type, type] = {
    ConsumerGroupMetadataKey: ConsumerGroupMetadataValue,
    ConsumerGroupMemberMetadataKey: ConsumerGroupMemberMetadataValue,
    ConsumerGroupTargetAssignmentMetadataKey: ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey: ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupCurrentMemberAssignmentKey: ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupRegularExpressionKey: ConsumerGroupRegularExpressionValue,
}
