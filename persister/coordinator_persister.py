"""`CoordinatorPersister`: the Persister protocol answered by an embedded ShareCoordinator.

LocalPersister (over a SegmentLog), KafkaPersister (over a KafkaRecordLog) and InMemoryPersister (over a
MemoryLog) are this class; they differ only in the log below and, for the test double, the controls on top.
"""

from __future__ import annotations

import uuid
from typing import Any, Coroutine, Sequence

from sharegroup.types import PartitionState, StateBatch, StateSummary

from .share_coordinator import ShareCoordinator
from .state_records import StateKey

__all__ = ["CoordinatorPersister"]


class CoordinatorPersister:
    """Every Persister call goes to `self.coordinator`, which holds all the rules."""

    coordinator: ShareCoordinator

    # -- the Persister protocol --------------------------------------------------------------------

    async def initialize_state(
        self, group_id: str, topic_id: uuid.UUID, partition: int, *, state_epoch: int, start_offset: int
    ) -> None:
        await self.coordinator.initialize_state(
            group_id, topic_id, partition, state_epoch=state_epoch, start_offset=start_offset
        )

    async def read_state(
        self, group_id: str, topic_id: uuid.UUID, partition: int, *, leader_epoch: int
    ) -> PartitionState:
        return await self.coordinator.read_state(group_id, topic_id, partition, leader_epoch=leader_epoch)

    def write_state(
        self,
        group_id: str,
        topic_id: uuid.UUID,
        partition: int,
        *,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        state_batches: Sequence[StateBatch],
        delivery_complete_count: int = -1,
    ) -> Coroutine[Any, Any, None]:
        """The coordinator's `write_state` coroutine itself: the hot path of every acknowledgement, so
        no coroutine of its own wraps it (awaiting it, or making a task of it, is the same)."""
        return self.coordinator.write_state(
            group_id,
            topic_id,
            partition,
            state_epoch=state_epoch,
            leader_epoch=leader_epoch,
            start_offset=start_offset,
            state_batches=state_batches,
            delivery_complete_count=delivery_complete_count,
        )

    async def delete_state(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        await self.coordinator.delete_state(group_id, topic_id, partition)

    async def read_summary(
        self, group_id: str, topic_id: uuid.UUID, partition: int, *, leader_epoch: int
    ) -> StateSummary:
        return await self.coordinator.read_summary(group_id, topic_id, partition, leader_epoch=leader_epoch)

    # -- maintenance -------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self.coordinator.closed

    async def prune(self) -> int:
        """Drop the redundant prefix of the log (what lies below every live key's latest checkpoint);
        return the new log start offset."""
        return await self.coordinator.prune()

    async def checkpoint_idle_keys(self) -> int:
        """Re-checkpoint keys idle for `cold_checkpoint_interval_ms` so they stop pinning the log."""
        return await self.coordinator.checkpoint_idle_keys()

    # -- inspection --------------------------------------------------------------------------------

    def state_of(self, group_id: str, topic_id: uuid.UUID, partition: int) -> PartitionState | None:
        """The durable state of one share-partition (completed writes only), or None when it has none."""
        state = self.coordinator.state(StateKey(group_id, topic_id, partition))
        if state is None:
            return None
        return PartitionState(state.state_epoch, state.start_offset, list(state.state_batches))

    def summary_of(self, group_id: str, topic_id: uuid.UUID, partition: int) -> StateSummary | None:
        """Like `state_of`, the summary fields (epochs, start offset, delivery complete count)."""
        state = self.coordinator.state(StateKey(group_id, topic_id, partition))
        if state is None:
            return None
        return StateSummary(state.state_epoch, state.leader_epoch, state.start_offset, state.delivery_complete_count)
