"""The lock heap of the Cython tracker (included by `tracker.pyx`): a binary min-heap of
(deadline_ms, entry first offset) in one PyMem block with hand-written sift up/down. It holds exactly
the items the pure twin's `heapq` list holds, so `next_lock_deadline_ms` agrees between the twins.
"""


cdef struct HeapItem:
    int64_t deadline
    int64_t first


cdef struct LockHeap:
    HeapItem *items
    Py_ssize_t n
    Py_ssize_t cap


cdef inline bint _heap_before(HeapItem x, HeapItem y) noexcept nogil:
    """x sorts before y: earlier deadline, then lower first offset (the order of heapq's tuples)."""
    return x.deadline < y.deadline or (x.deadline == y.deadline and x.first < y.first)


cdef inline void lock_heap_init(LockHeap *h) noexcept:
    h.items = NULL
    h.n = 0
    h.cap = 0


cdef inline void lock_heap_free(LockHeap *h) noexcept:
    if h.items != NULL:
        PyMem_Free(h.items)
    lock_heap_init(h)


cdef int lock_heap_push(LockHeap *h, int64_t deadline, int64_t first) except -1:
    """Add (deadline, first). Runtime complexity: O(log n)."""
    cdef Py_ssize_t i, parent, newcap
    cdef HeapItem *items
    cdef HeapItem item
    if h.n == h.cap:
        newcap = h.cap * 2 if h.cap else 16
        items = <HeapItem *>PyMem_Realloc(h.items, newcap * sizeof(HeapItem))
        if items == NULL:
            raise MemoryError()
        h.items = items
        h.cap = newcap
    items = h.items
    item.deadline = deadline
    item.first = first
    i = h.n
    h.n += 1
    while i > 0:
        parent = (i - 1) >> 1
        if not _heap_before(item, items[parent]):
            break
        items[i] = items[parent]
        i = parent
    items[i] = item
    return 0


cdef HeapItem lock_heap_pop(LockHeap *h) noexcept:
    """Remove and return the smallest item; the heap must not be empty. Runtime complexity: O(log n)."""
    cdef HeapItem *items = h.items
    cdef HeapItem top = items[0]
    cdef HeapItem last
    cdef Py_ssize_t n, i, c
    h.n -= 1
    n = h.n
    if n == 0:
        return top
    last = items[n]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and _heap_before(items[c + 1], items[c]):
            c += 1
        if not _heap_before(items[c], last):
            break
        items[i] = items[c]
        i = c
    items[i] = last
    return top
