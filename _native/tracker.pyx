# cython: language_level=3
"""The Cython twin of the in-flight tracker (`sharegroup.tracker._in_flight.InFlightTracker`).

Layer 1: no I/O, no clock, no asyncio. Same class name, constructor, methods, return values,
exceptions, Kafka error codes and messages as the pure twin; only the representation differs:

- an entry is a `cdef class` with C fields (int64 first/last/deadline, int32 owner, uint8
  state/flags/delivery count); a whole producer batch costs one small object;
- a split entry holds per-offset state in one PyMem block of 15 bytes an offset (int64 deadline,
  int32 owner, uint8 state, uint8 transition flag, uint8 delivery count), freed with the entry;
- the entries stay a Python list, searched by a typed binary search over their `first` field;
- lock deadlines sit in a C binary heap of {deadline_ms, first} with hand-written sift up/down,
  holding exactly the items the pure twin's `heapq` holds, so `next_lock_deadline_ms` agrees;
- runs, ranges and plans built during a call live in small stack buffers that spill to the heap.

Python objects are created only for returned values. Validation messages are formatted from the caller's
own objects, exactly as the pure twin formats them, so both twins fail with the same text.

Files (one extension module; the `.pxi` files are included textually, and each mirrors a module of the
pure twin): this file holds the class; `tracker_buffers.pxi` the C helpers (namedtuple builders, growable
run and range buffers, int64 helpers); `lock_heap.pxi` the lock heap; `in_flight_entry.pxi` entries
and pending transitions; `acknowledgement_request.pxi` the request parser; `in_flight_acquisition.pxi`
and `in_flight_transitions.pxi` the operations and `in_flight_start_offset.pxi` the SPSO advance, as
functions taking the tracker (a cdef class cannot span files); `in_flight_invariants.pxi` the `_check`
invariants.
"""

cimport cython
from cpython.dict cimport PyDict_GetItem
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_Check, PyLong_CheckExact
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.object cimport PyTypeObject
from cpython.ref cimport Py_DECREF, Py_INCREF, PyObject
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from libc.stdint cimport INT64_MAX, INT64_MIN, int32_t, int64_t, uint8_t
from libc.stdlib cimport qsort
from libc.string cimport memcpy, memset

from sharegroup.errors import Errors, ShareError
from sharegroup.types import (
    AcknowledgementBatch,
    AcquiredRecords,
    FetchedBatch,
    RecordState,
    RecordView,
    StateBatch,
    TrackerWrite,
)

__all__ = ["InFlightTracker"]

cdef enum:
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVING = 3  # not terminal: it holds the SPSO until its dead-letter write is done (KIP-1191)
    ARCHIVED = 4
    IN_TRANSITION = 1  # flag bit: the record's visible state awaits a persister answer (two-phase)
    MAX_DELIVERY_COUNT = 255  # delivery counts are bytes; Kafka's limit is at most 10 (25 for the broker maximum)
    T_GAP = 0
    T_ACCEPT = 1
    T_RELEASE = 2
    T_REJECT = 3
    T_RENEW = 4
    BYTES_PER_OFFSET = 15  # 8 deadline + 4 owner + 1 state + 1 flags + 1 delivery count

cdef int64_t NO_CAP = (<int64_t>1) << 62

cdef object _INVALID_REQUEST = Errors.INVALID_REQUEST
cdef object _INVALID_RECORD_STATE = Errors.INVALID_RECORD_STATE
cdef object _UNKNOWN_SERVER_ERROR = Errors.UNKNOWN_SERVER_ERROR
cdef tuple _RECORD_STATES = (RecordState.AVAILABLE, RecordState.ACQUIRED, RecordState.ACKNOWLEDGED,
                             RecordState.ARCHIVING, RecordState.ARCHIVED)
# Module-level references keep the types alive for the raw type pointers below.
cdef object _AcquiredRecords = AcquiredRecords
cdef object _StateBatch = StateBatch
cdef object _TrackerWrite = TrackerWrite
cdef object _RecordView = RecordView
cdef object _FetchedBatch = FetchedBatch
cdef object _AcknowledgementBatch = AcknowledgementBatch

# `_new_namedtuple3` / `_new_namedtuple4` build these namedtuples the way `tuple.__new__` does, without their
# Python-level __new__. That is only the same thing while they are plain namedtuples: tuple layout, no extra slots,
# the field count below. Refuse to load otherwise rather than build objects their class would not build.
for _cls, _nfields in ((AcquiredRecords, 3), (StateBatch, 4), (TrackerWrite, 4), (RecordView, 3)):
    if not (issubclass(_cls, tuple) and _cls.__basicsize__ == tuple.__basicsize__
            and _cls.__itemsize__ == tuple.__itemsize__ and len(getattr(_cls, "_fields", ())) == _nfields):
        raise ImportError(f"sharegroup.tracker._native expects {_cls.__name__} to be a plain {_nfields}-field "
                          "namedtuple; rebuild the native tracker for the changed sharegroup.types")
del _cls, _nfields


def record_state_ids():
    """The record state ids compiled into this module, in RecordState order (tests compare the two)."""
    return (AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVING, ARCHIVED)


def acknowledge_type_ids():
    """The acknowledge type ids compiled into this module, in AcknowledgeType order."""
    return (T_GAP, T_ACCEPT, T_RELEASE, T_REJECT, T_RENEW)


cdef inline bint _terminal(int s) noexcept nogil:
    return s == ACKNOWLEDGED or s == ARCHIVED


include "tracker_buffers.pxi"
include "lock_heap.pxi"
include "in_flight_entry.pxi"


@cython.final
cdef class InFlightTracker:
    """In-flight records of one share-partition: acquisition, acknowledgement, locks, SPSO/SPEO.

    Offsets: `start_offset` (SPSO) is the lowest offset not known to be terminal; `end_offset` (SPEO)
    is exclusive, one past the last in-flight offset. Runtime complexity of acquire, acknowledge,
    complete and expiry: O(log entries + entries touched + offsets of split entries touched), plus a
    list insert when a range lands in a hole; whole producer batches move in O(1). `begin_release` and
    `state_batches` walk the window; `next_fetch_offset` walks from where its last walk ended (amortized
    O(1) while nothing below becomes AVAILABLE again).
    """

    cdef int64_t _lock_ms
    cdef int _limit
    cdef int _dlq_state  # where REJECT and the delivery limit send a record: ARCHIVING with a DLQ topic, else ARCHIVED
    cdef int64_t _max_locks
    cdef bint _record_limit
    cdef int _throttle
    cdef list _entries
    cdef LockHeap _locks  # one item per lock started (stale items are skipped when popped)
    cdef dict _transitions
    cdef int64_t _next_tid
    cdef dict _member_index
    cdef list _member_names
    cdef int64_t _spso
    cdef int64_t _speo
    cdef int64_t _terminal_total  # terminal offsets in all entries (below the SPSO too): O(1) counts from the SPSO
    # The persisted-gap window (see `load`): holes in [max(SPSO, _gap_start), _gap_end) are acquirable
    # while _gap_end >= 0, which lasts until the SPEO moves past _gap_end (the SPEO at load).
    cdef int64_t _gap_start
    cdef int64_t _gap_end
    # No AVAILABLE record outside a transition and no acquirable hole lies in [SPSO, _fetch_scan_from):
    # `next_fetch_offset` starts its walk there. Set by the walk; lowered by whatever makes a record
    # AVAILABLE again (commit or rollback, lock expiry, a record-limit range).
    cdef int64_t _fetch_scan_from
    cdef object __weakref__

    def __cinit__(self, *args, **kwargs):
        lock_heap_init(&self._locks)
        self._entries = []
        self._transitions = {}
        self._member_index = {"": 0}
        self._member_names = [""]
        self._next_tid = 1

    def __dealloc__(self):
        lock_heap_free(&self._locks)

    def __init__(
        self,
        start_offset=0,
        *,
        record_lock_duration_ms=30_000,
        delivery_count_limit=5,
        partition_max_record_locks=2_000,
        record_limit_mode=False,
        dead_letter_queue=False,
    ):
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
        self._max_locks = _clamp_i64(int(partition_max_record_locks))
        self._record_limit = bool(record_limit_mode)
        self._dlq_state = ARCHIVING if dead_letter_queue else ARCHIVED
        # Poison-record isolation: from this delivery count on, batches shrink.
        self._throttle = max(2, (self._limit + 1) // 2)
        self._entries = []
        self._locks.n = 0
        self._transitions = {}
        self._next_tid = 1
        self._member_index = {"": 0}
        self._member_names = [""]
        self._spso = int(start_offset)
        self._speo = self._spso
        self._terminal_total = 0
        self._gap_start = 0
        self._gap_end = -1
        self._fetch_scan_from = 0

    # ------------------------------------------------------------------ properties

    @property
    def start_offset(self):
        return self._spso

    @property
    def end_offset(self):
        return self._speo

    @property
    def in_flight_count(self):
        return self._speo - self._spso

    @property
    def delivery_complete_count(self):
        """Terminal records at or above the SPSO (KIP-1226), counting those awaiting a write."""
        return self._count_terminal_from(self._spso)

    @property
    def pending_transitions(self):
        return len(self._transitions)

    @property
    def record_lock_duration_ms(self):
        return self._lock_ms

    @property
    def delivery_count_limit(self):
        return self._limit

    @property
    def dead_letter_queue(self):
        """Whether REJECT and the delivery count limit move records to ARCHIVING (the group has a DLQ topic).

        Read at each transition, as Kafka evaluates the gate per transition: records already ARCHIVING
        stay so until `complete_archiving`, whatever the setting becomes.
        """
        return self._dlq_state == ARCHIVING

    @dead_letter_queue.setter
    def dead_letter_queue(self, enabled):
        self._dlq_state = ARCHIVING if enabled else ARCHIVED

    def next_lock_deadline_ms(self):
        """The earliest lock deadline that may be due (possibly stale), or -1 when no lock is held."""
        return self._locks.items[0].deadline if self._locks.n else -1

    # ------------------------------------------------------------------ the lock heap (min-heap on (deadline, first))

    # ------------------------------------------------------------------ loading

    def reset(self, start_offset):
        """Forget everything: an empty window at `start_offset` (pending transitions are dropped)."""
        if start_offset < 0:
            raise ShareError(_INVALID_REQUEST, f"start offset {start_offset} is negative")
        cdef int64_t so = int(start_offset)
        self._entries = []
        self._locks.n = 0
        self._transitions = {}
        self._spso = so
        self._speo = so
        self._terminal_total = 0
        self._gap_start = 0
        self._gap_end = -1
        self._fetch_scan_from = 0

    @cython.boundscheck(True)  # indexes caller-supplied sequences: IndexError, never a wild read
    def load(self, start_offset, state_batches):
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
                raise ShareError(_UNKNOWN_SERVER_ERROR, f"malformed persisted state batch {b!r}")
            first, last, state, delivery_count = b
            if first < start_offset or last < first or first <= prev_last:
                raise ShareError(
                    _UNKNOWN_SERVER_ERROR,
                    f"persisted state batch {b!r} is below the start offset {start_offset} or out of order",
                )
            if state not in (AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVING, ARCHIVED) or delivery_count < 0:
                raise ShareError(_UNKNOWN_SERVER_ERROR, f"persisted state batch {b!r} has a bad state or count")
            prev_last = last
        self.reset(start_offset)
        cdef int64_t pos = self._spso
        cdef int64_t f, l, first_hole = -1
        cdef int s
        cdef list entries = self._entries
        for first, last, state, delivery_count in batches:
            f = first
            l = last
            if f > pos and first_hole < 0:
                first_hole = pos
            # ACQUIRED is never persisted; if it ever is, the lock is gone after a failover. ARCHIVING
            # stays ARCHIVING: the new leader writes its dead-letter record again (`complete_archiving`).
            s = AVAILABLE if state == ACQUIRED else state
            entries.append(_new_entry(f, l, s, min(delivery_count, MAX_DELIVERY_COUNT), 0, 0))
            if _terminal(s):
                self._terminal_total += l - f + 1
            pos = l + 1
        self._speo = pos
        if first_hole >= 0:
            self._gap_start = first_hole
            self._gap_end = pos
        _advance(self)

    cdef inline void _set_state(self, _Entry e, int s) noexcept:
        """Set the state of batch-level entry `e`, keeping the terminal total exact."""
        if _terminal(s) != _terminal(e.state):
            if _terminal(s):
                self._terminal_total += e.last - e.first + 1
            else:
                self._terminal_total -= e.last - e.first + 1
        e.state = <uint8_t>s

    cdef inline void _set_offset_state(self, _Entry e, Py_ssize_t k, int s) noexcept:
        """Set the state of offset e.first + k of split entry `e`, keeping both terminal counts exact."""
        cdef Py_ssize_t d = <Py_ssize_t>_terminal(s) - <Py_ssize_t>_terminal(e.offset_states[k])
        e.terminal_count += d
        self._terminal_total += d
        e.offset_states[k] = <uint8_t>s

    cdef int32_t _member(self, member_id) except -1:
        cdef PyObject *p = PyDict_GetItem(self._member_index, member_id)
        cdef int32_t owner
        if p != NULL:
            return <int32_t>(<object>p)
        owner = <int32_t>len(self._member_names)
        self._member_index[member_id] = owner
        self._member_names.append(member_id)
        return owner

    cdef inline Py_ssize_t _bisect_right(self, int64_t offset) noexcept:
        """Number of entries whose first offset is <= `offset`. Runtime complexity: O(log entries)."""
        cdef list entries = self._entries
        cdef Py_ssize_t lo = 0
        cdef Py_ssize_t hi = PyList_GET_SIZE(entries)
        cdef Py_ssize_t mid
        while lo < hi:
            mid = (lo + hi) >> 1
            if offset < (<_Entry>PyList_GET_ITEM(entries, mid)).first:
                hi = mid
            else:
                lo = mid + 1
        return lo

    cdef inline Py_ssize_t _index_from(self, int64_t offset) noexcept:
        """Index of the first entry whose last offset is >= `offset`."""
        cdef Py_ssize_t i = self._bisect_right(offset) - 1
        if i < 0:
            return 0
        if (<_Entry>PyList_GET_ITEM(self._entries, i)).last < offset:
            return i + 1
        return i

    # ------------------------------------------------------------------ queries

    def next_fetch_offset(self):
        """The first AVAILABLE offset not awaiting a write or acquirable persisted-gap hole, else the SPEO.

        Runtime complexity: O(entries walked), amortized O(1) while the answer does not move back: the
        walk starts where the last one ended unless a record became AVAILABLE below it since.
        """
        cdef int64_t offset = self._next_fetch_offset_from(max(self._spso, self._fetch_scan_from))
        self._fetch_scan_from = offset
        return offset

    cdef int64_t _next_fetch_offset_from(self, int64_t start) noexcept:
        """`next_fetch_offset`, walking from `start` (>= SPSO) on."""
        # The next acquirable hole of the persisted-gap window (none when the window is closed).
        cdef int64_t hole = max(start, self._gap_start) if self._gap_end >= 0 else self._speo
        cdef list entries = self._entries
        cdef Py_ssize_t i, k, n
        cdef _Entry e
        for i in range(self._index_from(start), PyList_GET_SIZE(entries)):
            e = <_Entry>PyList_GET_ITEM(entries, i)
            if e.first > hole:
                return hole
            if e.last >= hole:
                hole = e.last + 1
            if e.offset_states == NULL:
                if e.state == AVAILABLE and not e.flags:
                    return max(e.first, start)
                continue
            k = <Py_ssize_t>max(start - e.first, 0)
            n = <Py_ssize_t>(e.last - e.first + 1)
            while k < n:
                if e.offset_states[k] == AVAILABLE and not e.offset_flags[k]:
                    return e.first + k
                k += 1
        return min(hole, self._speo)

    cdef inline void _records_available_from(self, int64_t offset) noexcept:
        """Records at or above `offset` may have become AVAILABLE: the next walk must look there."""
        if offset < self._fetch_scan_from:
            self._fetch_scan_from = offset

    @cython.boundscheck(True)  # indexes caller-supplied sequences: IndexError, never a wild read
    def record_state(self, offset):
        """State, delivery count and owner of `offset`; None outside the window or in a hole."""
        cdef int overflow = 0
        cdef int64_t off
        cdef Py_ssize_t i, k
        cdef _Entry e
        if PyLong_Check(offset):
            off = PyLong_AsLongLongAndOverflow(offset, &overflow)
            if overflow:
                return None
        else:
            off = offset
        if off < self._spso or off >= self._speo:
            return None
        i = self._bisect_right(off) - 1
        if i < 0:
            return None
        e = <_Entry>PyList_GET_ITEM(self._entries, i)
        if e.last < off:
            return None
        if e.offset_states == NULL:
            return _new_namedtuple3(_TP_RECORD_VIEW, _RECORD_STATES[e.state], e.delivery_count,
                                    self._member_names[e.member], False)
        k = <Py_ssize_t>(off - e.first)
        return _new_namedtuple3(_TP_RECORD_VIEW, _RECORD_STATES[e.offset_states[k]], e.offset_delivery_counts[k],
                                self._member_names[e.offset_members[k]], False)

    def state_batches(self):
        """The window [SPSO, SPEO) as minimal runs of (state, delivery count); ACQUIRED shows as 1."""
        cdef Vec out
        cdef int64_t spso = self._spso
        cdef list entries = self._entries
        cdef Py_ssize_t i, k, n
        cdef _Entry e
        vec_init(&out, sizeof(Run))
        try:
            for i in range(self._index_from(spso), PyList_GET_SIZE(entries)):
                e = <_Entry>PyList_GET_ITEM(entries, i)
                if e.offset_states == NULL:
                    add_run(&out, max(e.first, spso), e.last, e.state, e.delivery_count)
                else:
                    n = <Py_ssize_t>(e.last - e.first + 1)
                    for k in range(<Py_ssize_t>max(spso - e.first, 0), n):
                        add_run(&out, e.first + k, e.first + k, e.offset_states[k], e.offset_delivery_counts[k])
            return _state_batch_list(&out)
        finally:
            vec_free(&out)

    cdef int64_t _count_terminal_from(self, int64_t start) noexcept:
        # The total minus what lies below `start`: O(entries below start), which is almost always 0 or 1
        # (wholly terminal entries below the SPSO are dropped), however long the window is.
        cdef int64_t total = self._terminal_total, end
        cdef list entries = self._entries
        cdef Py_ssize_t i
        cdef _Entry e
        for i in range(PyList_GET_SIZE(entries)):
            e = <_Entry>PyList_GET_ITEM(entries, i)
            if e.first >= start:
                break
            end = min(e.last, start - 1)
            if e.offset_states == NULL:
                if _terminal(e.state):
                    total -= end - e.first + 1
            else:
                total -= e.terminal_count - e.terminal_from(<Py_ssize_t>(end - e.first + 1))
        return total

    # ------------------------------------------------------------------ acquisition

    def acquire(
        self,
        member_id,
        fetched,
        max_records,
        now_ms,
        fetch_offset=-1,
        batch_size=0,
        aborted_transactions=(),
        read_committed=False,
    ):
        """Acquire records of `fetched` producer-batch headers for `member_id`.

        Cached AVAILABLE records are re-acquired; offsets past SPEO are acquired as new entries at
        producer-batch granularity. `max_records` and the in-flight limit are soft (rounded up to the end
        of a producer batch) unless the tracker is in record-limit mode. `batch_size` > 0 cuts new
        ranges at producer-batch boundaries. `fetch_offset` >= 0 says where the log read started:
        AVAILABLE records between it and the first fetched batch no longer exist (compaction) and are
        archived. Nothing is persisted: ACQUIRED is never written.
        Runtime complexity: O(fetched batches + entries touched + offsets of split entries touched).
        """
        return _acquire(self, member_id, fetched, max_records, now_ms, fetch_offset, batch_size, aborted_transactions,
                        read_committed)




    # ------------------------------------------------------------------ acknowledgement

    def begin_acknowledge(self, member_id, batches, now_ms):
        """Validate and apply acknowledgements all-or-nothing; the changes stay pending.

        Raises `ShareError` (INVALID_REQUEST or INVALID_RECORD_STATE) with nothing changed. Otherwise
        the new states are visible at once, marked in transition, and the returned `TrackerWrite` says
        what to persist; pass its `transition_id` to `complete`. RENEW restarts locks at once and
        persists nothing.
        Runtime complexity: O(batches × log entries + entries touched + offsets of split entries touched).
        """
        return _begin_acknowledge(self, member_id, batches, now_ms)

    cdef inline int _ack_target(self, int ack_type, int delivery_count) noexcept:
        if ack_type == T_ACCEPT:
            return ACKNOWLEDGED
        if ack_type == T_RELEASE:
            return self._dlq_state if delivery_count >= self._limit else AVAILABLE
        if ack_type == T_REJECT:
            return self._dlq_state
        return ARCHIVED  # GAP: no record, nothing to dead-letter

    cdef object _pending(self, int32_t owner, Vec *ranges, list writes):
        cdef _Transition tr
        cdef int64_t tid, start
        if ranges.n == 0:
            return _new_namedtuple4(_TP_TRACKER_WRITE, 0, [], self._spso, self._count_terminal_from(self._spso), False)
        tr = _Transition.__new__(_Transition)
        tr.owner = owner
        if ranges.n == 1:
            tr.one = (<Range *>ranges.data)[0]
            tr.ranges = &tr.one
        else:
            tr.ranges = <Range *>PyMem_Malloc(ranges.n * sizeof(Range))
            if tr.ranges == NULL:
                raise MemoryError()
            memcpy(tr.ranges, ranges.data, ranges.n * sizeof(Range))
        tr.n = ranges.n
        tid = self._next_tid
        self._next_tid += 1
        tid_o = tid
        self._transitions[tid_o] = tr
        start = _scan_start(self, tr.ranges, tr.n)
        return _new_namedtuple4(_TP_TRACKER_WRITE, tid_o, writes, start, self._count_terminal_from(start), False)

    def begin_release(self, member_id, now_ms):
        """Release every record `member_id` holds, like a RELEASE acknowledgement.

        The delivery count is kept, so a consumer that keeps crashing on a record cannot loop forever;
        records at the limit are archived (ARCHIVING with a dead-letter queue), records below the SPSO
        are archived. Pending until `complete`.
        Runtime complexity: O(entries + offsets of split entries).
        """
        return _begin_release(self, member_id, now_ms)

    def complete(self, transition_id, committed, now_ms):
        """Commit or roll back a pending transition once its write answered.

        Roll back restores ACQUIRED for the owner, except that a record whose lock expired meanwhile
        becomes AVAILABLE (ARCHIVED at the delivery limit or below the SPSO, never ARCHIVING: as in
        Kafka, no dead-letter record for a failed write). Records archived by a log start move meanwhile
        stay archived.
        """
        return _complete(self, transition_id, committed, now_ms)

    # ------------------------------------------------------------------ locks and the log start

    def expire_locks(self, now_ms):
        """Expire every lock due at `now_ms` (one phase: states change now, the write follows).

        Returns the number of records expired and what to persist; a record at the delivery count limit
        is archived (ARCHIVING with a dead-letter queue). A lock that falls due while its
        record awaits a write changes nothing now; the rollback, if any, finds it expired.
        Runtime complexity: O(due heap items × log heap + offsets of split entries they name).
        """
        return _expire_locks(self, now_ms)

    def complete_archiving(self, first_offset, last_offset):
        """The dead-letter write of [first_offset, last_offset] is done (or failed): ARCHIVING → ARCHIVED.

        One phase, like lock expiry: the states change now, the returned write follows. Offsets that are
        not ARCHIVING, or still await the write that made them ARCHIVING, are left alone. Raises
        `ShareError` (INVALID_REQUEST) for a negative or reversed range, with nothing changed.
        Runtime complexity: O(log entries + entries touched + offsets of split entries touched).
        """
        return _complete_archiving(self, first_offset, last_offset)

    cdef int64_t _archive(self, int64_t a, int64_t b, int from_state, bint pending_too) except -1:
        """Archive the records in [a, b] whose state is `from_state`; returns how many.

        Records awaiting a write are left alone unless `pending_too`: a log start move archives them
        too and takes them out of their transition, since the log no longer has them and no rollback
        may bring them back. Used for compaction, log start moves and aborted transactions.
        """
        cdef int64_t count = 0, lo, hi
        cdef Py_ssize_t i, k
        cdef list entries = self._entries
        cdef _Entry e
        if b < a:
            return 0
        for i in range(self._index_from(a), PyList_GET_SIZE(entries)):
            e = <_Entry>PyList_GET_ITEM(entries, i)
            if e.first > b:
                break
            lo = max(e.first, a)
            hi = min(e.last, b)
            if e.offset_states == NULL:
                if e.state != from_state or (e.flags and not pending_too):
                    continue
                if lo == e.first and hi == e.last:
                    self._set_state(e, ARCHIVED)
                    e.flags = 0
                    e.member = 0
                    count += hi - lo + 1
                    continue
                e.split_per_offset()
            for k in range(<Py_ssize_t>(lo - e.first), <Py_ssize_t>(hi - e.first + 1)):
                if e.offset_states[k] == from_state and (pending_too or not e.offset_flags[k]):
                    self._set_offset_state(e, k, ARCHIVED)
                    e.offset_flags[k] = 0
                    e.offset_members[k] = 0
                    count += 1
        return count

    def update_log_start_offset(self, log_start_offset):
        """Retention moved the log start: AVAILABLE records below it are archived.

        ACQUIRED records stay until acknowledged or expired (then archived). Nothing is persisted now;
        the new SPSO reaches storage with the next write.
        """
        cdef int64_t lso = int(log_start_offset)
        if lso <= self._spso:
            return
        self._archive(self._spso, lso - 1, AVAILABLE, True)
        self._spso = lso
        if self._speo < lso:
            self._speo = lso
        _advance(self)

    # ------------------------------------------------------------------ invariants

    def _check(self):
        """Assert every invariant of the window; tests call it after each step."""
        return _check_invariants(self)


# The operations kept apart from the class, as functions taking it (a cdef class cannot span files).
include "in_flight_start_offset.pxi"
include "acknowledgement_request.pxi"
include "in_flight_acquisition.pxi"
include "in_flight_transitions.pxi"
include "in_flight_invariants.pxi"
