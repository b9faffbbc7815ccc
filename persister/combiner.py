"""The state-batch combiner: merges persisted state batches into one sorted, disjoint, minimal list.

Overlaps are resolved by priority, not by recency: on every offset the batch with the highest delivery
count wins, then the highest delivery state (as Kafka's share coordinator combines state batches). A later write with a lower
(count, state) therefore loses on the overlapping range, so a stale retry can never make an archived or
acknowledged record available again with a lower count.
"""

from __future__ import annotations

import bisect
import heapq
from typing import Iterable, Sequence

from sharegroup.types import StateBatch

__all__ = ["combine", "is_canonical", "merge_canonical"]

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


# -- fast paths for canonical state ------------------------------------------------------------------
#
# The coordinator's state is always canonical (the combiner's output form) and so is every delta it
# writes, and most writes touch offsets no batch of the state covers (new acknowledgements beyond the
# state, or a start offset that prunes the old state away). For those, merging is a splice with at most
# two coalescings instead of a sweep; anything else falls back to `combine`, which is the definition.


def is_canonical(batches: Sequence, start_offset: int = -1) -> bool:
    """Whether `batches` is already in `combine`'s output form: StateBatch values of plain ints, each
    with 0 <= first <= last, sorted, strictly disjoint, touching ones differing in (state, count), and
    none below `start_offset` (-1: no bound). Then `combine((), batches, start_offset)` equals
    `list(batches)`. Runtime complexity: O(n)."""
    previous_last = -1 if start_offset == -1 else start_offset - 1
    previous_state = previous_count = None
    for batch in batches:
        if type(batch) is not StateBatch:
            return False
        first, last, state, count = batch
        if not (type(first) is int and type(last) is int and type(state) is int and type(count) is int):
            return False
        if first <= previous_last or last < first:
            return False
        if first == previous_last + 1 and state == previous_state and count == previous_count:
            return False
        previous_last, previous_state, previous_count = last, state, count
    return True


def merge_canonical(
    state_batches: tuple, new_batches: Sequence, start_offset: int, new_canonical: bool = False
) -> tuple[StateBatch, ...]:
    """`tuple(combine(state_batches, new_batches, start_offset))` for `state_batches` that is canonical
    (see `is_canonical`; its start bound does not matter here), computed without a sweep when the new
    batches are canonical, not below `start_offset` and cover no offset the pruned state covers.
    `new_canonical=True` is the caller's word that `is_canonical(new_batches, start_offset)` holds
    (it is then not checked again).

    Runtime complexity: O(p + k log n) for p pruned state batches, k new ones and n state batches (plus
    the copies of a tuple splice), else that of `combine`.
    """
    old = state_batches
    if start_offset != -1 and old and old[0].first_offset < start_offset:
        if old[-1].last_offset < start_offset:
            old = ()
        else:
            i = 0
            while old[i].last_offset < start_offset:
                i += 1
            head = old[i]
            if head.first_offset < start_offset:
                clipped = StateBatch(start_offset, head.last_offset, head.delivery_state, head.delivery_count)
                old = (clipped,) + old[i + 1 :]
            else:
                old = old[i:]
    if not new_batches:
        return old
    if not new_canonical and not is_canonical(new_batches, start_offset):
        return tuple(combine(state_batches, new_batches, start_offset))
    if not old:
        return tuple(new_batches)
    new_first = new_batches[0]
    tail = old[-1]
    if new_first.first_offset > tail.last_offset:  # everything new lies beyond the state: append
        if (
            tail.last_offset + 1 == new_first.first_offset
            and tail.delivery_state == new_first.delivery_state
            and tail.delivery_count == new_first.delivery_count
        ):
            joined = StateBatch(tail.first_offset, new_first.last_offset, tail.delivery_state, tail.delivery_count)
            return old[:-1] + (joined,) + tuple(new_batches[1:])
        return old + tuple(new_batches)
    merged = list(old)
    for batch in new_batches:
        first, last, state, count = batch
        i = bisect.bisect_left(merged, batch)
        if i > 0 and merged[i - 1].last_offset >= first or i < len(merged) and merged[i].first_offset <= last:
            return tuple(combine(state_batches, new_batches, start_offset))  # an overlap: priorities decide
        if i > 0:
            left = merged[i - 1]
            if left.last_offset + 1 == first and left.delivery_state == state and left.delivery_count == count:
                i -= 1
                first = left.first_offset
                del merged[i]
        if i < len(merged):
            right = merged[i]
            if last + 1 == right.first_offset and right.delivery_state == state and right.delivery_count == count:
                last = right.last_offset
                del merged[i]
        merged.insert(i, StateBatch(first, last, state, count))
    return tuple(merged)
