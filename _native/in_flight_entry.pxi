"""Entries and pending transitions of the Cython tracker (included by `tracker.pyx`; the pure twin is
`sharegroup.tracker._in_flight_entry`). An entry is one cached range: batch-level state, or a per-offset block.
"""


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
    # Split entries only: `terminal_count` counts terminal offsets; the first `settled_count` offsets are
    # terminal and not awaiting a write, so they never change again (extended lazily; it only grows).
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


cdef inline _Entry _new_entry(int64_t first, int64_t last, int state, int delivery_count, int32_t member,
                              int64_t deadline):
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

    cdef int32_t owner
    cdef Range *ranges  # points at `one` when there is a single range
    cdef Py_ssize_t n
    cdef Range one

    def __dealloc__(self):
        if self.ranges != NULL and self.ranges != &self.one:
            PyMem_Free(self.ranges)
        self.ranges = NULL
