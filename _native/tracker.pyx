# cython: language_level=3
"""The Cython twin of the in-flight tracker (`sharegroup.in_flight.InFlightTracker`).

Layer 1 (SPEC §2): no I/O, no clock, no asyncio. Same class name, constructor, methods, return values,
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
cdef tuple _RECORD_STATES = (RecordState.AVAILABLE, RecordState.ACQUIRED, RecordState.ACKNOWLEDGED, None,
                             RecordState.ARCHIVED)
# Module-level references keep the types alive for the raw type pointers below.
cdef object _AcquiredRecords = AcquiredRecords
cdef object _StateBatch = StateBatch
cdef object _TrackerWrite = TrackerWrite
cdef object _RecordView = RecordView
cdef object _FetchedBatch = FetchedBatch
cdef object _AcknowledgementBatch = AcknowledgementBatch

# `_new_namedtuple3` / `_new_namedtuple4` build these namedtuples the way `tuple.__new__` does, without their Python-level
# __new__. That is only the same thing while they are plain namedtuples: tuple layout, no extra slots,
# the field count below. Refuse to load otherwise rather than build objects their class would not build.
for _cls, _nfields in ((AcquiredRecords, 3), (StateBatch, 4), (TrackerWrite, 4), (RecordView, 3)):
    if not (issubclass(_cls, tuple) and _cls.__basicsize__ == tuple.__basicsize__
            and _cls.__itemsize__ == tuple.__itemsize__ and len(getattr(_cls, "_fields", ())) == _nfields):
        raise ImportError(f"sharegroup._native.tracker expects {_cls.__name__} to be a plain {_nfields}-field "
                          "namedtuple; rebuild the native tracker for the changed sharegroup.types")
del _cls, _nfields


cdef extern from "Python.h":
    # The namedtuples' tp_alloc (inherited from object); `tuple.__new__(cls, t)` allocates with it too.
    PyObject *_generic_alloc "PyType_GenericAlloc"(PyTypeObject *tp, Py_ssize_t nitems) except NULL
    PyObject *_list_new "PyList_New"(Py_ssize_t size) except NULL
    void _tuple_set "PyTuple_SET_ITEM"(PyObject *t, Py_ssize_t i, PyObject *o)
    void _list_set "PyList_SET_ITEM"(PyObject *l, Py_ssize_t i, PyObject *o)
    void _gc_untrack "PyObject_GC_UnTrack"(void *o)
    PyObject *_tuple_get_borrowed "PyTuple_GET_ITEM"(PyObject *t, Py_ssize_t i)
    bint _long_check_exact "PyLong_CheckExact"(PyObject *o)
    long _long_as_long_ovf "PyLong_AsLongAndOverflow"(PyObject *o, int *overflow) except? -1

cdef object _INT_ACCEPT = 1, _INT_RELEASE = 2, _INT_REJECT = 3  # kept alive for the pointers below
cdef PyObject *_P_ACCEPT = <PyObject *>_INT_ACCEPT
cdef PyObject *_P_RELEASE = <PyObject *>_INT_RELEASE
cdef PyObject *_P_REJECT = <PyObject *>_INT_REJECT
cdef PyTypeObject *_TP_ACQUIRED_RECORDS = <PyTypeObject *>AcquiredRecords
cdef PyTypeObject *_TP_STATE_BATCH = <PyTypeObject *>StateBatch
cdef PyTypeObject *_TP_TRACKER_WRITE = <PyTypeObject *>TrackerWrite
cdef PyTypeObject *_TP_RECORD_VIEW = <PyTypeObject *>RecordView


cdef inline object _steal(PyObject *o):
    """Wrap a new reference as an object without a second reference."""
    cdef object r = <object>o
    Py_DECREF(r)
    return r


cdef inline object _new_namedtuple3(PyTypeObject *tp, object a, object b, object c, bint atomic):
    """`tp(a, b, c)` for a 3-field namedtuple, built the way `tuple.__new__(tp, (a, b, c))` builds it.

    `atomic`: every field is an int, so the tuple can never be part of a cycle and is untracked at once
    (CPython untracks such tuples itself at its next collection).
    """
    cdef PyObject *o = _generic_alloc(tp, 3)
    Py_INCREF(a)
    _tuple_set(o, 0, <PyObject *>a)
    Py_INCREF(b)
    _tuple_set(o, 1, <PyObject *>b)
    Py_INCREF(c)
    _tuple_set(o, 2, <PyObject *>c)
    if atomic:
        _gc_untrack(o)
    return _steal(o)


cdef inline object _new_namedtuple4(PyTypeObject *tp, object a, object b, object c, object d, bint atomic):
    """`tp(a, b, c, d)` for a 4-field namedtuple (see `_new_namedtuple3`)."""
    cdef PyObject *o = _generic_alloc(tp, 4)
    Py_INCREF(a)
    _tuple_set(o, 0, <PyObject *>a)
    Py_INCREF(b)
    _tuple_set(o, 1, <PyObject *>b)
    Py_INCREF(c)
    _tuple_set(o, 2, <PyObject *>c)
    Py_INCREF(d)
    _tuple_set(o, 3, <PyObject *>d)
    if atomic:
        _gc_untrack(o)
    return _steal(o)


cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    /* Terminal states are ACKNOWLEDGED (2) and ARCHIVED (4): exactly the bytes with (s & 6) != 0 among
       the valid states 0, 1, 2, 4. Eight bytes at a time: fold bit 2 onto bit 1, keep bit 1 of every
       byte, shift it to bit 0 and add the bytes with one multiply (each byte sum is at most 8). */
    static inline Py_ssize_t sg_count_terminal(const uint8_t *p, Py_ssize_t n) {
        Py_ssize_t total = 0, i = 0;
        for (; i + 8 <= n; i += 8) {
            uint64_t w;
            memcpy(&w, p + i, 8);
            w &= 0x0606060606060606ULL;
            w = ((w | (w >> 1)) & 0x0202020202020202ULL) >> 1;
            total += (Py_ssize_t)((w * 0x0101010101010101ULL) >> 56);
        }
        for (; i < n; i++) total += (p[i] & 6) != 0;
        return total;
    }
    """
    Py_ssize_t sg_count_terminal(const uint8_t *p, Py_ssize_t n) noexcept nogil


def record_state_ids():
    """The record state ids compiled into this module, in RecordState order (tests compare the two)."""
    return (AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED)


def acknowledge_type_ids():
    """The acknowledge type ids compiled into this module, in AcknowledgeType order."""
    return (T_GAP, T_ACCEPT, T_RELEASE, T_REJECT, T_RENEW)


cdef inline bint _terminal(int s) noexcept nogil:
    return s == ACKNOWLEDGED or s == ARCHIVED


# ---------------------------------------------------------------------- small growable C buffers

cdef struct Vec:
    char *data
    Py_ssize_t n
    Py_ssize_t cap
    Py_ssize_t size
    int64_t buf[32]  # inline storage (256 bytes, 8-aligned); spills to PyMem when outgrown


cdef struct Run:  # a run of one state and delivery count (the StateBatch shape)
    int64_t first
    int64_t last
    int32_t state
    int32_t delivery_count


cdef struct ARun:  # a run of acquired offsets at one delivery count (the AcquiredRecords shape)
    int64_t first
    int64_t last
    int64_t delivery_count


cdef struct Range:
    int64_t a
    int64_t b


cdef struct HeapItem:
    int64_t deadline
    int64_t first


cdef struct FetchedBatchHeader:  # one fetched producer batch header: base and last offset
    int64_t base
    int64_t last


cdef struct Plan:  # one validated acknowledgement batch; its types are tbuf[toff:toff + nt]
    int64_t first
    int64_t last
    Py_ssize_t idx
    Py_ssize_t toff
    Py_ssize_t nt


cdef inline void vec_init(Vec *v, Py_ssize_t size) noexcept:
    v.data = <char *>v.buf
    v.n = 0
    v.size = size
    v.cap = sizeof(v.buf) // size


cdef int vec_reserve(Vec *v, Py_ssize_t need) except -1:
    """Make room for `need` items in total."""
    cdef Py_ssize_t newcap
    cdef char *p
    if need <= v.cap:
        return 0
    newcap = v.cap * 2
    if newcap < need:
        newcap = need
    if newcap > (<Py_ssize_t>1 << 56) // v.size:
        raise MemoryError()
    if v.data == <char *>v.buf:
        p = <char *>PyMem_Malloc(newcap * v.size)
        if p != NULL:
            memcpy(p, v.data, v.n * v.size)
    else:
        p = <char *>PyMem_Realloc(v.data, newcap * v.size)
    if p == NULL:
        raise MemoryError()
    v.data = p
    v.cap = newcap
    return 0


cdef inline void vec_free(Vec *v) noexcept:
    if v.data != <char *>v.buf:
        PyMem_Free(v.data)
    v.data = <char *>v.buf
    v.n = 0


cdef inline int add_run(Vec *v, int64_t first, int64_t last, int state, int delivery_count) except -1:
    """Append a state run, merging with the previous one when contiguous and equal (`_add_run`)."""
    cdef Run *r
    if v.n:
        r = (<Run *>v.data) + (v.n - 1)
        if r.last + 1 == first and r.state == state and r.delivery_count == delivery_count:
            r.last = last
            return 0
    if v.n == v.cap:
        vec_reserve(v, v.n + 1)
    r = (<Run *>v.data) + v.n
    r.first = first
    r.last = last
    r.state = state
    r.delivery_count = delivery_count
    v.n += 1
    return 0


cdef inline int add_acquired_run(Vec *v, int64_t first, int64_t last, int64_t delivery_count, bint merge) except -1:
    """Append an acquired run, merging when contiguous at the same delivery count (`_add_acquired_run`)."""
    cdef ARun *r
    if merge and v.n:
        r = (<ARun *>v.data) + (v.n - 1)
        if r.last + 1 == first and r.delivery_count == delivery_count:
            r.last = last
            return 0
    if v.n == v.cap:
        vec_reserve(v, v.n + 1)
    r = (<ARun *>v.data) + v.n
    r.first = first
    r.last = last
    r.delivery_count = delivery_count
    v.n += 1
    return 0


cdef inline int add_range(Vec *v, int64_t a, int64_t b) except -1:
    """Append [a, b], extending the previous range when contiguous (`_add_range`)."""
    cdef Range *r
    if v.n:
        r = (<Range *>v.data) + (v.n - 1)
        if r.b + 1 == a:
            r.b = b
            return 0
    if v.n == v.cap:
        vec_reserve(v, v.n + 1)
    r = (<Range *>v.data) + v.n
    r.a = a
    r.b = b
    v.n += 1
    return 0


cdef inline int add_range_raw(Vec *v, int64_t a, int64_t b) except -1:
    cdef Range *r
    if v.n == v.cap:
        vec_reserve(v, v.n + 1)
    r = (<Range *>v.data) + v.n
    r.a = a
    r.b = b
    v.n += 1
    return 0


cdef inline int push_raw_run(Vec *v, int64_t first, int64_t last, int state, int delivery_count) except -1:
    cdef Run *r
    if v.n == v.cap:
        vec_reserve(v, v.n + 1)
    r = (<Run *>v.data) + v.n
    r.first = first
    r.last = last
    r.state = state
    r.delivery_count = delivery_count
    v.n += 1
    return 0


cdef int _cmp_run_first(const void *x, const void *y) noexcept nogil:
    cdef int64_t a = (<const Run *>x).first
    cdef int64_t b = (<const Run *>y).first
    return (a > b) - (a < b)


cdef list _state_batch_list(Vec *v):
    """The runs as a list of StateBatch. Runtime: one tuple (and one or two ints) per run."""
    cdef Py_ssize_t j
    cdef Run *r = <Run *>v.data
    cdef list out = _steal(_list_new(v.n))
    cdef object first, last, sb
    for j in range(v.n):
        first = r[j].first
        last = first if r[j].last == r[j].first else r[j].last
        sb = _new_namedtuple4(_TP_STATE_BATCH, first, last, r[j].state, r[j].delivery_count, True)
        Py_INCREF(sb)
        _list_set(<PyObject *>out, j, <PyObject *>sb)
    return out


cdef inline int64_t _clamp_i64(object o) except? -1:
    """An int argument as int64, saturated (used where the pure twin only compares the value)."""
    cdef int overflow = 0
    cdef long long v
    if PyLong_Check(o):
        v = PyLong_AsLongLongAndOverflow(o, &overflow)
        if overflow > 0:
            return INT64_MAX
        if overflow < 0:
            return INT64_MIN
        return v
    return <int64_t>o


cdef inline int64_t _sat_add(int64_t a, int64_t b) noexcept nogil:
    if b > 0 and a > INT64_MAX - b:
        return INT64_MAX
    if b < 0 and a < INT64_MIN - b:
        return INT64_MIN
    return a + b


cdef str _not_acquired_message(int64_t offset, int state, int flags):
    if flags:
        return f"offset {offset} is awaiting a previous acknowledgement"
    if state != ACQUIRED:
        return f"offset {offset} is {RecordState(state).name}, not ACQUIRED"
    return f"offset {offset} is acquired by another member"


# ---------------------------------------------------------------------- entries and transitions

@cython.final
@cython.freelist(256)
cdef class _Entry:
    """One cached range [first, last]: batch-level state, or per-offset C arrays once split."""

    cdef int64_t first
    cdef int64_t last
    cdef int64_t deadline
    cdef int32_t member
    cdef uint8_t state
    cdef uint8_t flags
    cdef uint8_t delivery_count
    cdef int64_t *offset_deadlines  # NULL while batch-level; owns the per-offset block
    cdef int32_t *offset_members
    cdef uint8_t *offset_states
    cdef uint8_t *offset_flags
    cdef uint8_t *offset_delivery_counts
    # Split entries only: `terminal_count` counts terminal offsets; the first `settled_count` offsets are terminal and not
    # awaiting a write, so they never change again (extended lazily; it only grows).
    cdef Py_ssize_t terminal_count
    cdef Py_ssize_t settled_count

    def __dealloc__(self):
        if self.offset_deadlines != NULL:
            PyMem_Free(self.offset_deadlines)
            self.offset_deadlines = NULL

    cdef int split_per_offset(self) except -1:
        """Switch to per-offset state; every offset inherits the batch's state, owner and deadline."""
        cdef Py_ssize_t n, k
        cdef char *block
        if self.offset_states != NULL:
            return 0
        n = <Py_ssize_t>(self.last - self.first + 1)
        if n <= 0 or n > (<Py_ssize_t>1 << 56) // BYTES_PER_OFFSET:
            raise MemoryError()
        block = <char *>PyMem_Malloc(n * BYTES_PER_OFFSET)
        if block == NULL:
            raise MemoryError()
        self.offset_deadlines = <int64_t *>block
        self.offset_members = <int32_t *>(block + 8 * n)
        self.offset_states = <uint8_t *>(block + 12 * n)
        self.offset_flags = <uint8_t *>(block + 13 * n)
        self.offset_delivery_counts = <uint8_t *>(block + 14 * n)
        for k in range(n):
            self.offset_deadlines[k] = self.deadline
            self.offset_members[k] = self.member
        memset(self.offset_states, self.state, n)
        memset(self.offset_flags, self.flags, n)
        memset(self.offset_delivery_counts, self.delivery_count, n)
        self.terminal_count = n if _terminal(self.state) else 0
        self.settled_count = 0
        return 0

    cdef inline Py_ssize_t settled_prefix(self) noexcept:
        """Extend and return `settled_count`. Amortized O(1): each offset is passed once in the entry's life."""
        cdef Py_ssize_t k = self.settled_count
        cdef Py_ssize_t n = <Py_ssize_t>(self.last - self.first + 1)
        while k < n and _terminal(self.offset_states[k]) and not self.offset_flags[k]:
            k += 1
        self.settled_count = k
        return k

    cdef inline Py_ssize_t terminal_from(self, Py_ssize_t k) noexcept:
        """Terminal offsets among first + k .. last of a split entry."""
        cdef Py_ssize_t n = <Py_ssize_t>(self.last - self.first + 1)
        cdef Py_ssize_t t
        if k <= 0:
            return self.terminal_count
        if k >= n:
            return 0
        t = self.settled_prefix()
        if k <= t:
            return self.terminal_count - k
        # Count whichever side of k is shorter.
        if k - t <= n - k:
            return self.terminal_count - t - sg_count_terminal(self.offset_states + t, k - t)
        return sg_count_terminal(self.offset_states + k, n - k)

    cdef bint done(self) noexcept:
        """Every record terminal and none awaiting a write (`_entry_done`)."""
        cdef Py_ssize_t k, n
        cdef uint8_t s
        if self.offset_states == NULL:
            return _terminal(self.state) and not self.flags
        n = <Py_ssize_t>(self.last - self.first + 1)
        if self.terminal_count != n:
            return False
        if self.settled_prefix() == n:
            return True
        for k in range(n):
            s = self.offset_states[k]
            if (s != ACKNOWLEDGED and s != ARCHIVED) or self.offset_flags[k]:
                return False
        return True


cdef inline _Entry _new_entry(int64_t first, int64_t last, int state, int delivery_count, int32_t member, int64_t deadline):
    cdef _Entry e = _Entry.__new__(_Entry)
    e.first = first
    e.last = last
    e.state = <uint8_t>state
    e.flags = 0
    e.delivery_count = <uint8_t>delivery_count
    e.member = member
    e.deadline = deadline
    e.offset_deadlines = NULL
    e.offset_members = NULL
    e.offset_states = NULL
    e.offset_flags = NULL
    e.offset_delivery_counts = NULL
    return e


@cython.final
@cython.freelist(64)
cdef class _Transition:
    """A pending two-phase change: the owner and the offset ranges marked in transition."""

    cdef int32_t m
    cdef Range *ranges  # points at `one` when there is a single range
    cdef Py_ssize_t n
    cdef Range one

    def __dealloc__(self):
        if self.ranges != NULL and self.ranges != &self.one:
            PyMem_Free(self.ranges)
        self.ranges = NULL


# ---------------------------------------------------------------------- the tracker

@cython.final
cdef class InFlightTracker:
    """In-flight records of one share-partition: acquisition, acknowledgement, locks, SPSO/SPEO.

    Offsets: `start_offset` (SPSO) is the lowest offset not known to be terminal; `end_offset` (SPEO)
    is exclusive, one past the last in-flight offset. Runtime complexity of every operation is
    O(entries touched + offsets of split entries touched); whole producer batches move in O(1).
    """

    cdef int64_t _lock_ms
    cdef int _limit
    cdef int64_t _max_locks
    cdef bint _record_limit
    cdef int _throttle
    cdef list _entries
    cdef HeapItem *_heap
    cdef Py_ssize_t _heap_n
    cdef Py_ssize_t _heap_cap
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
    cdef object __weakref__

    def __cinit__(self, *args, **kwargs):
        self._heap = NULL
        self._heap_n = 0
        self._heap_cap = 0
        self._entries = []
        self._transitions = {}
        self._member_index = {"": 0}
        self._member_names = [""]
        self._next_tid = 1

    def __dealloc__(self):
        if self._heap != NULL:
            PyMem_Free(self._heap)
            self._heap = NULL

    def __init__(
        self,
        start_offset=0,
        *,
        record_lock_duration_ms=30_000,
        delivery_count_limit=5,
        partition_max_record_locks=2_000,
        record_limit_mode=False,
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
        # Poison-record isolation (SPEC §4.10): from this delivery count on, batches shrink.
        self._throttle = max(2, (self._limit + 1) // 2)
        self._entries = []
        self._heap_n = 0
        self._transitions = {}
        self._next_tid = 1
        self._member_index = {"": 0}
        self._member_names = [""]
        self._spso = int(start_offset)
        self._speo = self._spso
        self._terminal_total = 0
        self._gap_start = 0
        self._gap_end = -1

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

    def next_lock_deadline_ms(self):
        """The earliest lock deadline that may be due (possibly stale), or -1 when no lock is held."""
        return self._heap[0].deadline if self._heap_n else -1

    # ------------------------------------------------------------------ the lock heap (min-heap on (deadline, first))

    cdef int _heap_push(self, int64_t deadline, int64_t first) except -1:
        cdef Py_ssize_t i, parent, newcap
        cdef HeapItem *h
        cdef HeapItem item
        if self._heap_n == self._heap_cap:
            newcap = self._heap_cap * 2 if self._heap_cap else 16
            h = <HeapItem *>PyMem_Realloc(self._heap, newcap * sizeof(HeapItem))
            if h == NULL:
                raise MemoryError()
            self._heap = h
            self._heap_cap = newcap
        h = self._heap
        i = self._heap_n
        self._heap_n += 1
        item.deadline = deadline
        item.first = first
        while i > 0:
            parent = (i - 1) >> 1
            if h[parent].deadline < deadline or (h[parent].deadline == deadline and h[parent].first <= first):
                break
            h[i] = h[parent]
            i = parent
        h[i] = item
        return 0

    cdef HeapItem _heap_pop(self) noexcept:
        """Remove and return the smallest item; the heap must not be empty."""
        cdef HeapItem *h = self._heap
        cdef HeapItem top = h[0]
        cdef HeapItem last
        cdef Py_ssize_t n, i, c
        self._heap_n -= 1
        n = self._heap_n
        if n == 0:
            return top
        last = h[n]
        i = 0
        while True:
            c = 2 * i + 1
            if c >= n:
                break
            if c + 1 < n and (h[c + 1].deadline < h[c].deadline or
                              (h[c + 1].deadline == h[c].deadline and h[c + 1].first < h[c].first)):
                c += 1
            if last.deadline < h[c].deadline or (last.deadline == h[c].deadline and last.first <= h[c].first):
                break
            h[i] = h[c]
            i = c
        h[i] = last
        return top

    # ------------------------------------------------------------------ loading

    def reset(self, start_offset):
        """Forget everything: an empty window at `start_offset` (pending transitions are dropped)."""
        if start_offset < 0:
            raise ShareError(_INVALID_REQUEST, f"start offset {start_offset} is negative")
        cdef int64_t so = int(start_offset)
        self._entries = []
        self._heap_n = 0
        self._transitions = {}
        self._spso = so
        self._speo = so
        self._terminal_total = 0
        self._gap_start = 0
        self._gap_end = -1

    @cython.boundscheck(True)  # indexes caller-supplied sequences: IndexError, never a wild read
    def load(self, start_offset, state_batches):
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
                raise ShareError(_UNKNOWN_SERVER_ERROR, f"malformed persisted state batch {b!r}")
            first, last, state, delivery_count = b
            if first < start_offset or last < first or first <= prev_last:
                raise ShareError(
                    _UNKNOWN_SERVER_ERROR,
                    f"persisted state batch {b!r} is below the start offset {start_offset} or out of order",
                )
            if state not in (AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED) or delivery_count < 0:
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
            # ACQUIRED is never persisted; if it ever is, the lock is gone after a failover.
            s = AVAILABLE if state == ACQUIRED else state
            entries.append(_new_entry(f, l, s, min(delivery_count, MAX_DELIVERY_COUNT), 0, 0))
            if _terminal(s):
                self._terminal_total += l - f + 1
            pos = l + 1
        self._speo = pos
        if first_hole >= 0:
            self._gap_start = first_hole
            self._gap_end = pos
        self._advance()

    cdef inline void _bset(self, _Entry e, int s) noexcept:
        """Set the state of batch-level entry `e`, keeping the terminal total exact."""
        if _terminal(s) != _terminal(e.state):
            if _terminal(s):
                self._terminal_total += e.last - e.first + 1
            else:
                self._terminal_total -= e.last - e.first + 1
        e.state = <uint8_t>s

    cdef inline void _oset(self, _Entry e, Py_ssize_t k, int s) noexcept:
        """Set the state of offset e.first + k of split entry `e`, keeping both terminal counts exact."""
        cdef Py_ssize_t d = <Py_ssize_t>_terminal(s) - <Py_ssize_t>_terminal(e.offset_states[k])
        e.terminal_count += d
        self._terminal_total += d
        e.offset_states[k] = <uint8_t>s

    cdef int32_t _member(self, member_id) except -1:
        cdef PyObject *p = PyDict_GetItem(self._member_index, member_id)
        cdef int32_t m
        if p != NULL:
            return <int32_t>(<object>p)
        m = <int32_t>len(self._member_names)
        self._member_index[member_id] = m
        self._member_names.append(member_id)
        return m

    cdef inline Py_ssize_t _bisect_right(self, int64_t offset) noexcept:
        """Number of entries whose first offset is <= `offset`. Runtime complexity: O(log entries)."""
        cdef list es = self._entries
        cdef Py_ssize_t lo = 0
        cdef Py_ssize_t hi = PyList_GET_SIZE(es)
        cdef Py_ssize_t mid
        while lo < hi:
            mid = (lo + hi) >> 1
            if offset < (<_Entry>PyList_GET_ITEM(es, mid)).first:
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
        """The first AVAILABLE offset not awaiting a write or acquirable persisted-gap hole, else the SPEO."""
        cdef int64_t spso = self._spso
        # The next acquirable hole of the persisted-gap window (none when the window is closed).
        cdef int64_t hole = max(spso, self._gap_start) if self._gap_end >= 0 else self._speo
        cdef list entries = self._entries
        cdef Py_ssize_t i, k, n
        cdef _Entry e
        for i in range(self._index_from(spso), PyList_GET_SIZE(entries)):
            e = <_Entry>PyList_GET_ITEM(entries, i)
            if e.first > hole:
                return hole
            if e.last >= hole:
                hole = e.last + 1
            if e.offset_states == NULL:
                if e.state == AVAILABLE and not e.flags:
                    return max(e.first, spso)
                continue
            k = <Py_ssize_t>max(spso - e.first, 0)
            n = <Py_ssize_t>(e.last - e.first + 1)
            while k < n:
                if e.offset_states[k] == AVAILABLE and not e.offset_flags[k]:
                    return e.first + k
                k += 1
        return min(hole, self._speo)

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
            return _new_namedtuple3(_TP_RECORD_VIEW, _RECORD_STATES[e.state], e.delivery_count, self._member_names[e.member], False)
        k = <Py_ssize_t>(off - e.first)
        return _new_namedtuple3(_TP_RECORD_VIEW, _RECORD_STATES[e.offset_states[k]], e.offset_delivery_counts[k], self._member_names[e.offset_members[k]], False)

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

    @cython.boundscheck(True)  # indexes caller-supplied sequences: IndexError, never a wild read
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
        """Acquire records of `fetched` producer-batch headers for `member_id` (SPEC §4.5, §4.8, §4.10).

        Cached AVAILABLE records are re-acquired; offsets past SPEO are acquired as new entries at
        producer-batch granularity. `max_records` and the in-flight limit are soft (rounded up to the end
        of a producer batch) unless the tracker is in record-limit mode. `batch_size` > 0 cuts new
        ranges at producer-batch boundaries. `fetch_offset` >= 0 says where the log read started:
        AVAILABLE records between it and the first fetched batch no longer exist (compaction) and are
        archived. Nothing is persisted: ACQUIRED is never written.
        Runtime complexity: O(fetched batches + entries touched + offsets of split entries touched).
        """
        cdef Vec fb, runs
        cdef FetchedBatchHeader *fbp
        cdef Py_ssize_t nfetched, j, i
        cdef int64_t base, blast, prev_last, first_base, maxr, bsz, fo, deadline, lo, hi, a, b, size, cap
        cdef int64_t acquired, got, cursor, hole_first, hole_last, allowance
        cdef int32_t m
        cdef int limit, throttle, shift
        cdef bint stop, throttled, overlapped
        cdef list entries, result
        cdef _Entry e
        cdef ARun *r
        if not isinstance(member_id, str) or not member_id:
            raise ShareError(_INVALID_REQUEST, "member id must be a non-empty string")
        nfetched = len(fetched)
        vec_init(&fb, sizeof(FetchedBatchHeader))
        vec_init(&runs, sizeof(ARun))
        try:
            prev_last = -1
            for bo in fetched:
                if (type(bo) is tuple or type(bo) is _FetchedBatch) and PyTuple_GET_SIZE(bo) >= 2:
                    base = <object>PyTuple_GET_ITEM(bo, 0)
                    blast = <object>PyTuple_GET_ITEM(bo, 1)
                else:
                    base = bo[0]
                    blast = bo[1]
                if base < 0 or blast < base or base <= prev_last:
                    raise ShareError(_INVALID_REQUEST,
                                     f"fetched batches must be ascending, disjoint and non-empty: {tuple(bo)!r}")
                prev_last = blast
                if fb.n == fb.cap:
                    vec_reserve(&fb, fb.n + 1)
                fbp = (<FetchedBatchHeader *>fb.data) + fb.n
                fbp.base = base
                fbp.last = blast
                fb.n += 1
            if max_records <= 0 or nfetched == 0:
                return []
            if batch_size < 0:
                raise ShareError(_INVALID_REQUEST, f"batch size {batch_size} is negative")
            if fb.n == 0:  # only a sequence whose length lies gets here
                return []
            nfetched = fb.n
            fbp = <FetchedBatchHeader *>fb.data
            maxr = _clamp_i64(max_records)
            bsz = _clamp_i64(batch_size)
            fo = _clamp_i64(fetch_offset)
            first_base = fbp[0].base
            if 0 <= fo < first_base:
                self._archive_available(max(fo, self._spso), first_base - 1)
            m = self._member(member_id)
            deadline = _sat_add(now_ms, self._lock_ms)
            lo = max(first_base, self._spso)
            hi = fbp[nfetched - 1].last
            acquired = 0
            stop = False
            limit = self._limit
            throttle = self._throttle
            if hi >= lo:
                i = self._index_from(lo)
                entries = self._entries
                cursor = lo  # the lowest fetched offset not yet walked past
                overlapped = False
                while i < PyList_GET_SIZE(entries) and not stop and acquired < maxr:
                    e = <_Entry>PyList_GET_ITEM(entries, i)
                    if e.first > hi:
                        break
                    overlapped = True
                    if self._gap_end >= 0:
                        # Persisted-gap window: the hole before this entry is acquirable (never past it).
                        hole_first = max(cursor, self._gap_start)
                        if hole_first < e.first:
                            acquired += self._acquire_new(fbp, nfetched, hole_first, e.first - 1, m, deadline,
                                                          &runs, maxr - acquired, bsz)
                            i = self._index_from(e.first)
                            if acquired >= maxr:
                                break
                    cursor = e.last + 1
                    a = max(e.first, lo)
                    b = min(e.last, hi)
                    if e.offset_states == NULL:
                        if e.state != AVAILABLE or e.flags:
                            i += 1
                            continue
                        size = e.last - e.first + 1
                        throttled = e.delivery_count >= throttle
                        if throttled and acquired > 0:
                            stop = True  # poison isolation: redeliveries this deep go out on their own
                            break
                        if throttled:
                            shift = e.delivery_count - throttle + 1
                            cap = max(<int64_t>1, size >> shift if shift < 63 else 0)
                        else:
                            cap = size
                        if self._record_limit:
                            cap = min(cap, maxr - acquired)
                        if a == e.first and b == e.last and cap >= size and not (
                            throttled and e.delivery_count == limit - 1 and limit > 2 and size > 1
                        ):
                            self._bset(e, ACQUIRED)
                            e.delivery_count = min(e.delivery_count + 1, MAX_DELIVERY_COUNT)
                            e.member = m
                            e.deadline = deadline
                            self._heap_push(deadline, e.first)
                            add_acquired_run(&runs, e.first, e.last, e.delivery_count, True)
                            acquired += size
                            if throttled:
                                stop = True
                            i += 1
                            continue
                        e.split_per_offset()
                    got = self._acquire_offsets(e, a, b, m, deadline, &runs, acquired, maxr, &stop)
                    acquired += got
                    i += 1
                if not stop and acquired < maxr:
                    # A fetch that overlaps no entry may fill a hole below the SPEO; a fetch that overlaps
                    # entries leaves the holes between them alone, except persisted-gap holes.
                    if self._gap_end >= 0 or not overlapped:
                        hole_first = max(cursor, self._gap_start) if self._gap_end >= 0 else cursor
                        hole_last = min(hi, self._speo - 1)
                        if hole_first <= hole_last:
                            acquired += self._acquire_new(fbp, nfetched, hole_first, hole_last, m, deadline,
                                                          &runs, maxr - acquired, bsz)
                    if acquired < maxr and hi >= self._speo:
                        allowance = self._max_locks - (self._speo - self._spso)
                        acquired += self._acquire_new(fbp, nfetched, max(cursor, self._speo), hi, m, deadline,
                                                      &runs, min(maxr - acquired, allowance), bsz)
            if runs.n and self._gap_end >= 0:
                self._gap_start = max(self._gap_start, (<ARun *>runs.data)[runs.n - 1].last + 1)
            if read_committed and runs.n:
                self._archive_aborted(fetched, aborted_transactions, &runs)
            self._advance()
            result = _steal(_list_new(runs.n))
            r = <ARun *>runs.data
            for j in range(runs.n):
                ar = _new_namedtuple3(_TP_ACQUIRED_RECORDS, r[j].first, r[j].last, r[j].delivery_count, True)
                Py_INCREF(ar)
                _list_set(<PyObject *>result, j, <PyObject *>ar)
            return result
        finally:
            vec_free(&fb)
            vec_free(&runs)

    cdef int64_t _acquire_offsets(self, _Entry e, int64_t a, int64_t b, int32_t m, int64_t deadline, Vec *runs,
                                  int64_t acquired, int64_t max_records, bint *stop_out) except -1:
        """Acquire the AVAILABLE offsets of split entry `e` in [a, b]; returns the count, sets *stop_out."""
        cdef uint8_t *offset_states = e.offset_states
        cdef uint8_t *offset_flags = e.offset_flags
        cdef uint8_t *offset_delivery_counts = e.offset_delivery_counts
        cdef int64_t f = e.first
        cdef Py_ssize_t k, k0 = <Py_ssize_t>(a - f), k1 = <Py_ssize_t>(b - f)
        cdef int max_delivery_count = -1, delivery_count, shift
        cdef int limit = self._limit, throttle = self._throttle
        cdef bint throttled, stop, last_attempt
        cdef int64_t cap, got
        for k in range(k0, k1 + 1):
            if offset_states[k] == AVAILABLE and not offset_flags[k] and offset_delivery_counts[k] > max_delivery_count:
                max_delivery_count = offset_delivery_counts[k]
        if max_delivery_count < 0:
            stop_out[0] = False
            return 0
        throttled = max_delivery_count >= throttle
        if throttled and acquired > 0:
            stop_out[0] = True
            return 0
        if throttled:
            shift = max_delivery_count - throttle + 1
            cap = max(<int64_t>1, (e.last - f + 1) >> shift if shift < 63 else 0)
        else:
            cap = NO_CAP
        if self._record_limit:
            cap = min(cap, max_records - acquired)
        got = 0
        stop = throttled
        for k in range(k0, k1 + 1):
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
            offset_delivery_counts[k] = <uint8_t>delivery_count
            e.offset_members[k] = m
            e.offset_deadlines[k] = deadline
            add_acquired_run(runs, f + k, f + k, delivery_count, True)
            got += 1
            if last_attempt:
                stop = True
                break
        if got:
            self._heap_push(deadline, f)
        stop_out[0] = stop
        return got

    cdef int64_t _acquire_new(self, FetchedBatchHeader *fetched, Py_ssize_t n, int64_t from_offset, int64_t to_offset, int32_t m,
                              int64_t deadline, Vec *runs, int64_t budget, int64_t batch_size) except -1:
        """Acquire the fetched offsets in [from_offset, to_offset] as new entries; returns the count.

        Whole producer batches are taken until `budget` offsets (counted from `from_offset`) are reached;
        the batch that crosses it is included (soft limit), but nothing goes past `to_offset` (the end
        of a hole, or the last fetched offset). `batch_size` > 0 starts a new entry at a producer batch
        base offset at least `batch_size` past the current entry's first; the earlier entry then ends
        just before that base offset, so holes between producer batches belong to it. A range that
        becomes the lowest in flight moves the SPSO to its first offset.
        """
        cdef int64_t last, base, batch_last, start, acquired, size, take, first, seg_last
        cdef Py_ssize_t j, si, k, i
        cdef Vec segs
        cdef Range *sg
        cdef _Entry e
        cdef bint merge = batch_size == 0
        if budget <= 0 or to_offset < from_offset:
            return 0
        j = 0
        while j < n and fetched[j].last < from_offset:
            j += 1
        if j == n or fetched[j].base > to_offset:
            return 0
        vec_init(&segs, sizeof(Range))
        try:
            last = -1
            while j < n:
                base = fetched[j].base
                batch_last = min(fetched[j].last, to_offset)
                if base > to_offset or (last >= 0 and last - from_offset + 1 >= budget):
                    break
                start = max(base, from_offset)
                if segs.n == 0 or (batch_size > 0 and start - (<Range *>segs.data)[segs.n - 1].a >= batch_size):
                    if segs.n:
                        (<Range *>segs.data)[segs.n - 1].b = start - 1
                    if segs.n == segs.cap:
                        vec_reserve(&segs, segs.n + 1)
                    sg = (<Range *>segs.data) + segs.n
                    sg.a = start
                    sg.b = batch_last
                    segs.n += 1
                else:
                    (<Range *>segs.data)[segs.n - 1].b = batch_last
                last = batch_last
                j += 1
            first = (<Range *>segs.data)[0].a
            i = self._index_from(self._spso)
            if first > self._spso and (i == PyList_GET_SIZE(self._entries) or
                                       (<_Entry>PyList_GET_ITEM(self._entries, i)).first > first):
                # Nothing is in flight below the new range: the offsets before it are no one's.
                self._spso = first
            acquired = 0
            for si in range(segs.n):
                first = (<Range *>segs.data)[si].a
                seg_last = (<Range *>segs.data)[si].b
                size = seg_last - first + 1
                if self._record_limit and acquired + size > budget:
                    take = budget - acquired
                    e = _new_entry(first, seg_last, AVAILABLE, 0, 0, 0)
                    e.split_per_offset()
                    if take > 0:
                        for k in range(<Py_ssize_t>take):
                            e.offset_states[k] = ACQUIRED
                            e.offset_delivery_counts[k] = 1
                            e.offset_members[k] = m
                            e.offset_deadlines[k] = deadline
                        self._heap_push(deadline, first)
                        add_acquired_run(runs, first, first + take - 1, 1, merge)
                        acquired += take
                else:
                    e = _new_entry(first, seg_last, ACQUIRED, 1, m, deadline)
                    self._heap_push(deadline, first)
                    add_acquired_run(runs, first, seg_last, 1, merge)
                    acquired += size
                if seg_last >= self._speo:
                    self._entries.append(e)
                    self._speo = seg_last + 1
                else:
                    self._entries.insert(self._bisect_right(first), e)
            return acquired
        finally:
            vec_free(&segs)

    cdef int64_t _archive_available(self, int64_t a, int64_t b) except -1:
        """Archive AVAILABLE records not awaiting a write in [a, b] (compaction, log start moves)."""
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
                if e.state != AVAILABLE or e.flags:
                    continue
                if lo == e.first and hi == e.last:
                    self._bset(e, ARCHIVED)
                    e.member = 0
                    count += hi - lo + 1
                    continue
                e.split_per_offset()
            for k in range(<Py_ssize_t>(lo - e.first), <Py_ssize_t>(hi - e.first + 1)):
                if e.offset_states[k] == AVAILABLE and not e.offset_flags[k]:
                    self._oset(e, k, ARCHIVED)
                    e.offset_members[k] = 0
                    count += 1
        return count

    @cython.boundscheck(True)  # indexes caller-supplied sequences: IndexError, never a wild read
    cdef int _archive_aborted(self, fetched, aborted, Vec *runs) except -1:
        """read_committed: archive just-acquired records of aborted transactions and control batches,
        and cut them out of the acquired runs (SPEC §4.8)."""
        cdef Vec cut, new_runs
        cdef Range *cp
        cdef ARun *rp
        cdef Py_ssize_t ci, cj, ri, p, npending
        cdef int64_t first, last, delivery_count, pos, c0, c1, lo, hi
        pending = sorted((int(t[1]), int(t[0])) for t in aborted)  # (first_offset, producer_id)
        npending = len(pending)
        p = 0
        active = set()
        vec_init(&cut, sizeof(Range))
        vec_init(&new_runs, sizeof(ARun))
        try:
            for bo in fetched:
                base, blast = bo[0], bo[1]
                pid = bo[2] if len(bo) > 2 else -1
                txn = bool(bo[3]) if len(bo) > 3 else False
                control = bool(bo[4]) if len(bo) > 4 else False
                while p < npending and pending[p][0] <= blast:
                    active.add(pending[p][1])
                    p += 1
                if control:
                    add_range_raw(&cut, base, blast)
                    active.discard(pid)  # an abort marker ends the aborted transaction
                elif txn and pid in active:
                    add_range_raw(&cut, base, blast)
            if cut.n == 0:
                return 0
            cp = <Range *>cut.data
            ci = 0
            for ri in range(runs.n):
                rp = (<ARun *>runs.data) + ri
                first = rp.first
                last = rp.last
                delivery_count = rp.delivery_count
                pos = first
                while ci < cut.n and cp[ci].b < pos:
                    ci += 1
                cj = ci
                while pos <= last:
                    if cj < cut.n and cp[cj].a <= last:
                        c0 = cp[cj].a
                        c1 = cp[cj].b
                        if c0 > pos:
                            add_acquired_run(&new_runs, pos, c0 - 1, delivery_count, False)
                        lo = max(c0, pos)
                        hi = min(c1, last)
                        if lo <= hi:
                            self._archive_acquired(lo, hi)
                        pos = hi + 1
                        if c1 <= last:
                            cj += 1
                    else:
                        add_acquired_run(&new_runs, pos, last, delivery_count, False)
                        pos = last + 1
            # runs[:] = new_runs
            runs.n = 0
            vec_reserve(runs, new_runs.n)
            memcpy(runs.data, new_runs.data, new_runs.n * sizeof(ARun))
            runs.n = new_runs.n
            return 0
        finally:
            vec_free(&cut)
            vec_free(&new_runs)

    cdef int _archive_acquired(self, int64_t a, int64_t b) except -1:
        cdef list entries = self._entries
        cdef Py_ssize_t i, k
        cdef int64_t lo, hi
        cdef _Entry e
        for i in range(self._index_from(a), PyList_GET_SIZE(entries)):
            e = <_Entry>PyList_GET_ITEM(entries, i)
            if e.first > b:
                break
            lo = max(e.first, a)
            hi = min(e.last, b)
            if e.offset_states == NULL:
                if lo == e.first and hi == e.last:
                    self._bset(e, ARCHIVED)
                    e.member = 0
                    continue
                e.split_per_offset()
            for k in range(<Py_ssize_t>(lo - e.first), <Py_ssize_t>(hi - e.first + 1)):
                if e.offset_states[k] == ACQUIRED:
                    self._oset(e, k, ARCHIVED)
                    e.offset_members[k] = 0
        return 0

    # ------------------------------------------------------------------ acknowledgement

    @cython.boundscheck(True)  # indexes caller-supplied sequences: IndexError, never a wild read
    def begin_acknowledge(self, member_id, batches, now_ms):
        """Validate and apply acknowledgements all-or-nothing (SPEC §4.4); the changes stay pending.

        Raises `ShareError` (INVALID_REQUEST or INVALID_RECORD_STATE) with nothing changed. Otherwise
        the new states are visible at once, marked in transition, and the returned `TrackerWrite` says
        what to persist; pass its `transition_id` to `complete`. RENEW restarts locks at once and
        persists nothing.
        Runtime complexity: O(batches × log entries + entries touched + offsets of split entries touched).
        """
        cdef int32_t m
        cdef PyObject *mp
        cdef Vec plan, tbuf, out, ranges
        cdef Plan *pl
        cdef Plan *pp
        cdef uint8_t *tp
        cdef Py_ssize_t nb, idx, nt, j, i, k, k0, k1, pi
        cdef int64_t first, last, prev_last = -1, spso, speo, a, lo, hi, deadline
        cdef int64_t tv
        cdef int overflow, single, t, tk, s
        cdef bint fast, prev_fast = True, renewed
        cdef _Entry e
        cdef list entries
        cdef uint8_t *es
        cdef uint8_t *ef
        cdef int32_t *em
        cdef uint8_t *edc
        cdef uint8_t *ttp
        cdef PyObject *tob
        cdef int64_t f0, off, run_first = 0, run_last = 0, rng_a = 0, rng_b = 0
        cdef int run_state = 0, run_dc = 0, delivery_count, limit = self._limit
        cdef bint run_ok = False, rng_ok = False
        cdef Py_ssize_t dterm
        if isinstance(member_id, str) and member_id:
            mp = PyDict_GetItem(self._member_index, member_id)
            m = <int32_t>(<object>mp) if mp != NULL else -1
        else:
            m = -1
        # A list or tuple is read in place (bounds-checked: Python code such as an odd int's __index__
        # could in principle shrink a list meanwhile); anything else is read once into a tuple.
        seq = batches if (type(batches) is list or type(batches) is tuple) else tuple(batches)
        nb = len(seq)
        vec_init(&plan, sizeof(Plan))
        vec_init(&tbuf, 1)
        vec_init(&out, sizeof(Run))
        vec_init(&ranges, sizeof(Range))
        try:
            # ---- the request checks Kafka's broker makes before the leader sees the batches (INVALID_REQUEST)
            vec_reserve(&plan, nb)
            pl = <Plan *>plan.data
            prev_last_o = None
            for idx in range(nb):
                ab = seq[idx]
                if (type(ab) is tuple or type(ab) is _AcknowledgementBatch) and PyTuple_GET_SIZE(ab) >= 3:
                    first_o = <object>PyTuple_GET_ITEM(ab, 0)
                    last_o = <object>PyTuple_GET_ITEM(ab, 1)
                    types_o = <object>PyTuple_GET_ITEM(ab, 2)
                else:
                    try:
                        first_o, last_o, types_o = ab[0], ab[1], ab[2]
                    except (TypeError, IndexError):
                        raise ShareError(_INVALID_REQUEST, f"malformed acknowledgement batch {ab!r}") from None
                if not (PyLong_CheckExact(first_o) and PyLong_CheckExact(last_o)):
                    if not isinstance(first_o, int) or not isinstance(last_o, int) or isinstance(first_o, bool):
                        raise ShareError(_INVALID_REQUEST, f"acknowledgement offsets must be integers: {ab!r}")
                overflow = 0
                first = PyLong_AsLongLongAndOverflow(first_o, &overflow)
                fast = overflow == 0
                last = PyLong_AsLongLongAndOverflow(last_o, &overflow)
                fast = fast and overflow == 0
                if fast:
                    if first < 0 or first > last:
                        raise ShareError(_INVALID_REQUEST,
                                         f"acknowledgement batch first offset {first_o} > last offset {last_o}")
                    if idx > 0 and ((first <= prev_last) if prev_fast else (first_o <= prev_last_o)):
                        raise ShareError(
                            _INVALID_REQUEST,
                            f"acknowledgement batches must be ascending and disjoint ({first_o} <= {prev_last_o})",
                        )
                else:
                    if first_o < 0 or first_o > last_o:
                        raise ShareError(_INVALID_REQUEST,
                                         f"acknowledgement batch first offset {first_o} > last offset {last_o}")
                    if idx > 0 and first_o <= prev_last_o:
                        raise ShareError(
                            _INVALID_REQUEST,
                            f"acknowledgement batches must be ascending and disjoint ({first_o} <= {prev_last_o})",
                        )
                    # Past int64: the window check below refuses the batch; keep a saturated stand-in.
                    first = INT64_MAX if first_o > INT64_MAX else first_o
                    last = INT64_MAX
                if type(types_o) is tuple:
                    tt = types_o
                elif isinstance(types_o, int):
                    tt = (types_o,)
                else:
                    try:
                        tt = tuple(types_o)
                    except TypeError:
                        raise ShareError(_INVALID_REQUEST,
                                         f"acknowledge types must be a tuple of ints: {ab!r}") from None
                nt = PyTuple_GET_SIZE(tt)
                if nt == 0:
                    raise ShareError(_INVALID_REQUEST,
                                     f"acknowledgement batch {first_o}-{last_o} has no acknowledge types")
                if nt != 1 and ((nt - 1 != last - first) if fast else (nt != last_o - first_o + 1)):
                    raise ShareError(
                        _INVALID_REQUEST,
                        f"acknowledgement batch {first_o}-{last_o} has {nt} types for {last_o - first_o + 1} offsets",
                    )
                vec_reserve(&tbuf, tbuf.n + nt)
                tp = (<uint8_t *>tbuf.data) + tbuf.n
                for j in range(nt):
                    # Borrowed: no reference counting on the shared small ints in this loop.
                    tob = _tuple_get_borrowed(<PyObject *>tt, j)
                    # CPython hands out one shared object per small int, so an identity match is exact;
                    # any other int object (a big one, an int built some other way) takes the next test.
                    if tob == _P_ACCEPT:
                        tv = T_ACCEPT
                    elif tob == _P_RELEASE:
                        tv = T_RELEASE
                    elif tob == _P_REJECT:
                        tv = T_REJECT
                    elif _long_check_exact(tob):
                        overflow = 0
                        tv = _long_as_long_ovf(tob, &overflow)
                        if overflow or tv < 0 or tv > 4:
                            to = <object>tob
                            raise ShareError(_INVALID_REQUEST, f"unknown acknowledge type {to!r}")
                    else:
                        to = <object>tob
                        if not isinstance(to, int) or isinstance(to, bool) or not 0 <= to <= 4:
                            raise ShareError(_INVALID_REQUEST, f"unknown acknowledge type {to!r}")
                        tv = int(to)
                    tp[j] = <uint8_t>tv
                pp = pl + idx
                pp.first = first
                pp.last = last
                pp.idx = idx
                pp.toff = tbuf.n
                pp.nt = nt
                tbuf.n += nt
                plan.n = idx + 1
                prev_last = last
                prev_last_o = last_o
                prev_fast = fast
            # ---- the leader's checks: every record in the window must be ACQUIRED by this member
            spso = self._spso
            speo = self._speo
            entries = self._entries
            for pi in range(plan.n):
                pp = pl + pi
                if pp.last < spso:
                    continue
                if pp.last >= speo:
                    ab = seq[pp.idx]
                    raise ShareError(
                        _INVALID_REQUEST,
                        f"acknowledgement of offsets {ab[0]}-{ab[1]} goes past the in-flight window ending at {speo - 1}",
                    )
                a = max(pp.first, spso)
                i = self._bisect_right(a) - 1
                if i < 0 or (<_Entry>PyList_GET_ITEM(entries, i)).last < a:
                    raise ShareError(_INVALID_RECORD_STATE, f"no in-flight batch holds offset {a}")
                while i < PyList_GET_SIZE(entries):
                    e = <_Entry>PyList_GET_ITEM(entries, i)
                    if e.first > pp.last:
                        break
                    lo = max(e.first, a)
                    hi = min(e.last, pp.last)
                    if e.offset_states == NULL:
                        if e.state != ACQUIRED or e.flags or e.member != m:
                            raise ShareError(_INVALID_RECORD_STATE, _not_acquired_message(lo, e.state, e.flags))
                    else:
                        es = e.offset_states
                        ef = e.offset_flags
                        em = e.offset_members
                        for k in range(<Py_ssize_t>(lo - e.first), <Py_ssize_t>(hi - e.first + 1)):
                            if es[k] != ACQUIRED or ef[k] or em[k] != m:
                                raise ShareError(_INVALID_RECORD_STATE,
                                                 _not_acquired_message(e.first + k, es[k], ef[k]))
                    i += 1
            # ---- validated: apply. From here on nothing can fail but memory.
            deadline = _sat_add(now_ms, self._lock_ms)
            for pi in range(plan.n):
                pp = pl + pi
                if pp.last < spso:
                    continue
                first = pp.first
                last = pp.last
                a = max(first, spso)
                i = self._bisect_right(a) - 1
                tp = (<uint8_t *>tbuf.data) + pp.toff
                nt = pp.nt
                single = tp[0] if nt == 1 else -1
                while i < PyList_GET_SIZE(entries):
                    e = <_Entry>PyList_GET_ITEM(entries, i)
                    if e.first > last:
                        break
                    lo = max(e.first, a)
                    hi = min(e.last, last)
                    t = single
                    if t < 0:
                        k0 = <Py_ssize_t>(lo - first)
                        k1 = <Py_ssize_t>(hi - first)
                        t = tp[k0]
                        for k in range(k0 + 1, k1 + 1):
                            if tp[k] != t:
                                t = -1
                                break
                    if e.offset_states == NULL and t >= 0 and lo == e.first and hi == e.last:
                        if t == T_RENEW:
                            e.deadline = deadline
                            self._heap_push(deadline, e.first)
                        else:
                            self._bset(e, self._ack_target(t, e.delivery_count))
                            e.flags = IN_TRANSITION
                            e.member = 0
                            # add_run / add_range through the pending run and range (see below)
                            if run_ok and run_last + 1 == lo and run_state == e.state and run_dc == e.delivery_count:
                                run_last = hi
                            else:
                                if run_ok:
                                    add_run(&out, run_first, run_last, run_state, run_dc)
                                run_first = lo
                                run_last = hi
                                run_state = e.state
                                run_dc = e.delivery_count
                                run_ok = True
                            if rng_ok and rng_b + 1 == lo:
                                rng_b = hi
                            else:
                                if rng_ok:
                                    add_range(&ranges, rng_a, rng_b)
                                rng_a = lo
                                rng_b = hi
                                rng_ok = True
                        i += 1
                        continue
                    e.split_per_offset()
                    renewed = False
                    es = e.offset_states
                    ef = e.offset_flags
                    em = e.offset_members
                    edc = e.offset_delivery_counts
                    f0 = e.first
                    ttp = tp + (f0 - first)  # the type of offset f0 + k is ttp[k]
                    dterm = 0
                    # Per offset: no call, no allocation. The last state run and the last range stay in
                    # locals and reach `out` / `ranges` only when a record breaks them, which is what
                    # add_run / add_range produce when called once per offset (as the pure twin does).
                    for k in range(<Py_ssize_t>(lo - f0), <Py_ssize_t>(hi - f0 + 1)):
                        tk = t if t >= 0 else ttp[k]
                        if tk == T_RENEW:
                            e.offset_deadlines[k] = deadline
                            renewed = True
                            continue
                        delivery_count = edc[k]
                        if tk == T_ACCEPT:
                            s = ACKNOWLEDGED
                        elif tk == T_RELEASE and delivery_count < limit:
                            s = AVAILABLE
                        else:
                            s = ARCHIVED  # REJECT, GAP, or RELEASE at the delivery limit
                        dterm += <Py_ssize_t>_terminal(s) - <Py_ssize_t>_terminal(es[k])
                        es[k] = <uint8_t>s
                        ef[k] = IN_TRANSITION
                        em[k] = 0
                        off = f0 + k
                        if run_ok and run_last + 1 == off and run_state == s and run_dc == delivery_count:
                            run_last = off
                        else:
                            if run_ok:
                                add_run(&out, run_first, run_last, run_state, run_dc)
                            run_first = off
                            run_last = off
                            run_state = s
                            run_dc = delivery_count
                            run_ok = True
                        if rng_ok and rng_b + 1 == off:
                            rng_b = off
                        else:
                            if rng_ok:
                                add_range(&ranges, rng_a, rng_b)
                            rng_a = off
                            rng_b = off
                            rng_ok = True
                    e.terminal_count += dterm
                    self._terminal_total += dterm
                    if renewed:
                        self._heap_push(deadline, e.first)
                    i += 1
            if run_ok:
                add_run(&out, run_first, run_last, run_state, run_dc)
            if rng_ok:
                add_range(&ranges, rng_a, rng_b)
            return self._pending(m, &ranges, _state_batch_list(&out))
        finally:
            vec_free(&plan)
            vec_free(&tbuf)
            vec_free(&out)
            vec_free(&ranges)

    cdef inline int _ack_target(self, int ack_type, int delivery_count) noexcept:
        if ack_type == T_ACCEPT:
            return ACKNOWLEDGED
        if ack_type == T_RELEASE:
            return ARCHIVED if delivery_count >= self._limit else AVAILABLE
        return ARCHIVED  # REJECT and GAP

    cdef object _pending(self, int32_t m, Vec *ranges, list writes):
        cdef _Transition tr
        cdef int64_t tid, start
        if ranges.n == 0:
            return _new_namedtuple4(_TP_TRACKER_WRITE, 0, [], self._spso, self._count_terminal_from(self._spso), False)
        tr = _Transition.__new__(_Transition)
        tr.m = m
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
        start = self._scan_start(tr.ranges, tr.n)
        return _new_namedtuple4(_TP_TRACKER_WRITE, tid_o, writes, start, self._count_terminal_from(start), False)

    def begin_release(self, member_id, now_ms):
        """Release every record `member_id` holds, like a RELEASE acknowledgement (SPEC §4.3).

        The delivery count is kept, so a consumer that keeps crashing on a record cannot loop forever;
        records at the limit, or below the SPSO, are archived. Pending until `complete`.
        Runtime complexity: O(entries + offsets of split entries).
        """
        cdef int32_t m
        cdef PyObject *mp
        cdef Vec out, ranges
        cdef int64_t spso, off
        cdef int limit = self._limit, s
        cdef Py_ssize_t i, k, n
        cdef list entries = self._entries
        cdef _Entry e
        if isinstance(member_id, str) and member_id:
            mp = PyDict_GetItem(self._member_index, member_id)
            m = <int32_t>(<object>mp) if mp != NULL else -1
        else:
            m = -1
        vec_init(&out, sizeof(Run))
        vec_init(&ranges, sizeof(Range))
        try:
            if m > 0:
                spso = self._spso
                for i in range(PyList_GET_SIZE(entries)):
                    e = <_Entry>PyList_GET_ITEM(entries, i)
                    if e.offset_states == NULL:
                        if e.state != ACQUIRED or e.flags or e.member != m:
                            continue
                        if e.first >= spso or e.delivery_count >= limit:
                            self._bset(e, ARCHIVED if (e.delivery_count >= limit or e.last < spso) else AVAILABLE)
                            e.flags = IN_TRANSITION
                            e.member = 0
                            add_run(&out, e.first, e.last, e.state, e.delivery_count)
                            add_range(&ranges, e.first, e.last)
                            continue
                        e.split_per_offset()
                    n = <Py_ssize_t>(e.last - e.first + 1)
                    for k in range(n):
                        if e.offset_states[k] != ACQUIRED or e.offset_flags[k] or e.offset_members[k] != m:
                            continue
                        off = e.first + k
                        s = ARCHIVED if (e.offset_delivery_counts[k] >= limit or off < spso) else AVAILABLE
                        self._oset(e, k, s)
                        e.offset_flags[k] = IN_TRANSITION
                        e.offset_members[k] = 0
                        add_run(&out, off, off, s, e.offset_delivery_counts[k])
                        add_range(&ranges, off, off)
            return self._pending(m, &ranges, _state_batch_list(&out))
        finally:
            vec_free(&out)
            vec_free(&ranges)

    def complete(self, transition_id, committed, now_ms):
        """Commit or roll back a pending transition once its write answered (SPEC §4.6).

        Roll back restores ACQUIRED for the owner, except that a record whose lock expired meanwhile
        becomes AVAILABLE (ARCHIVED at the delivery limit or below the SPSO). Records archived by a log
        start move meanwhile stay archived.
        """
        cdef _Transition tr
        cdef bint commit
        cdef int64_t now = 0, spso, a, b, lo, hi, d, earliest
        cdef int limit
        cdef int32_t m
        cdef Py_ssize_t ri, i, k, nentries
        cdef list entries
        cdef _Entry e
        t = self._transitions.pop(transition_id, None)
        if t is None:
            raise ShareError(_INVALID_REQUEST, f"unknown transition {transition_id}")
        tr = <_Transition>t
        commit = bool(committed)
        if not commit:
            now = now_ms
        m = tr.m
        spso = self._spso
        limit = self._limit
        entries = self._entries
        nentries = PyList_GET_SIZE(entries)
        for ri in range(tr.n):
            a = tr.ranges[ri].a
            b = tr.ranges[ri].b
            for i in range(self._index_from(a), nentries):
                e = <_Entry>PyList_GET_ITEM(entries, i)
                if e.first > b:
                    break
                lo = max(e.first, a)
                hi = min(e.last, b)
                if e.offset_states == NULL:
                    if lo == e.first and hi == e.last:
                        if not e.flags:
                            continue
                        if commit:
                            e.flags = 0
                            continue
                        if e.deadline > now:
                            e.flags = 0
                            self._bset(e, ACQUIRED)
                            e.member = m
                            # The lock may have been popped by an expiry pass that ran "later" than
                            # now_ms; a fresh heap item guarantees the record still expires.
                            self._heap_push(e.deadline, e.first)
                            continue
                        if e.first >= spso or e.delivery_count >= limit:
                            e.flags = 0
                            self._bset(e, ARCHIVED if e.delivery_count >= limit else AVAILABLE)
                            e.member = 0
                            continue
                    e.split_per_offset()  # straddles the SPSO: offsets below it archive, the rest do not
                earliest = -1
                for k in range(<Py_ssize_t>(lo - e.first), <Py_ssize_t>(hi - e.first + 1)):
                    if not e.offset_flags[k]:
                        continue
                    e.offset_flags[k] = 0
                    if commit:
                        continue
                    d = e.offset_deadlines[k]
                    if d <= now:
                        self._oset(e, k, ARCHIVED if (e.offset_delivery_counts[k] >= limit or e.first + k < spso) else AVAILABLE)
                        e.offset_members[k] = 0
                    else:
                        self._oset(e, k, ACQUIRED)
                        e.offset_members[k] = m
                        if earliest < 0 or d < earliest:
                            earliest = d
                if earliest >= 0:
                    self._heap_push(earliest, e.first)
        self._advance()

    # ------------------------------------------------------------------ locks and the log start

    def expire_locks(self, now_ms):
        """Expire every lock due at `now_ms` (one phase: states change now, the write follows).

        Returns the number of records expired and what to persist. A lock that falls due while its
        record awaits a write changes nothing now; the rollback, if any, finds it expired.
        Runtime complexity: O(due heap items × log heap + offsets of split entries they name).
        """
        cdef int64_t now = now_ms
        cdef int limit = self._limit
        cdef int64_t spso = self._spso
        cdef int64_t count = 0, first
        cdef Vec out, merged
        cdef HeapItem item
        cdef Py_ssize_t i, k, n
        cdef list entries = self._entries
        cdef _Entry e
        cdef Run *rp
        cdef int s
        vec_init(&out, sizeof(Run))
        vec_init(&merged, sizeof(Run))
        try:
            while self._heap_n and self._heap[0].deadline <= now:
                item = self._heap_pop()
                first = item.first
                i = self._bisect_right(first) - 1
                if i < 0:
                    continue
                e = <_Entry>PyList_GET_ITEM(entries, i)
                if e.first != first:
                    continue
                if e.offset_states == NULL:
                    if e.state != ACQUIRED or e.flags or e.deadline > now:
                        continue
                    if e.first >= spso or e.delivery_count >= limit:
                        self._bset(e, ARCHIVED if (e.delivery_count >= limit or e.last < spso) else AVAILABLE)
                        e.member = 0
                        push_raw_run(&out, e.first, e.last, e.state, e.delivery_count)
                        count += e.last - e.first + 1
                        continue
                    e.split_per_offset()
                n = <Py_ssize_t>(e.last - e.first + 1)
                for k in range(n):
                    if e.offset_states[k] == ACQUIRED and not e.offset_flags[k] and e.offset_deadlines[k] <= now:
                        s = ARCHIVED if (e.offset_delivery_counts[k] >= limit or e.first + k < spso) else AVAILABLE
                        self._oset(e, k, s)
                        e.offset_members[k] = 0
                        push_raw_run(&out, e.first + k, e.first + k, s, e.offset_delivery_counts[k])
                        count += 1
            if out.n == 0:
                return 0, _new_namedtuple4(_TP_TRACKER_WRITE, 0, [], self._spso, self._count_terminal_from(self._spso), False)
            # Offsets in `out` are distinct, so ordering by first offset is the pure twin's list sort.
            qsort(out.data, out.n, sizeof(Run), _cmp_run_first)
            rp = <Run *>out.data
            for i in range(out.n):
                add_run(&merged, rp[i].first, rp[i].last, rp[i].state, rp[i].delivery_count)
            self._advance()
            return count, _new_namedtuple4(_TP_TRACKER_WRITE, 0, _state_batch_list(&merged), self._spso,
                               self._count_terminal_from(self._spso), False)
        finally:
            vec_free(&out)
            vec_free(&merged)

    def update_log_start_offset(self, log_start_offset):
        """Retention moved the log start: AVAILABLE records below it are archived (SPEC §4.9).

        ACQUIRED records stay until acknowledged or expired (then archived). Nothing is persisted now;
        the new SPSO reaches storage with the next write.
        """
        cdef int64_t lso = int(log_start_offset)
        if lso <= self._spso:
            return
        self._archive_available_lso(self._spso, lso - 1)
        self._spso = lso
        if self._speo < lso:
            self._speo = lso
        self._advance()

    cdef int _archive_available_lso(self, int64_t a, int64_t b) except -1:
        # Like _archive_available, but a record awaiting a RELEASE write is archived too and leaves
        # its transition: the log no longer has it, so no rollback may bring it back.
        cdef list entries = self._entries
        cdef Py_ssize_t i, k
        cdef int64_t lo, hi
        cdef _Entry e
        for i in range(self._index_from(a), PyList_GET_SIZE(entries)):
            e = <_Entry>PyList_GET_ITEM(entries, i)
            if e.first > b:
                break
            lo = max(e.first, a)
            hi = min(e.last, b)
            if e.offset_states == NULL:
                if e.state != AVAILABLE:
                    continue
                if lo == e.first and hi == e.last:
                    self._bset(e, ARCHIVED)
                    e.flags = 0
                    e.member = 0
                    continue
                e.split_per_offset()
            for k in range(<Py_ssize_t>(lo - e.first), <Py_ssize_t>(hi - e.first + 1)):
                if e.offset_states[k] == AVAILABLE:
                    self._oset(e, k, ARCHIVED)
                    e.offset_flags[k] = 0
                    e.offset_members[k] = 0
        return 0

    # ------------------------------------------------------------------ SPSO advance

    cdef int64_t _scan_start(self, Range *allowed, Py_ssize_t nr) noexcept:
        """Where the SPSO lands after the leading run of terminal records (natural gaps skipped).

        Records awaiting a write stop the run, except those inside `allowed` (the ranges of the
        transition whose write is being prepared: once it is durable they are done).
        """
        cdef int64_t pos = self._spso, off
        cdef list entries = self._entries
        cdef Py_ssize_t i = self._index_from(pos)
        cdef Py_ssize_t ri = 0, k, size
        cdef uint8_t s
        cdef _Entry e
        cdef int64_t hole
        while i < PyList_GET_SIZE(entries):
            e = <_Entry>PyList_GET_ITEM(entries, i)
            if e.first > pos:
                hole = self._blocking_hole(pos, e.first)
                if hole >= 0:
                    return hole
                pos = e.first
            if e.offset_states == NULL:
                if _terminal(e.state):
                    if not e.flags:
                        pos = e.last + 1
                        i += 1
                        continue
                    while ri < nr and allowed[ri].b < pos:
                        ri += 1
                    if ri < nr and allowed[ri].a <= pos and allowed[ri].b >= e.last:
                        pos = e.last + 1
                        i += 1
                        continue
                return pos
            k = <Py_ssize_t>(pos - e.first)
            size = <Py_ssize_t>(e.last - e.first + 1)
            while k < size:
                s = e.offset_states[k]
                if s != ACKNOWLEDGED and s != ARCHIVED:
                    return e.first + k
                if e.offset_flags[k]:
                    off = e.first + k
                    while ri < nr and allowed[ri].b < off:
                        ri += 1
                    if not (ri < nr and allowed[ri].a <= off):
                        return off
                k += 1
            pos = e.last + 1
            i += 1
        if pos < self._speo:
            hole = self._blocking_hole(pos, self._speo)
            if hole >= 0:
                return hole
        return max(pos, self._speo)

    cdef inline int64_t _blocking_hole(self, int64_t pos, int64_t end) noexcept:
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

    cdef inline void _close_gap_window_when_done(self) noexcept:
        """Close the persisted-gap window once the SPEO moved past the last persisted batch (or the SPSO
        reached it); the holes left then are natural gaps."""
        if self._gap_end >= 0 and (self._speo != self._gap_end or self._spso >= self._gap_end):
            self._gap_end = -1

    cdef int _advance(self) except -1:
        """Move the SPSO over the leading terminal run and drop wholly terminal leading entries."""
        self._close_gap_window_when_done()
        cdef int64_t start = self._scan_start(NULL, 0)
        cdef int64_t spso
        cdef Py_ssize_t drop = 0, n
        cdef list entries = self._entries
        cdef _Entry e
        if start > self._spso:
            self._spso = start
        spso = self._spso
        n = PyList_GET_SIZE(entries)
        while drop < n:
            e = <_Entry>PyList_GET_ITEM(entries, drop)
            if e.last >= spso or not e.done():
                break
            self._terminal_total -= e.last - e.first + 1  # a done entry is terminal throughout
            drop += 1
        if drop:
            del entries[:drop]
        if PyList_GET_SIZE(entries) == 0:
            self._speo = max(self._speo, self._spso)
            if not self._transitions:
                self._heap_n = 0
        self._close_gap_window_when_done()
        return 0

    # ------------------------------------------------------------------ invariants

    @cython.boundscheck(True)  # indexes caller-supplied sequences: IndexError, never a wild read
    def _check(self):
        """Assert every invariant of the window; tests call it after each step."""
        cdef Py_ssize_t idx, k, n, c
        cdef int64_t prev_last = -1
        cdef _Entry e
        cdef _Transition tr
        cdef int64_t nmembers = len(self._member_names)
        if not (0 <= self._spso <= self._speo):
            raise AssertionError((self._spso, self._speo))
        if self._gap_end >= 0 and not (self._gap_end == self._speo and self._spso < self._gap_end):
            raise AssertionError(("gap window", self._gap_start, self._gap_end, self._spso, self._speo))
        if self._heap_n < 0 or self._heap_n > self._heap_cap or (self._heap_cap and self._heap == NULL):
            raise AssertionError("lock heap bookkeeping is corrupt")
        heap_min = {}
        for k in range(self._heap_n):
            for c in (2 * k + 1, 2 * k + 2):
                if c < self._heap_n and (self._heap[c].deadline < self._heap[k].deadline or (
                        self._heap[c].deadline == self._heap[k].deadline and self._heap[c].first < self._heap[k].first)):
                    raise AssertionError("lock heap order is broken")
            d = self._heap[k].deadline
            f = self._heap[k].first
            if d < heap_min.get(f, 1 << 62):
                heap_min[f] = d
        flagged = False
        terminal_total = 0
        for idx in range(len(self._entries)):
            e = self._entries[idx]
            if not (e.first <= e.last < self._speo):
                raise AssertionError((e.first, e.last, self._speo))
            if not e.first > prev_last:
                raise AssertionError("entries overlap or are unsorted")
            prev_last = e.last
            n = <Py_ssize_t>(e.last - e.first + 1)
            if e.offset_states == NULL:
                if e.offset_deadlines != NULL or e.offset_members != NULL or e.offset_flags != NULL or e.offset_delivery_counts != NULL:
                    raise AssertionError("batch-level entry holds per-offset arrays")
                recs = [(e.first, e.state, e.flags, e.delivery_count, e.member, e.deadline)]
            else:
                if e.offset_deadlines == NULL or e.offset_members == NULL or e.offset_flags == NULL or e.offset_delivery_counts == NULL:
                    raise AssertionError("split entry lacks per-offset arrays")
                recs = [(e.first + k, e.offset_states[k], e.offset_flags[k], e.offset_delivery_counts[k], e.offset_members[k], e.offset_deadlines[k])
                        for k in range(n)]
                if e.terminal_count != sum(1 for r in recs if r[1] in (ACKNOWLEDGED, ARCHIVED)):
                    raise AssertionError(f"entry {e.first}-{e.last}: terminal count {e.terminal_count} is stale")
                if not 0 <= e.settled_count <= n or any(r[1] not in (ACKNOWLEDGED, ARCHIVED) or r[2]
                                                  for r in recs[:e.settled_count]):
                    raise AssertionError(f"entry {e.first}-{e.last}: settled prefix {e.settled_count} is wrong")
            if e.offset_states == NULL:
                terminal_total += (e.last - e.first + 1) if e.state in (ACKNOWLEDGED, ARCHIVED) else 0
            else:
                terminal_total += e.terminal_count
            for off, s, fl, delivery_count, mem, dl in recs:
                if s not in (AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED):
                    raise AssertionError(s)
                if not 0 <= mem < nmembers:
                    raise AssertionError((off, mem))
                if s == ACQUIRED:
                    if not (mem != 0 and delivery_count >= 1 and not fl):
                        raise AssertionError((off, s, mem, delivery_count, fl))
                    if not heap_min.get(e.first, 1 << 62) <= dl:
                        raise AssertionError(f"acquired offset {off} has no lock timer")
                elif mem != 0:
                    raise AssertionError((off, s, mem))
                if fl:
                    flagged = True
                if off < self._spso and s == AVAILABLE:
                    raise AssertionError(f"offset {off} below the SPSO is AVAILABLE")
            if e.last < self._spso:
                if not (not e.done() or idx > 0):
                    raise AssertionError("a done entry below the SPSO should have been dropped")
        if terminal_total != self._terminal_total:
            raise AssertionError(f"terminal total {self._terminal_total} is stale (actual {terminal_total})")
        # Every flagged record belongs to a pending transition.
        for t in self._transitions.values():
            tr = <_Transition>t
            if not 0 < tr.m < nmembers:
                raise AssertionError(tr.m)
            for k in range(tr.n):
                if not tr.ranges[k].a <= tr.ranges[k].b:
                    raise AssertionError((tr.ranges[k].a, tr.ranges[k].b))
        if flagged and not self._transitions:
            raise AssertionError("records in transition without a pending transition")
        # The SPSO is fully advanced: the record at the SPSO (if any) is not done.
        if not self._scan_start(NULL, 0) <= self._spso:
            raise AssertionError("SPSO not advanced over a terminal run")

