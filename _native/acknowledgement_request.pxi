"""The acknowledgement request parser of the Cython tracker (included by `tracker.pyx`; the pure twin is
`sharegroup.tracker._acknowledgement_request`).
"""


cdef struct Plan:  # one validated acknowledgement batch; its types are type_buffer[toff:toff + nt]
    int64_t first
    int64_t last
    Py_ssize_t idx
    Py_ssize_t toff
    Py_ssize_t nt


@cython.boundscheck(True)  # indexes caller-supplied sequences: IndexError, never a wild read
cdef int parse_acknowledgement_request(object seq, Py_ssize_t nb, Vec *plan_buffer, Vec *type_buffer) except -1:
    """Check an acknowledgement request as Kafka's broker does before the leader sees it.

    `seq` is a list or tuple of `AcknowledgementBatch`-shaped items. Raises `ShareError`
    (INVALID_REQUEST) for a malformed batch, offsets that are not integers, first > last, batches not
    ascending and disjoint, an empty or wrongly sized types tuple, or an unknown type; otherwise fills
    `plan_buffer` with one `Plan` per batch and `type_buffer` with their acknowledge types, one byte each.
    Runtime complexity: O(batches + acknowledge types).
    """
    cdef Plan *plans
    cdef Plan *plan
    cdef uint8_t *types
    cdef Py_ssize_t idx, nt, j
    cdef int64_t first, last, prev_last = -1, type_id
    cdef int overflow
    cdef bint fast, prev_fast = True
    cdef PyObject *type_object
    vec_reserve(plan_buffer, nb)
    plans = <Plan *>plan_buffer.data
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
            types_tuple = types_o
        elif isinstance(types_o, int):
            types_tuple = (types_o,)
        else:
            try:
                types_tuple = tuple(types_o)
            except TypeError:
                raise ShareError(_INVALID_REQUEST,
                                 f"acknowledge types must be a tuple of ints: {ab!r}") from None
        nt = PyTuple_GET_SIZE(types_tuple)
        if nt == 0:
            raise ShareError(_INVALID_REQUEST,
                             f"acknowledgement batch {first_o}-{last_o} has no acknowledge types")
        if nt != 1 and ((nt - 1 != last - first) if fast else (nt != last_o - first_o + 1)):
            raise ShareError(
                _INVALID_REQUEST,
                f"acknowledgement batch {first_o}-{last_o} has {nt} types for {last_o - first_o + 1} offsets",
            )
        vec_reserve(type_buffer, type_buffer.n + nt)
        types = (<uint8_t *>type_buffer.data) + type_buffer.n
        for j in range(nt):
            # Borrowed: no reference counting on the shared small ints in this loop.
            type_object = _tuple_get_borrowed(<PyObject *>types_tuple, j)
            # CPython hands out one shared object per small int, so an identity match is exact;
            # any other int object (a big one, an int built some other way) takes the next test.
            if type_object == _P_ACCEPT:
                type_id = T_ACCEPT
            elif type_object == _P_RELEASE:
                type_id = T_RELEASE
            elif type_object == _P_REJECT:
                type_id = T_REJECT
            elif _long_check_exact(type_object):
                overflow = 0
                type_id = _long_as_long_ovf(type_object, &overflow)
                if overflow or type_id < 0 or type_id > 4:
                    to = <object>type_object
                    raise ShareError(_INVALID_REQUEST, f"unknown acknowledge type {to!r}")
            else:
                to = <object>type_object
                if not isinstance(to, int) or isinstance(to, bool) or not 0 <= to <= 4:
                    raise ShareError(_INVALID_REQUEST, f"unknown acknowledge type {to!r}")
                type_id = int(to)
            types[j] = <uint8_t>type_id
        plan = plans + idx
        plan.first = first
        plan.last = last
        plan.idx = idx
        plan.toff = type_buffer.n
        plan.nt = nt
        type_buffer.n += nt
        plan_buffer.n = idx + 1
        prev_last = last
        prev_last_o = last_o
        prev_fast = fast
    return 0
