"""What the classic-group and offset APIs of the coordinator return (Kafka's response shapes, plain data)."""

from __future__ import annotations

from typing import NamedTuple

from ...errors import Errors

__all__ = [
    "ClassicGroupDescription",
    "ClassicMemberDescription",
    "CommittedOffset",
    "GroupListing",
    "JoinGroupResult",
    "JoinedMember",
    "LeaveMemberResult",
    "SyncGroupResult",
]


class JoinedMember(NamedTuple):
    """A member as the leader sees it in its JoinGroup response."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


class JoinGroupResult(NamedTuple):
    """A JoinGroup answer. On an error, `member_id` is the id the request used (or the one allocated,
    with MEMBER_ID_REQUIRED) and the generation is -1. Only the leader gets `members`."""

    error: Errors
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: tuple[JoinedMember, ...] = ()


class SyncGroupResult(NamedTuple):
    error: Errors
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


class LeaveMemberResult(NamedTuple):
    member_id: str
    group_instance_id: str | None
    error: Errors


class ClassicMemberDescription(NamedTuple):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


class ClassicGroupDescription(NamedTuple):
    """DescribeGroups of one group. `error` GROUP_ID_NOT_FOUND (state Dead) when it does not exist or
    is not a classic group. Member metadata and assignments are filled only when Stable."""

    group_id: str
    error: Errors
    state: str
    protocol_type: str
    protocol_data: str
    members: tuple[ClassicMemberDescription, ...]
    message: str | None = None


class GroupListing(NamedTuple):
    """One group in ListGroups: its type ("classic", "consumer", "share"), protocol type and state."""

    group_id: str
    group_type: str
    protocol_type: str
    state: str


class CommittedOffset(NamedTuple):
    """OffsetFetch of one partition: offset -1 and metadata "" when nothing is committed."""

    offset: int
    leader_epoch: int
    metadata: str
    error: Errors = Errors.NONE
