# cython: language_level=3
"""The Cython twin of `sharegroup.topics.record_batch.scan_timestamp_deltas`, built as
`sharegroup.topics._record_scan`: the smallest and largest timestamp delta of the records of an
uncompressed Kafka RecordBatch v2, which Produce's timestamp check reads for every batch. It takes
exactly the batches the pure record walk (`record_batch._record_deltas`) takes.

Same arguments, result and stopping points as the pure twin. Only the cost per record differs: a few
C steps here against about 0.4 µs of Python. A varint too long for a Java long (more than ten bytes,
or a value past 64 bits) stops the walk with None. The pure twin computes such a value exactly, but
its range can never be in bounds, so the caller walks the records in both cases and the outcome is
the same.
"""

from libc.stdint cimport int64_t, uint64_t

__all__ = ["scan_timestamp_deltas", "NATIVE"]

NATIVE = True


cdef inline int _varint(const unsigned char *p, Py_ssize_t n, Py_ssize_t *pos, int64_t *out) noexcept:
    """A zigzag varint at p[pos]: 0 with the value in `out` and `pos` moved past it; -1 when it runs
    past `n` bytes or does not fit 64 bits."""
    cdef uint64_t raw = 0
    cdef int shift = 0
    cdef unsigned char b
    while True:
        if shift > 63 or pos[0] >= n:
            return -1
        b = p[pos[0]]
        pos[0] += 1
        if shift == 63 and (b & 0x7F) > 1:
            return -1
        raw |= (<uint64_t>(b & 0x7F)) << shift
        if not (b & 0x80):
            out[0] = (<int64_t>(raw >> 1)) ^ (-(<int64_t>(raw & 1)))
            return 0
        shift += 7


def scan_timestamp_deltas(bytes data not None, Py_ssize_t start, Py_ssize_t end, Py_ssize_t record_count,
                          int64_t last_offset_delta):
    """(smallest, largest) timestamp delta of the `record_count` records framed from `start` to exactly
    `end` of `data`, reading each record's length, timestamp delta and offset delta only; None when there
    are none or they do not frame so (a length <= 0, a record past `end`, fields past their record, an
    offset delta outside [0, last_offset_delta], bytes missing, or bytes left after the last record)."""
    cdef const unsigned char *p = <const unsigned char *>data
    cdef Py_ssize_t n = len(data), pos = start, at, i
    cdef int64_t length, delta, offset_delta, low = 0, high = 0
    if record_count <= 0:
        return None
    for i in range(record_count):
        if _varint(p, n, &pos, &length) < 0:
            return None
        if length <= 0 or pos + length > end:
            return None
        at = pos + 1  # after the record's attributes byte
        if _varint(p, n, &at, &delta) < 0 or _varint(p, n, &at, &offset_delta) < 0:
            return None
        if at > pos + length or offset_delta < 0 or offset_delta > last_offset_delta:
            return None
        if i == 0:
            low = high = delta
        elif delta < low:
            low = delta
        elif delta > high:
            high = delta
        pos += length
    if pos != end:
        return None
    return (low, high)
