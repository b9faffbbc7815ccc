"""State transitions after acquisition for the Cython tracker (included by `tracker.pyx`; the pure twin is
`sharegroup.tracker._in_flight_transitions`): acknowledgement, release and their completion (two-phase),
and lock expiry (one phase).
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
    cdef int32_t owner
    cdef PyObject *owner_ref
    cdef Vec plan_buffer, type_buffer, out, ranges
    cdef Plan *plans
    cdef Plan *plan
    cdef uint8_t *types
    cdef Py_ssize_t nb, nt, i, k, k0, k1, pi
    cdef int64_t first, last, spso, speo, a, lo, hi, deadline
    cdef int single, t, tk, s
    cdef bint renewed
    cdef _Entry e
    cdef list entries
    cdef uint8_t *states
    cdef uint8_t *in_transition
    cdef int32_t *owners
    cdef uint8_t *delivery_counts
    cdef uint8_t *offset_types
    cdef int64_t entry_first, off, run_first = 0, run_last = 0, range_first = 0, range_last = 0
    cdef int run_state = 0, run_delivery_count = 0, delivery_count, limit = self._limit
    cdef bint run_open = False, range_open = False
    cdef Py_ssize_t terminal_change
    if isinstance(member_id, str) and member_id:
        owner_ref = PyDict_GetItem(self._member_index, member_id)
        owner = <int32_t>(<object>owner_ref) if owner_ref != NULL else -1
    else:
        owner = -1
    # A list or tuple is read in place (bounds-checked: Python code such as an odd int's __index__
    # could in principle shrink a list meanwhile); anything else is read once into a tuple.
    seq = batches if (type(batches) is list or type(batches) is tuple) else tuple(batches)
    nb = len(seq)
    vec_init(&plan_buffer, sizeof(Plan))
    vec_init(&type_buffer, 1)
    vec_init(&out, sizeof(Run))
    vec_init(&ranges, sizeof(Range))
    try:
        # ---- the request checks Kafka's broker makes before the leader sees the batches (INVALID_REQUEST)
        parse_acknowledgement_request(seq, nb, &plan_buffer, &type_buffer)
        plans = <Plan *>plan_buffer.data
        # ---- the leader's checks: every record in the window must be ACQUIRED by this member
        spso = self._spso
        speo = self._speo
        entries = self._entries
        for pi in range(plan_buffer.n):
            plan = plans + pi
            if plan.last < spso:
                continue
            if plan.last >= speo:
                ab = seq[plan.idx]
                raise ShareError(
                    _INVALID_REQUEST,
                    f"acknowledgement of offsets {ab[0]}-{ab[1]} goes past the in-flight window ending at {speo - 1}",
                )
            a = max(plan.first, spso)
            i = self._bisect_right(a) - 1
            if i < 0 or (<_Entry>PyList_GET_ITEM(entries, i)).last < a:
                raise ShareError(_INVALID_RECORD_STATE, f"no in-flight batch holds offset {a}")
            while i < PyList_GET_SIZE(entries):
                e = <_Entry>PyList_GET_ITEM(entries, i)
                if e.first > plan.last:
                    break
                lo = max(e.first, a)
                hi = min(e.last, plan.last)
                if e.offset_states == NULL:
                    if e.state != ACQUIRED or e.flags or e.member != owner:
                        raise ShareError(_INVALID_RECORD_STATE, _not_acquired_message(lo, e.state, e.flags))
                else:
                    states = e.offset_states
                    in_transition = e.offset_flags
                    owners = e.offset_members
                    for k in range(<Py_ssize_t>(lo - e.first), <Py_ssize_t>(hi - e.first + 1)):
                        if states[k] != ACQUIRED or in_transition[k] or owners[k] != owner:
                            raise ShareError(_INVALID_RECORD_STATE,
                                             _not_acquired_message(e.first + k, states[k], in_transition[k]))
                i += 1
        # ---- validated: apply. From here on nothing can fail but memory.
        deadline = _sat_add(now_ms, self._lock_ms)
        for pi in range(plan_buffer.n):
            plan = plans + pi
            if plan.last < spso:
                continue
            first = plan.first
            last = plan.last
            a = max(first, spso)
            i = self._bisect_right(a) - 1
            types = (<uint8_t *>type_buffer.data) + plan.toff
            nt = plan.nt
            single = types[0] if nt == 1 else -1
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
                    t = types[k0]
                    for k in range(k0 + 1, k1 + 1):
                        if types[k] != t:
                            t = -1
                            break
                if e.offset_states == NULL and t >= 0 and lo == e.first and hi == e.last:
                    if t == T_RENEW:
                        e.deadline = deadline
                        lock_heap_push(&self._locks, deadline, e.first)
                    else:
                        self._set_state(e, self._ack_target(t, e.delivery_count))
                        e.flags = IN_TRANSITION
                        e.member = 0
                        # add_run / add_range through the pending run and range (see below)
                        if (run_open and run_last + 1 == lo and run_state == e.state
                                and run_delivery_count == e.delivery_count):
                            run_last = hi
                        else:
                            if run_open:
                                add_run(&out, run_first, run_last, run_state, run_delivery_count)
                            run_first = lo
                            run_last = hi
                            run_state = e.state
                            run_delivery_count = e.delivery_count
                            run_open = True
                        if range_open and range_last + 1 == lo:
                            range_last = hi
                        else:
                            if range_open:
                                add_range(&ranges, range_first, range_last)
                            range_first = lo
                            range_last = hi
                            range_open = True
                    i += 1
                    continue
                e.split_per_offset()
                renewed = False
                states = e.offset_states
                in_transition = e.offset_flags
                owners = e.offset_members
                delivery_counts = e.offset_delivery_counts
                entry_first = e.first
                offset_types = types + (entry_first - first)  # the type of offset entry_first + k is offset_types[k]
                terminal_change = 0
                # Per offset: no call, no allocation. The last state run and the last range stay in
                # locals and reach `out` / `ranges` only when a record breaks them, which is what
                # add_run / add_range produce when called once per offset (as the pure twin does).
                for k in range(<Py_ssize_t>(lo - entry_first), <Py_ssize_t>(hi - entry_first + 1)):
                    tk = t if t >= 0 else offset_types[k]
                    if tk == T_RENEW:
                        e.offset_deadlines[k] = deadline
                        renewed = True
                        continue
                    delivery_count = delivery_counts[k]
                    if tk == T_ACCEPT:
                        s = ACKNOWLEDGED
                    elif tk == T_RELEASE and delivery_count < limit:
                        s = AVAILABLE
                    elif tk == T_GAP:
                        s = ARCHIVED
                    else:
                        s = self._dlq_state  # REJECT, or RELEASE at the delivery limit
                    terminal_change += <Py_ssize_t>_terminal(s) - <Py_ssize_t>_terminal(states[k])
                    states[k] = <uint8_t>s
                    in_transition[k] = IN_TRANSITION
                    owners[k] = 0
                    off = entry_first + k
                    if run_open and run_last + 1 == off and run_state == s and run_delivery_count == delivery_count:
                        run_last = off
                    else:
                        if run_open:
                            add_run(&out, run_first, run_last, run_state, run_delivery_count)
                        run_first = off
                        run_last = off
                        run_state = s
                        run_delivery_count = delivery_count
                        run_open = True
                    if range_open and range_last + 1 == off:
                        range_last = off
                    else:
                        if range_open:
                            add_range(&ranges, range_first, range_last)
                        range_first = off
                        range_last = off
                        range_open = True
                e.terminal_count += terminal_change
                self._terminal_total += terminal_change
                if renewed:
                    lock_heap_push(&self._locks, deadline, e.first)
                i += 1
        if run_open:
            add_run(&out, run_first, run_last, run_state, run_delivery_count)
        if range_open:
            add_range(&ranges, range_first, range_last)
        return self._pending(owner, &ranges, _state_batch_list(&out))
    finally:
        vec_free(&plan_buffer)
        vec_free(&type_buffer)
        vec_free(&out)
        vec_free(&ranges)


cdef object _begin_release(InFlightTracker self, member_id, now_ms):
    """`InFlightTracker.begin_release` (see its docstring)."""
    cdef int32_t owner
    cdef PyObject *owner_ref
    cdef Vec out, ranges
    cdef int64_t spso, off
    cdef int limit = self._limit, s
    cdef Py_ssize_t i, k, n
    cdef list entries = self._entries
    cdef _Entry e
    if isinstance(member_id, str) and member_id:
        owner_ref = PyDict_GetItem(self._member_index, member_id)
        owner = <int32_t>(<object>owner_ref) if owner_ref != NULL else -1
    else:
        owner = -1
    vec_init(&out, sizeof(Run))
    vec_init(&ranges, sizeof(Range))
    try:
        if owner > 0:
            spso = self._spso
            for i in range(PyList_GET_SIZE(entries)):
                e = <_Entry>PyList_GET_ITEM(entries, i)
                if e.offset_states == NULL:
                    if e.state != ACQUIRED or e.flags or e.member != owner:
                        continue
                    if e.first >= spso or e.delivery_count >= limit:
                        self._set_state(e, self._dlq_state if e.delivery_count >= limit else AVAILABLE)
                        e.flags = IN_TRANSITION
                        e.member = 0
                        add_run(&out, e.first, e.last, e.state, e.delivery_count)
                        add_range(&ranges, e.first, e.last)
                        continue
                    e.split_per_offset()
                n = <Py_ssize_t>(e.last - e.first + 1)
                for k in range(n):
                    if e.offset_states[k] != ACQUIRED or e.offset_flags[k] or e.offset_members[k] != owner:
                        continue
                    off = e.first + k
                    s = self._dlq_state if e.offset_delivery_counts[k] >= limit else (
                        ARCHIVED if off < spso else AVAILABLE)
                    self._set_offset_state(e, k, s)
                    e.offset_flags[k] = IN_TRANSITION
                    e.offset_members[k] = 0
                    add_run(&out, off, off, s, e.offset_delivery_counts[k])
                    add_range(&ranges, off, off)
        return self._pending(owner, &ranges, _state_batch_list(&out))
    finally:
        vec_free(&out)
        vec_free(&ranges)


cdef object _complete(InFlightTracker self, transition_id, committed, now_ms):
    """`InFlightTracker.complete` (see its docstring)."""
    cdef _Transition tr
    cdef bint commit
    cdef int64_t now = 0, spso, a, b, lo, hi, d, earliest
    cdef int limit, expired_state
    cdef bint at_limit_or_below
    cdef int32_t owner
    cdef Py_ssize_t allowed_index, i, k, nentries
    cdef list entries
    cdef _Entry e
    t = self._transitions.pop(transition_id, None)
    if t is None:
        raise ShareError(_INVALID_REQUEST, f"unknown transition {transition_id}")
    tr = <_Transition>t
    commit = bool(committed)
    if not commit:
        now = now_ms
    owner = tr.owner
    spso = self._spso
    limit = self._limit
    entries = self._entries
    nentries = PyList_GET_SIZE(entries)
    for allowed_index in range(tr.n):
        a = tr.ranges[allowed_index].a
        b = tr.ranges[allowed_index].b
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
                        self._set_state(e, ACQUIRED)
                        e.member = owner
                        # The lock may have been popped by an expiry pass that ran "later" than
                        # now_ms; a fresh heap item guarantees the record still expires.
                        lock_heap_push(&self._locks, e.deadline, e.first)
                        continue
                    if e.first >= spso or e.delivery_count >= limit:
                        e.flags = 0
                        self._set_state(e, ARCHIVED if e.delivery_count >= limit else AVAILABLE)
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
                    at_limit_or_below = e.offset_delivery_counts[k] >= limit or e.first + k < spso
                    expired_state = ARCHIVED if at_limit_or_below else AVAILABLE
                    self._set_offset_state(e, k, expired_state)
                    e.offset_members[k] = 0
                else:
                    self._set_offset_state(e, k, ACQUIRED)
                    e.offset_members[k] = owner
                    if earliest < 0 or d < earliest:
                        earliest = d
            if earliest >= 0:
                lock_heap_push(&self._locks, earliest, e.first)
    # Committed or rolled back, records of the transition that are AVAILABLE are fetchable now (its
    # ranges ascend: requests and entries are walked in offset order).
    self._records_available_from(tr.ranges[0].a)
    _advance(self)


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
                    self._set_state(e, self._dlq_state if e.delivery_count >= limit else AVAILABLE)
                    e.member = 0
                    push_raw_run(&out, e.first, e.last, e.state, e.delivery_count)
                    count += e.last - e.first + 1
                    continue
                e.split_per_offset()
            n = <Py_ssize_t>(e.last - e.first + 1)
            for k in range(n):
                if e.offset_states[k] == ACQUIRED and not e.offset_flags[k] and e.offset_deadlines[k] <= now:
                    s = self._dlq_state if e.offset_delivery_counts[k] >= limit else (
                        ARCHIVED if e.first + k < spso else AVAILABLE)
                    self._set_offset_state(e, k, s)
                    e.offset_members[k] = 0
                    push_raw_run(&out, e.first + k, e.first + k, s, e.offset_delivery_counts[k])
                    count += 1
        if out.n == 0:
            return 0, _new_namedtuple4(_TP_TRACKER_WRITE, 0, [], self._spso, self._count_terminal_from(self._spso),
                                       False)
        # Offsets in `out` are distinct, so ordering by first offset is the pure twin's list sort.
        qsort(out.data, out.n, sizeof(Run), _cmp_run_first)
        rp = <Run *>out.data
        self._records_available_from(rp[0].first)
        for i in range(out.n):
            add_run(&merged, rp[i].first, rp[i].last, rp[i].state, rp[i].delivery_count)
        _advance(self)
        return count, _new_namedtuple4(_TP_TRACKER_WRITE, 0, _state_batch_list(&merged), self._spso,
                           self._count_terminal_from(self._spso), False)
    finally:
        vec_free(&out)
        vec_free(&merged)


cdef object _complete_archiving(InFlightTracker self, first_offset, last_offset):
    """`InFlightTracker.complete_archiving` (see its docstring)."""
    cdef int64_t first = first_offset, last = last_offset, lo, hi
    cdef Vec out
    cdef Py_ssize_t i, k
    cdef list entries = self._entries
    cdef _Entry e
    if first < 0 or last < first:
        raise ShareError(_INVALID_REQUEST, f"bad archiving range {first}-{last}")
    vec_init(&out, sizeof(Run))
    try:
        for i in range(self._index_from(first), PyList_GET_SIZE(entries)):
            e = <_Entry>PyList_GET_ITEM(entries, i)
            if e.first > last:
                break
            lo = max(e.first, first)
            hi = min(e.last, last)
            if e.offset_states == NULL:
                if e.state != ARCHIVING or e.flags:
                    continue
                if lo == e.first and hi == e.last:
                    self._set_state(e, ARCHIVED)
                    add_run(&out, lo, hi, ARCHIVED, e.delivery_count)
                    continue
                e.split_per_offset()
            for k in range(<Py_ssize_t>(lo - e.first), <Py_ssize_t>(hi - e.first + 1)):
                if e.offset_states[k] == ARCHIVING and not e.offset_flags[k]:
                    self._set_offset_state(e, k, ARCHIVED)
                    add_run(&out, e.first + k, e.first + k, ARCHIVED, e.offset_delivery_counts[k])
        if out.n:
            _advance(self)
        return _new_namedtuple4(_TP_TRACKER_WRITE, 0, _state_batch_list(&out), self._spso,
                                self._count_terminal_from(self._spso), False)
    finally:
        vec_free(&out)
