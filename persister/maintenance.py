"""One prune of a share coordinator's log, measured: what Kafka's prune job does once per interval.

`ShareCoordinator.prune` decides the bound (`persister.pruning`) and asks its log to delete below it;
this module adds what an operator watches: the last redundant offset, how far the log start moved, and
what storage went with it. A `SegmentLog` frees whole segment files (its active segment never goes);
a `KafkaRecordLog` frees the Kafka records (appends) below the new start with DeleteRecords, and the
in-memory copy of them, while the cluster frees its own segments; a `MemoryLog` frees its frames.
The scheduling lives with the caller (`sharegroup serve` runs it every
`share.coordinator.state.topic.prune.interval.ms`).
"""

from __future__ import annotations

import dataclasses

from .kafka_state_log import KafkaRecordLog
from .share_coordinator import ShareCoordinator
from .state_log import SegmentLog

__all__ = ["PruneOutcome", "prune_measured", "held_storage"]


@dataclasses.dataclass(frozen=True, slots=True)
class PruneOutcome:
    """What one prune did: `last_redundant_offset` (Kafka's metric of that name: everything below it is
    redundant), the log start before and after, and the storage units (segment files of a SegmentLog)
    and bytes released."""

    last_redundant_offset: int
    start_offset_before: int
    start_offset: int
    segments_deleted: int
    bytes_reclaimed: int

    @property
    def records_deleted(self) -> int:
        return self.start_offset - self.start_offset_before


def held_storage(log: object) -> tuple[dict[int, int], bool]:
    """The storage units `log` holds as {unit id: bytes}, and whether the units are segment files.

    A SegmentLog's units are its segment files (by base offset), a KafkaRecordLog's the Kafka records it
    holds in memory (by Kafka offset); any other log (MemoryLog) reports none. O(units)."""
    if isinstance(log, SegmentLog):
        return {segment.base_offset: segment.size_bytes for segment in log.segments}, True
    if isinstance(log, KafkaRecordLog):
        return dict(zip(log.kafka_offsets, map(len, log.values))), False
    return {}, False


async def prune_measured(coordinator: ShareCoordinator) -> PruneOutcome:
    """Prune `coordinator`'s log (`ShareCoordinator.prune`) and say what it released.

    Appends may land while the log deletes; units are compared by id, so only the ones that went count.
    Raises what the prune raises (the log's error, or COORDINATOR_NOT_AVAILABLE once closed)."""
    log = coordinator.log
    bound = coordinator.last_redundant_offset()
    start_before = log.start_offset
    before, are_segments = held_storage(log)
    start = await coordinator.prune()
    after, _ = held_storage(log)
    gone = [size for unit, size in before.items() if unit not in after]
    return PruneOutcome(
        last_redundant_offset=bound,
        start_offset_before=start_before,
        start_offset=start,
        segments_deleted=len(gone) if are_segments else 0,
        bytes_reclaimed=sum(gone),
    )
