"""The in-memory model of one KIP-848 consumer group, moved only by replaying records.

It mirrors `ShareGroup` (epochs, members, target assignment, sessions) with what consumer groups add:
exclusive ownership of partitions, revocation (a member's partitions pending revocation are still
its own until it reports them gone), static members (instance ids), subscription by regex and a
per-member server assignor. `partition_owners` is Kafka's "current partition epoch" map: every
partition some member holds, assigned or pending revocation, maps to that one member. Replaying a
record that would give a partition a second owner raises ValueError; `_check` asserts it after
every operation in tests.

Sessions and rebalance timeouts are deadlines (not persisted): a member that does not heartbeat
within the session timeout, or does not revoke within its rebalance timeout, is removed.
"""

from __future__ import annotations

import uuid
from collections import Counter
from enum import Enum, IntEnum
from typing import Iterable

from ..assignment import Assignment, assignment_from_tuple, assignment_tuple
from ..deadlines import Deadlines
from ..records import Record
from .records import (
    CONSUMER_VALUE_TYPES,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMetadataKey,
)

__all__ = ["ConsumerGroup", "ConsumerGroupMember", "ConsumerGroupState", "MemberState", "LEAVE_STATIC_EPOCH"]

# The member epoch of a static member that left and will rejoin (it keeps its partitions meanwhile).
LEAVE_STATIC_EPOCH = -2


class MemberState(IntEnum):
    """Kafka's MemberState, with the byte it is recorded as."""

    STABLE = 1
    UNREVOKED_PARTITIONS = 2
    UNRELEASED_PARTITIONS = 3

    @property
    def kafka_name(self) -> str:
        return self.name.lower()


class ConsumerGroupState(str, Enum):
    """Kafka's ConsumerGroupState names."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"

    def __str__(self) -> str:
        return self.value


class ConsumerGroupMember:
    """One member: what it sent (metadata) and what it has reconciled to."""

    __slots__ = (
        "member_id", "instance_id", "rack_id", "client_id", "client_host", "subscribed_topic_names",
        "subscribed_topic_regex", "rebalance_timeout_ms", "server_assignor", "member_epoch",
        "previous_member_epoch", "state", "assigned", "pending_revocation",
    )

    def __init__(self, member_id: str) -> None:
        self.member_id = member_id
        self.instance_id: str | None = None
        self.rack_id: str | None = None
        self.client_id = ""
        self.client_host = ""
        self.subscribed_topic_names: tuple[str, ...] = ()
        self.subscribed_topic_regex: str | None = None
        self.rebalance_timeout_ms = -1
        self.server_assignor: str | None = None
        self.member_epoch = 0
        self.previous_member_epoch = 0
        self.state = MemberState.STABLE
        self.assigned: Assignment = {}
        self.pending_revocation: Assignment = {}

    def metadata(self) -> ConsumerGroupMemberMetadataValue:
        return ConsumerGroupMemberMetadataValue(
            self.instance_id, self.rack_id, self.client_id, self.client_host, self.subscribed_topic_names,
            self.subscribed_topic_regex, self.rebalance_timeout_ms, self.server_assignor,
        )

    def owned(self) -> Iterable[tuple[uuid.UUID, int]]:
        """Every partition this member holds: assigned or pending revocation."""
        for assignment in (self.assigned, self.pending_revocation):
            for topic_id, partitions in assignment.items():
                for p in partitions:
                    yield topic_id, p


class ConsumerGroup:
    """One consumer group; see the module docstring. Mutated only through `replay` (and deadlines)."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.metadata_hash = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.target: dict[str, Assignment] = {}
        # regex -> what it matched when last resolved
        self.regexes: dict[str, ConsumerGroupRegularExpressionValue] = {}
        # Derived, not persisted.
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.partition_owners: dict[tuple[uuid.UUID, int], str] = {}
        self.subscription_counts: Counter[str] = Counter()  # explicit topic names
        self.regex_counts: Counter[str] = Counter()
        self.assignment_unsent: set[str] = set()
        self.sessions: Deadlines[str] = Deadlines()
        self.rebalance_timeouts: Deadlines[str] = Deadlines()
        self.rebalance_timeout_epochs: dict[str, int] = {}
        self.regex_checked_ms: dict[str, int] = {}  # regex -> when it was last matched (not persisted)

    # -- derived views -----------------------------------------------------------------------------

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE
               for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def owner(self, topic_id: uuid.UUID, partition: int) -> str | None:
        return self.partition_owners.get((topic_id, partition))

    def preferred_assignor(self, default: str) -> str:
        """The server assignor most members ask for (ties: the first name), else `default`."""
        counts = Counter(m.server_assignor for m in self.members.values() if m.server_assignor)
        if not counts:
            return default
        best = max(counts.values())
        return min(name for name, c in counts.items() if c == best)

    # -- replay ------------------------------------------------------------------------------------

    def replay(self, record: Record) -> None:
        """Apply one record of this group. The only way the persisted part of the state changes."""
        key, value = record
        kind = type(key)
        if value is not None and type(value) is not CONSUMER_VALUE_TYPES.get(kind):
            raise ValueError(f"record value {value!r} does not fit key {key!r}")
        if kind is ConsumerGroupMetadataKey:
            if value is None:
                raise ValueError("a group metadata tombstone deletes the group; the coordinator applies it")
            self.group_epoch, self.metadata_hash = value.epoch, value.metadata_hash
        elif kind is ConsumerGroupMemberMetadataKey:
            self._replay_member_metadata(key.member_id, value)
        elif kind is ConsumerGroupCurrentMemberAssignmentKey:
            member = self.members.get(key.member_id)
            if value is None:
                if member is not None:
                    self._set_partitions(member, {}, {})
                    member.member_epoch = member.previous_member_epoch = 0
                return
            if member is None:
                member = self.members[key.member_id] = ConsumerGroupMember(key.member_id)
            assigned = assignment_from_tuple(value.assigned_partitions)
            if assigned != member.assigned:
                self.assignment_unsent.add(key.member_id)
            member.member_epoch, member.previous_member_epoch = value.member_epoch, value.previous_member_epoch
            member.state = MemberState(value.state)
            self._set_partitions(member, assigned, assignment_from_tuple(value.partitions_pending_revocation))
        elif kind is ConsumerGroupTargetAssignmentMemberKey:
            if value is None:
                self.target.pop(key.member_id, None)
            else:
                self.target[key.member_id] = assignment_from_tuple(value.topic_partitions)
        elif kind is ConsumerGroupTargetAssignmentMetadataKey:
            self.assignment_epoch = 0 if value is None else value.assignment_epoch
        elif kind is ConsumerGroupRegularExpressionKey:
            if value is None:
                self.regexes.pop(key.regular_expression, None)
                self.regex_checked_ms.pop(key.regular_expression, None)
            else:
                self.regexes[key.regular_expression] = value
        else:
            raise ValueError(f"unknown consumer group record key {key!r}")

    def _set_partitions(self, member: ConsumerGroupMember, assigned: Assignment, pending: Assignment) -> None:
        """Give `member` exactly these partitions, keeping `partition_owners` in step; a partition
        another member holds is corruption (ValueError, nothing changed)."""
        wanted = [(t, p) for a in (assigned, pending) for t, ps in a.items() for p in ps]
        for tp in wanted:
            owner = self.partition_owners.get(tp)
            if owner is not None and owner != member.member_id:
                raise ValueError(f"partition {tp} of group {self.group_id} would be owned by {member.member_id} "
                                 f"while {owner} still owns it")
        for tp in list(member.owned()):
            self.partition_owners.pop(tp, None)
        for tp in wanted:
            self.partition_owners[tp] = member.member_id
        member.assigned, member.pending_revocation = assigned, pending

    def _replay_member_metadata(self, member_id: str, value: ConsumerGroupMemberMetadataValue | None) -> None:
        member = self.members.get(member_id)
        if member is not None:
            self.subscription_counts.subtract(member.subscribed_topic_names)
            if member.subscribed_topic_regex is not None:
                self.regex_counts[member.subscribed_topic_regex] -= 1
            if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
                del self.static_members[member.instance_id]
        if value is None:
            if member is not None:
                self._set_partitions(member, {}, {})
                del self.members[member_id]
                self.sessions.cancel(member_id)
                self.rebalance_timeouts.cancel(member_id)
                self.rebalance_timeout_epochs.pop(member_id, None)
                self.assignment_unsent.discard(member_id)
        else:
            if member is None:
                member = self.members[member_id] = ConsumerGroupMember(member_id)
            (member.instance_id, member.rack_id, member.client_id, member.client_host, names,
             member.subscribed_topic_regex, member.rebalance_timeout_ms, member.server_assignor) = value
            member.subscribed_topic_names = tuple(names)
            self.subscription_counts.update(member.subscribed_topic_names)
            if member.subscribed_topic_regex is not None:
                self.regex_counts[member.subscribed_topic_regex] += 1
            if member.instance_id is not None:
                self.static_members[member.instance_id] = member_id
        self.subscription_counts = +self.subscription_counts
        self.regex_counts = +self.regex_counts

    # -- invariants and comparison -------------------------------------------------------------------

    def _check(self, max_size: int | None = None) -> None:
        """Assert every invariant of the group."""
        assert 0 <= self.assignment_epoch <= self.group_epoch, (self.assignment_epoch, self.group_epoch)
        if max_size is not None:
            assert len(self.members) <= max_size
        owners: dict[tuple[uuid.UUID, int], str] = {}
        for member_id, member in self.members.items():
            assert member.member_id == member_id
            for tp in member.owned():
                assert tp not in owners, f"partition {tp} owned by {owners[tp]} and {member_id}"
                owners[tp] = member_id
            for topic_id, ps in member.pending_revocation.items():
                assert not ps & member.assigned.get(topic_id, frozenset()), "assigned and pending revocation"
            if member.pending_revocation:
                assert member.state is MemberState.UNREVOKED_PARTITIONS, (member_id, member.state)
            assert member.member_epoch == LEAVE_STATIC_EPOCH or (
                0 <= member.member_epoch <= self.assignment_epoch), (member_id, member.member_epoch)
            assert member_id in self.sessions, f"member {member_id} has no session"
        assert owners == self.partition_owners, "partition owners out of step with the members"
        assert set(self.sessions.deadlines) == set(self.members), "sessions of members that left"
        assert set(self.target) <= set(self.members), "target assignment of a member that left"
        assert set(self.rebalance_timeout_epochs) == set(self.rebalance_timeouts.deadlines)
        expected_statics = {m.instance_id: m.member_id for m in self.members.values() if m.instance_id is not None}
        assert expected_statics == self.static_members, (expected_statics, self.static_members)
        assert self.subscription_counts == Counter(
            n for m in self.members.values() for n in m.subscribed_topic_names)
        assert self.regex_counts == Counter(
            m.subscribed_topic_regex for m in self.members.values() if m.subscribed_topic_regex is not None)
        targeted: set[tuple[uuid.UUID, int]] = set()
        for member_id, target in self.target.items():
            for t, ps in target.items():
                for p in ps:
                    assert (t, p) not in targeted, f"partition {(t, p)} in two target assignments"
                    targeted.add((t, p))

    def dump(self) -> dict:
        """Everything that is persisted, in a comparable form (what a restart must reproduce)."""
        return {
            "type": "consumer",
            "group_epoch": self.group_epoch,
            "metadata_hash": self.metadata_hash,
            "assignment_epoch": self.assignment_epoch,
            "members": {
                m.member_id: (m.metadata(), m.member_epoch, m.previous_member_epoch, int(m.state),
                              assignment_tuple(m.assigned), assignment_tuple(m.pending_revocation))
                for m in self.members.values()
            },
            "target": {member_id: assignment_tuple(a) for member_id, a in self.target.items()},
            "regexes": dict(self.regexes),
        }
