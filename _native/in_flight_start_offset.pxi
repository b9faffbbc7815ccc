"""The start offset (SPSO) advance of the Cython tracker (included by `tracker.pyx`; the pure twin is
`sharegroup.tracker._in_flight_start_offset`): the leading run of terminal records, the holes it may or may not
skip (the persisted-gap window), and dropping wholly terminal leading entries.
"""


cdef int64_t _scan_start(InFlightTracker self, Range *allowed, Py_ssize_t allowed_count) noexcept:
    """Where the SPSO lands after the leading run of terminal records (natural gaps skipped).

    Records awaiting a write stop the run, except those inside `allowed` (the ranges of the
    transition whose write is being prepared: once it is durable they are done).
    """
    cdef int64_t pos = self._spso, off
    cdef list entries = self._entries
    cdef Py_ssize_t i = self._index_from(pos)
    cdef Py_ssize_t allowed_index = 0, k, size
    cdef uint8_t s
    cdef _Entry e
    cdef int64_t hole
    while i < PyList_GET_SIZE(entries):
        e = <_Entry>PyList_GET_ITEM(entries, i)
        if e.first > pos:
            hole = _blocking_hole(self, pos, e.first)
            if hole >= 0:
                return hole
            pos = e.first
        if e.offset_states == NULL:
            if _terminal(e.state):
                if not e.flags:
                    pos = e.last + 1
                    i += 1
                    continue
                while allowed_index < allowed_count and allowed[allowed_index].b < pos:
                    allowed_index += 1
                if (allowed_index < allowed_count and allowed[allowed_index].a <= pos
                        and allowed[allowed_index].b >= e.last):
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
                while allowed_index < allowed_count and allowed[allowed_index].b < off:
                    allowed_index += 1
                if not (allowed_index < allowed_count and allowed[allowed_index].a <= off):
                    return off
            k += 1
        pos = e.last + 1
        i += 1
    if pos < self._speo:
        hole = _blocking_hole(self, pos, self._speo)
        if hole >= 0:
            return hole
    return max(pos, self._speo)

cdef inline int64_t _blocking_hole(InFlightTracker self, int64_t pos, int64_t end) noexcept:
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

cdef inline void _close_gap_window_when_done(InFlightTracker self) noexcept:
    """Close the persisted-gap window once the SPEO moved past the last persisted batch (or the SPSO
    reached it); the holes left then are natural gaps."""
    if self._gap_end >= 0 and (self._speo != self._gap_end or self._spso >= self._gap_end):
        self._gap_end = -1

cdef inline bint _covered(InFlightTracker self, int64_t offset) noexcept:
    """Whether an entry covers `offset`."""
    cdef Py_ssize_t i = self._index_from(offset)
    return i < PyList_GET_SIZE(self._entries) and (<_Entry>PyList_GET_ITEM(self._entries, i)).first <= offset

cdef int _advance(InFlightTracker self, bint acquisition=False) except -1:
    """Move the SPSO over the leading terminal run and drop wholly terminal leading entries.

    After an `acquisition` an SPSO that no entry covers (a leading hole of the persisted-gap window
    that the read did not acquire) stays where it is, as in Kafka, even when the window has just
    closed; the next acknowledgement, release, lock expiry or log start move passes it.
    """
    _close_gap_window_when_done(self)
    cdef int64_t start
    cdef int64_t spso
    cdef Py_ssize_t drop = 0, n
    cdef list entries = self._entries
    cdef _Entry e
    if not (acquisition and not _covered(self, self._spso)):
        start = _scan_start(self, NULL, 0)
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
            self._locks.n = 0
    _close_gap_window_when_done(self)
    return 0
