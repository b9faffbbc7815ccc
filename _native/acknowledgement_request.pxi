"""The acknowledgement request parser of the Cython tracker (included by `tracker.pyx`; the pure twin is
`sharegroup.acknowledgement_request`).
"""


cdef struct Plan:  # one validated acknowledgement batch; its types are tbuf[toff:toff + nt]
    int64_t first
    int64_t last
    Py_ssize_t idx
    Py_ssize_t toff
    Py_ssize_t nt


@cython.boundscheck(True)  # indexes caller-supplied sequences: IndexError, never a wild read
cdef int parse_acknowledgement_request(object seq, Py_ssize_t nb, Vec *plan, Vec *tbuf) except -1:
    """Check an acknowledgement request as Kafka's broker does before the leader sees it.

    `seq` is a list or tuple of `AcknowledgementBatch`-shaped items. Raises `ShareError`
    (INVALID_REQUEST) for a malformed batch, offsets that are not integers, first > last, batches not
    ascending and disjoint, an empty or wrongly sized types tuple, or an unknown type; otherwise fills
    `plan` with one `Plan` per batch and `tbuf` with their acknowledge types, one byte each.
    Runtime complexity: O(batches + acknowledge types).
    """
    cdef Plan *pl
    cdef Plan *pp
    cdef uint8_t *tp
    cdef Py_ssize_t idx, nt, j
    cdef int64_t first, last, prev_last = -1, tv
    cdef int overflow
    cdef bint fast, prev_fast = True
    cdef PyObject *tob
    vec_reserve(plan, nb)
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
        vec_reserve(tbuf, tbuf.n + nt)
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
    return 0
