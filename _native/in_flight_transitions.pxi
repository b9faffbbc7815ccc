"""State transitions after acquisition for the Cython tracker (included by `tracker.pyx`; the pure twin is
`sharegroup.in_flight_transitions`): acknowledgement, release and their completion (two-phase, SPEC
§4.4 and §4.6), and lock expiry (one phase).
"""


cdef str _not_acquired_message(int64_t offset, int state, int flags):
    if flags:
        return f"offset {offset} is awaiting a previous acknowledgement"
    if state != ACQUIRED:
        return f"offset {offset} is {RecordState(state).name}, not ACQUIRED"
    return f"offset {offset} is acquired by another member"


@cython.boundscheck(True)  # indexes caller-supplied sequences: IndexError, never a wild read
cdef object _begin_acknowledge(InFlightTracker self, member_id, batches, now_ms):
    """`InFlightTracker.begin_acknowledge` (see its docstring)."""
    cdef int32_t m
    cdef PyObject *mp
    cdef Vec plan, tbuf, out, ranges
    cdef Plan *pl
    cdef Plan *pp
    cdef uint8_t *tp
    cdef Py_ssize_t nb, nt, i, k, k0, k1, pi
    cdef int64_t first, last, spso, speo, a, lo, hi, deadline
    cdef int single, t, tk, s
    cdef bint renewed
    cdef _Entry e
    cdef list entries
    cdef uint8_t *es
    cdef uint8_t *ef
    cdef int32_t *em
    cdef uint8_t *edc
    cdef uint8_t *ttp
    cdef int64_t f0, off, run_first = 0, run_last = 0, rng_a = 0, rng_b = 0
    cdef int run_state = 0, run_delivery_count = 0, delivery_count, limit = self._limit
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
        parse_acknowledgement_request(seq, nb, &plan, &tbuf)
        pl = <Plan *>plan.data
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
                        lock_heap_push(&self._locks, deadline, e.first)
                    else:
                        self._bset(e, self._ack_target(t, e.delivery_count))
                        e.flags = IN_TRANSITION
                        e.member = 0
                        # add_run / add_range through the pending run and range (see below)
                        if run_ok and run_last + 1 == lo and run_state == e.state and run_delivery_count == e.delivery_count:
                            run_last = hi
                        else:
                            if run_ok:
                                add_run(&out, run_first, run_last, run_state, run_delivery_count)
                            run_first = lo
                            run_last = hi
                            run_state = e.state
                            run_delivery_count = e.delivery_count
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
                    if run_ok and run_last + 1 == off and run_state == s and run_delivery_count == delivery_count:
                        run_last = off
                    else:
                        if run_ok:
                            add_run(&out, run_first, run_last, run_state, run_delivery_count)
                        run_first = off
                        run_last = off
                        run_state = s
                        run_delivery_count = delivery_count
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
                    lock_heap_push(&self._locks, deadline, e.first)
                i += 1
        if run_ok:
            add_run(&out, run_first, run_last, run_state, run_delivery_count)
        if rng_ok:
            add_range(&ranges, rng_a, rng_b)
        return self._pending(m, &ranges, _state_batch_list(&out))
    finally:
        vec_free(&plan)
        vec_free(&tbuf)
        vec_free(&out)
        vec_free(&ranges)


cdef object _begin_release(InFlightTracker self, member_id, now_ms):
    """`InFlightTracker.begin_release` (see its docstring)."""
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


cdef object _complete(InFlightTracker self, transition_id, committed, now_ms):
    """`InFlightTracker.complete` (see its docstring)."""
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
                        lock_heap_push(&self._locks, e.deadline, e.first)
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
                lock_heap_push(&self._locks, earliest, e.first)
    self._advance()


cdef object _expire_locks(InFlightTracker self, now_ms):
    """`InFlightTracker.expire_locks` (see its docstring)."""
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
        while self._locks.n and self._locks.items[0].deadline <= now:
            item = lock_heap_pop(&self._locks)
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
