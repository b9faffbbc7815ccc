# cython: language_level=3
"""The Cython twin of the bulk frame codec (`persister.frame_codec_pure`), built as
`persister._native_records`.

Same functions, arguments, results and stopping points as the pure twin; only the work differs:

- frames are walked in C over the caller's buffer (no slices, no per-frame Python calls); the CRC32C
  is computed here (table-driven, slice-by-8, the Castagnoli polynomial the `crc32c` package uses);
- `scan_frames` releases the GIL while it walks, so the event loop runs while a log is recovered in a
  worker thread;
- the msgpack payload is parsed by a reader of exactly the subset a record can be (arrays, ints, one
  UTF-8 string, one binary, nil) with the range checks of `records._check_*`; anything else stops the
  walk, and the caller's `decode_record` explains it, so every frame this twin takes is one
  `decode_record` takes, with the same values;
- a key is looked up by its exact stored bytes in the caller's `KeyTable`; only a new stored form is
  decoded into a StateKey (through `KeyTable.add`, which merges two stored forms of one key);
- rows are tuples of ints built in C and untracked by the garbage collector at once (they cannot be
  part of a cycle), so recovering millions of records does not make the collector walk them;
- `encode_delta_frame` writes a delta's frame straight into one buffer (the write path's encoding),
  byte for byte what msgpack-python and `records.encode_record` produce.
"""

cimport cython
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.dict cimport PyDict_GetItem
from cpython.list cimport PyList_Append
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_FromLongLong
from cpython.ref cimport Py_DECREF, Py_INCREF, PyObject
from cpython.tuple cimport PyTuple_New
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport INT64_MAX, INT64_MIN, int64_t, uint8_t, uint32_t, uint64_t

import uuid

from persister.frame_rows import KIND_CHECKPOINT, KIND_DELTA, KIND_TOMBSTONE
from persister.state_records import FORMAT_VERSION, MAX_FRAME_BYTES, RECORD_TYPE_CHECKPOINT, RECORD_TYPE_DELTA, StateKey

__all__ = ["scan_frames", "decode_frames", "encode_delta_frame", "crc32c", "NATIVE", "KIND_CHECKPOINT", "KIND_DELTA", "KIND_TOMBSTONE"]

NATIVE = True

cdef enum:
    C_KIND_CHECKPOINT = 0
    C_KIND_DELTA = 1
    C_KIND_TOMBSTONE = 2
    C_TYPE_CHECKPOINT = 0
    C_TYPE_DELTA = 1
    C_FORMAT_VERSION = 0
    HEADER = 8
    BODY_MIN = 3

cdef uint32_t C_MAX_FRAME = 64 * 1024 * 1024
cdef int64_t I8_MIN = -128
cdef int64_t I8_MAX = 127
cdef int64_t I16_MAX = 32767
cdef int64_t I32_MAX = 2147483647
cdef int64_t I64_MAX = INT64_MAX
cdef int64_t I64_MIN = INT64_MIN

# The shared vocabulary is defined in Python; refuse to load if the constants compiled in differ.
if (KIND_CHECKPOINT, KIND_DELTA, KIND_TOMBSTONE) != (C_KIND_CHECKPOINT, C_KIND_DELTA, C_KIND_TOMBSTONE) or (
    RECORD_TYPE_CHECKPOINT, RECORD_TYPE_DELTA, FORMAT_VERSION, MAX_FRAME_BYTES
) != (C_TYPE_CHECKPOINT, C_TYPE_DELTA, C_FORMAT_VERSION, C_MAX_FRAME):
    raise ImportError("persister._native_records was built for other record constants; rebuild it")

cdef extern from "Python.h":
    void _tuple_set "PyTuple_SET_ITEM"(object t, Py_ssize_t i, object o)
    void _gc_untrack "PyObject_GC_UnTrack"(object o)


# -- CRC32C ------------------------------------------------------------------------------------------

cdef uint32_t CRC_TABLE[8][256]


cdef void _init_crc_table():
    cdef uint32_t crc
    cdef int i, j, k
    for i in range(256):
        crc = <uint32_t>i
        for j in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)  # reflected Castagnoli polynomial
        CRC_TABLE[0][i] = crc
    for i in range(256):
        crc = CRC_TABLE[0][i]
        for k in range(1, 8):
            crc = CRC_TABLE[0][crc & 0xFF] ^ (crc >> 8)
            CRC_TABLE[k][i] = crc


_init_crc_table()


cdef inline uint32_t _crc_update(uint32_t crc, const uint8_t *p, Py_ssize_t n) noexcept nogil:
    """Continue a CRC32C register (already inverted) over n bytes: eight bytes a step, then the rest."""
    cdef uint32_t lo, hi
    while n >= 8:
        lo = crc ^ (<uint32_t>p[0] | (<uint32_t>p[1] << 8) | (<uint32_t>p[2] << 16) | (<uint32_t>p[3] << 24))
        hi = <uint32_t>p[4] | (<uint32_t>p[5] << 8) | (<uint32_t>p[6] << 16) | (<uint32_t>p[7] << 24)
        crc = (CRC_TABLE[7][lo & 0xFF] ^ CRC_TABLE[6][(lo >> 8) & 0xFF] ^ CRC_TABLE[5][(lo >> 16) & 0xFF]
               ^ CRC_TABLE[4][lo >> 24] ^ CRC_TABLE[3][hi & 0xFF] ^ CRC_TABLE[2][(hi >> 8) & 0xFF]
               ^ CRC_TABLE[1][(hi >> 16) & 0xFF] ^ CRC_TABLE[0][hi >> 24])
        p += 8
        n -= 8
    while n > 0:
        crc = CRC_TABLE[0][(crc ^ p[0]) & 0xFF] ^ (crc >> 8)
        p += 1
        n -= 1
    return crc


def crc32c(data, uint32_t value=0):
    """`crc32c.crc32c(data, value)`: the CRC32C of `data`, continuing from the CRC `value` (for tests
    that hold this implementation equal to the package the pure twin uses)."""
    cdef const uint8_t[::1] view = data
    cdef uint32_t crc = ~value
    if view.shape[0]:
        crc = _crc_update(crc, &view[0], view.shape[0])
    return ~crc


# -- framing -----------------------------------------------------------------------------------------

cdef inline uint32_t _be32(const uint8_t *p) noexcept nogil:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3]


cdef inline Py_ssize_t _frame_end(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end) noexcept nogil:
    """The end of the whole, valid frame at `pos` (framing only: length range, CRC, version, type),
    or -1 when it is cut off by `end` or invalid (the caller's `check_frame` says which)."""
    cdef uint32_t length, crc
    cdef Py_ssize_t frame_end
    if end - pos < HEADER:
        return -1
    length = _be32(buf + pos)
    if length > C_MAX_FRAME or length < BODY_MIN:
        return -1
    frame_end = pos + HEADER + <Py_ssize_t>length
    if frame_end > end:
        return -1
    crc = _crc_update(0xFFFFFFFF, buf + pos, 4)
    crc = _crc_update(crc, buf + pos + HEADER, length)
    if ~crc != _be32(buf + pos + 4):
        return -1
    if buf[pos + HEADER + 1] != C_FORMAT_VERSION or buf[pos + HEADER] > C_TYPE_DELTA:
        return -1
    return frame_end


cdef inline void _check_range(object buf, Py_ssize_t length, Py_ssize_t pos, Py_ssize_t end) except *:
    if not 0 <= pos <= end <= length:
        raise ValueError(f"range [{pos}, {end}) outside a buffer of {length} bytes")


def scan_frames(buf, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t max_count=-1):
    """Check the framing (length range, CRC32C, type, version) of consecutive frames in buf[pos:end],
    at most `max_count` of them (-1: no limit); return (frames checked, position after the last one).
    The position is `end` when every byte was a whole valid frame, else where the first frame that is
    cut off by `end` or invalid begins. Runs without the GIL. Runtime complexity: O(end - pos)."""
    cdef const uint8_t[::1] view = buf
    cdef Py_ssize_t count = 0
    cdef Py_ssize_t next_pos
    cdef const uint8_t *data
    _check_range(buf, view.shape[0], pos, end)
    if view.shape[0] == 0:
        return 0, pos
    data = &view[0]
    with nogil:
        while pos < end and count != max_count:
            next_pos = _frame_end(data, pos, end)
            if next_pos < 0:
                break
            count += 1
            pos = next_pos
    return count, pos


# -- the msgpack subset of a record ------------------------------------------------------------------

cdef struct Reader:
    const uint8_t *p
    const uint8_t *end
    bint failed  # set at the first byte that is not what a record may hold there


cdef inline uint64_t _be(const uint8_t *p, int n) noexcept nogil:
    cdef uint64_t v = 0
    cdef int i
    for i in range(n):
        v = (v << 8) | p[i]
    return v


cdef inline bint _take(Reader *r, Py_ssize_t n) noexcept nogil:
    """Whether n more bytes are there; marks the reader failed when not."""
    if r.end - r.p < n:
        r.failed = True
        return False
    return True


cdef Py_ssize_t _array(Reader *r) noexcept nogil:
    """An array header: its length, or -1 (failed) when the next object is not an array."""
    cdef uint8_t b
    cdef Py_ssize_t n
    if not _take(r, 1):
        return -1
    b = r.p[0]
    if 0x90 <= b <= 0x9F:
        r.p += 1
        return b & 0x0F
    if b == 0xDC:
        if not _take(r, 3):
            return -1
        n = <Py_ssize_t>_be(r.p + 1, 2)
        r.p += 3
        return n
    if b == 0xDD:
        if not _take(r, 5):
            return -1
        n = <Py_ssize_t>_be(r.p + 1, 4)
        r.p += 5
        return n
    r.failed = True
    return -1


cdef int64_t _int(Reader *r, int64_t low, int64_t high) noexcept nogil:
    """An integer within [low, high]; marks the reader failed for anything else (another type, or a
    value out of range, however it is encoded)."""
    cdef uint8_t b
    cdef uint64_t u
    cdef int64_t v
    cdef int n
    if not _take(r, 1):
        return 0
    b = r.p[0]
    if b <= 0x7F:
        v = b
        r.p += 1
    elif b >= 0xE0:
        v = <int64_t>b - 256
        r.p += 1
    elif 0xCC <= b <= 0xCF:  # uint 8 / 16 / 32 / 64
        n = 1 << (b - 0xCC)
        if not _take(r, 1 + n):
            return 0
        u = _be(r.p + 1, n)
        r.p += 1 + n
        if u > <uint64_t>I64_MAX:
            r.failed = True
            return 0
        v = <int64_t>u
    elif 0xD0 <= b <= 0xD3:  # int 8 / 16 / 32 / 64
        n = 1 << (b - 0xD0)
        if not _take(r, 1 + n):
            return 0
        u = _be(r.p + 1, n)
        r.p += 1 + n
        if n == 1:
            v = <int64_t>(<signed char>u)
        elif n == 2:
            v = <int64_t>(<short>u)
        elif n == 4:
            v = <int64_t>(<int>u)
        else:
            v = <int64_t>u
    else:
        r.failed = True
        return 0
    if v < low or v > high:
        r.failed = True
    return v


cdef inline object _pyint(int64_t v):
    return PyLong_FromLongLong(v)


cdef object _batches(Reader *r):
    """The flat state batch array as a tuple of ints, checked as `records._check_batches` checks it;
    None when the reader failed."""
    cdef Py_ssize_t n = _array(r)
    cdef Py_ssize_t i
    cdef int64_t first, last, state, count
    cdef object out
    if r.failed or n % 4 != 0 or n > r.end - r.p:  # every int takes at least one byte
        r.failed = True
        return None
    out = PyTuple_New(n)
    i = 0
    while i < n:
        first = _int(r, 0, I64_MAX)
        last = _int(r, first, I64_MAX)
        state = _int(r, I8_MIN, I8_MAX)
        count = _int(r, 0, I16_MAX)
        if r.failed:
            return None
        _set(out, i, _pyint(first))
        _set(out, i + 1, _pyint(last))
        _set(out, i + 2, _pyint(state))
        _set(out, i + 3, _pyint(count))
        i += 4
    _gc_untrack(out)
    return out


cdef inline void _set(object t, Py_ssize_t i, object o):
    Py_INCREF(o)  # PyTuple_SET_ITEM steals a reference
    _tuple_set(t, i, o)


cdef object _new_key(object keys, const uint8_t *start, Py_ssize_t size, bytes stored_form):
    """Decode and check a key seen for the first time in this form; None when it is not a valid key."""
    cdef Reader r
    cdef uint8_t b
    cdef Py_ssize_t n
    cdef int64_t partition
    cdef object group_id, topic
    r.p = start
    r.end = start + size
    r.failed = False
    if _array(&r) != 3 or r.failed:
        return None
    if not _take(&r, 1):
        return None
    b = r.p[0]
    if 0xA0 <= b <= 0xBF:
        n = b & 0x1F
        r.p += 1
    elif 0xD9 <= b <= 0xDB:
        if not _take(&r, 1 + (1 << (b - 0xD9))):
            return None
        n = <Py_ssize_t>_be(r.p + 1, 1 << (b - 0xD9))
        r.p += 1 + (1 << (b - 0xD9))
    else:
        return None
    if not _take(&r, n):
        return None
    try:
        group_id = PyUnicode_DecodeUTF8(<const char *>r.p, n, "strict")
    except UnicodeDecodeError:
        return None
    r.p += n
    if not _take(&r, 2) or not 0xC4 <= r.p[0] <= 0xC6:
        return None
    if r.p[0] != 0xC4:  # bin 16 / bin 32: a longer length form than msgpack writes for 16 bytes
        return _new_key_slow(keys, stored_form)
    n = r.p[1]
    r.p += 2
    if n != 16 or not _take(&r, 16):
        return None
    topic = PyBytes_FromStringAndSize(<const char *>r.p, 16)
    r.p += 16
    partition = _int(&r, 0, I32_MAX)
    if r.failed or r.p != r.end:
        return None
    return keys.add(stored_form, StateKey(group_id, uuid.UUID(bytes=topic), partition))


cdef object _new_key_slow(object keys, bytes stored_form):
    """A key whose stored form uses a longer encoding than msgpack writes: decoded by msgpack itself
    and checked as `records.check_encoded_key` checks it (rare enough not to need speed)."""
    import msgpack
    from persister.state_records import check_encoded_key
    try:
        encoded_key = msgpack.unpackb(stored_form, raw=False, use_list=True, strict_map_key=True)
        check_encoded_key(encoded_key)
    except Exception:
        return None
    group_id, topic_bytes, partition = encoded_key
    return keys.add(stored_form, StateKey(group_id, uuid.UUID(bytes=topic_bytes), partition))


cdef Py_ssize_t _skip_key(Reader *r) noexcept nogil:
    """Move past the key array (its shape is checked when it is decoded); -1 when it is malformed."""
    cdef Py_ssize_t items = _array(r)
    cdef Py_ssize_t i, n
    cdef uint8_t b
    if r.failed or items != 3:
        r.failed = True
        return -1
    for i in range(3):
        if not _take(r, 1):
            return -1
        b = r.p[0]
        if 0xA0 <= b <= 0xBF:
            n = 1 + (b & 0x1F)
        elif b <= 0x7F or b >= 0xE0:
            n = 1
        elif 0xCC <= b <= 0xCF:
            n = 1 + (1 << (b - 0xCC))
        elif 0xD0 <= b <= 0xD3:
            n = 1 + (1 << (b - 0xD0))
        elif b == 0xC4 or b == 0xD9:
            if not _take(r, 2):
                return -1
            n = 2 + r.p[1]
        elif b == 0xC5 or b == 0xDA:
            if not _take(r, 3):
                return -1
            n = 3 + <Py_ssize_t>_be(r.p + 1, 2)
        elif b == 0xC6 or b == 0xDB:
            if not _take(r, 5):
                return -1
            n = 5 + <Py_ssize_t>_be(r.p + 1, 4)
        else:
            r.failed = True
            return -1
        if not _take(r, n):
            return -1
        r.p += n
    return 0


cdef object _decode_one(const uint8_t *body, Py_ssize_t length, object keys, dict ids):
    """The row of one frame body (type, version, payload) whose framing is valid, or None when its
    payload is not one `decode_record` accepts."""
    cdef Reader r
    cdef int record_type = body[0]
    cdef const uint8_t *key_start
    cdef Py_ssize_t key_size
    cdef PyObject *found
    cdef object key_id, row, batches
    cdef bytes stored_form
    cdef int64_t checkpoint_epoch, state_epoch, leader_epoch, start_offset, dcc, create_ms, write_ms
    r.p = body + 2
    r.end = body + length
    r.failed = False
    if _array(&r) != 2 or r.failed:
        return None
    key_start = r.p
    if _skip_key(&r) < 0:
        return None
    key_size = r.p - key_start
    stored_form = PyBytes_FromStringAndSize(<const char *>key_start, key_size)
    found = PyDict_GetItem(ids, stored_form)
    if found != NULL:
        key_id = <object>found
    else:
        key_id = _new_key(keys, key_start, key_size, stored_form)
        if key_id is None:
            return None
    if not _take(&r, 1):
        return None
    if r.p[0] == 0xC0:  # nil: a tombstone
        r.p += 1
        if r.p != r.end or record_type != C_TYPE_CHECKPOINT:
            return None
        row = PyTuple_New(2)
        _set(row, 0, key_id)
        _set(row, 1, C_KIND_TOMBSTONE)
        _gc_untrack(row)
        return row
    if record_type == C_TYPE_CHECKPOINT:
        if _array(&r) != 8 or r.failed:
            return None
        checkpoint_epoch = _int(&r, 0, I32_MAX)
        state_epoch = _int(&r, 0, I32_MAX)
        leader_epoch = _int(&r, -1, I32_MAX)
        start_offset = _int(&r, -1, I64_MAX)
        dcc = _int(&r, -1, I32_MAX)
        create_ms = _int(&r, I64_MIN, I64_MAX)
        write_ms = _int(&r, I64_MIN, I64_MAX)
        if r.failed:
            return None
        batches = _batches(&r)
        if r.failed or r.p != r.end:
            return None
        row = PyTuple_New(10)
        _set(row, 0, key_id)
        _set(row, 1, C_KIND_CHECKPOINT)
        _set(row, 2, _pyint(checkpoint_epoch))
        _set(row, 3, _pyint(state_epoch))
        _set(row, 4, _pyint(leader_epoch))
        _set(row, 5, _pyint(start_offset))
        _set(row, 6, _pyint(dcc))
        _set(row, 7, _pyint(create_ms))
        _set(row, 8, _pyint(write_ms))
        _set(row, 9, batches)
        _gc_untrack(row)
        return row
    if _array(&r) != 5 or r.failed:
        return None
    checkpoint_epoch = _int(&r, 0, I32_MAX)
    leader_epoch = _int(&r, -1, I32_MAX)
    start_offset = _int(&r, -1, I64_MAX)
    dcc = _int(&r, -1, I32_MAX)
    if r.failed:
        return None
    batches = _batches(&r)
    if r.failed or r.p != r.end:
        return None
    row = PyTuple_New(7)
    _set(row, 0, key_id)
    _set(row, 1, C_KIND_DELTA)
    _set(row, 2, _pyint(checkpoint_epoch))
    _set(row, 3, _pyint(leader_epoch))
    _set(row, 4, _pyint(start_offset))
    _set(row, 5, _pyint(dcc))
    _set(row, 6, batches)
    _gc_untrack(row)
    return row


def decode_frames(buf, Py_ssize_t pos, Py_ssize_t end, keys):
    """Decode consecutive frames in buf[pos:end] into rows (see `persister.frame_codec_pure`); return
    (rows, position after the last decoded frame), stopping where `scan_frames` would and also at a
    frame whose payload `decode_record` would refuse. Runtime complexity: O(end - pos)."""
    cdef const uint8_t[::1] view = buf
    cdef const uint8_t *data
    cdef Py_ssize_t next_pos
    cdef list rows = []
    cdef dict ids = keys.ids
    cdef object row
    _check_range(buf, view.shape[0], pos, end)
    if view.shape[0] == 0:
        return rows, pos
    data = &view[0]
    while pos < end:
        next_pos = _frame_end(data, pos, end)
        if next_pos < 0:
            break
        row = _decode_one(data + pos + HEADER, next_pos - pos - HEADER, keys, ids)
        if row is None:
            break
        PyList_Append(rows, row)
        pos = next_pos
    return rows, pos


# -- encoding a delta (the write path) ---------------------------------------------------------------

cdef object _encode_delta_frame_py = None


cdef inline Py_ssize_t _put_int(uint8_t *out, int64_t v) noexcept nogil:
    """Write `v` as msgpack-python's packer does (the shortest form, unsigned for v >= 0); return the
    bytes written (at most 9)."""
    cdef uint64_t u
    cdef int n, i
    if v >= 0:
        if v < 128:
            out[0] = <uint8_t>v
            return 1
        if v < 256:
            out[0] = 0xCC
            n = 1
        elif v < 65536:
            out[0] = 0xCD
            n = 2
        elif v < (<int64_t>1 << 32):
            out[0] = 0xCE
            n = 4
        else:
            out[0] = 0xCF
            n = 8
    else:
        if v >= -32:
            out[0] = <uint8_t>(v & 0xFF)
            return 1
        if v >= -128:
            out[0] = 0xD0
            n = 1
        elif v >= -32768:
            out[0] = 0xD1
            n = 2
        elif v >= -(<int64_t>1 << 31):
            out[0] = 0xD2
            n = 4
        else:
            out[0] = 0xD3
            n = 8
    u = <uint64_t>v
    for i in range(n):
        out[n - i] = <uint8_t>(u & 0xFF)
        u >>= 8
    return 1 + n


cdef inline Py_ssize_t _put_array_header(uint8_t *out, Py_ssize_t n) noexcept nogil:
    if n < 16:
        out[0] = <uint8_t>(0x90 | n)
        return 1
    if n <= 0xFFFF:
        out[0] = 0xDC
        out[1] = <uint8_t>(n >> 8)
        out[2] = <uint8_t>n
        return 3
    out[0] = 0xDD
    out[1] = <uint8_t>(n >> 24)
    out[2] = <uint8_t>(n >> 16)
    out[3] = <uint8_t>(n >> 8)
    out[4] = <uint8_t>n
    return 5


cdef inline bint _plain_int(object o, int64_t low, int64_t high, int64_t *out):
    """Whether `o` is an exact int within [low, high] (stored in *out)."""
    cdef int overflow = 0
    cdef long long v
    if type(o) is not int:
        return False
    v = PyLong_AsLongLongAndOverflow(o, &overflow)
    if overflow:
        return False
    out[0] = v
    return low <= v <= high


def encode_delta_frame(bytes encoded_key, value, pack=None):
    """`records.encode_delta_frame`: the frame of a delta given its key's msgpack bytes, the same bytes
    `encode_record` makes. A value that is not plain (a field that is not an exact int in range, a
    batch that is not a 4-tuple) goes to the Python function, which raises as `encode_record` would."""
    global _encode_delta_frame_py
    cdef int64_t fields[4]
    cdef int64_t first = 0, last = 0, state = 0, count = 0
    cdef object batches = value.state_batches
    cdef Py_ssize_t n_batches, i, size, pos, key_size = len(encoded_key)
    cdef object batch
    cdef bytearray out
    cdef uint8_t *p
    cdef uint32_t crc
    if _encode_delta_frame_py is None:
        from persister.state_records import encode_delta_frame as python_encoder
        _encode_delta_frame_py = python_encoder
    if not (
        type(batches) is tuple
        and _plain_int(value.checkpoint_epoch, 0, I32_MAX, &fields[0])
        and _plain_int(value.leader_epoch, -1, I32_MAX, &fields[1])
        and _plain_int(value.start_offset, -1, I64_MAX, &fields[2])
        and _plain_int(value.delivery_complete_count, -1, I32_MAX, &fields[3])
    ):
        return _encode_delta_frame_py(encoded_key, value, pack)
    n_batches = len(batches)
    # header 8, type + version + [key, value] 3, the key, [5 fields] 1 + 4 ints, batches header 5,
    # 4 ints a batch; 9 bytes an int at most
    size = HEADER + 3 + key_size + 1 + 4 * 9 + 5 + n_batches * 4 * 9
    out = bytearray(size)
    p = out
    pos = HEADER
    p[pos] = C_TYPE_DELTA
    p[pos + 1] = C_FORMAT_VERSION
    p[pos + 2] = 0x92
    pos += 3
    for i in range(key_size):
        p[pos + i] = (<const uint8_t *><const char *>encoded_key)[i]
    pos += key_size
    p[pos] = 0x95
    pos += 1
    for i in range(4):
        pos += _put_int(p + pos, fields[i])
    pos += _put_array_header(p + pos, n_batches * 4)
    for i in range(n_batches):
        batch = batches[i]
        if not (isinstance(batch, tuple) and len(batch) == 4
                and _plain_int(batch[0], 0, I64_MAX, &first)
                and _plain_int(batch[1], first, I64_MAX, &last)
                and _plain_int(batch[2], I8_MIN, I8_MAX, &state)
                and _plain_int(batch[3], 0, I16_MAX, &count)):
            return _encode_delta_frame_py(encoded_key, value, pack)
        pos += _put_int(p + pos, first)
        pos += _put_int(p + pos, last)
        pos += _put_int(p + pos, state)
        pos += _put_int(p + pos, count)
    size = pos - HEADER  # the body
    if size > C_MAX_FRAME:
        raise ValueError(f"record of {size} bytes exceeds MAX_FRAME_BYTES ({MAX_FRAME_BYTES})")
    p[0] = <uint8_t>(size >> 24)
    p[1] = <uint8_t>(size >> 16)
    p[2] = <uint8_t>(size >> 8)
    p[3] = <uint8_t>size
    crc = _crc_update(0xFFFFFFFF, p, 4)
    crc = ~_crc_update(crc, p + HEADER, size)
    p[4] = <uint8_t>(crc >> 24)
    p[5] = <uint8_t>(crc >> 16)
    p[6] = <uint8_t>(crc >> 8)
    p[7] = <uint8_t>crc
    return PyBytes_FromStringAndSize(<const char *>p, pos)
