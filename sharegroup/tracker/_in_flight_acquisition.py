"""Acquisition for the pure tracker: functions taking the tracker (the Cython twin's counterpart is
`_native/in_flight_acquisition.pxi`).

New ranges at producer-batch granularity (holes included: natural holes fetched on their own and the
holes of the persisted-gap window), re-acquisition of AVAILABLE cached records with poison-record
throttling, and the read_committed cut of aborted transactions. Layer 1.
"""

from __future__ import annotations

import heapq
from typing import Sequence

from ..errors import Errors, ShareError
from ._in_flight_entry import ACQUIRED, AVAILABLE, MAX_DELIVERY_COUNT, _Entry
from ._in_flight_start_offset import _advance
from ._tracker_buffers import add_acquired_run
from ..types import AcquiredRecords
from ._tracker_state import TrackerState



def _acquire(self: TrackerState, member_id: str, fetched: Sequence[Sequence], max_records: int, now_ms: int,
             fetch_offset: int, batch_size: int, aborted_transactions: Sequence[Sequence[int]],
             read_committed: bool) -> list[AcquiredRecords]:
    """`InFlightTracker.acquire` (see its docstring)."""
    if not isinstance(member_id, str) or not member_id:
        raise ShareError(Errors.INVALID_REQUEST, "member id must be a non-empty string")
    nfetched = len(fetched)
    prev_last = -1
    for b in fetched:
        base, last = b[0], b[1]
        if base < 0 or last < base or base <= prev_last:
            raise ShareError(
                Errors.INVALID_REQUEST, f"fetched batches must be ascending, disjoint and non-empty: {tuple(b)!r}"
            )
        prev_last = last
    if max_records <= 0 or nfetched == 0:
        return []
    if batch_size < 0:
        raise ShareError(Errors.INVALID_REQUEST, f"batch size {batch_size} is negative")
    first_base = fetched[0][0]
    if 0 <= fetch_offset < first_base:
        self._archive(max(fetch_offset, self._spso), first_base - 1, AVAILABLE)
    owner = self._member(member_id)
    deadline = now_ms + self._lock_ms
    runs: list[list[int]] = []  # [first, last, delivery_count] ascending, merged when contiguous and equal
    lo = max(first_base, self._spso)
    hi = fetched[-1][1]
    acquired = 0
    stop = False
    limit = self._limit
    throttle = self._throttle
    if hi >= lo:
        i = self._index_from(lo)
        entries = self._entries
        cursor = lo  # the lowest fetched offset not yet walked past
        overlapped = False
        while i < len(entries) and not stop and acquired < max_records:
            e = entries[i]
            if e.first > hi:
                break
            overlapped = True
            if self._gap_end >= 0:
                # Persisted-gap window: the hole before this entry is acquirable (never past it).
                hole_first = max(cursor, self._gap_start)
                if hole_first < e.first:
                    acquired += _acquire_new(self, fetched, hole_first, e.first - 1, owner, deadline, runs,
                                             max_records - acquired, batch_size, True)
                    i = self._index_from(e.first)
                    if acquired >= max_records:
                        break
            cursor = e.last + 1
            a = max(e.first, lo)
            b = min(e.last, hi)
            if e.offset_states is None:
                if e.state != AVAILABLE or e.flags:
                    i += 1
                    continue
                size = e.last - e.first + 1
                throttled = e.delivery_count >= throttle
                if throttled and acquired > 0:
                    stop = True  # poison isolation: redeliveries this deep go out on their own
                    break
                cap = max(1, size >> (e.delivery_count - throttle + 1)) if throttled else size
                if self._record_limit:
                    cap = min(cap, max_records - acquired)
                if a == e.first and b == e.last and cap >= size and not (
                    throttled and e.delivery_count == limit - 1 and limit > 2 and size > 1
                ):
                    e.state = ACQUIRED
                    e.delivery_count = min(e.delivery_count + 1, MAX_DELIVERY_COUNT)
                    e.member = owner
                    e.deadline = deadline
                    heapq.heappush(self._heap, (deadline, e.first))
                    add_acquired_run(runs, e.first, e.last, e.delivery_count)
                    acquired += size
                    if throttled:
                        stop = True
                    i += 1
                    continue
                e.split_per_offset()
            got, stop = _acquire_offsets(self, e, a, b, owner, deadline, runs, acquired, max_records)
            acquired += got
            i += 1
        if not stop and acquired < max_records:
            # A fetch that overlaps no entry may fill a hole below the SPEO; a fetch that overlaps
            # entries leaves the holes between them alone, except persisted-gap holes.
            if self._gap_end >= 0 or not overlapped:
                in_window = self._gap_end >= 0
                hole_first = max(cursor, self._gap_start) if in_window else cursor
                hole_last = min(hi, self._speo - 1)
                if hole_first <= hole_last:
                    acquired += _acquire_new(self, fetched, hole_first, hole_last, owner, deadline, runs,
                                             max_records - acquired, batch_size, in_window and overlapped)
            if acquired < max_records and hi >= self._speo:
                allowance = self._max_locks - (self._speo - self._spso)
                acquired += _acquire_new(self, fetched, max(cursor, self._speo), hi, owner, deadline, runs,
                                         min(max_records - acquired, allowance), batch_size)
    if runs and self._gap_end >= 0:
        self._gap_start = max(self._gap_start, runs[-1][1] + 1)
    if read_committed and runs:
        _archive_aborted(self, fetched, aborted_transactions, runs)
    _advance(self, True)
    return [AcquiredRecords(r[0], r[1], r[2]) for r in runs]


def _acquire_offsets(self: TrackerState, e: _Entry, a: int, b: int, owner: int, deadline: int, runs: list,
                     acquired: int, max_records: int) -> tuple[int, bool]:
    """Acquire the AVAILABLE offsets of split entry `e` in [a, b]; returns (count, stop)."""
    offset_states, offset_flags, offset_delivery_counts = e.offset_states, e.offset_flags, e.offset_delivery_counts
    f = e.first
    max_delivery_count = -1
    for k in range(a - f, b - f + 1):
        if offset_states[k] == AVAILABLE and not offset_flags[k] and offset_delivery_counts[k] > max_delivery_count:
            max_delivery_count = offset_delivery_counts[k]
    if max_delivery_count < 0:
        return 0, False
    limit = self._limit
    throttle = self._throttle
    throttled = max_delivery_count >= throttle
    if throttled and acquired > 0:
        return 0, True
    cap = max(1, (e.last - f + 1) >> (max_delivery_count - throttle + 1)) if throttled else (1 << 62)
    if self._record_limit:
        cap = min(cap, max_records - acquired)
    got = 0
    stop = throttled
    for k in range(a - f, b - f + 1):
        if offset_states[k] != AVAILABLE or offset_flags[k]:
            continue
        if got >= cap:
            stop = True
            break
        delivery_count = offset_delivery_counts[k]
        last_attempt = limit > 2 and delivery_count == limit - 1
        if last_attempt and (acquired + got) > 0:
            stop = True
            break
        delivery_count = min(delivery_count + 1, MAX_DELIVERY_COUNT)
        offset_states[k] = ACQUIRED
        offset_delivery_counts[k] = delivery_count
        e.offset_members[k] = owner
        e.offset_deadlines[k] = deadline
        add_acquired_run(runs, f + k, f + k, delivery_count)
        got += 1
        if last_attempt:
            stop = True
            break
    if got:
        heapq.heappush(self._heap, (deadline, f))
    return got, stop


def _acquire_new(self: TrackerState, fetched: Sequence[Sequence], from_offset: int, to_offset: int, owner: int,
                 deadline: int, runs: list, budget: int, batch_size: int, whole: bool = False) -> int:
    """Acquire the fetched offsets in [from_offset, to_offset] as new entries; returns the count.

    Whole producer batches are taken until `budget` offsets (counted from `from_offset`) are reached;
    the batch that crosses it is included (soft limit), but nothing goes past `to_offset` (the end
    of a hole, or the last fetched offset). `batch_size` > 0 starts a new entry at a producer batch
    base offset at least `batch_size` past the current entry's first; the earlier entry then ends
    just before that base offset, so holes between producer batches belong to it. A range that
    becomes the lowest in flight moves the SPSO to its first offset.

    `whole` (a hole of the persisted-gap window between walked entries, as Kafka acquires it): the
    range is [from_offset, to_offset] itself, offsets that no fetched batch holds included; the soft
    limit ends it at the last offset of the fetched batch holding offset `from_offset + budget - 1`,
    or at that offset when no fetched batch holds it.
    """
    if budget <= 0 or to_offset < from_offset:
        return 0
    j = 0
    n = len(fetched)
    while j < n and fetched[j][1] < from_offset:
        j += 1
    segments: list[list[int]] = []  # [first, last] of each new entry
    if whole:
        end = to_offset
        if budget < to_offset - from_offset + 1:
            end = from_offset + budget - 1
            for k in range(j, n):
                if fetched[k][0] > end:
                    break
                if fetched[k][1] >= end:
                    end = min(fetched[k][1], to_offset)
                    break
        segments.append([from_offset, end])
        while j < n and fetched[j][0] <= end:
            base = fetched[j][0]
            if batch_size > 0 and base - segments[-1][0] >= batch_size:
                segments[-1][1] = base - 1
                segments.append([base, end])
            j += 1
    else:
        if j == n or fetched[j][0] > to_offset:
            return 0
        last = -1
        while j < n:
            base, batch_last = fetched[j][0], min(fetched[j][1], to_offset)
            if base > to_offset or (last >= 0 and last - from_offset + 1 >= budget):
                break
            start = max(base, from_offset)
            if not segments:
                segments.append([start, batch_last])
            elif batch_size > 0 and start - segments[-1][0] >= batch_size:
                segments[-1][1] = start - 1
                segments.append([start, batch_last])
            else:
                segments[-1][1] = batch_last
            last = batch_last
            j += 1
    first = segments[0][0]
    i = self._index_from(self._spso)
    if first > self._spso and (i == len(self._entries) or self._entries[i].first > first):
        # Nothing is in flight below the new range: the offsets before it are no one's.
        self._spso = first
    acquired = 0
    for first, seg_last in segments:
        size = seg_last - first + 1
        if self._record_limit and acquired + size > budget:
            take = budget - acquired
            e = _Entry(first, seg_last, AVAILABLE, 0, 0, 0)
            e.split_per_offset()
            self._records_available_from(first + max(take, 0))  # the rest of the range waits AVAILABLE
            if take > 0:
                for k in range(take):
                    e.offset_states[k] = ACQUIRED
                    e.offset_delivery_counts[k] = 1
                    e.offset_members[k] = owner
                    e.offset_deadlines[k] = deadline
                heapq.heappush(self._heap, (deadline, first))
                add_acquired_run(runs, first, first + take - 1, 1, batch_size == 0)
                acquired += take
        else:
            e = _Entry(first, seg_last, ACQUIRED, 1, owner, deadline)
            heapq.heappush(self._heap, (deadline, first))
            add_acquired_run(runs, first, seg_last, 1, batch_size == 0)
            acquired += size
        self._insert_entry(e)
        if seg_last >= self._speo:
            self._speo = seg_last + 1
    return acquired


def _archive_aborted(self: TrackerState, fetched: Sequence[Sequence], aborted: Sequence[Sequence[int]],
                     runs: list) -> None:
    """read_committed: archive just-acquired records of aborted transactions and control batches,
    and cut them out of the acquired runs."""
    pending = sorted((int(t[1]), int(t[0])) for t in aborted)  # (first_offset, producer_id)
    p = 0
    active: set[int] = set()
    cut: list[tuple[int, int]] = []
    for b in fetched:
        base, last = b[0], b[1]
        pid = b[2] if len(b) > 2 else -1
        txn = bool(b[3]) if len(b) > 3 else False
        control = bool(b[4]) if len(b) > 4 else False
        while p < len(pending) and pending[p][0] <= last:
            active.add(pending[p][1])
            p += 1
        if control:
            cut.append((base, last))
            active.discard(pid)  # an abort marker ends the aborted transaction
        elif txn and pid in active:
            cut.append((base, last))
    if not cut:
        return
    new_runs: list[list[int]] = []
    ci = 0
    for first, last, delivery_count in runs:
        pos = first
        while ci < len(cut) and cut[ci][1] < pos:
            ci += 1
        cj = ci
        while pos <= last:
            if cj < len(cut) and cut[cj][0] <= last:
                c0, c1 = cut[cj]
                if c0 > pos:
                    add_acquired_run(new_runs, pos, c0 - 1, delivery_count, False)
                lo, hi = max(c0, pos), min(c1, last)
                if lo <= hi:
                    self._archive(lo, hi, ACQUIRED)
                pos = hi + 1
                if c1 <= last:
                    cj += 1
            else:
                add_acquired_run(new_runs, pos, last, delivery_count, False)
                pos = last + 1
    runs[:] = new_runs
