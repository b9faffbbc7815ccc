"""Acquisition for the Cython tracker (included by `tracker.pyx`; the pure twin is `sharegroup.tracker._in_flight_acquisition`).

New ranges at producer-batch granularity (holes included: natural holes fetched on their own and the
holes of the persisted-gap window), re-acquisition of AVAILABLE cached records with poison-record
throttling, and the read_committed cut of aborted transactions.
"""


cdef struct FetchedBatchHeader:  # one fetched producer batch header: base and last offset
    int64_t base
    int64_t last


@cython.boundscheck(True)  # indexes caller-supplied sequences: IndexError, never a wild read
cdef object _acquire(InFlightTracker self, member_id, fetched, max_records, now_ms, fetch_offset, batch_size,
                     aborted_transactions, read_committed):
    """`InFlightTracker.acquire` (see its docstring)."""
    cdef Vec header_buffer, runs
    cdef FetchedBatchHeader *headers
    cdef Py_ssize_t nfetched, j, i
    cdef int64_t base, blast, prev_last, first_base, max_records_c, batch_size_c, fetch_offset_c, deadline
    cdef int64_t lo, hi, a, b, size, cap
    cdef int64_t acquired, got, cursor, hole_first, hole_last, allowance
    cdef int32_t owner
    cdef int limit, throttle, shift
    cdef bint stop, throttled, overlapped, in_window
    cdef list entries, result
    cdef _Entry e
    cdef ARun *r
    if not isinstance(member_id, str) or not member_id:
        raise ShareError(_INVALID_REQUEST, "member id must be a non-empty string")
    nfetched = len(fetched)
    vec_init(&header_buffer, sizeof(FetchedBatchHeader))
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
            if header_buffer.n == header_buffer.cap:
                vec_reserve(&header_buffer, header_buffer.n + 1)
            headers = (<FetchedBatchHeader *>header_buffer.data) + header_buffer.n
            headers.base = base
            headers.last = blast
            header_buffer.n += 1
        if max_records <= 0 or nfetched == 0:
            return []
        if batch_size < 0:
            raise ShareError(_INVALID_REQUEST, f"batch size {batch_size} is negative")
        if header_buffer.n == 0:  # only a sequence whose length lies gets here
            return []
        nfetched = header_buffer.n
        headers = <FetchedBatchHeader *>header_buffer.data
        max_records_c = _clamp_i64(max_records)
        batch_size_c = _clamp_i64(batch_size)
        fetch_offset_c = _clamp_i64(fetch_offset)
        first_base = headers[0].base
        if 0 <= fetch_offset_c < first_base:
            self._archive(max(fetch_offset_c, self._spso), first_base - 1, AVAILABLE, False)
        owner = self._member(member_id)
        deadline = _sat_add(now_ms, self._lock_ms)
        lo = max(first_base, self._spso)
        hi = headers[nfetched - 1].last
        acquired = 0
        stop = False
        limit = self._limit
        throttle = self._throttle
        if hi >= lo:
            i = self._index_from(lo)
            entries = self._entries
            cursor = lo  # the lowest fetched offset not yet walked past
            overlapped = False
            while i < PyList_GET_SIZE(entries) and not stop and acquired < max_records_c:
                e = <_Entry>PyList_GET_ITEM(entries, i)
                if e.first > hi:
                    break
                overlapped = True
                if self._gap_end >= 0:
                    # Persisted-gap window: the hole before this entry is acquirable (never past it).
                    hole_first = max(cursor, self._gap_start)
                    if hole_first < e.first:
                        acquired += _acquire_new(self, headers, nfetched, hole_first, e.first - 1, owner, deadline,
                                                 &runs, max_records_c - acquired, batch_size_c, True)
                        i = self._index_from(e.first)
                        if acquired >= max_records_c:
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
                        cap = min(cap, max_records_c - acquired)
                    if a == e.first and b == e.last and cap >= size and not (
                        throttled and e.delivery_count == limit - 1 and limit > 2 and size > 1
                    ):
                        self._set_state(e, ACQUIRED)
                        e.delivery_count = min(e.delivery_count + 1, MAX_DELIVERY_COUNT)
                        e.member = owner
                        e.deadline = deadline
                        lock_heap_push(&self._locks, deadline, e.first)
                        add_acquired_run(&runs, e.first, e.last, e.delivery_count, True)
                        acquired += size
                        if throttled:
                            stop = True
                        i += 1
                        continue
                    e.split_per_offset()
                got = _acquire_offsets(self, e, a, b, owner, deadline, &runs, acquired, max_records_c, &stop)
                acquired += got
                i += 1
            if not stop and acquired < max_records_c:
                # A fetch that overlaps no entry may fill a hole below the SPEO; a fetch that overlaps
                # entries leaves the holes between them alone, except persisted-gap holes.
                if self._gap_end >= 0 or not overlapped:
                    in_window = self._gap_end >= 0
                    hole_first = max(cursor, self._gap_start) if in_window else cursor
                    hole_last = min(hi, self._speo - 1)
                    if hole_first <= hole_last:
                        acquired += _acquire_new(self, headers, nfetched, hole_first, hole_last, owner, deadline,
                                                 &runs, max_records_c - acquired, batch_size_c,
                                                 in_window and overlapped)
                if acquired < max_records_c and hi >= self._speo:
                    allowance = self._max_locks - (self._speo - self._spso)
                    acquired += _acquire_new(self, headers, nfetched, max(cursor, self._speo), hi, owner, deadline,
                                             &runs, min(max_records_c - acquired, allowance), batch_size_c, False)
        if runs.n and self._gap_end >= 0:
            self._gap_start = max(self._gap_start, (<ARun *>runs.data)[runs.n - 1].last + 1)
        if read_committed and runs.n:
            _archive_aborted(self, fetched, aborted_transactions, &runs)
        _advance(self, True)
        result = _steal(_list_new(runs.n))
        r = <ARun *>runs.data
        for j in range(runs.n):
            acquired_records = _new_namedtuple3(_TP_ACQUIRED_RECORDS, r[j].first, r[j].last, r[j].delivery_count, True)
            Py_INCREF(acquired_records)
            _list_set(<PyObject *>result, j, <PyObject *>acquired_records)
        return result
    finally:
        vec_free(&header_buffer)
        vec_free(&runs)


cdef int64_t _acquire_offsets(InFlightTracker self, _Entry e, int64_t a, int64_t b, int32_t owner, int64_t deadline,
                              Vec *runs,
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
        e.offset_members[k] = owner
        e.offset_deadlines[k] = deadline
        add_acquired_run(runs, f + k, f + k, delivery_count, True)
        got += 1
        if last_attempt:
            stop = True
            break
    if got:
        lock_heap_push(&self._locks, deadline, f)
    stop_out[0] = stop
    return got


cdef int64_t _acquire_new(InFlightTracker self, FetchedBatchHeader *fetched, Py_ssize_t n, int64_t from_offset,
                          int64_t to_offset, int32_t owner, int64_t deadline, Vec *runs, int64_t budget,
                          int64_t batch_size, bint whole) except -1:
    """Acquire the fetched offsets in [from_offset, to_offset] as new entries; returns the count.

    Whole producer batches are taken until `budget` offsets (counted from `from_offset`) are reached;
    the batch that crosses it is included (soft limit), but nothing goes past `to_offset` (the end
    of a hole, or the last fetched offset). `batch_size` > 0 starts a new entry at a producer batch
    base offset at least `batch_size` past the current entry's first; the earlier entry then ends
    just before that base offset, so holes between producer batches belong to it. A range that
    becomes the lowest in flight moves the SPSO to its first offset.

    `whole` (a hole of the persisted-gap window between walked entries, as Kafka acquires it): the
    range is [from_offset, to_offset] itself, offsets that no fetched batch holds included; the soft
    limit ends it at the last offset of the fetched batch holding offset `from_offset + budget - 1`,
    or at that offset when no fetched batch holds it.
    """
    cdef int64_t last, base, batch_last, start, acquired, size, take, first, seg_last, end
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
    if not whole and (j == n or fetched[j].base > to_offset):
        return 0
    vec_init(&segs, sizeof(Range))
    try:
        last = -1
        if whole:
            end = to_offset
            if budget < to_offset - from_offset + 1:
                end = from_offset + budget - 1
                for k in range(j, n):
                    if fetched[k].base > end:
                        break
                    if fetched[k].last >= end:
                        end = min(fetched[k].last, to_offset)
                        break
            vec_reserve(&segs, 1)
            sg = <Range *>segs.data
            sg.a = from_offset
            sg.b = end
            segs.n = 1
            while j < n and fetched[j].base <= end:
                base = fetched[j].base
                if batch_size > 0 and base - (<Range *>segs.data)[segs.n - 1].a >= batch_size:
                    (<Range *>segs.data)[segs.n - 1].b = base - 1
                    if segs.n == segs.cap:
                        vec_reserve(&segs, segs.n + 1)
                    sg = (<Range *>segs.data) + segs.n
                    sg.a = base
                    sg.b = end
                    segs.n += 1
                j += 1
            j = n  # the fetched batches are used up
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
                self._records_available_from(first + max(take, 0))  # the rest of the range waits AVAILABLE
                if take > 0:
                    for k in range(<Py_ssize_t>take):
                        e.offset_states[k] = ACQUIRED
                        e.offset_delivery_counts[k] = 1
                        e.offset_members[k] = owner
                        e.offset_deadlines[k] = deadline
                    lock_heap_push(&self._locks, deadline, first)
                    add_acquired_run(runs, first, first + take - 1, 1, merge)
                    acquired += take
            else:
                e = _new_entry(first, seg_last, ACQUIRED, 1, owner, deadline)
                lock_heap_push(&self._locks, deadline, first)
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


@cython.boundscheck(True)  # indexes caller-supplied sequences: IndexError, never a wild read
cdef int _archive_aborted(InFlightTracker self, fetched, aborted, Vec *runs) except -1:
    """read_committed: archive just-acquired records of aborted transactions and control batches,
    and cut them out of the acquired runs."""
    cdef Vec cut, new_runs
    cdef Range *cp
    cdef ARun *rp
    cdef Py_ssize_t ci, cj, allowed_index, p, npending
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
        for allowed_index in range(runs.n):
            rp = (<ARun *>runs.data) + allowed_index
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
                        self._archive(lo, hi, ACQUIRED, False)
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
