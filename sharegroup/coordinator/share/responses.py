"""What the share-group admin APIs return: group and offset descriptions."""

from __future__ import annotations

import uuid
from typing import NamedTuple

from ...errors import Errors
from .group import GroupState

__all__ = ["MemberDescription", "GroupDescription", "OffsetInfo"]


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
