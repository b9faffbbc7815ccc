"""Per-partition items and results of the batched share-state RPCs (one group, many partitions).

Kafka's requests carry one group id and a list of topics with partitions; here a request is the group
id plus a flat list of items, and the response one PartitionResult per item, in item order.
"""

from __future__ import annotations

import uuid
from typing import NamedTuple, Sequence

from sharegroup.errors import Errors
from sharegroup.types import PartitionState, StateBatch, StateSummary

__all__ = ["WriteItem", "ReadItem", "InitializeItem", "DeleteItem", "PartitionResult"]


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
