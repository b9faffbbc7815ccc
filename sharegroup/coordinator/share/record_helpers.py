"""Builders of the record lists that change a share group (Kafka's GroupCoordinatorRecordHelpers).

Each function only builds records from the current in-memory state; nothing changes until the group
store commits them (append to the sink, then replay). Keeping the builders apart from the operations
that use them lets the heartbeat, the admin APIs and the share-partition lifecycle produce exactly the
same records for the same change.
"""

from __future__ import annotations

import logging
import uuid

from ..assignment import Assignment, assignment_tuple
from ..records import Record
from ..topics import TopicInfo
from .group import (
    NEW_GROUP_EPOCH,
    ShareGroup,
    TopicEntry,
    partition_metadata_value,
    restrict_to_initialized,
)
from .records import (
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataKey,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
)

__all__ = [
    "creation_records",
    "deletion_records",
    "group_epoch_record",
    "member_assignment_record",
    "member_removal_records",
    "partition_metadata_record",
    "target_assignment_metadata_record",
    "target_member_record",
    "topic_cleanup_records",
]

log = logging.getLogger(__name__)


def creation_records(group_id: str) -> list[Record]:
    """A new, empty group: its metadata and an (empty) target assignment at the new-group epoch."""
    return [
        group_epoch_record(group_id, NEW_GROUP_EPOCH, 0),
        target_assignment_metadata_record(group_id, NEW_GROUP_EPOCH, -1),
    ]


def deletion_records(group: ShareGroup) -> list[Record]:
    """Tombstones of everything the group has, in Kafka's order (current assignments, target
    assignments, target metadata, member metadata, share-partition metadata, group metadata)."""
    group_id = group.group_id
    members = sorted(set(group.members) | set(group.target))
    records = [Record(ShareGroupCurrentMemberAssignmentKey(group_id, m), None) for m in members]
    records += [Record(ShareGroupTargetAssignmentMemberKey(group_id, m), None) for m in members]
    records.append(Record(ShareGroupTargetAssignmentMetadataKey(group_id), None))
    records += [Record(ShareGroupMemberMetadataKey(group_id, m), None) for m in members]
    records.append(Record(ShareGroupStatePartitionMetadataKey(group_id), None))
    records.append(Record(ShareGroupMetadataKey(group_id), None))
    return records


def group_epoch_record(group_id: str, group_epoch: int, metadata_hash: int) -> Record:
    return Record(ShareGroupMetadataKey(group_id), ShareGroupMetadataValue(group_epoch, metadata_hash))


def target_assignment_metadata_record(group_id: str, assignment_epoch: int, timestamp_ms: int) -> Record:
    return Record(
        ShareGroupTargetAssignmentMetadataKey(group_id),
        ShareGroupTargetAssignmentMetadataValue(assignment_epoch, timestamp_ms),
    )


def target_member_record(group_id: str, member_id: str, assignment: Assignment) -> Record:
    return Record(
        ShareGroupTargetAssignmentMemberKey(group_id, member_id),
        ShareGroupTargetAssignmentMemberValue(assignment_tuple(assignment)),
    )


def member_assignment_record(
    group_id: str, member_id: str, member_epoch: int, previous_member_epoch: int, assignment: Assignment
) -> Record:
    return Record(
        ShareGroupCurrentMemberAssignmentKey(group_id, member_id),
        ShareGroupCurrentMemberAssignmentValue(member_epoch, previous_member_epoch, assignment_tuple(assignment)),
    )


def partition_metadata_record(
    group_id: str,
    initializing: dict[uuid.UUID, TopicEntry],
    initialized: dict[uuid.UUID, TopicEntry],
    deleting: dict[uuid.UUID, TopicEntry],
) -> Record:
    """The whole share-partition lifecycle of a group (each record replaces the previous one)."""
    return Record(
        ShareGroupStatePartitionMetadataKey(group_id), partition_metadata_value(initializing, initialized, deleting)
    )


def member_removal_records(group_id: str, member_id: str) -> list[Record]:
    """Tombstones of one member (leave or session expiry); the caller adds the group epoch bump."""
    return [
        Record(ShareGroupCurrentMemberAssignmentKey(group_id, member_id), None),
        Record(ShareGroupTargetAssignmentMemberKey(group_id, member_id), None),
        Record(ShareGroupMemberMetadataKey(group_id, member_id), None),
    ]


def topic_cleanup_records(group: ShareGroup, image: dict[str, TopicInfo], member_ids: list[str]) -> list[Record]:
    """Drop the share-partitions of topics that were deleted, recreated (new id) or shrunk, and strip
    them from the assignments of `member_ids`; empty when nothing is stale."""

    def still_there(entries: dict[uuid.UUID, TopicEntry]) -> dict[uuid.UUID, TopicEntry]:
        out = {}
        for topic_id, entry in entries.items():
            info = image.get(entry.topic_name)
            if info is None or info.topic_id != topic_id:
                continue  # the topic was deleted (or recreated under a new id)
            partitions = frozenset(p for p in entry.partitions if p < info.num_partitions)
            if partitions:
                out[topic_id] = TopicEntry.of(entry.topic_name, partitions)
        return out

    initializing = still_there(group.initializing)
    initialized = still_there(group.initialized)
    deleting = still_there(group.deleting)
    if (initializing, initialized, deleting) == (group.initializing, group.initialized, group.deleting):
        return []
    log.info("share group %s: dropping share-partitions of deleted or shrunk topics", group.group_id)
    records = [partition_metadata_record(group.group_id, initializing, initialized, deleting)]
    # Assignments only ever hold initialized partitions: strip what is no longer initialized.
    for member_id in member_ids:
        member = group.members.get(member_id)
        if member is not None:
            kept = restrict_to_initialized(member.assignment, initialized)
            if kept != member.assignment:
                records.append(
                    member_assignment_record(
                        group.group_id, member_id, member.member_epoch, member.previous_member_epoch, kept
                    )
                )
        target = group.target.get(member_id)
        if target is not None:
            kept = restrict_to_initialized(target, initialized)
            if kept != target:
                records.append(target_member_record(group.group_id, member_id, kept))
    return records
