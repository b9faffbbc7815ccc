"""The Persister protocol: the only way the services (layer 3) reach durable share-partition state.

Implementations live in `persister/` (layer 2); the edges choose one and hand it in. Every method is
async and refuses with `ShareError` carrying the Kafka error code.
"""

from __future__ import annotations

import uuid
from typing import Protocol, Sequence, runtime_checkable

from .types import PartitionState, StateBatch, StateSummary

__all__ = ["Persister"]


@runtime_checkable
class Persister(Protocol):
    """Kafka's share-group state RPCs for one share-partition at a time."""

    async def initialize_state(
        self, group_id: str, topic_id: uuid.UUID, partition: int, *, state_epoch: int, start_offset: int
    ) -> None: ...

    async def read_state(
        self, group_id: str, topic_id: uuid.UUID, partition: int, *, leader_epoch: int
    ) -> PartitionState: ...

    async def write_state(
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
    ) -> None: ...

    async def delete_state(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None: ...

    async def read_summary(
        self, group_id: str, topic_id: uuid.UUID, partition: int, *, leader_epoch: int
    ) -> StateSummary: ...
