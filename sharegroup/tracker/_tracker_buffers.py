"""Run and range builders of the pure tracker: the lists a call fills before it builds its result.

Layer 1. The Cython twin's counterparts (same names) grow C buffers in
`_native/tracker_buffers.pxi`.
"""

from __future__ import annotations


def add_run(out: list, first: int, last: int, state: int, delivery_count: int) -> None:
    """Append a state run [first, last, state, delivery_count], merging with the previous one when
    contiguous and equal (the StateBatch shape)."""
    if out:
        r = out[-1]
        if r[1] + 1 == first and r[2] == state and r[3] == delivery_count:
            r[1] = last
            return
    out.append([first, last, state, delivery_count])


def add_acquired_run(runs: list, first: int, last: int, delivery_count: int, merge: bool = True) -> None:
    """Append an acquired run [first, last, delivery_count], merging when `merge` and contiguous at the
    same delivery count (the AcquiredRecords shape)."""
    if merge and runs:
        r = runs[-1]
        if r[1] + 1 == first and r[2] == delivery_count:
            r[1] = last
            return
    runs.append([first, last, delivery_count])


def add_range(ranges: list, a: int, b: int) -> None:
    """Append the offset range (a, b), extending the previous range when contiguous."""
    if ranges and ranges[-1][1] + 1 == a:
        ranges[-1] = (ranges[-1][0], b)
    else:
        ranges.append((a, b))
