"""Per-partition items and results of the batched share-state RPCs (one group, many partitions), and
the plumbing that runs one operation per item (`per_partition`).

Kafka's requests carry one group id and a list of topics with partitions; here a request is the group
id plus a flat list of items, and the response one PartitionResult per item, in item order.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Awaitable, Callable, Iterable, NamedTuple, Sequence

from sharegroup.errors import Errors, ShareError
from sharegroup.types import PartitionState, StateBatch, StateSummary

__all__ = ["WriteItem", "ReadItem", "InitializeItem", "DeleteItem", "PartitionResult", "as_items", "per_partition"]


class WriteItem(NamedTuple):
    """One partition of a WriteShareGroupState request."""

    topic_id: uuid.UUID
    partition: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: Sequence[StateBatch]
    delivery_complete_count: int = -1


class ReadItem(NamedTuple):
    """One partition of a ReadShareGroupState or ReadShareGroupStateSummary request."""

    topic_id: uuid.UUID
    partition: int
    leader_epoch: int


class InitializeItem(NamedTuple):
    """One partition of an InitializeShareGroupState request."""

    topic_id: uuid.UUID
    partition: int
    state_epoch: int
    start_offset: int


class DeleteItem(NamedTuple):
    """One partition of a DeleteShareGroupState request."""

    topic_id: uuid.UUID
    partition: int


class PartitionResult(NamedTuple):
    """The outcome for one partition; `data` is the PartitionState of a read or the StateSummary of a
    summary when `error` is NONE, else None."""

    topic_id: uuid.UUID
    partition: int
    error: Errors = Errors.NONE
    message: str = ""
    data: PartitionState | StateSummary | None = None


def as_items(items: Iterable, item_type: type) -> list:
    """The items of a batched request as `item_type` (plain tuples are taken field by field)."""
    return [item if isinstance(item, item_type) else item_type(*item) for item in items]


async def per_partition(items: list, operation: Callable[[object], Awaitable[object]]) -> list[PartitionResult]:
    """Run one operation per item concurrently (same-key items queue on the key's hold in item order)
    and turn each outcome into a PartitionResult, in item order; the log may group the appends."""

    async def one(item) -> PartitionResult:
        try:
            data = await operation(item)
        except ShareError as exc:
            return PartitionResult(item.topic_id, item.partition, exc.error, exc.message)
        return PartitionResult(item.topic_id, item.partition, Errors.NONE, "", data)

    if len(items) == 1:
        return [await one(items[0])]
    return list(await asyncio.gather(*(one(item) for item in items)))
