"""Records of classic groups and of committed offsets (Kafka's record types 1 and 2 in __consumer_offsets).

- `OffsetCommitKey(group_id, topic, partition)` -> `OffsetCommitValue`: one committed offset of any
  group type (classic or KIP-848 consumer groups); a tombstone deletes it (OffsetDelete, expiry,
  DeleteGroups).
- `GroupMetadataKey(group_id)` -> `GroupMetadataValue`: a snapshot of a classic group, written when a
  generation is stored (the leader's SyncGroup, a group that became Empty, a static member that
  replaced its old member id); a tombstone deletes the group.

Kafka does not replay a classic group's snapshots while it serves (the group's in-memory state already
moved); they are replayed when the coordinator loads, which rebuilds each group as Stable (members) or
Empty. Offset records are replayed at once, like the share-group records.

Keys and values are plain data (str, int, bytes, tuples) so the durable sink can encode them as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, NamedTuple

__all__ = [
    "ClassicMemberMetadata",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "CLASSIC_VALUE_TYPES",
    "NESTED_TYPES",
]


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group_id: str
    topic: str
    partition: int
    record_type: ClassVar[int] = 1


class OffsetCommitValue(NamedTuple):
    """`leader_epoch` -1 when the client sent none; `expire_timestamp_ms` -1 unless an OffsetCommit
    v2-4 carried a retention time (Kafka keeps that explicit expiry for those versions only)."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int


class ClassicMemberMetadata(NamedTuple):
    """One member of a stored generation: its identity, timeouts, the metadata of the selected protocol
    (`subscription`) and the assignment the leader gave it."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group_id: str
    record_type: ClassVar[int] = 2


class GroupMetadataValue(NamedTuple):
    """A classic group's stored generation. `protocol_type` "" for a simple group (offsets only);
    `protocol` and `leader` None when the generation has no members."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int
    members: tuple[ClassicMemberMetadata, ...]


# key type -> the value type it must carry (None is always allowed: a tombstone)
CLASSIC_VALUE_TYPES: dict[type, type] = {
    OffsetCommitKey: OffsetCommitValue,
    GroupMetadataKey: GroupMetadataValue,
}

# Nested record classes a durable sink must know by name.
NESTED_TYPES: tuple[type, ...] = (ClassicMemberMetadata,)
