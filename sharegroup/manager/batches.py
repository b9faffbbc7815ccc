"""Small pure helpers of the fetch and acknowledgement paths: which log batches a response ships, how a
record-limit request is honoured on a batch-optimized share-partition, and acknowledgement counts."""

from __future__ import annotations

from typing import Sequence

from ..logs import LogBatch
from ..types import AcknowledgementBatch, AcquiredRecords

__all__ = ["batches_holding", "counts_by_type", "whole_batches_within"]


def whole_batches_within(batches: Sequence[LogBatch], fetch_offset: int, budget: int) -> Sequence[LogBatch]:
    """For a record-limit request on a share-partition configured batch-optimized: the leading batches
    whose records from `fetch_offset` on fit `budget`, so the soft limit cannot overshoot. The first
    batch is always offered (a producer batch larger than the budget is otherwise never delivered)."""
    total = 0
    for i, batch in enumerate(batches):
        total += batch.last_offset - max(batch.base_offset, fetch_offset) + 1
        if total > budget:
            return batches[: max(1, i)]
    return batches


def batches_holding(batches: Sequence[LogBatch], acquired: Sequence[AcquiredRecords]) -> tuple[LogBatch, ...]:
    """The read batches that hold at least one acquired offset, in log order (both inputs ascend)."""
    out = []
    i, n = 0, len(acquired)
    for batch in batches:
        while i < n and acquired[i][1] < batch.base_offset:
            i += 1
        if i == n:
            break
        if acquired[i][0] <= batch.last_offset:
            out.append(batch)
    return tuple(out)


def counts_by_type(batches: Sequence[AcknowledgementBatch]) -> dict[int, int]:
    """Records per acknowledge type of acknowledgement batches (one type for a range, or one per offset)."""
    counts: dict[int, int] = {}
    for first, last, types in batches:
        if len(types) == 1:
            counts[types[0]] = counts.get(types[0], 0) + last - first + 1
        else:
            for t in types:
                counts[t] = counts.get(t, 0) + 1
    return counts
