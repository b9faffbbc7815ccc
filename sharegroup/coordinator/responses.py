"""What the heartbeat APIs return (share groups' and, in the same form, KIP-848 consumer groups')."""

from __future__ import annotations

import uuid
from typing import NamedTuple

__all__ = ["HeartbeatResult"]


class HeartbeatResult(NamedTuple):
    """A ShareGroupHeartbeat response. `assignment` (topic id -> ascending partitions) is None when it
    has not changed since the member last received it, except on a join or a full request (one that
    carries the subscribed topic names), which always get it."""

    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: dict[uuid.UUID, list[int]] | None
