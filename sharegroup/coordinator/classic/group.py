"""The in-memory model of one classic group (the 0.9 consumer's JoinGroup/SyncGroup protocol).

A classic group moves through Kafka's states:

    Empty --join--> PreparingRebalance --all joined / rebalance timeout--> CompletingRebalance
    CompletingRebalance --leader's SyncGroup stored--> Stable
    Stable / CompletingRebalance --join, leave, member expiry--> PreparingRebalance
    PreparingRebalance --no member left--> Empty;  any --DeleteGroups--> Dead

Members carry the protocols they support (name -> metadata, in preference order), their timeouts, the
assignment of the current generation and, while a request is parked, the future that answers it.
Static members (KIP-345) are indexed by `group.instance.id`. Pending members got a member id from
MEMBER_ID_REQUIRED and have not joined with it yet.

Only a stored generation is persisted (`snapshot()` -> GroupMetadataValue, see records.py);
`from_record` rebuilds a group from it at load time, Stable with its members or Empty.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from enum import Enum
from typing import Any, Iterable

from .consumer_protocol import subscribed_topics
from .records import (
    ClassicMemberMetadata,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
)

__all__ = [
    "ClassicGroup",
    "ClassicGroupMember",
    "ClassicGroupState",
    "CONSUMER_PROTOCOL_TYPE",
    "replay_classic_record",
]

CONSUMER_PROTOCOL_TYPE = "consumer"


class ClassicGroupState(str, Enum):
    """Kafka's ClassicGroupState names, as DescribeGroups and ListGroups show them."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


S = ClassicGroupState
# state -> the states it may be entered from (Kafka's ClassicGroupState.validPreviousStates)
_VALID_PREVIOUS: dict[ClassicGroupState, frozenset[ClassicGroupState]] = {
    S.EMPTY: frozenset({S.PREPARING_REBALANCE}),
    S.PREPARING_REBALANCE: frozenset({S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY}),
    S.COMPLETING_REBALANCE: frozenset({S.PREPARING_REBALANCE}),
    S.STABLE: frozenset({S.COMPLETING_REBALANCE}),
    S.DEAD: frozenset({S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.EMPTY, S.DEAD}),
}


class ClassicGroupMember:
    """One member; `join_future` / `sync_future` are set while its JoinGroup / SyncGroup is parked."""

    __slots__ = (
        "member_id", "group_instance_id", "client_id", "client_host", "rebalance_timeout_ms",
        "session_timeout_ms", "protocol_type", "protocols", "assignment", "join_future", "sync_future",
        "is_new",
    )

    def __init__(self, member_id: str, group_instance_id: str | None, client_id: str, client_host: str,
                 rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                 protocols: tuple[tuple[str, bytes], ...]) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = protocols
        self.assignment = b""
        self.join_future: asyncio.Future | None = None
        self.sync_future: asyncio.Future | None = None
        self.is_new = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise ValueError(f"member {self.member_id} does not support protocol {protocol!r}")

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among `candidates`."""
        for name, _metadata in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def matches(self, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        """Whether a rejoin carries exactly the protocols (and metadata) this member has."""
        return self.protocols == protocols

    def has_satisfied_heartbeat(self) -> bool:
        """A member that is not new and has a parked JoinGroup or SyncGroup is kept alive by it: the
        rebalance timeout, not the session timeout, decides its fate then."""
        return not self.is_new and (self.awaiting_join or self.awaiting_sync)


class ClassicGroup:
    """One classic group; see the module docstring."""

    def __init__(self, group_id: str, now_ms: int, state: ClassicGroupState = S.EMPTY) -> None:
        self.group_id = group_id
        self.state = state
        self.previous_state: ClassicGroupState | None = None
        self.current_state_timestamp_ms = now_ms
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, ClassicGroupMember] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_members: set[str] = set()  # got an id from MEMBER_ID_REQUIRED, not joined yet
        self.pending_sync_members: set[str] = set()  # joined this generation, SyncGroup not seen yet
        self.new_member_added = False  # extends the initial rebalance delay
        self.supported_protocols: Counter[str] = Counter()
        self.num_awaiting_join = 0
        self.last_record: GroupMetadataValue | None = None  # what the record sink holds for it

    # -- views ---------------------------------------------------------------------------------------

    def in_state(self, *states: ClassicGroupState) -> bool:
        return self.state in states

    @property
    def is_simple(self) -> bool:
        """A group that only stores offsets (created by an OffsetCommit, never joined)."""
        return self.protocol_type in (None, "")

    def static_member_id(self, group_instance_id: str | None) -> str | None:
        return None if group_instance_id is None else self.static_members.get(group_instance_id)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def rebalance_timeout_ms(self) -> int:
        """The longest rebalance timeout of the members: how long a rebalance waits for rejoins."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_members

    def candidate_protocols(self) -> set[str]:
        count = len(self.members)
        return {name for name, n in self.supported_protocols.items() if n == count}

    def supports_protocols(self, protocol_type: str, protocols: Iterable[str]) -> bool:
        """Whether a member with these protocols may join: any protocol type on an Empty group, else
        the group's protocol type and at least one protocol every current member supports."""
        names = list(protocols)
        if self.state is S.EMPTY:
            return bool(protocol_type) and bool(names)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols.get(n, 0) == len(self.members) for n in names
        )

    def select_protocol(self) -> str:
        """The protocol every member supports that most members prefer (ties: the smallest name, so
        the choice is deterministic)."""
        if not self.members:
            raise ValueError(f"cannot select a protocol for the empty group {self.group_id}")
        candidates = self.candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return min(votes, key=lambda name: (-votes[name], name))

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to, from their consumer-protocol metadata; None when unknown
        (another protocol type, or metadata that does not decode)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None if self.members else set()
        topics: set[str] = set()
        for member in self.members.values():
            try:
                found = subscribed_topics(member.metadata(self.protocol_name))
            except ValueError:
                return None
            topics.update(found)
        return topics

    # -- membership ------------------------------------------------------------------------------------

    def add(self, member: ClassicGroupMember, join_future: asyncio.Future | None = None) -> None:
        """Add a member; the first one sets the protocol type and becomes the leader."""
        assert member.member_id not in self.members, member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        assert self.protocol_type == member.protocol_type
        self.members[member.member_id] = member
        self.supported_protocols.update(name for name, _ in member.protocols)
        if member.is_static:
            self.static_members[member.group_instance_id] = member.member_id
        if join_future is not None:
            member.join_future = join_future
            self.num_awaiting_join += 1
        self.pending_members.discard(member.member_id)
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> ClassicGroupMember | None:
        """Remove a member (or a pending one); a leaving leader hands over to another member."""
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self.supported_protocols.subtract(name for name, _ in member.protocols)
        self.supported_protocols = +self.supported_protocols
        if member.is_static and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if member.awaiting_join:
            self.num_awaiting_join -= 1
        if self.leader_id == member_id:
            self.leader_id = self._new_leader()
        return member

    def _new_leader(self) -> str | None:
        """A member awaiting join if there is one (it will hear of the new generation), else any."""
        for member_id, member in self.members.items():
            if member.awaiting_join:
                return member_id
        return next(iter(self.members), None)

    def elect_joined_leader(self) -> bool:
        """Make sure the leader is a member that rejoined (Kafka's maybeElectNewJoinedLeader);
        False (the leader unchanged) when no member rejoined."""
        if self.leader_id is not None and self.members[self.leader_id].awaiting_join:
            return True
        joined = next((m for m, member in self.members.items() if member.awaiting_join), None)
        if joined is None:
            return False
        self.leader_id = joined
        return True

    def update_member(self, member: ClassicGroupMember, protocols: tuple[tuple[str, bytes], ...],
                      rebalance_timeout_ms: int, session_timeout_ms: int,
                      join_future: asyncio.Future | None) -> None:
        """A rejoin: new protocols and timeouts, and the join future that will answer it."""
        self.supported_protocols.subtract(name for name, _ in member.protocols)
        self.supported_protocols.update(name for name, _ in protocols)
        self.supported_protocols = +self.supported_protocols
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if join_future is not None:
            if member.join_future is None:
                self.num_awaiting_join += 1
            elif not member.join_future.done():
                member.join_future.cancel()  # superseded by this request
            member.join_future = join_future

    def complete_join(self, member: ClassicGroupMember, result: Any) -> None:
        """Answer a member's parked JoinGroup (no-op when none is parked)."""
        future = member.join_future
        if future is None:
            return
        member.join_future = None
        self.num_awaiting_join -= 1
        if not future.done():
            future.set_result(result)

    def complete_sync(self, member: ClassicGroupMember, result: Any) -> None:
        future = member.sync_future
        member.sync_future = None
        if future is not None and not future.done():
            future.set_result(result)

    def replace_static_member(self, group_instance_id: str, old_member_id: str, new_member_id: str,
                              fenced: Any) -> ClassicGroupMember:
        """KIP-345: the member of `group_instance_id` takes `new_member_id`; a request parked under the
        old id is answered with `fenced` (FENCED_INSTANCE_ID). The assignment is kept."""
        member = self.members.pop(old_member_id)
        self.pending_sync_members.discard(old_member_id)
        if member.awaiting_join:
            self.complete_join(member, fenced)
        self.complete_sync(member, fenced)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        self.static_members[group_instance_id] = new_member_id
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        return member

    # -- state -----------------------------------------------------------------------------------------

    def transition_to(self, state: ClassicGroupState, now_ms: int) -> None:
        assert self.state in _VALID_PREVIOUS[state], f"{self.group_id}: {self.state} -> {state} is not allowed"
        self.previous_state = self.state
        self.state = state
        self.current_state_timestamp_ms = now_ms

    def init_next_generation(self, now_ms: int) -> None:
        """Start the next generation: Kafka bumps the generation even when no member is left."""
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.pending_sync_members = set(self.members)
            self.transition_to(S.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.pending_sync_members = set()
            self.transition_to(S.EMPTY, now_ms)

    def current_members(self) -> list[tuple[str, str | None, bytes]]:
        """(member id, instance id, metadata of the selected protocol) of every member: what the
        leader receives to compute the assignment."""
        assert self.protocol_name is not None
        return [(m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members.values()]

    # -- persistence -------------------------------------------------------------------------------

    def snapshot(self, assignment: dict[str, bytes] | None = None) -> GroupMetadataValue:
        """The stored generation (with `assignment` instead of the members' current ones when given)."""
        members = tuple(
            ClassicMemberMetadata(
                m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                m.session_timeout_ms, m.metadata(self.protocol_name),
                m.assignment if assignment is None else assignment.get(m.member_id, b""),
            )
            for m in self.members.values()
        ) if self.protocol_name is not None else ()
        return GroupMetadataValue(
            self.protocol_type or "", self.generation_id, self.protocol_name,
            self.leader_id if members else None, self.current_state_timestamp_ms, members,
        )

    @classmethod
    def from_record(cls, group_id: str, value: GroupMetadataValue, now_ms: int) -> "ClassicGroup":
        """Rebuild a stored generation: Stable with its members, or Empty."""
        state = S.STABLE if value.members else S.EMPTY
        group = cls(group_id, value.current_state_timestamp_ms if value.current_state_timestamp_ms >= 0 else now_ms,
                    state)
        group.protocol_type = value.protocol_type or None
        group.generation_id = value.generation
        group.protocol_name = value.protocol
        for m in value.members:
            member = ClassicGroupMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                        m.rebalance_timeout_ms, m.session_timeout_ms, value.protocol_type,
                                        ((value.protocol or "", m.subscription),))
            member.assignment = m.assignment
            group.add(member)
        group.protocol_type = value.protocol_type or None
        group.leader_id = value.leader if value.leader in group.members else group.leader_id
        group.last_record = value
        return group

    # -- invariants ----------------------------------------------------------------------------------

    def _check(self, max_size: int | None = None) -> None:
        """Assert every invariant of the group."""
        assert self.generation_id >= 0
        assert all(k == m.member_id for k, m in self.members.items())
        expected = Counter(name for m in self.members.values() for name, _ in m.protocols)
        assert +self.supported_protocols == expected, (self.supported_protocols, expected)
        assert self.num_awaiting_join == sum(1 for m in self.members.values() if m.awaiting_join)
        assert self.static_members == {m.group_instance_id: k for k, m in self.members.items() if m.is_static}
        assert not (self.pending_members & set(self.members)), "a pending member is also a member"
        assert self.pending_sync_members <= set(self.members)
        if self.members:
            assert self.leader_id in self.members, (self.leader_id, list(self.members))
            assert all(m.protocol_type == self.protocol_type for m in self.members.values())
        else:
            assert self.leader_id is None
        if self.state is S.EMPTY:
            assert not self.members and self.protocol_name is None
        if self.state in (S.COMPLETING_REBALANCE, S.STABLE):
            assert self.members and self.protocol_name is not None
            assert all(not m.awaiting_join for m in self.members.values())
            assert self.protocol_name in self.candidate_protocols()
        if self.state is not S.COMPLETING_REBALANCE:
            assert all(not m.awaiting_sync for m in self.members.values())
        if self.state is S.DEAD:
            assert not self.members


def replay_classic_record(classic_groups: dict[str, ClassicGroup], offsets: dict[str, dict[tuple[str, int], Any]],
                          share_group_ids: Any, record: Any, loading: bool, now_ms: int) -> None:
    """Apply one classic-group or offset record.

    - OffsetCommit: sets (or, as a tombstone, deletes) one committed offset; an offset of a group that
      does not exist creates a simple classic group (as Kafka's replay does).
    - GroupMetadata: a tombstone deletes the classic group and its offsets' map; a value rebuilds the
      group when loading, and while serving only notes what the sink now holds (the operation that
      wrote it already moved the group).
    """
    key, value = record
    group_id = key.group_id
    if isinstance(key, OffsetCommitKey):
        if value is None:
            held = offsets.get(group_id)
            if held is not None:
                held.pop((key.topic, key.partition), None)
                if not held:
                    del offsets[group_id]
            return
        if type(value) is not OffsetCommitValue:
            raise ValueError(f"record value {value!r} does not fit key {key!r}")
        if group_id not in classic_groups and group_id not in share_group_ids:
            classic_groups[group_id] = ClassicGroup(group_id, now_ms)
        offsets.setdefault(group_id, {})[(key.topic, key.partition)] = value
        return
    if not isinstance(key, GroupMetadataKey):
        raise ValueError(f"not a classic group record key: {key!r}")
    if value is None:
        group = classic_groups.pop(group_id, None)
        if group is not None:
            group.state = S.DEAD
        return
    if type(value) is not GroupMetadataValue:
        raise ValueError(f"record value {value!r} does not fit key {key!r}")
    group = classic_groups.get(group_id)
    if loading or group is None:
        classic_groups[group_id] = ClassicGroup.from_record(group_id, value, now_ms)
    else:
        group.last_record = value
