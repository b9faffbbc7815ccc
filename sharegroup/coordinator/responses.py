"""What the coordinator's APIs return: heartbeat results, group and offset descriptions."""

from __future__ import annotations

import uuid
from typing import NamedTuple

from ..errors import Errors
from .share.group import GroupState

__all__ = ["HeartbeatResult", "MemberDescription", "GroupDescription", "OffsetInfo"]


class HeartbeatResult(NamedTuple):
    """A ShareGroupHeartbeat response. `assignment` (topic id -> ascending partitions) is None when it
    has not changed since the member last received it, except on a join or a full request (one that
    carries the subscribed topic names), which always get it."""

    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: dict[uuid.UUID, list[int]] | None


class MemberDescription(NamedTuple):
    member_id: str
    member_epoch: int
    client_id: str
    client_host: str
    rack_id: str | None
    subscribed_topic_names: list[str]
    assignment: dict[uuid.UUID, list[int]]


class GroupDescription(NamedTuple):
    group_id: str
    state: GroupState
    group_epoch: int
    assignment_epoch: int
    members: list[MemberDescription]


class OffsetInfo(NamedTuple):
    """Start offset and lag of one share-partition. `lag` is -1 when it cannot be computed (start
    offset not yet resolved, no delivery-complete count, or an error); `error` says why it failed."""

    start_offset: int
    lag: int
    error: Errors = Errors.NONE
