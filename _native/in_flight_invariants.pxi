"""The invariant check of the Cython tracker (included by `tracker.pyx`; the pure twin is
`sharegroup.tracker._in_flight_invariants`). Tests call `InFlightTracker._check()` after every step.
"""


@cython.boundscheck(True)  # indexes caller-supplied sequences: IndexError, never a wild read
cdef object _check_invariants(InFlightTracker self):
    """`InFlightTracker._check` (see its docstring)."""
    cdef Py_ssize_t idx, k, n, c
    cdef int64_t prev_last = -1
    cdef _Entry e
    cdef _Transition tr
    cdef int64_t nmembers = len(self._member_names)
    if not (0 <= self._spso <= self._speo):
        raise AssertionError((self._spso, self._speo))
    if self._gap_end >= 0 and not (self._gap_end == self._speo and self._spso < self._gap_end):
        raise AssertionError(("gap window", self._gap_start, self._gap_end, self._spso, self._speo))
    if self._locks.n < 0 or self._locks.n > self._locks.cap or (self._locks.cap and self._locks.items == NULL):
        raise AssertionError("lock heap bookkeeping is corrupt")
    heap_min = {}
    for k in range(self._locks.n):
        for c in (2 * k + 1, 2 * k + 2):
            if c < self._locks.n and (self._locks.items[c].deadline < self._locks.items[k].deadline or (
                    self._locks.items[c].deadline == self._locks.items[k].deadline
                    and self._locks.items[c].first < self._locks.items[k].first)):
                raise AssertionError("lock heap order is broken")
        d = self._locks.items[k].deadline
        f = self._locks.items[k].first
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
            if (e.offset_deadlines != NULL or e.offset_members != NULL or e.offset_flags != NULL
                    or e.offset_delivery_counts != NULL):
                raise AssertionError("batch-level entry holds per-offset arrays")
            recs = [(e.first, e.state, e.flags, e.delivery_count, e.member, e.deadline)]
        else:
            if (e.offset_deadlines == NULL or e.offset_members == NULL or e.offset_flags == NULL
                    or e.offset_delivery_counts == NULL):
                raise AssertionError("split entry lacks per-offset arrays")
            recs = [(e.first + k, e.offset_states[k], e.offset_flags[k], e.offset_delivery_counts[k],
                     e.offset_members[k], e.offset_deadlines[k])
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
            if s not in (AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVING, ARCHIVED):
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
        if not 0 < tr.owner < nmembers:
            raise AssertionError(tr.owner)
        for k in range(tr.n):
            # ascending and disjoint (complete relies on it)
            if not (tr.ranges[k].a <= tr.ranges[k].b and (k == 0 or tr.ranges[k - 1].b < tr.ranges[k].a)):
                raise AssertionError((tr.ranges[k].a, tr.ranges[k].b))
    if flagged and not self._transitions:
        raise AssertionError("records in transition without a pending transition")
    # The next-fetch walk may start where it does: nothing fetchable lies below its start.
    if (self._next_fetch_offset_from(self._spso)
            != self._next_fetch_offset_from(max(self._spso, self._fetch_scan_from))):
        raise AssertionError("next-fetch walk starts too late")
    # The SPSO is fully advanced: the record at the SPSO (if any) is not done. An acquisition leaves an
    # SPSO that no entry covers where it is (see `_advance`).
    if not (_scan_start(self, NULL, 0) <= self._spso or not _covered(self, self._spso)):
        raise AssertionError("SPSO not advanced over a terminal run")
