"""The in-memory model of one share group, moved only by replaying records (`ShareGroup.replay`).

A group holds its epochs, its members (metadata and current assignment), the target assignment, and
the share-partition lifecycle (initializing / initialized / deleting partitions per topic). Session
deadlines are kept here too but are not persisted: after a restart every member gets a fresh session,
as in Kafka.
"""

from __future__ import annotations

import uuid
from collections import Counter
from enum import Enum
from typing import Iterable, NamedTuple

from ..assignment import Assignment, assignment_from_tuple, assignment_tuple
from ..deadlines import Deadlines
from ..records import Record
from .records import (
    SHARE_VALUE_TYPES,
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMetadataKey,
    TopicMetadata,
)

__all__ = [
    "GroupState",
    "NEW_GROUP_EPOCH",
    "ShareGroup",
    "ShareGroupMember",
    "TopicEntry",
    "add_partitions",
    "all_partitions_of",
    "has_stale_topics",
    "remove_partitions",
    "restrict_to_initialized",
]

# The epochs a new share group starts at (Kafka since KAFKA-20268): the first subscription makes it 2.
NEW_GROUP_EPOCH = 1


class GroupState(str, Enum):
    """Kafka's ShareGroupState names: a group with no members is Empty, otherwise Stable."""

    EMPTY = "Empty"
    STABLE = "Stable"

    def __str__(self) -> str:
        return self.value


class TopicEntry(NamedTuple):
    """A topic in the share-partition metadata: its name when recorded and its partitions (with the
    highest one cached, so a heartbeat can see in O(1) whether the topic shrank). Build with `of`."""

    topic_name: str
    partitions: frozenset[int]
    last_partition: int

    @classmethod
    def of(cls, topic_name: str, partitions: Iterable[int]) -> "TopicEntry":
        partitions = frozenset(partitions)
        return cls(topic_name, partitions, max(partitions, default=-1))


class ShareGroupMember:
    """One member: what it sent (metadata) and what it has reconciled to (epoch, assignment)."""

    __slots__ = (
        "member_id",
        "rack_id",
        "client_id",
        "client_host",
        "subscribed_topic_names",
        "member_epoch",
        "previous_member_epoch",
        "assignment",
    )

    def __init__(self, member_id: str) -> None:
        self.member_id = member_id
        self.rack_id: str | None = None
        self.client_id = ""
        self.client_host = ""
        self.subscribed_topic_names: tuple[str, ...] = ()
        self.member_epoch = 0
        self.previous_member_epoch = 0
        self.assignment: Assignment = {}

    def metadata(self) -> ShareGroupMemberMetadataValue:
        return ShareGroupMemberMetadataValue(
            self.rack_id, self.client_id, self.client_host, self.subscribed_topic_names
        )


class ShareGroup:
    """One share group; see the module docstring. Mutated only through `replay` (and sessions)."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.metadata_hash = 0
        self.assignment_epoch = 0
        self.assignment_timestamp_ms = -1
        self.members: dict[str, ShareGroupMember] = {}
        self.target: dict[str, Assignment] = {}
        self.initializing: dict[uuid.UUID, TopicEntry] = {}
        self.initialized: dict[uuid.UUID, TopicEntry] = {}
        self.deleting: dict[uuid.UUID, TopicEntry] = {}
        # Derived, not persisted: how many members subscribe to each topic name.
        self.subscription_counts: Counter[str] = Counter()
        # Set by replay when something that decides which partitions need initializing may have moved.
        self.initialize_check_needed = True
        # The start offset a partition was meant to initialize at when that failed, so that the retry
        # uses it too (not persisted: after a restart the usual rule decides).
        self.retry_start_offsets: dict[tuple[uuid.UUID, int], int] = {}
        # Members whose current assignment changed since a heartbeat response last carried it (not
        # persisted: after a restart every member is sent its assignment again).
        self.assignment_unsent: set[str] = set()
        # Sessions (not persisted): member -> deadline.
        self.sessions: Deadlines[str] = Deadlines()

    # -- derived views -----------------------------------------------------------------------------

    @property
    def state(self) -> GroupState:
        return GroupState.STABLE if self.members else GroupState.EMPTY

    def subscribed_topic_names(self) -> set[str]:
        """Every topic name some member subscribes to. O(distinct names)."""
        return set(self.subscription_counts)

    def known_topic_names(self) -> set[str]:
        """Names of every topic the group holds share-partition state for (in any lifecycle stage)."""
        names = {e.topic_name for e in self.initialized.values()}
        names.update(e.topic_name for e in self.initializing.values())
        names.update(e.topic_name for e in self.deleting.values())
        return names

    def homogeneous(self) -> bool:
        members = iter(self.members.values())
        first = next(members, None)
        return first is None or all(m.subscribed_topic_names == first.subscribed_topic_names for m in members)

    def partition_metadata(self) -> ShareGroupStatePartitionMetadataValue:
        return partition_metadata_value(self.initializing, self.initialized, self.deleting)

    # -- sessions ----------------------------------------------------------------------------------

    def touch_session(self, member_id: str, deadline_ms: int) -> None:
        """(Re)start a member's session so it expires at `deadline_ms`."""
        self.sessions.touch(member_id, deadline_ms)

    def has_expired_sessions(self, now_ms: int) -> bool:
        """Whether some session may have expired at `now_ms` (O(1); may say yes spuriously)."""
        return self.sessions.has_due(now_ms)

    def expired_members(self, now_ms: int) -> list[str]:
        """Members whose session deadline is at or before `now_ms`, in deadline order; they stay until
        their removal is recorded, so a failed removal retries."""
        return self.sessions.due(now_ms)

    @property
    def session_deadlines(self) -> dict[str, int]:
        return self.sessions.deadlines

    # -- replay ------------------------------------------------------------------------------------

    def replay(self, record: Record) -> None:
        """Apply one record of this group. The only way the persisted part of the state changes."""
        key, value = record
        if value is not None and type(value) is not SHARE_VALUE_TYPES.get(type(key)):
            raise ValueError(f"record value {value!r} does not fit key {key!r}")
        kind = type(key)
        if kind is ShareGroupMetadataKey:
            if value is None:
                raise ValueError("a group metadata tombstone deletes the group; the coordinator applies it")
            self.group_epoch = value.epoch
            self.metadata_hash = value.metadata_hash
            self.initialize_check_needed = True
        elif kind is ShareGroupMemberMetadataKey:
            self._replay_member_metadata(key.member_id, value)
        elif kind is ShareGroupCurrentMemberAssignmentKey:
            member = self.members.get(key.member_id)
            if value is None:
                if member is not None:
                    member.assignment = {}
                return
            if member is None:
                member = self._add_member(key.member_id)
            member.member_epoch = value.member_epoch
            member.previous_member_epoch = value.previous_member_epoch
            assignment = assignment_from_tuple(value.assigned_partitions)
            if assignment != member.assignment:
                self.assignment_unsent.add(key.member_id)
            member.assignment = assignment
        elif kind is ShareGroupTargetAssignmentMemberKey:
            if value is None:
                self.target.pop(key.member_id, None)
            else:
                self.target[key.member_id] = assignment_from_tuple(value.topic_partitions)
        elif kind is ShareGroupTargetAssignmentMetadataKey:
            if value is None:
                self.assignment_epoch, self.assignment_timestamp_ms = 0, -1
            else:
                self.assignment_epoch = value.assignment_epoch
                self.assignment_timestamp_ms = value.assignment_timestamp_ms
        elif kind is ShareGroupStatePartitionMetadataKey:
            if value is None:
                self.initializing, self.initialized, self.deleting = {}, {}, {}
            else:
                self.initializing = _entries(value.initializing_topics)
                self.initialized = _entries(value.initialized_topics)
                self.deleting = _entries(value.deleting_topics)
            self.initialize_check_needed = True
        else:
            raise ValueError(f"unknown group coordinator record key {key!r}")

    def _add_member(self, member_id: str) -> ShareGroupMember:
        member = ShareGroupMember(member_id)
        self.members[member_id] = member
        return member

    def _replay_member_metadata(self, member_id: str, value: ShareGroupMemberMetadataValue | None) -> None:
        member = self.members.get(member_id)
        if member is not None:
            self.subscription_counts.subtract(member.subscribed_topic_names)
        if value is None:
            if member is not None:
                del self.members[member_id]
                self.session_deadlines.pop(member_id, None)
                self.assignment_unsent.discard(member_id)
        else:
            if member is None:
                member = self._add_member(member_id)
            member.rack_id, member.client_id, member.client_host = value.rack_id, value.client_id, value.client_host
            member.subscribed_topic_names = tuple(value.subscribed_topic_names)
            self.subscription_counts.update(member.subscribed_topic_names)
        self.subscription_counts = +self.subscription_counts  # drop names no one subscribes to any more
        self.initialize_check_needed = True

    # -- invariants and comparison ----------------------------------------------------------------------

    def _check(self, max_size: int) -> None:
        """Assert every invariant of the group (the coordinator's `_check` calls it for each group)."""
        assert self.group_epoch >= NEW_GROUP_EPOCH, self.group_epoch
        assert 0 <= self.assignment_epoch <= self.group_epoch, (self.assignment_epoch, self.group_epoch)
        assert len(self.members) <= max_size
        expected_counts = Counter(n for m in self.members.values() for n in m.subscribed_topic_names)
        assert self.subscription_counts == expected_counts, (self.subscription_counts, expected_counts)
        assert set(self.session_deadlines) == set(self.members), "every member has a session, and only members"
        assert set(self.target) <= set(self.members), "target assignment of a member that left"
        # Share-partition lifecycle: a partition is in at most one stage.
        for topic_id in {*self.initializing, *self.initialized, *self.deleting}:
            stages = [
                entries[topic_id].partitions
                for entries in (self.initializing, self.initialized, self.deleting)
                if topic_id in entries
            ]
            assert all(stages), f"empty lifecycle entry for {topic_id}"
            assert sum(len(s) for s in stages) == len(frozenset().union(*stages)), f"{topic_id} in two stages"
            assert all(p >= 0 for s in stages for p in s)
        for member_id, member in self.members.items():
            assert 0 <= member.previous_member_epoch <= member.member_epoch <= self.assignment_epoch, (
                member_id,
                member.previous_member_epoch,
                member.member_epoch,
                self.assignment_epoch,
            )
            assert member.member_epoch == 0 or member.previous_member_epoch < member.member_epoch
            self._check_assignable(member.assignment, member.subscribed_topic_names, f"member {member_id}")
        for member_id, target in self.target.items():
            # A target behind the group epoch may still hold a topic its member no longer subscribes to
            # (reconciliation filters it out); it never holds an uninitialized partition.
            self._check_assignable(target, None, f"target of {member_id}")
        if self.assignment_epoch == self.group_epoch:
            self._check_current_target()

    def _check_assignable(self, assignment: Assignment, names: Iterable[str] | None, what: str) -> None:
        names = set(names) if names is not None else None
        for topic_id, partitions in assignment.items():
            entry = self.initialized.get(topic_id)
            assert entry is not None, f"{what} holds {topic_id}, which is not initialized"
            assert partitions and partitions <= entry.partitions, f"{what} holds uninitialized partitions"
            if names is not None:
                assert entry.topic_name in names, f"{what} holds {entry.topic_name}, which it does not subscribe to"

    def _check_current_target(self) -> None:
        """A target at the group epoch reflects the current members, subscriptions and initialized
        partitions (any change to those bumps the group epoch)."""
        pool = {
            (t, p)
            for t, e in self.initialized.items()
            if e.topic_name in self.subscription_counts
            for p in e.partitions
        }
        assigned = {(t, p) for a in self.target.values() for t, ps in a.items() for p in ps}
        assert assigned == pool, "a current target assignment covers every assignable partition, and only those"
        for member_id, member in self.members.items():
            target = self.target.get(member_id, {})
            self._check_assignable(target, member.subscribed_topic_names, f"target of {member_id}")
            subscribed_pool = any(e.topic_name in member.subscribed_topic_names for e in self.initialized.values())
            assert bool(target) == subscribed_pool, f"member {member_id} subscribes to assignable topics but has none"
        if self.members and self.homogeneous() and pool:
            counts = [sum(len(ps) for ps in self.target.get(m, {}).values()) for m in self.members]
            if len(pool) >= len(self.members):
                assert max(counts) - min(counts) <= 1, f"unbalanced homogeneous assignment {counts}"

    def dump(self) -> dict:
        """Everything that is persisted, in a comparable form (what a restart must reproduce)."""
        return {
            "group_epoch": self.group_epoch,
            "metadata_hash": self.metadata_hash,
            "assignment_epoch": self.assignment_epoch,
            "assignment_timestamp_ms": self.assignment_timestamp_ms,
            "members": {
                m.member_id: (
                    m.metadata(),
                    m.member_epoch,
                    m.previous_member_epoch,
                    assignment_tuple(m.assignment),
                )
                for m in self.members.values()
            },
            "target": {member_id: assignment_tuple(a) for member_id, a in self.target.items()},
            "partition_metadata": self.partition_metadata(),
        }


def partition_metadata_value(
    initializing: dict[uuid.UUID, TopicEntry],
    initialized: dict[uuid.UUID, TopicEntry],
    deleting: dict[uuid.UUID, TopicEntry],
) -> ShareGroupStatePartitionMetadataValue:
    def form(entries: dict[uuid.UUID, TopicEntry]) -> tuple[TopicMetadata, ...]:
        return tuple(
            TopicMetadata(t, e.topic_name, tuple(sorted(e.partitions)))
            for t, e in sorted(entries.items())
            if e.partitions
        )

    return ShareGroupStatePartitionMetadataValue(form(initializing), form(initialized), form(deleting))


def _entries(topics: Iterable[TopicMetadata]) -> dict[uuid.UUID, TopicEntry]:
    return {t.topic_id: TopicEntry.of(t.topic_name, t.partitions) for t in topics if t.partitions}


# -- share-partition lifecycle maps (topic id -> TopicEntry) ------------------------------------------


def add_partitions(entries: dict[uuid.UUID, TopicEntry], topic_id: uuid.UUID, name: str, partitions: Iterable[int]) -> None:
    """Add partitions of one topic to a lifecycle map (in place)."""
    old = entries.get(topic_id)
    before = old.partitions if old is not None else frozenset()
    entries[topic_id] = TopicEntry.of(name, before | frozenset(partitions))


def remove_partitions(entries: dict[uuid.UUID, TopicEntry], topic_id: uuid.UUID, partitions: Iterable[int]) -> bool:
    """Remove partitions of one topic (dropping the topic when none are left); whether any were there."""
    old = entries.get(topic_id)
    if old is None:
        return False
    left = old.partitions - frozenset(partitions)
    if left == old.partitions:
        return False
    if left:
        entries[topic_id] = TopicEntry.of(old.topic_name, left)
    else:
        del entries[topic_id]
    return True


def all_partitions_of(group: ShareGroup, topic_id: uuid.UUID) -> TopicEntry | None:
    """All partitions of a topic the group holds state for, in any lifecycle stage, or None."""
    name, partitions = None, frozenset()
    for entries in (group.initialized, group.initializing, group.deleting):
        entry = entries.get(topic_id)
        if entry is not None:
            name, partitions = entry.topic_name, partitions | entry.partitions
    return TopicEntry.of(name, partitions) if name is not None else None


def has_stale_topics(group: ShareGroup, image: dict) -> bool:
    """Whether the group holds share-partitions of a topic that is gone, recreated or shrunk (`image`:
    topic name -> TopicInfo). O(topics)."""
    for entries in (group.initialized, group.initializing, group.deleting):
        for topic_id, entry in entries.items():
            info = image.get(entry.topic_name)
            if info is None or info.topic_id != topic_id or entry.last_partition >= info.num_partitions:
                return True
    return False


def restrict_to_initialized(assignment: Assignment, initialized: dict[uuid.UUID, TopicEntry]) -> Assignment:
    """The part of an assignment whose partitions are in `initialized`."""
    out = {}
    for topic_id, partitions in assignment.items():
        entry = initialized.get(topic_id)
        if entry is not None:
            kept = partitions & entry.partitions
            if kept:
                out[topic_id] = kept
    return out
