"""C helpers of the Cython tracker (included by `tracker.pyx`): building the returned namedtuples
without their Python-level constructors, a word-at-a-time terminal-state count, small growable C buffers
of runs and ranges (the pure twin's lists, `sharegroup.tracker._tracker_buffers`), and saturating int64 helpers.
"""


cdef extern from "Python.h":
    # The namedtuples' tp_alloc (inherited from object); `tuple.__new__(cls, t)` allocates with it too.
    PyObject *_generic_alloc "PyType_GenericAlloc"(PyTypeObject *namedtuple_type, Py_ssize_t nitems) except NULL
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


cdef inline object _new_namedtuple3(PyTypeObject *namedtuple_type, object a, object b, object c, bint atomic):
    """`namedtuple_type(a, b, c)` for a 3-field namedtuple, built the way
    `tuple.__new__(namedtuple_type, (a, b, c))` builds it.

    `atomic`: every field is an int, so the tuple can never be part of a cycle and is untracked at once
    (CPython untracks such tuples itself at its next collection).
    """
    cdef PyObject *o = _generic_alloc(namedtuple_type, 3)
    Py_INCREF(a)
    _tuple_set(o, 0, <PyObject *>a)
    Py_INCREF(b)
    _tuple_set(o, 1, <PyObject *>b)
    Py_INCREF(c)
    _tuple_set(o, 2, <PyObject *>c)
    if atomic:
        _gc_untrack(o)
    return _steal(o)


cdef inline object _new_namedtuple4(PyTypeObject *namedtuple_type, object a, object b, object c, object d, bint atomic):
    """`namedtuple_type(a, b, c, d)` for a 4-field namedtuple (see `_new_namedtuple3`)."""
    cdef PyObject *o = _generic_alloc(namedtuple_type, 4)
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
    /* Terminal states are ACKNOWLEDGED (2) and ARCHIVED (4): among the valid states 0..4 exactly the
       bytes with bit 2 set, or bit 1 set and bit 0 clear (3, ARCHIVING, is not terminal). Eight bytes at a
       time: move both tests to bit 0 of every byte (they never hold together) and add the bytes with one
       multiply (each byte sum is at most 8). */
    static inline Py_ssize_t sg_count_terminal(const uint8_t *p, Py_ssize_t n) {
        Py_ssize_t total = 0, i = 0;
        for (; i + 8 <= n; i += 8) {
            uint64_t w;
            memcpy(&w, p + i, 8);
            w = ((w >> 2) | ((w >> 1) & ~w)) & 0x0101010101010101ULL;
            total += (Py_ssize_t)((w * 0x0101010101010101ULL) >> 56);
        }
        for (; i < n; i++) total += (p[i] == 2) | (p[i] == 4);
        return total;
    }
    """
    Py_ssize_t sg_count_terminal(const uint8_t *p, Py_ssize_t n) noexcept nogil


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
