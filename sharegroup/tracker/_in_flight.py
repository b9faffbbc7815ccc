"""The pure-Python twin of the in-flight tracker: every record between SPSO and SPEO of one share-partition.

Layer 1: no I/O, no clock, no asyncio. Callers pass `now_ms`; changes that must be persisted
come back as `TrackerWrite`s. The Cython twin in `_native/tracker.pyx` implements the same behaviour
with the same names; `sharegroup.tracker` picks one at import time.

Representation. The window is a sorted list of *entries*, one per acquired producer-batch range. An
entry holds one state for its whole range (batch level, O(1) memory) until an operation touches only
part of it; then it switches to per-offset state held in flat arrays (15 bytes an offset: state,
transition flag, delivery count, owner index, lock deadline), never a Python object per record. Lock
deadlines sit in a heap of (deadline_ms, entry first offset), so expiry visits only what is due. A
running count of terminal records keeps the delivery-complete count (sent with every write) off the
window: no operation but `state_batches`, `begin_release` and `_check` walks all entries.

Modules of `sharegroup.tracker` (each private module `_X.py` mirrors `_native/X.pxi` of the Cython twin):
`_in_flight` (this class; `tracker.pyx`), `_in_flight_entry` (state ids, one entry),
`_in_flight_acquisition`, `_in_flight_transitions` (acknowledgement, release, completion, lock expiry),
`_acknowledgement_request` (the request parser), `_in_flight_start_offset` (the SPSO advance),
`_in_flight_invariants` (`_check`) and `_tracker_buffers` (run builders; the `.pxi` also holds the C
helpers). `_tracker_state` is the Protocol the part modules are typed against (no `.pxi`: in Cython the
parts see the cdef class itself). The lock heap of the Cython twin (`lock_heap.pxi`) is `heapq` here.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from typing import Iterable, Sequence

from ..errors import Errors, ShareError
from ._in_flight_acquisition import _acquire
from ._in_flight_entry import (ACCEPT, ACKNOWLEDGED, ACQUIRED, ARCHIVED, ARCHIVING, AVAILABLE, MAX_DELIVERY_COUNT,
                              REJECT, RELEASE, _Entry, terminal)
from ._in_flight_invariants import _check_invariants
from ._in_flight_start_offset import _advance, _scan_start
from ._in_flight_transitions import (_begin_acknowledge, _begin_release, _complete, _complete_archiving,
                                     _expire_locks)
from ._tracker_buffers import add_run
from ..types import AcquiredRecords, RecordState, RecordView, StateBatch, TrackerWrite

__all__ = ["InFlightTracker"]


class InFlightTracker:
    """In-flight records of one share-partition: acquisition, acknowledgement, locks, SPSO/SPEO.

    Offsets: `start_offset` (SPSO) is the lowest offset not known to be terminal; `end_offset` (SPEO)
    is exclusive, one past the last in-flight offset. Runtime complexity of acquire, acknowledge,
    complete and expiry: O(log entries + entries touched + offsets of split entries touched), plus a
    list insert when a range lands in a hole; whole producer batches move in O(1). `begin_release` and
    `state_batches` walk the window; `next_fetch_offset` walks from where its last walk ended (amortized
    O(1) while nothing below becomes AVAILABLE again).
    """

    def __init__(
        self,
        start_offset: int = 0,
        *,
        record_lock_duration_ms: int = 30_000,
        delivery_count_limit: int = 5,
        partition_max_record_locks: int = 2_000,
        record_limit_mode: bool = False,
        dead_letter_queue: bool = False,
    ) -> None:
        if start_offset < 0:
            raise ValueError("start_offset must be >= 0")
        if record_lock_duration_ms <= 0:
            raise ValueError("record_lock_duration_ms must be > 0")
        if not 1 <= delivery_count_limit <= MAX_DELIVERY_COUNT - 1:
            raise ValueError("delivery_count_limit out of range")
        if partition_max_record_locks <= 0:
            raise ValueError("partition_max_record_locks must be > 0")
        self._lock_ms = int(record_lock_duration_ms)
        self._limit = int(delivery_count_limit)
        self._max_locks = int(partition_max_record_locks)
        self._record_limit = bool(record_limit_mode)
        # Where REJECT and the delivery count limit send a record: ARCHIVING while the group has a
        # dead-letter queue topic (KIP-1191), else ARCHIVED. A setting the leader may change at any time.
        self._dlq_state = ARCHIVING if dead_letter_queue else ARCHIVED
        # Poison-record isolation: from this delivery count on, batches shrink.
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
        # No AVAILABLE record outside a transition and no acquirable hole lies in [SPSO, _fetch_scan_from):
        # `next_fetch_offset` starts its walk there. Set by the walk; lowered by whatever makes a record
        # AVAILABLE again (commit or rollback, lock expiry, a record-limit range).
        self._fetch_scan_from = 0

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

    @property
    def dead_letter_queue(self) -> bool:
        """Whether REJECT and the delivery count limit move records to ARCHIVING (the group has a DLQ topic).

        Read at each transition, as Kafka evaluates the gate per transition: records already ARCHIVING
        stay so until `complete_archiving`, whatever the setting becomes.
        """
        return self._dlq_state == ARCHIVING

    @dead_letter_queue.setter
    def dead_letter_queue(self, enabled: bool) -> None:
        self._dlq_state = ARCHIVING if enabled else ARCHIVED

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
        # No AVAILABLE record outside a transition and no acquirable hole lies in [SPSO, _fetch_scan_from):
        # `next_fetch_offset` starts its walk there. Set by the walk; lowered by whatever makes a record
        # AVAILABLE again (commit or rollback, lock expiry, a record-limit range).
        self._fetch_scan_from = 0

    def load(self, start_offset: int, state_batches: Iterable[Sequence[int]]) -> None:
        """Rebuild the window from persisted state; all-or-nothing.

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
            if state not in (AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVING, ARCHIVED) or delivery_count < 0:
                raise ShareError(Errors.UNKNOWN_SERVER_ERROR, f"persisted state batch {b!r} has a bad state or count")
            prev_last = last
        self.reset(start_offset)
        pos = start_offset
        first_hole = -1
        for first, last, state, delivery_count in batches:
            if first > pos and first_hole < 0:
                first_hole = pos
            # ACQUIRED is never persisted; if it ever is, the lock is gone after a failover. ARCHIVING
            # stays ARCHIVING: the new leader writes its dead-letter record again (`complete_archiving`).
            state = AVAILABLE if state == ACQUIRED else state
            self._append_entry(_Entry(first, last, state, min(delivery_count, MAX_DELIVERY_COUNT), 0, 0))
            if terminal(state):
                self._terminal_total += last - first + 1
            pos = last + 1
        self._speo = pos
        if first_hole >= 0:
            self._gap_start = first_hole
            self._gap_end = pos
        _advance(self)

    def _set_state(self, e: _Entry, state: int) -> None:
        """Set the state of batch-level entry `e`, keeping the terminal total exact."""
        if terminal(state) != terminal(e.state):
            self._terminal_total += (e.last - e.first + 1) if terminal(state) else -(e.last - e.first + 1)
        e.state = state

    def _set_offset_state(self, e: _Entry, k: int, state: int) -> None:
        """Set the state of offset e.first + k of split entry `e`, keeping both terminal counts exact."""
        change = terminal(state) - terminal(e.offset_states[k])
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
        owner = self._member_index.get(member_id)
        if owner is None:
            owner = len(self._member_names)
            self._member_index[member_id] = owner
            self._member_names.append(member_id)
        return owner

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
        """The first AVAILABLE offset not awaiting a write or acquirable persisted-gap hole, else the SPEO.

        Runtime complexity: O(entries walked), amortized O(1) while the answer does not move back: the
        walk starts where the last one ended unless a record became AVAILABLE below it since.
        """
        offset = self._next_fetch_offset_from(max(self._spso, self._fetch_scan_from))
        self._fetch_scan_from = offset
        return offset

    def _next_fetch_offset_from(self, start: int) -> int:
        """`next_fetch_offset`, walking from `start` (>= SPSO) on."""
        # The next acquirable hole of the persisted-gap window (none when the window is closed).
        hole = max(start, self._gap_start) if self._gap_end >= 0 else self._speo
        for i in range(self._index_from(start), len(self._entries)):
            e = self._entries[i]
            if e.first > hole:
                return hole
            if e.last >= hole:
                hole = e.last + 1
            if e.offset_states is None:
                if e.state == AVAILABLE and not e.flags:
                    return max(e.first, start)
                continue
            k = max(start - e.first, 0)
            offset_states, offset_flags = e.offset_states, e.offset_flags
            while True:
                k = offset_states.find(AVAILABLE, k)
                if k < 0:
                    break
                if not offset_flags[k]:
                    return e.first + k
                k += 1
        return min(hole, self._speo)

    def _records_available_from(self, offset: int) -> None:
        """Records at or above `offset` may have become AVAILABLE: the next walk must look there."""
        if offset < self._fetch_scan_from:
            self._fetch_scan_from = offset

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
        return RecordView(RecordState(e.offset_states[k]), e.offset_delivery_counts[k],
                          self._member_names[e.offset_members[k]])

    def state_batches(self) -> list[StateBatch]:
        """The window [SPSO, SPEO) as minimal runs of (state, delivery count); ACQUIRED shows as 1."""
        out: list[list[int]] = []
        spso = self._spso
        for i in range(self._index_from(spso), len(self._entries)):
            e = self._entries[i]
            if e.offset_states is None:
                add_run(out, max(e.first, spso), e.last, e.state, e.delivery_count)
            else:
                for k in range(max(spso - e.first, 0), e.last - e.first + 1):
                    add_run(out, e.first + k, e.first + k, e.offset_states[k], e.offset_delivery_counts[k])
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
                if terminal(e.state):
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
        return _acquire(self, member_id, fetched, max_records, now_ms, fetch_offset, batch_size, aborted_transactions,
                        read_committed)

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

    # ------------------------------------------------------------------ acknowledgement

    def begin_acknowledge(self, member_id: str, batches: Sequence[Sequence], now_ms: int) -> TrackerWrite:
        """Validate and apply acknowledgements all-or-nothing; the changes stay pending.

        Raises `ShareError` (INVALID_REQUEST or INVALID_RECORD_STATE) with nothing changed. Otherwise
        the new states are visible at once, marked in transition, and the returned `TrackerWrite` says
        what to persist; pass its `transition_id` to `complete`. RENEW restarts locks at once and
        persists nothing.
        """
        return _begin_acknowledge(self, member_id, batches, now_ms)

    def _ack_target(self, ack_type: int, delivery_count: int) -> int:
        if ack_type == ACCEPT:
            return ACKNOWLEDGED
        if ack_type == RELEASE:
            return self._dlq_state if delivery_count >= self._limit else AVAILABLE
        if ack_type == REJECT:
            return self._dlq_state
        return ARCHIVED  # GAP: no record, nothing to dead-letter

    def _pending(self, owner: int, ranges: list[tuple[int, int]], writes: list[StateBatch]) -> TrackerWrite:
        if not ranges:
            return TrackerWrite(0, [], self._spso, self._count_terminal_from(self._spso))
        tid = self._next_tid
        self._next_tid += 1
        self._transitions[tid] = (owner, ranges)
        start = _scan_start(self, ranges)
        return TrackerWrite(tid, writes, start, self._count_terminal_from(start))

    def begin_release(self, member_id: str, now_ms: int) -> TrackerWrite:
        """Release every record `member_id` holds, like a RELEASE acknowledgement.

        The delivery count is kept, so a consumer that keeps crashing on a record cannot loop forever;
        records at the limit are archived (ARCHIVING with a dead-letter queue), records below the SPSO
        are archived. Pending until `complete`.
        """
        return _begin_release(self, member_id, now_ms)

    def complete(self, transition_id: int, committed: bool, now_ms: int) -> None:
        """Commit or roll back a pending transition once its write answered.

        Roll back restores ACQUIRED for the owner, except that a record whose lock expired meanwhile
        becomes AVAILABLE (ARCHIVED at the delivery limit or below the SPSO, never ARCHIVING: as in
        Kafka, no dead-letter record for a failed write). Records archived by a log start move meanwhile
        stay archived.
        """
        return _complete(self, transition_id, committed, now_ms)

    def complete_archiving(self, first_offset: int, last_offset: int) -> TrackerWrite:
        """The dead-letter write of [first_offset, last_offset] is done (or failed): ARCHIVING → ARCHIVED.

        One phase, like lock expiry: the states change now, the returned write follows. Offsets that are
        not ARCHIVING, or still await the write that made them ARCHIVING, are left alone. Raises
        `ShareError` (INVALID_REQUEST) for a negative or reversed range, with nothing changed.
        Runtime complexity: O(log entries + entries touched + offsets of split entries touched).
        """
        return _complete_archiving(self, first_offset, last_offset)

    # ------------------------------------------------------------------ locks and the log start

    def expire_locks(self, now_ms: int) -> tuple[int, TrackerWrite]:
        """Expire every lock due at `now_ms` (one phase: states change now, the write follows).

        Returns the number of records expired and what to persist; a record at the delivery count limit
        is archived (ARCHIVING with a dead-letter queue). A lock that falls due while its
        record awaits a write changes nothing now; the rollback, if any, finds it expired.
        Runtime complexity: O(due heap items × log heap + offsets of split entries they name).
        """
        return _expire_locks(self, now_ms)

    def update_log_start_offset(self, log_start_offset: int) -> None:
        """Retention moved the log start: AVAILABLE records below it are archived.

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
        _advance(self)

    # ------------------------------------------------------------------ invariants

    def _check(self) -> None:
        """Assert every invariant of the window; tests call it after each step."""
        return _check_invariants(self)


