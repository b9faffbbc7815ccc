"""The state-batch combiner: merges persisted state batches into one sorted, disjoint, minimal list.

Overlaps are resolved by priority, not by recency: on every offset the batch with the highest delivery
count wins, then the highest delivery state (coordinator-facts §2.5). A later write with a lower
(count, state) therefore loses on the overlapping range, so a stale retry can never make an archived or
acknowledged record available again with a lower count.
"""

from __future__ import annotations

import heapq
from typing import Iterable, Sequence

from sharegroup.types import StateBatch

__all__ = ["combine"]

_BatchLike = Sequence[int]  # (first_offset, last_offset, delivery_state, delivery_count)


def combine(
    batches_so_far: Iterable[_BatchLike] | None,
    new_batches: Iterable[_BatchLike] | None,
    start_offset: int,
) -> list[StateBatch]:
    """Merge `new_batches` into `batches_so_far`, pruned at `start_offset` (-1 means "no pruning").

    Batches wholly below `start_offset` are dropped and straddling ones clipped to start there. The
    result is sorted, strictly disjoint and minimal (no two touching batches share state and count);
    offsets covered by no input batch stay gaps. Either list may be None (empty) and hold any
    4-tuples; the inputs need not be sorted or disjoint. A batch with first > last is a ValueError.

    Runtime complexity: O((n + k) log(n + k)) for n + k input batches (a sweep line over the batch
    boundaries with a heap of the active priorities).
    """
    pruned = _prune(batches_so_far, new_batches, start_offset)
    if len(pruned) <= 1:
        return [StateBatch(*batch) for batch in pruned]
    return _sweep(pruned)


def _prune(
    batches_so_far: Iterable[_BatchLike] | None, new_batches: Iterable[_BatchLike] | None, start_offset: int
) -> list[tuple[int, int, int, int]]:
    """Both lists as plain tuples, with batches below `start_offset` dropped and straddlers clipped."""
    pruned: list[tuple[int, int, int, int]] = []
    for source in (batches_so_far, new_batches):
        if source is None:
            continue
        for first_offset, last_offset, delivery_state, delivery_count in source:
            if first_offset > last_offset:
                raise ValueError(f"state batch first_offset {first_offset} > last_offset {last_offset}")
            if start_offset != -1:
                if last_offset < start_offset:
                    continue
                if first_offset < start_offset:
                    first_offset = start_offset
            pruned.append((first_offset, last_offset, delivery_state, delivery_count))
    return pruned


def _sweep(batches: list[tuple[int, int, int, int]]) -> list[StateBatch]:
    """Emit the winning (state, count) over every sub-range between consecutive batch boundaries.

    Boundaries are the batch starts and the offsets one past their ends. At one offset the ends are
    processed before the starts, so a batch that ends where another begins never shares an offset
    with it. The active priorities sit in a max-heap (negated) with lazy deletion.
    """
    # begins: (first, -count, -state); ends: (last + 1, -count, -state). Negated so heapq is a max-heap.
    begins = sorted((first, -count, -state) for first, _last, state, count in batches)
    ends = sorted((last + 1, -count, -state) for _first, last, state, count in batches)
    heap: list[tuple[int, int]] = []
    removed: dict[tuple[int, int], int] = {}
    active = 0
    out: list[list[int]] = []  # [first, last, state, count], mutable so a coalesce is one assignment
    n = len(begins)
    i = j = 0
    previous = 0
    while j < n:  # every batch contributes one begin and one end, and its end comes after its begin
        x = ends[j][0] if i >= n else min(begins[i][0], ends[j][0])
        if active and previous < x:
            top = heap[0]
            while removed.get(top):
                removed[top] -= 1
                heapq.heappop(heap)
                top = heap[0]
            count, state = -top[0], -top[1]
            if out and out[-1][1] + 1 == previous and out[-1][2] == state and out[-1][3] == count:
                out[-1][1] = x - 1
            else:
                out.append([previous, x - 1, state, count])
        while j < n and ends[j][0] == x:
            priority = ends[j][1:]
            removed[priority] = removed.get(priority, 0) + 1
            active -= 1
            j += 1
        while i < n and begins[i][0] == x:
            heapq.heappush(heap, begins[i][1:])
            active += 1
            i += 1
        previous = x
    assert active == 0 and i == n
    return [StateBatch(first, last, state, count) for first, last, state, count in out]
