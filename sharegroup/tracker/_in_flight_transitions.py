"""State transitions after acquisition for the pure tracker: acknowledgement, release and their
completion (two-phase), and lock expiry (one phase). Functions taking the tracker;
the Cython twin's counterpart is `_native/in_flight_transitions.pxi`. Layer 1.
"""

from __future__ import annotations

import heapq
import operator
from bisect import bisect_right
from typing import Sequence

from ._acknowledgement_request import parse_acknowledgement_request
from ..errors import Errors, ShareError
from ._in_flight_entry import ACQUIRED, ARCHIVED, ARCHIVING, AVAILABLE, IN_TRANSITION, RENEW
from ._in_flight_start_offset import _advance
from ._tracker_buffers import add_range, add_run
from ..types import RecordState, StateBatch, TrackerWrite
from ._tracker_state import TrackerState



def _not_acquired_message(offset: int, state: int, flags: int, member: int, owner: int) -> str:
    if flags:
        return f"offset {offset} is awaiting a previous acknowledgement"
    if state != ACQUIRED:
        return f"offset {offset} is {RecordState(state).name}, not ACQUIRED"
    return f"offset {offset} is acquired by another member"


def _begin_acknowledge(self: TrackerState, member_id: str, batches: Sequence[Sequence], now_ms: int) -> TrackerWrite:
    """`InFlightTracker.begin_acknowledge` (see its docstring)."""
    owner = self._member_index.get(member_id, -1) if isinstance(member_id, str) and member_id else -1
    plan = parse_acknowledgement_request(batches)
    spso, speo = self._spso, self._speo
    for first, last, types in plan:
        if last < spso:
            continue
        if last >= speo:
            raise ShareError(
                Errors.INVALID_REQUEST,
                f"acknowledgement of offsets {first}-{last} goes past the in-flight window ending at {speo - 1}",
            )
        a = max(first, spso)
        i = bisect_right(self._firsts, a) - 1
        if i < 0 or self._entries[i].last < a:
            raise ShareError(Errors.INVALID_RECORD_STATE, f"no in-flight batch holds offset {a}")
        while i < len(self._entries):
            e = self._entries[i]
            if e.first > last:
                break
            lo, hi = max(e.first, a), min(e.last, last)
            if e.offset_states is None:
                if e.state != ACQUIRED or e.flags or e.member != owner:
                    raise ShareError(Errors.INVALID_RECORD_STATE, _not_acquired_message(lo, e.state, e.flags,
                                                                                        e.member, owner))
            else:
                offset_states, offset_flags, offset_members = e.offset_states, e.offset_flags, e.offset_members
                for k in range(lo - e.first, hi - e.first + 1):
                    if offset_states[k] != ACQUIRED or offset_flags[k] or offset_members[k] != owner:
                        raise ShareError(
                            Errors.INVALID_RECORD_STATE,
                            _not_acquired_message(e.first + k, offset_states[k], offset_flags[k], offset_members[k],
                                                  owner),
                        )
            i += 1
    # Validated: apply. From here on nothing can fail.
    writes: list[StateBatch] = []
    ranges: list[tuple[int, int]] = []
    out: list[list[int]] = []
    deadline = now_ms + self._lock_ms
    for first, last, types in plan:
        if last < spso:
            continue
        a = max(first, spso)
        i = bisect_right(self._firsts, a) - 1
        single = types[0] if len(types) == 1 else -1
        while i < len(self._entries):
            e = self._entries[i]
            if e.first > last:
                break
            lo, hi = max(e.first, a), min(e.last, last)
            t = single
            if t < 0:
                seg = types[lo - first: hi - first + 1]
                if seg.count(seg[0]) == len(seg):
                    t = seg[0]
            if e.offset_states is None and t >= 0 and lo == e.first and hi == e.last:
                if t == RENEW:
                    e.deadline = deadline
                    heapq.heappush(self._heap, (deadline, e.first))
                else:
                    self._set_state(e, self._ack_target(t, e.delivery_count))
                    e.flags = IN_TRANSITION
                    e.member = 0
                    add_run(out, lo, hi, e.state, e.delivery_count)
                    add_range(ranges, lo, hi)
                i += 1
                continue
            e.split_per_offset()
            renewed = False
            for k in range(lo - e.first, hi - e.first + 1):
                tk = t if t >= 0 else types[e.first + k - first]
                if tk == RENEW:
                    e.offset_deadlines[k] = deadline
                    renewed = True
                    continue
                s = self._ack_target(tk, e.offset_delivery_counts[k])
                self._set_offset_state(e, k, s)
                e.offset_flags[k] = IN_TRANSITION
                e.offset_members[k] = 0
                add_run(out, e.first + k, e.first + k, s, e.offset_delivery_counts[k])
                add_range(ranges, e.first + k, e.first + k)
            if renewed:
                heapq.heappush(self._heap, (deadline, e.first))
            i += 1
    for r in out:
        writes.append(StateBatch(r[0], r[1], r[2], r[3]))
    return self._pending(owner, ranges, writes)


def _begin_release(self: TrackerState, member_id: str, now_ms: int) -> TrackerWrite:
    """`InFlightTracker.begin_release` (see its docstring)."""
    owner = self._member_index.get(member_id, -1) if isinstance(member_id, str) and member_id else -1
    ranges: list[tuple[int, int]] = []
    out: list[list[int]] = []
    if owner > 0:
        spso = self._spso
        for e in self._entries:
            if e.offset_states is None:
                if e.state != ACQUIRED or e.flags or e.member != owner:
                    continue
                if e.first >= spso or e.delivery_count >= self._limit:
                    self._set_state(e, self._dlq_state if e.delivery_count >= self._limit else AVAILABLE)
                    e.flags = IN_TRANSITION
                    e.member = 0
                    add_run(out, e.first, e.last, e.state, e.delivery_count)
                    add_range(ranges, e.first, e.last)
                    continue
                e.split_per_offset()
            for k in range(e.last - e.first + 1):
                if e.offset_states[k] != ACQUIRED or e.offset_flags[k] or e.offset_members[k] != owner:
                    continue
                off = e.first + k
                s = self._dlq_state if e.offset_delivery_counts[k] >= self._limit else (
                    ARCHIVED if off < spso else AVAILABLE)
                self._set_offset_state(e, k, s)
                e.offset_flags[k] = IN_TRANSITION
                e.offset_members[k] = 0
                add_run(out, off, off, s, e.offset_delivery_counts[k])
                add_range(ranges, off, off)
    return self._pending(owner, ranges, [StateBatch(r[0], r[1], r[2], r[3]) for r in out])


def _complete(self: TrackerState, transition_id: int, committed: bool, now_ms: int) -> None:
    """`InFlightTracker.complete` (see its docstring)."""
    t = self._transitions.pop(transition_id, None)
    if t is None:
        raise ShareError(Errors.INVALID_REQUEST, f"unknown transition {transition_id}")
    owner, ranges = t
    spso = self._spso
    limit = self._limit
    for a, b in ranges:
        for i in range(self._index_from(a), len(self._entries)):
            e = self._entries[i]
            if e.first > b:
                break
            lo, hi = max(e.first, a), min(e.last, b)
            if e.offset_states is None:
                if lo == e.first and hi == e.last:
                    if not e.flags:
                        continue
                    if committed:
                        e.flags = 0
                        continue
                    if e.deadline > now_ms:
                        e.flags = 0
                        self._set_state(e, ACQUIRED)
                        e.member = owner
                        # The lock may have been popped by an expiry pass that ran "later" than
                        # now_ms; a fresh heap item guarantees the record still expires.
                        heapq.heappush(self._heap, (e.deadline, e.first))
                        continue
                    if e.first >= spso or e.delivery_count >= limit:
                        e.flags = 0
                        self._set_state(e, ARCHIVED if e.delivery_count >= limit else AVAILABLE)
                        e.member = 0
                        continue
                e.split_per_offset()  # straddles the SPSO: offsets below it archive, the rest do not
            earliest = -1
            for k in range(lo - e.first, hi - e.first + 1):
                if not e.offset_flags[k]:
                    continue
                e.offset_flags[k] = 0
                if committed:
                    continue
                d = e.offset_deadlines[k]
                if d <= now_ms:
                    at_limit_or_below = e.offset_delivery_counts[k] >= limit or e.first + k < spso
                    expired_state = ARCHIVED if at_limit_or_below else AVAILABLE
                    self._set_offset_state(e, k, expired_state)
                    e.offset_members[k] = 0
                else:
                    self._set_offset_state(e, k, ACQUIRED)
                    e.offset_members[k] = owner
                    if earliest < 0 or d < earliest:
                        earliest = d
            if earliest >= 0:
                heapq.heappush(self._heap, (earliest, e.first))
    # Committed or rolled back, records of the transition that are AVAILABLE are fetchable now (its
    # ranges ascend: requests and entries are walked in offset order).
    self._records_available_from(ranges[0][0])
    _advance(self)


def _expire_locks(self: TrackerState, now_ms: int) -> tuple[int, TrackerWrite]:
    """`InFlightTracker.expire_locks` (see its docstring)."""
    heap = self._heap
    limit = self._limit
    spso = self._spso
    out: list[list[int]] = []
    count = 0
    while heap and heap[0][0] <= now_ms:
        _d, first = heapq.heappop(heap)
        i = bisect_right(self._firsts, first) - 1
        if i < 0 or self._firsts[i] != first:
            continue
        e = self._entries[i]
        if e.offset_states is None:
            if e.state != ACQUIRED or e.flags or e.deadline > now_ms:
                continue
            if e.first >= spso or e.delivery_count >= limit:
                self._set_state(e, self._dlq_state if e.delivery_count >= limit else AVAILABLE)
                e.member = 0
                out.append([e.first, e.last, e.state, e.delivery_count])
                count += e.last - e.first + 1
                continue
            e.split_per_offset()
        offset_states, offset_flags, offset_deadlines = e.offset_states, e.offset_flags, e.offset_deadlines
        for k in range(e.last - e.first + 1):
            if offset_states[k] == ACQUIRED and not offset_flags[k] and offset_deadlines[k] <= now_ms:
                s = self._dlq_state if e.offset_delivery_counts[k] >= limit else (
                    ARCHIVED if e.first + k < spso else AVAILABLE)
                self._set_offset_state(e, k, s)
                e.offset_members[k] = 0
                out.append([e.first + k, e.first + k, s, e.offset_delivery_counts[k]])
                count += 1
    if not out:
        return 0, TrackerWrite(0, [], self._spso, self._count_terminal_from(self._spso))
    out.sort()
    self._records_available_from(out[0][0])
    merged: list[list[int]] = []
    for r in out:
        add_run(merged, r[0], r[1], r[2], r[3])
    _advance(self)
    return count, TrackerWrite(0, [StateBatch(r[0], r[1], r[2], r[3]) for r in merged],
                               self._spso, self._count_terminal_from(self._spso))


def _complete_archiving(self: TrackerState, first_offset: int, last_offset: int) -> TrackerWrite:
    """`InFlightTracker.complete_archiving` (see its docstring)."""
    first, last = operator.index(first_offset), operator.index(last_offset)
    if first < 0 or last < first:
        raise ShareError(Errors.INVALID_REQUEST, f"bad archiving range {first}-{last}")
    out: list[list[int]] = []
    for i in range(self._index_from(first), len(self._entries)):
        e = self._entries[i]
        if e.first > last:
            break
        lo, hi = max(e.first, first), min(e.last, last)
        if e.offset_states is None:
            if e.state != ARCHIVING or e.flags:
                continue
            if lo == e.first and hi == e.last:
                self._set_state(e, ARCHIVED)
                add_run(out, lo, hi, ARCHIVED, e.delivery_count)
                continue
            e.split_per_offset()
        offset_states, offset_flags = e.offset_states, e.offset_flags
        for k in range(lo - e.first, hi - e.first + 1):
            if offset_states[k] == ARCHIVING and not offset_flags[k]:
                self._set_offset_state(e, k, ARCHIVED)
                add_run(out, e.first + k, e.first + k, ARCHIVED, e.offset_delivery_counts[k])
    if out:
        _advance(self)
    return TrackerWrite(0, [StateBatch(r[0], r[1], r[2], r[3]) for r in out], self._spso,
                        self._count_terminal_from(self._spso))
