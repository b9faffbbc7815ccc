"""What the KIP-848 consumer-group describe API returns (ConsumerGroupDescribe)."""

from __future__ import annotations

import uuid
from typing import NamedTuple

from .group import ConsumerGroupState

__all__ = ["ConsumerGroupDescription", "ConsumerMemberDescription"]


class ConsumerMemberDescription(NamedTuple):
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None
    assignment: dict[uuid.UUID, list[int]]
    target_assignment: dict[uuid.UUID, list[int]]
    state: str  # stable, unrevoked_partitions, unreleased_partitions


class ConsumerGroupDescription(NamedTuple):
    group_id: str
    state: ConsumerGroupState
    group_epoch: int
    assignment_epoch: int
    assignor_name: str
    members: list[ConsumerMemberDescription]
