"""GroupListener: how the group coordinator tells the share-partition side about membership changes.

The share-partition manager (Kafka's SharePartitionManager, which learns of these through the share
session cache and the group coordinator) implements it: a member that left must have its share session
closed and its acquired records released, and share-partitions whose durable state was reset or
removed must be dropped from the manager's cache so the next fetch reads the state again.

The coordinator calls the listener after its own state changed (the records are committed) and after
it released the group's lock, so a listener may call back into the coordinator. A listener that
raises is logged and ignored: the coordinator's state is already final.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable
from uuid import UUID

__all__ = ["GroupListener"]


@runtime_checkable
class GroupListener(Protocol):
    """Membership and share-partition state events of a group coordinator."""

    async def on_member_left(self, group_id: str, member_id: str) -> None:
        """The member left (heartbeat with epoch -1) or its session expired."""

    async def on_group_deleted(self, group_id: str) -> None:
        """The group and all its share-partition state were deleted."""

    async def on_offsets_deleted(self, group_id: str, topic_ids: list[UUID]) -> None:
        """The share-partition state of these topics was deleted (delete_offsets) or reset
        (alter_offsets): every share-partition of them must be read again before it serves."""
