"""What the manager tells the outside world, and what it asks of the group coordinator.

`ManagerObserver` receives the manager's events (a no-op base class to subclass): the Prometheus edge
(`sharegroup.metrics`) binds one, so this layer never imports a metrics library. `GroupConfigSource` is
the one thing the manager needs from a group coordinator: each group's share-group configuration.
"""

from __future__ import annotations

import uuid
from typing import Protocol, Sequence, runtime_checkable

from ..config import ShareGroupConfig
from ..share_messages import (
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareFetchRequest,
    ShareFetchResponse,
)
from ..types import AcquiredRecords

__all__ = ["GroupConfigSource", "ManagerObserver"]


@runtime_checkable
class GroupConfigSource(Protocol):
    """Anything that knows each share group's configuration (the group coordinator does)."""

    def group_config(self, group_id: str) -> ShareGroupConfig: ...


class ManagerObserver:
    """Events of a SharePartitionManager; every method is called synchronously and must be cheap."""

    def share_fetch_done(self, request: ShareFetchRequest, response: ShareFetchResponse, latency_ms: int) -> None:
        """A ShareFetch was answered (after any long poll); `latency_ms` by the manager's clock."""

    def share_acknowledge_done(
        self, request: ShareAcknowledgeRequest, response: ShareAcknowledgeResponse, latency_ms: int
    ) -> None:
        """A ShareAcknowledge was answered."""

    def records_acquired(
        self, group_id: str, topic_id: uuid.UUID, partition: int, records: Sequence[AcquiredRecords]
    ) -> None:
        """Records were acquired for a consumer (and shipped in a response)."""

    def records_acknowledged(self, group_id: str, topic_id: uuid.UUID, partition: int,
                             counts_by_type: dict[int, int]) -> None:
        """An acknowledgement became durable: records per acknowledge type (GAP included)."""

    def locks_expired(self, group_id: str, topic_id: uuid.UUID, partition: int, records: int) -> None:
        """The lock timer expired `records` acquisition locks of one share-partition."""

    def partition_loaded(self, group_id: str, topic_id: uuid.UUID, partition: int, load_time_ms: int) -> None:
        """A share-partition finished initializing from the persister."""

    def fetches_expired(self, count: int) -> None:
        """`count` waiting fetches reached their MaxWaitMs."""
