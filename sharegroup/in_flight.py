"""The pure-Python twin of the in-flight tracker: every record between SPSO and SPEO of one share-partition.

Layer 1 (SPEC §2): no I/O, no clock, no asyncio. Callers pass `now_ms`; changes that must be persisted
come back as `TrackerWrite`s. The Cython twin in `_native/tracker.pyx` implements the same behaviour
with the same names; `sharegroup.tracker` picks one at import time.

Representation. The window is a sorted list of *entries*, one per acquired producer-batch range. An
entry holds one state for its whole range (batch level, O(1) memory) until an operation touches only
part of it; then it switches to per-offset state held in flat arrays (15 bytes an offset: state,
transition flag, delivery count, owner index, lock deadline), never a Python object per record. Lock
deadlines sit in a heap of (deadline_ms, entry first offset), so expiry visits only what is due.
"""

from __future__ import annotations

import heapq
from array import array
from bisect import bisect_right
from typing import Iterable, Sequence

from .errors import Errors, ShareError
from .types import AcknowledgeType, AcquiredRecords, RecordState, RecordView, StateBatch, TrackerWrite

__all__ = ["InFlightTracker"]

# Plain ints of the layer-0 vocabulary: they index bytearrays and compare fast in the hot loops.
AVAILABLE = int(RecordState.AVAILABLE)
ACQUIRED = int(RecordState.ACQUIRED)
ACKNOWLEDGED = int(RecordState.ACKNOWLEDGED)
ARCHIVED = int(RecordState.ARCHIVED)
_ACCEPT = int(AcknowledgeType.ACCEPT)
_RELEASE = int(AcknowledgeType.RELEASE)
_RENEW = int(AcknowledgeType.RENEW)
_ACKNOWLEDGE_TYPE_IDS = frozenset(int(t) for t in AcknowledgeType)
IN_TRANSITION = 1  # flag bit: the record's visible state awaits a persister answer (two-phase)
# Delivery counts are stored in one byte per record: a storage bound of this tracker, not a Kafka value
# (Kafka's limit is at most 10, 25 for the broker maximum).
_MAX_DELIVERY_COUNT = 255


def _terminal(state: int) -> bool:
    return state == ACKNOWLEDGED or state == ARCHIVED


class _Entry:
    """One cached range [first, last]: batch-level state, or per-offset arrays once split."""

    __slots__ = ("first", "last", "state", "flags", "delivery_count", "member", "deadline",
                 "offset_states", "offset_flags", "offset_delivery_counts", "offset_members", "offset_deadlines", "terminal_count")

    def __init__(self, first: int, last: int, state: int, delivery_count: int, member: int, deadline: int) -> None:
        self.first = first
        self.last = last
        self.state = state
        self.flags = 0
        self.delivery_count = delivery_count
        self.member = member
        self.deadline = deadline
        self.offset_states = None  # bytearray | None: per-offset state once the entry is split

    def split_per_offset(self) -> None:
        """Switch to per-offset state; every offset inherits the batch's state, owner and deadline."""
        if self.offset_states is not None:
            return
        n = self.last - self.first + 1
        self.offset_states = bytearray([self.state]) * n
        self.offset_flags = bytearray([self.flags]) * n
        self.offset_delivery_counts = bytearray([self.delivery_count]) * n
        self.offset_members = array("i", [self.member]) * n
        self.offset_deadlines = array("q", [self.deadline]) * n
        self.terminal_count = n if _terminal(self.state) else 0  # terminal offsets of the split entry, kept exact


class InFlightTracker:
    """In-flight records of one share-partition: acquisition, acknowledgement, locks, SPSO/SPEO.

    Offsets: `start_offset` (SPSO) is the lowest offset not known to be terminal; `end_offset` (SPEO)
    is exclusive, one past the last in-flight offset. Runtime complexity of every operation is
    O(entries touched + offsets of split entries touched); whole producer batches move in O(1).
    """

    def __init__(
        self,
        start_offset: int = 0,
        *,
        record_lock_duration_ms: int = 30_000,
        delivery_count_limit: int = 5,
        partition_max_record_locks: int = 2_000,
        record_limit_mode: bool = False,
    ) -> None:
        if start_offset < 0:
            raise ValueError("start_offset must be >= 0")
        if record_lock_duration_ms <= 0:
            raise ValueError("record_lock_duration_ms must be > 0")
        if not 1 <= delivery_count_limit <= _MAX_DELIVERY_COUNT - 1:
            raise ValueError("delivery_count_limit out of range")
        if partition_max_record_locks <= 0:
            raise ValueError("partition_max_record_locks must be > 0")
        self._lock_ms = int(record_lock_duration_ms)
        self._limit = int(delivery_count_limit)
        self._max_locks = int(partition_max_record_locks)
        self._record_limit = bool(record_limit_mode)
        # Poison-record isolation (SPEC §4.10): from this delivery count on, batches shrink.
        self._throttle = max(2, (self._limit + 1) // 2)
        self._entries: list[_Entry] = []
        self._firsts: list[int] = []
        self._heap: list[tuple[int, int]] = []
        self._transitions: dict[int, tuple[int, list[tuple[int, int]]]] = {}
        self._next_tid = 1
        self._member_index: dict[str, int] = {"": 0}
        self._member_names: list[str] = [""]
        self._spso = int(start_offset)
        self._speo = int(start_offset)
        # Terminal offsets in all entries (below the SPSO too), kept exact by every state change, so
        # counting those at or above the SPSO never walks the window.
        self._terminal_total = 0
        # The persisted-gap window (see `load`): holes in [max(SPSO, _gap_start), _gap_end) are acquirable
        # while _gap_end >= 0, which lasts until the SPEO moves past _gap_end (the SPEO at load).
        self._gap_start = 0
        self._gap_end = -1

    # ------------------------------------------------------------------ properties

    @property
    def start_offset(self) -> int:
        return self._spso

    @property
    def end_offset(self) -> int:
        return self._speo

    @property
    def in_flight_count(self) -> int:
        return self._speo - self._spso

    @property
    def delivery_complete_count(self) -> int:
        """Terminal records at or above the SPSO (KIP-1226), counting those awaiting a write."""
        return self._count_terminal_from(self._spso)

    @property
    def pending_transitions(self) -> int:
        return len(self._transitions)

    @property
    def record_lock_duration_ms(self) -> int:
        return self._lock_ms

    @property
    def delivery_count_limit(self) -> int:
        return self._limit

    def next_lock_deadline_ms(self) -> int:
        """The earliest lock deadline that may be due (possibly stale), or -1 when no lock is held."""
        return self._heap[0][0] if self._heap else -1

    # ------------------------------------------------------------------ loading

    def reset(self, start_offset: int) -> None:
        """Forget everything: an empty window at `start_offset` (pending transitions are dropped)."""
        if start_offset < 0:
            raise ShareError(Errors.INVALID_REQUEST, f"start offset {start_offset} is negative")
        self._entries = []
        self._firsts = []
        self._heap = []
        self._transitions = {}
        self._spso = self._speo = int(start_offset)
        self._terminal_total = 0
        self._gap_start = 0
        self._gap_end = -1

    def load(self, start_offset: int, state_batches: Iterable[Sequence[int]]) -> None:
        """Rebuild the window from persisted state (SPEC §4.7); all-or-nothing.

        Each persisted batch becomes one entry. Holes between `start_offset` and the batches are
        offsets whose fate is unknown (acquired when the last leader failed, or never records). They
        form the persisted-gap window, as in Kafka: while the SPEO has not moved past the last persisted
        batch, fetched data inside a hole is acquired as a new range (delivery count 1), the SPSO stops
        at the first hole not yet passed, and `next_fetch_offset` points at it. Once an acquisition
        moves the SPEO past the last persisted batch, the holes left are natural gaps.
        """
        batches = [tuple(b) for b in state_batches]
        prev_last = start_offset - 1
        for b in batches:
            if len(b) != 4:
                raise ShareError(Errors.UNKNOWN_SERVER_ERROR, f"malformed persisted state batch {b!r}")
            first, last, state, delivery_count = b
            if first < start_offset or last < first or first <= prev_last:
                raise ShareError(
                    Errors.UNKNOWN_SERVER_ERROR,
                    f"persisted state batch {b!r} is below the start offset {start_offset} or out of order",
                )
            if state not in (AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED) or delivery_count < 0:
                raise ShareError(Errors.UNKNOWN_SERVER_ERROR, f"persisted state batch {b!r} has a bad state or count")
            prev_last = last
        self.reset(start_offset)
        pos = start_offset
        first_hole = -1
        for first, last, state, delivery_count in batches:
            if first > pos and first_hole < 0:
                first_hole = pos
            # ACQUIRED is never persisted; if it ever is, the lock is gone after a failover.
            self._append_entry(_Entry(first, last, AVAILABLE if state == ACQUIRED else state, min(delivery_count, _MAX_DELIVERY_COUNT), 0, 0))
            if _terminal(state):
                self._terminal_total += last - first + 1
            pos = last + 1
        self._speo = pos
        if first_hole >= 0:
            self._gap_start = first_hole
            self._gap_end = pos
        self._advance()

    def _set_state(self, e: _Entry, state: int) -> None:
        """Set the state of batch-level entry `e`, keeping the terminal total exact."""
        if _terminal(state) != _terminal(e.state):
            self._terminal_total += (e.last - e.first + 1) if _terminal(state) else -(e.last - e.first + 1)
        e.state = state

    def _set_offset_state(self, e: _Entry, k: int, state: int) -> None:
        """Set the state of offset e.first + k of split entry `e`, keeping both terminal counts exact."""
        change = _terminal(state) - _terminal(e.offset_states[k])
        e.terminal_count += change
        self._terminal_total += change
        e.offset_states[k] = state

    def _append_entry(self, e: _Entry) -> None:
        self._entries.append(e)
        self._firsts.append(e.first)

    def _insert_entry(self, e: _Entry) -> None:
        i = bisect_right(self._firsts, e.first)
        self._entries.insert(i, e)
        self._firsts.insert(i, e.first)

    def _member(self, member_id: str) -> int:
        m = self._member_index.get(member_id)
        if m is None:
            m = len(self._member_names)
            self._member_index[member_id] = m
            self._member_names.append(member_id)
        return m

    def _index_from(self, offset: int) -> int:
        """Index of the first entry whose last offset is >= `offset`."""
        i = bisect_right(self._firsts, offset) - 1
        if i < 0:
            return 0
        if self._entries[i].last < offset:
            return i + 1
        return i

    # ------------------------------------------------------------------ queries

    def next_fetch_offset(self) -> int:
        """The first AVAILABLE offset not awaiting a write or acquirable persisted-gap hole, else the SPEO."""
        spso = self._spso
        # The next acquirable hole of the persisted-gap window (none when the window is closed).
        hole = max(spso, self._gap_start) if self._gap_end >= 0 else self._speo
        for i in range(self._index_from(spso), len(self._entries)):
            e = self._entries[i]
            if e.first > hole:
                return hole
            if e.last >= hole:
                hole = e.last + 1
            if e.offset_states is None:
                if e.state == AVAILABLE and not e.flags:
                    return max(e.first, spso)
                continue
            k = max(spso - e.first, 0)
            offset_states, offset_flags = e.offset_states, e.offset_flags
            while True:
                k = offset_states.find(b"\x00", k)
                if k < 0:
                    break
                if not offset_flags[k]:
                    return e.first + k
                k += 1
        return min(hole, self._speo)

    def record_state(self, offset: int) -> RecordView | None:
        """State, delivery count and owner of `offset`; None outside the window or in a hole."""
        if offset < self._spso or offset >= self._speo:
            return None
        i = bisect_right(self._firsts, offset) - 1
        if i < 0 or self._entries[i].last < offset:
            return None
        e = self._entries[i]
        if e.offset_states is None:
            return RecordView(RecordState(e.state), e.delivery_count, self._member_names[e.member])
        k = offset - e.first
        return RecordView(RecordState(e.offset_states[k]), e.offset_delivery_counts[k], self._member_names[e.offset_members[k]])

    def state_batches(self) -> list[StateBatch]:
        """The window [SPSO, SPEO) as minimal runs of (state, delivery count); ACQUIRED shows as 1."""
        out: list[list[int]] = []
        spso = self._spso
        for i in range(self._index_from(spso), len(self._entries)):
            e = self._entries[i]
            if e.offset_states is None:
                _add_run(out, max(e.first, spso), e.last, e.state, e.delivery_count)
            else:
                for k in range(max(spso - e.first, 0), e.last - e.first + 1):
                    _add_run(out, e.first + k, e.first + k, e.offset_states[k], e.offset_delivery_counts[k])
        return [StateBatch(r[0], r[1], r[2], r[3]) for r in out]

    def _count_terminal_from(self, start: int) -> int:
        """Terminal records at or above `start`: the running total minus those below `start`.

        Runtime complexity: O(entries below `start`), almost always 0 or 1 (wholly terminal entries
        below the SPSO are dropped), plus a C-level count over the part of one split entry below it.
        """
        total = self._terminal_total
        for e in self._entries:
            if e.first >= start:
                break
            end = min(e.last, start - 1)
            if e.offset_states is None:
                if _terminal(e.state):
                    total -= end - e.first + 1
            else:
                j = end - e.first + 1  # count in place: slicing would copy the entry's states
                total -= e.offset_states.count(ACKNOWLEDGED, 0, j) + e.offset_states.count(ARCHIVED, 0, j)
        return total

    # ------------------------------------------------------------------ acquisition

    def acquire(
        self,
        member_id: str,
        fetched: Sequence[Sequence],
        max_records: int,
        now_ms: int,
        fetch_offset: int = -1,
        batch_size: int = 0,
        aborted_transactions: Sequence[Sequence[int]] = (),
        read_committed: bool = False,
    ) -> list[AcquiredRecords]:
        """Acquire records of `fetched` producer-batch headers for `member_id` (SPEC §4.5, §4.8, §4.10).

        Cached AVAILABLE records are re-acquired; offsets past SPEO are acquired as new entries at
        producer-batch granularity. `max_records` and the in-flight limit are soft (rounded up to the end
        of a producer batch) unless the tracker is in record-limit mode. `batch_size` > 0 cuts new
        ranges at producer-batch boundaries. `fetch_offset` >= 0 says where the log read started:
        AVAILABLE records between it and the first fetched batch no longer exist (compaction) and are
        archived. Nothing is persisted: ACQUIRED is never written.
        """
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
        m = self._member(member_id)
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
                        acquired += self._acquire_new(fetched, hole_first, e.first - 1, m, deadline, runs,
                                                      max_records - acquired, batch_size)
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
                        e.delivery_count = min(e.delivery_count + 1, _MAX_DELIVERY_COUNT)
                        e.member = m
                        e.deadline = deadline
                        heapq.heappush(self._heap, (deadline, e.first))
                        _add_acquired_run(runs, e.first, e.last, e.delivery_count)
                        acquired += size
                        if throttled:
                            stop = True
                        i += 1
                        continue
                    e.split_per_offset()
                got, stop = self._acquire_offsets(e, a, b, m, deadline, runs, acquired, max_records)
                acquired += got
                i += 1
            if not stop and acquired < max_records:
                # A fetch that overlaps no entry may fill a hole below the SPEO; a fetch that overlaps
                # entries leaves the holes between them alone, except persisted-gap holes.
                if self._gap_end >= 0 or not overlapped:
                    hole_first = max(cursor, self._gap_start) if self._gap_end >= 0 else cursor
                    hole_last = min(hi, self._speo - 1)
                    if hole_first <= hole_last:
                        acquired += self._acquire_new(fetched, hole_first, hole_last, m, deadline, runs,
                                                      max_records - acquired, batch_size)
                if acquired < max_records and hi >= self._speo:
                    allowance = self._max_locks - (self._speo - self._spso)
                    acquired += self._acquire_new(fetched, max(cursor, self._speo), hi, m, deadline, runs,
                                                  min(max_records - acquired, allowance), batch_size)
        if runs and self._gap_end >= 0:
            self._gap_start = max(self._gap_start, runs[-1][1] + 1)
        if read_committed and runs:
            self._archive_aborted(fetched, aborted_transactions, runs)
        self._advance()
        return [AcquiredRecords(r[0], r[1], r[2]) for r in runs]

    def _acquire_offsets(self, e: _Entry, a: int, b: int, m: int, deadline: int, runs: list,
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
            delivery_count = min(delivery_count + 1, _MAX_DELIVERY_COUNT)
            offset_states[k] = ACQUIRED
            offset_delivery_counts[k] = delivery_count
            e.offset_members[k] = m
            e.offset_deadlines[k] = deadline
            _add_acquired_run(runs, f + k, f + k, delivery_count)
            got += 1
            if last_attempt:
                stop = True
                break
        if got:
            heapq.heappush(self._heap, (deadline, f))
        return got, stop

    def _acquire_new(self, fetched: Sequence[Sequence], from_offset: int, to_offset: int, m: int, deadline: int,
                     runs: list, budget: int, batch_size: int) -> int:
        """Acquire the fetched offsets in [from_offset, to_offset] as new entries; returns the count.

        Whole producer batches are taken until `budget` offsets (counted from `from_offset`) are reached;
        the batch that crosses it is included (soft limit), but nothing goes past `to_offset` (the end
        of a hole, or the last fetched offset). `batch_size` > 0 starts a new entry at a producer batch
        base offset at least `batch_size` past the current entry's first; the earlier entry then ends
        just before that base offset, so holes between producer batches belong to it. A range that
        becomes the lowest in flight moves the SPSO to its first offset.
        """
        if budget <= 0 or to_offset < from_offset:
            return 0
        j = 0
        n = len(fetched)
        while j < n and fetched[j][1] < from_offset:
            j += 1
        if j == n or fetched[j][0] > to_offset:
            return 0
        segments: list[list[int]] = []  # [first, last] of each new entry
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
                if take > 0:
                    for k in range(take):
                        e.offset_states[k] = ACQUIRED
                        e.offset_delivery_counts[k] = 1
                        e.offset_members[k] = m
                        e.offset_deadlines[k] = deadline
                    heapq.heappush(self._heap, (deadline, first))
                    _add_acquired_run(runs, first, first + take - 1, 1, batch_size == 0)
                    acquired += take
            else:
                e = _Entry(first, seg_last, ACQUIRED, 1, m, deadline)
                heapq.heappush(self._heap, (deadline, first))
                _add_acquired_run(runs, first, seg_last, 1, batch_size == 0)
                acquired += size
            self._insert_entry(e)
            if seg_last >= self._speo:
                self._speo = seg_last + 1
        return acquired

    def _archive(self, a: int, b: int, from_state: int, pending_too: bool = False) -> int:
        """Archive the records in [a, b] whose state is `from_state`; returns how many.

        Records awaiting a write are left alone unless `pending_too`: a log start move archives them
        too and takes them out of their transition, since the log no longer has them and no rollback
        may bring them back. Used for compaction, log start moves and aborted transactions.
        """
        if b < a:
            return 0
        n = 0
        for i in range(self._index_from(a), len(self._entries)):
            e = self._entries[i]
            if e.first > b:
                break
            lo, hi = max(e.first, a), min(e.last, b)
            if e.offset_states is None:
                if e.state != from_state or (e.flags and not pending_too):
                    continue
                if lo == e.first and hi == e.last:
                    self._set_state(e, ARCHIVED)
                    e.flags = 0
                    e.member = 0
                    n += hi - lo + 1
                    continue
                e.split_per_offset()
            offset_states, offset_flags, offset_members = e.offset_states, e.offset_flags, e.offset_members
            for k in range(lo - e.first, hi - e.first + 1):
                if offset_states[k] == from_state and (pending_too or not offset_flags[k]):
                    self._set_offset_state(e, k, ARCHIVED)
                    offset_flags[k] = 0
                    offset_members[k] = 0
                    n += 1
        return n

    def _archive_aborted(self, fetched: Sequence[Sequence], aborted: Sequence[Sequence[int]], runs: list) -> None:
        """read_committed: archive just-acquired records of aborted transactions and control batches,
        and cut them out of the acquired runs (SPEC §4.8)."""
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
                        _add_acquired_run(new_runs, pos, c0 - 1, delivery_count, False)
                    lo, hi = max(c0, pos), min(c1, last)
                    if lo <= hi:
                        self._archive(lo, hi, ACQUIRED)
                    pos = hi + 1
                    if c1 <= last:
                        cj += 1
                else:
                    _add_acquired_run(new_runs, pos, last, delivery_count, False)
                    pos = last + 1
        runs[:] = new_runs

    # ------------------------------------------------------------------ acknowledgement

    def begin_acknowledge(self, member_id: str, batches: Sequence[Sequence], now_ms: int) -> TrackerWrite:
        """Validate and apply acknowledgements all-or-nothing (SPEC §4.4); the changes stay pending.

        Raises `ShareError` (INVALID_REQUEST or INVALID_RECORD_STATE) with nothing changed. Otherwise
        the new states are visible at once, marked in transition, and the returned `TrackerWrite` says
        what to persist; pass its `transition_id` to `complete`. RENEW restarts locks at once and
        persists nothing.
        """
        m = self._member_index.get(member_id, -1) if isinstance(member_id, str) and member_id else -1
        plan = _validate_ack_shape(batches)
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
                    if e.state != ACQUIRED or e.flags or e.member != m:
                        raise ShareError(Errors.INVALID_RECORD_STATE, _not_acquired_message(lo, e.state, e.flags, e.member, m))
                else:
                    offset_states, offset_flags, offset_members = e.offset_states, e.offset_flags, e.offset_members
                    for k in range(lo - e.first, hi - e.first + 1):
                        if offset_states[k] != ACQUIRED or offset_flags[k] or offset_members[k] != m:
                            raise ShareError(
                                Errors.INVALID_RECORD_STATE,
                                _not_acquired_message(e.first + k, offset_states[k], offset_flags[k], offset_members[k], m),
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
                    if t == _RENEW:
                        e.deadline = deadline
                        heapq.heappush(self._heap, (deadline, e.first))
                    else:
                        self._set_state(e, self._ack_target(t, e.delivery_count))
                        e.flags = IN_TRANSITION
                        e.member = 0
                        _add_run(out, lo, hi, e.state, e.delivery_count)
                        _add_range(ranges, lo, hi)
                    i += 1
                    continue
                e.split_per_offset()
                renewed = False
                for k in range(lo - e.first, hi - e.first + 1):
                    tk = t if t >= 0 else types[e.first + k - first]
                    if tk == _RENEW:
                        e.offset_deadlines[k] = deadline
                        renewed = True
                        continue
                    s = self._ack_target(tk, e.offset_delivery_counts[k])
                    self._set_offset_state(e, k, s)
                    e.offset_flags[k] = IN_TRANSITION
                    e.offset_members[k] = 0
                    _add_run(out, e.first + k, e.first + k, s, e.offset_delivery_counts[k])
                    _add_range(ranges, e.first + k, e.first + k)
                if renewed:
                    heapq.heappush(self._heap, (deadline, e.first))
                i += 1
        for r in out:
            writes.append(StateBatch(r[0], r[1], r[2], r[3]))
        return self._pending(m, ranges, writes)

    def _ack_target(self, ack_type: int, delivery_count: int) -> int:
        if ack_type == _ACCEPT:
            return ACKNOWLEDGED
        if ack_type == _RELEASE:
            return ARCHIVED if delivery_count >= self._limit else AVAILABLE
        return ARCHIVED  # REJECT and GAP

    def _pending(self, m: int, ranges: list[tuple[int, int]], writes: list[StateBatch]) -> TrackerWrite:
        if not ranges:
            return TrackerWrite(0, [], self._spso, self._count_terminal_from(self._spso))
        tid = self._next_tid
        self._next_tid += 1
        self._transitions[tid] = (m, ranges)
        start = self._scan_start(ranges)
        return TrackerWrite(tid, writes, start, self._count_terminal_from(start))

    def begin_release(self, member_id: str, now_ms: int) -> TrackerWrite:
        """Release every record `member_id` holds, like a RELEASE acknowledgement (SPEC §4.3).

        The delivery count is kept, so a consumer that keeps crashing on a record cannot loop forever;
        records at the limit, or below the SPSO, are archived. Pending until `complete`.
        """
        m = self._member_index.get(member_id, -1) if isinstance(member_id, str) and member_id else -1
        ranges: list[tuple[int, int]] = []
        out: list[list[int]] = []
        if m > 0:
            spso = self._spso
            for e in self._entries:
                if e.offset_states is None:
                    if e.state != ACQUIRED or e.flags or e.member != m:
                        continue
                    if e.first >= spso or e.delivery_count >= self._limit:
                        self._set_state(e, ARCHIVED if (e.delivery_count >= self._limit or e.last < spso) else AVAILABLE)
                        e.flags = IN_TRANSITION
                        e.member = 0
                        _add_run(out, e.first, e.last, e.state, e.delivery_count)
                        _add_range(ranges, e.first, e.last)
                        continue
                    e.split_per_offset()
                for k in range(e.last - e.first + 1):
                    if e.offset_states[k] != ACQUIRED or e.offset_flags[k] or e.offset_members[k] != m:
                        continue
                    off = e.first + k
                    s = ARCHIVED if (e.offset_delivery_counts[k] >= self._limit or off < spso) else AVAILABLE
                    self._set_offset_state(e, k, s)
                    e.offset_flags[k] = IN_TRANSITION
                    e.offset_members[k] = 0
                    _add_run(out, off, off, s, e.offset_delivery_counts[k])
                    _add_range(ranges, off, off)
        return self._pending(m, ranges, [StateBatch(r[0], r[1], r[2], r[3]) for r in out])

    def complete(self, transition_id: int, committed: bool, now_ms: int) -> None:
        """Commit or roll back a pending transition once its write answered (SPEC §4.6).

        Roll back restores ACQUIRED for the owner, except that a record whose lock expired meanwhile
        becomes AVAILABLE (ARCHIVED at the delivery limit or below the SPSO). Records archived by a log
        start move meanwhile stay archived.
        """
        t = self._transitions.pop(transition_id, None)
        if t is None:
            raise ShareError(Errors.INVALID_REQUEST, f"unknown transition {transition_id}")
        m, ranges = t
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
                            e.member = m
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
                        self._set_offset_state(e, k, ARCHIVED if (e.offset_delivery_counts[k] >= limit or e.first + k < spso) else AVAILABLE)
                        e.offset_members[k] = 0
                    else:
                        self._set_offset_state(e, k, ACQUIRED)
                        e.offset_members[k] = m
                        if earliest < 0 or d < earliest:
                            earliest = d
                if earliest >= 0:
                    heapq.heappush(self._heap, (earliest, e.first))
        self._advance()

    # ------------------------------------------------------------------ locks and the log start

    def expire_locks(self, now_ms: int) -> tuple[int, TrackerWrite]:
        """Expire every lock due at `now_ms` (one phase: states change now, the write follows).

        Returns the number of records expired and what to persist. A lock that falls due while its
        record awaits a write changes nothing now; the rollback, if any, finds it expired.
        Runtime complexity: O(due heap items × log heap + offsets of split entries they name).
        """
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
                    self._set_state(e, ARCHIVED if (e.delivery_count >= limit or e.last < spso) else AVAILABLE)
                    e.member = 0
                    out.append([e.first, e.last, e.state, e.delivery_count])
                    count += e.last - e.first + 1
                    continue
                e.split_per_offset()
            offset_states, offset_flags, offset_deadlines = e.offset_states, e.offset_flags, e.offset_deadlines
            for k in range(e.last - e.first + 1):
                if offset_states[k] == ACQUIRED and not offset_flags[k] and offset_deadlines[k] <= now_ms:
                    s = ARCHIVED if (e.offset_delivery_counts[k] >= limit or e.first + k < spso) else AVAILABLE
                    self._set_offset_state(e, k, s)
                    e.offset_members[k] = 0
                    out.append([e.first + k, e.first + k, s, e.offset_delivery_counts[k]])
                    count += 1
        if not out:
            return 0, TrackerWrite(0, [], self._spso, self._count_terminal_from(self._spso))
        out.sort()
        merged: list[list[int]] = []
        for r in out:
            _add_run(merged, r[0], r[1], r[2], r[3])
        self._advance()
        return count, TrackerWrite(0, [StateBatch(r[0], r[1], r[2], r[3]) for r in merged],
                                   self._spso, self._count_terminal_from(self._spso))

    def update_log_start_offset(self, log_start_offset: int) -> None:
        """Retention moved the log start: AVAILABLE records below it are archived (SPEC §4.9).

        ACQUIRED records stay until acknowledged or expired (then archived). Nothing is persisted now;
        the new SPSO reaches storage with the next write.
        """
        lso = int(log_start_offset)
        if lso <= self._spso:
            return
        self._archive(self._spso, lso - 1, AVAILABLE, pending_too=True)
        self._spso = lso
        if self._speo < lso:
            self._speo = lso
        self._advance()

    # ------------------------------------------------------------------ SPSO advance

    def _scan_start(self, allowed: list[tuple[int, int]] | None) -> int:
        """Where the SPSO lands after the leading run of terminal records (natural gaps skipped).

        Records awaiting a write stop the run, except those inside `allowed` (the ranges of the
        transition whose write is being prepared: once it is durable they are done).
        """
        pos = self._spso
        entries = self._entries
        i = self._index_from(pos)
        ri = 0
        nr = len(allowed) if allowed else 0
        while i < len(entries):
            e = entries[i]
            if e.first > pos:
                hole = self._blocking_hole(pos, e.first)
                if hole >= 0:
                    return hole
                pos = e.first
            if e.offset_states is None:
                if _terminal(e.state):
                    if not e.flags:
                        pos = e.last + 1
                        i += 1
                        continue
                    while ri < nr and allowed[ri][1] < pos:
                        ri += 1
                    if ri < nr and allowed[ri][0] <= pos and allowed[ri][1] >= e.last:
                        pos = e.last + 1
                        i += 1
                        continue
                return pos
            offset_states, offset_flags = e.offset_states, e.offset_flags
            k = pos - e.first
            size = e.last - e.first + 1
            while k < size:
                s = offset_states[k]
                if s != ACKNOWLEDGED and s != ARCHIVED:
                    return e.first + k
                if offset_flags[k]:
                    off = e.first + k
                    while ri < nr and allowed[ri][1] < off:
                        ri += 1
                    if not (ri < nr and allowed[ri][0] <= off):
                        return off
                k += 1
            pos = e.last + 1
            i += 1
        if pos < self._speo:
            hole = self._blocking_hole(pos, self._speo)
            if hole >= 0:
                return hole
        return max(pos, self._speo)

    def _blocking_hole(self, pos: int, end: int) -> int:
        """Where the SPSO must stop inside the hole [pos, end), or -1 when it may skip the hole.

        Natural gaps are skipped. While the persisted-gap window is open, the SPSO stops at a leading
        hole (one that starts at the SPSO: nothing covers it yet) and at the first hole offset at or
        above the window's gap start (it may still be acquired).
        """
        if self._gap_end < 0:
            return -1
        if pos == self._spso:
            return pos
        if self._gap_start < end:
            return max(pos, self._gap_start)
        return -1

    def _advance(self) -> None:
        """Move the SPSO over the leading terminal run and drop wholly terminal leading entries."""
        self._close_gap_window_when_done()
        start = self._scan_start(None)
        if start > self._spso:
            self._spso = start
        spso = self._spso
        drop = 0
        for e in self._entries:
            if e.last >= spso or not _entry_done(e):
                break
            self._terminal_total -= e.last - e.first + 1  # a done entry is terminal throughout
            drop += 1
        if drop:
            del self._entries[:drop]
            del self._firsts[:drop]
        if not self._entries:
            self._speo = max(self._speo, self._spso)
            if not self._transitions:
                self._heap.clear()
        self._close_gap_window_when_done()

    def _close_gap_window_when_done(self) -> None:
        """Close the persisted-gap window once the SPEO moved past the last persisted batch (or the SPSO
        reached it); the holes left then are natural gaps."""
        if self._gap_end >= 0 and (self._speo != self._gap_end or self._spso >= self._gap_end):
            self._gap_end = -1

    # ------------------------------------------------------------------ invariants

    def _check(self) -> None:
        """Assert every invariant of the window; tests call it after each step."""
        assert 0 <= self._spso <= self._speo, (self._spso, self._speo)
        if self._gap_end >= 0:
            assert self._gap_end == self._speo and self._spso < self._gap_end, \
                (self._gap_start, self._gap_end, self._spso, self._speo)
        assert len(self._entries) == len(self._firsts)
        prev_last = -1
        flagged = False
        heap_min: dict[int, int] = {}
        for d, f in self._heap:
            if d < heap_min.get(f, 1 << 62):
                heap_min[f] = d
        terminal_total = 0
        for idx, e in enumerate(self._entries):
            assert self._firsts[idx] == e.first
            assert e.first <= e.last < self._speo, (e.first, e.last, self._speo)
            assert e.first > prev_last, "entries overlap or are unsorted"
            prev_last = e.last
            n = e.last - e.first + 1
            if e.offset_states is None:
                recs = [(e.first, e.state, e.flags, e.delivery_count, e.member, e.deadline)]
            else:
                assert len(e.offset_states) == len(e.offset_flags) == len(e.offset_delivery_counts) == len(e.offset_members) == len(e.offset_deadlines) == n
                recs = [(e.first + k, e.offset_states[k], e.offset_flags[k], e.offset_delivery_counts[k], e.offset_members[k], e.offset_deadlines[k])
                        for k in range(n)]
                assert e.terminal_count == sum(1 for r in recs if _terminal(r[1])), f"entry {e.first}: stale terminal count"
            terminal_total += sum((e.last - e.first + 1) if e.offset_states is None else 1 for r in recs if _terminal(r[1]))
            for off, s, fl, delivery_count, mem, dl in recs:
                assert s in (AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED), s
                assert 0 <= mem < len(self._member_names)
                if s == ACQUIRED:
                    assert mem != 0 and delivery_count >= 1 and not fl, (off, s, mem, delivery_count, fl)
                    assert heap_min.get(e.first, 1 << 62) <= dl, f"acquired offset {off} has no lock timer"
                else:
                    assert mem == 0, (off, s, mem)
                flagged = flagged or bool(fl)
                if s == AVAILABLE:
                    assert off >= self._spso, f"offset {off} below the SPSO is AVAILABLE"
            if e.last < self._spso:
                assert not _entry_done(e) or idx > 0, "a done entry below the SPSO should have been dropped"
        assert terminal_total == self._terminal_total, f"terminal total {self._terminal_total} is stale (actual {terminal_total})"
        # Pending transitions name real members and well-formed ranges; flagged records imply one.
        for m, ranges in self._transitions.values():
            assert 0 < m < len(self._member_names)
            for a, b in ranges:
                assert a <= b
        if flagged:
            assert self._transitions, "records in transition without a pending transition"
        # The SPSO is fully advanced: the record at the SPSO (if any) is not done.
        assert self._scan_start(None) <= self._spso, "SPSO not advanced over a terminal run"


def _entry_done(e: _Entry) -> bool:
    """Every record of `e` is terminal and none awaits a write."""
    if e.offset_states is None:
        return _terminal(e.state) and not e.flags
    return e.terminal_count == len(e.offset_states) and e.offset_flags.find(IN_TRANSITION) < 0


def _add_run(out: list, first: int, last: int, state: int, delivery_count: int) -> None:
    if out:
        r = out[-1]
        if r[1] + 1 == first and r[2] == state and r[3] == delivery_count:
            r[1] = last
            return
    out.append([first, last, state, delivery_count])


def _add_acquired_run(runs: list, first: int, last: int, delivery_count: int, merge: bool = True) -> None:
    if merge and runs:
        r = runs[-1]
        if r[1] + 1 == first and r[2] == delivery_count:
            r[1] = last
            return
    runs.append([first, last, delivery_count])


def _add_range(ranges: list, a: int, b: int) -> None:
    if ranges and ranges[-1][1] + 1 == a:
        ranges[-1] = (ranges[-1][0], b)
    else:
        ranges.append((a, b))


def _not_acquired_message(offset: int, state: int, flags: int, member: int, m: int) -> str:
    if flags:
        return f"offset {offset} is awaiting a previous acknowledgement"
    if state != ACQUIRED:
        return f"offset {offset} is {RecordState(state).name}, not ACQUIRED"
    return f"offset {offset} is acquired by another member"


def _validate_ack_shape(batches: Sequence[Sequence]) -> list[tuple[int, int, tuple]]:
    """The request checks Kafka's broker makes before the leader sees the batches (INVALID_REQUEST)."""
    plan = []
    prev_last = -1
    for ab in batches:
        try:
            first, last, types = ab[0], ab[1], ab[2]
        except (TypeError, IndexError):
            raise ShareError(Errors.INVALID_REQUEST, f"malformed acknowledgement batch {ab!r}") from None
        if not isinstance(first, int) or not isinstance(last, int) or isinstance(first, bool):
            raise ShareError(Errors.INVALID_REQUEST, f"acknowledgement offsets must be integers: {ab!r}")
        if first < 0 or first > last:
            raise ShareError(Errors.INVALID_REQUEST, f"acknowledgement batch first offset {first} > last offset {last}")
        if plan and first <= prev_last:
            raise ShareError(
                Errors.INVALID_REQUEST, f"acknowledgement batches must be ascending and disjoint ({first} <= {prev_last})"
            )
        if isinstance(types, int):
            types = (types,)
        try:
            types = tuple(types)
        except TypeError:
            raise ShareError(Errors.INVALID_REQUEST, f"acknowledge types must be a tuple of ints: {ab!r}") from None
        if not types:
            raise ShareError(Errors.INVALID_REQUEST, f"acknowledgement batch {first}-{last} has no acknowledge types")
        if len(types) != 1 and len(types) != last - first + 1:
            raise ShareError(
                Errors.INVALID_REQUEST,
                f"acknowledgement batch {first}-{last} has {len(types)} types for {last - first + 1} offsets",
            )
        for t in types:
            if not isinstance(t, int) or isinstance(t, bool) or t not in _ACKNOWLEDGE_TYPE_IDS:
                raise ShareError(Errors.INVALID_REQUEST, f"unknown acknowledge type {t!r}")
        plan.append((first, last, tuple(int(t) for t in types)))
        prev_last = last
    return plan
