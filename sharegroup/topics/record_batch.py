"""Kafka RecordBatch v2 headers: parsing, the checks a broker makes on produce, the base-offset rewrite,
and a small encoder (for transaction markers and tests).

A RecordBatch v2 starts with a 61-byte big-endian header::

    baseOffset i64 | batchLength i32 | partitionLeaderEpoch i32 | magic i8 | crc u32 | attributes i16 |
    lastOffsetDelta i32 | baseTimestamp i64 | maxTimestamp i64 | producerId i64 | producerEpoch i16 |
    baseSequence i32 | recordCount i32

`batchLength` counts the bytes after itself, so a batch takes `12 + batchLength` bytes. The CRC is
CRC-32C (Castagnoli) over the bytes from `attributes` to the end of the batch: it does not cover the base
offset, the length, the partition leader epoch or the magic byte, so the broker assigns offsets by
overwriting the base offset (records carry offset *deltas*) without recomputing it. Attribute bits: 0-2
compression codec, 3 timestamp type (1 = log append time), 4 transactional, 5 control, 6 delete horizon.

The broker never decompresses records. It decodes them in two places only: a control batch (a
transaction marker, never compressed), whose single record's key says commit (1) or abort (0), and the
record timestamps of an uncompressed batch (`record_timestamps`), which ListOffsets needs to answer the
exact record a time falls on and Produce to check each record's timestamp (`check_timestamps`), as Kafka
does.

Error codes on produce, as Kafka's broker answers them (its `ProduceRequest.validateRecords`,
`ByteBufferLogInputStream` and `LogValidator`):

- bytes that do not frame as whole batches (a length that lies, a batch shorter than its header, bytes
  left over) and a CRC mismatch: CORRUPT_MESSAGE (2);
- magic other than 2: INVALID_RECORD (87). Produce v3 and later may carry only magic-2 batches, and
  Kafka refuses others with an InvalidRecordException (INVALID_RECORD since Kafka 2.5; before that the
  same exception was a CorruptRecordException, CORRUPT_MESSAGE). UNSUPPORTED_FOR_MESSAGE_FORMAT (43) is
  Kafka's answer to the reverse case, a new feature on an old format, which cannot happen here;
- a batch larger than `max.message.bytes`: MESSAGE_TOO_LARGE (10);
- a batch whose record count disagrees with its offset range, a control batch from a client, a producer
  id with a negative base sequence, no batch at all: INVALID_RECORD (87);
- more than one batch where a Produce request (v3+) may carry exactly one per partition: INVALID_RECORD
  (87), unless the caller allows more (`max_batches`);
- a record timestamp outside the topic's bounds around the broker's clock: INVALID_TIMESTAMP (32), with
  one record error per offending record (`check_timestamps`, `RecordValidationError`).
"""

from __future__ import annotations

import functools
import struct
from typing import Callable, Iterable, NamedTuple, Sequence

import crc32c

from sharegroup._twins import twin
from sharegroup.errors import Errors, ShareError

__all__ = [
    "BatchHeader",
    "SimpleRecord",
    "HEADER_BYTES",
    "LOG_OVERHEAD_BYTES",
    "MAGIC_V2",
    "CONTROL_ABORT",
    "CONTROL_COMMIT",
    "MAGIC_ERROR",
    "parse_header",
    "batch_crc",
    "validate_produce_batches",
    "check_timestamps",
    "scan_timestamp_deltas",
    "RecordValidationError",
    "INVALID_TIMESTAMP_MESSAGE",
    "set_base_offset",
    "stamp_log_append_time",
    "control_type",
    "record_timestamps",
    "last_sequence",
    "build_record_batch",
    "build_control_batch",
]

HEADER_BYTES = 61
LOG_OVERHEAD_BYTES = 12  # baseOffset + batchLength: the bytes batchLength does not count
MAGIC_V2 = 2
_MAGIC_POS = 16
_CRC_POS = 17
_ATTRIBUTES_POS = 21  # the CRC covers from here to the end of the batch
_MIN_BATCH_LENGTH = HEADER_BYTES - LOG_OVERHEAD_BYTES
_HEADER = struct.Struct(">qiibIhiqqqhii")
_BASE_OFFSET = struct.Struct(">q")
_PLE = struct.Struct(">i")
assert _HEADER.size == HEADER_BYTES

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
CONTROL_ABORT = 0
CONTROL_COMMIT = 1
MAGIC_ERROR = Errors.INVALID_RECORD
_INT32_MAX = 2**31 - 1
_LONG_MAX = 2**63 - 1
NO_TIMESTAMP = -1
INVALID_TIMESTAMP_MESSAGE = "One or more records have been rejected due to invalid timestamp"


class RecordValidationError(ShareError):
    """A refusal of a batch that names its offending records (Kafka's RecordValidationException): the
    partition's error and message, plus `record_errors`, (batch index, message) per record, which a
    ProduceResponse (v8+) carries as `record_errors`. Nothing of the batch is appended."""

    def __init__(self, error: Errors | int, message: str, record_errors: Sequence[tuple[int, str]]) -> None:
        super().__init__(error, message)
        self.record_errors = tuple((int(i), str(m)) for i, m in record_errors)

    def __reduce__(self):
        return (RecordValidationError, (int(self.error), self.message, self.record_errors))


class BatchHeader(NamedTuple):
    """The 61-byte header of one RecordBatch v2, field by field (Kafka's names)."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size_bytes(self) -> int:
        """Bytes the whole batch takes (header plus records)."""
        return self.batch_length + LOG_OVERHEAD_BYTES

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        return last_sequence(self.base_sequence, self.last_offset_delta)


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """The sequence number of a batch's last record; sequences wrap from INT32_MAX to 0 (Kafka's
    `DefaultRecordBatch.incrementSequence`)."""
    if base_sequence < 0:
        return -1
    if base_sequence > _INT32_MAX - last_offset_delta:
        return last_offset_delta - (_INT32_MAX - base_sequence) - 1
    return base_sequence + last_offset_delta


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """The header of the batch starting at `pos` (the caller made sure 61 bytes are there)."""
    return BatchHeader._make(_HEADER.unpack_from(buf, pos))


def batch_crc(buf: bytes | bytearray | memoryview, pos: int, size_bytes: int) -> int:
    """CRC-32C of the batch at `pos` taking `size_bytes`, over the span its CRC field covers."""
    return crc32c.crc32c(memoryview(buf)[pos + _ATTRIBUTES_POS : pos + size_bytes])


def validate_produce_batches(data: bytes | bytearray | memoryview, *, max_message_bytes: int,
                             max_batches: int | None = None) -> list[BatchHeader]:
    """Check a Produce request's records for one partition: whole RecordBatch v2 batches back to back
    (at most `max_batches` of them; Kafka's Produce takes exactly one), each with a good CRC and a
    consistent header. Returns the headers in order; raises ShareError with Kafka's code (module
    docstring) at the first fault, having changed nothing.

    Runtime: O(bytes) for the CRCs (hardware CRC-32C), O(batches) for the rest.
    """
    if data is None:
        raise ShareError(Errors.INVALID_RECORD, "a produce request needs records (got null)")
    view = memoryview(data)
    n = len(view)
    if n == 0:
        raise ShareError(Errors.INVALID_RECORD, "a produce request needs at least one record batch")
    headers: list[BatchHeader] = []
    pos = 0
    while pos < n:
        index = len(headers)
        if max_batches is not None and index >= max_batches:
            raise ShareError(Errors.INVALID_RECORD,
                             f"a produce request may carry {max_batches} record batch(es) per partition, not more")
        if n - pos < _MAGIC_POS + 1:
            raise ShareError(Errors.CORRUPT_MESSAGE, f"batch {index}: {n - pos} bytes left, too few for a batch header")
        magic = view[pos + _MAGIC_POS]
        if magic != MAGIC_V2:
            raise ShareError(MAGIC_ERROR, f"batch {index}: magic {magic}; produce takes only RecordBatch v2 (magic 2)")
        (length,) = _PLE.unpack_from(view, pos + 8)
        if length < _MIN_BATCH_LENGTH:
            raise ShareError(Errors.CORRUPT_MESSAGE,
                             f"batch {index}: batchLength {length} is below the {_MIN_BATCH_LENGTH}-byte minimum")
        size = length + LOG_OVERHEAD_BYTES
        if size > max_message_bytes:
            raise ShareError(Errors.MESSAGE_TOO_LARGE,
                             f"batch {index}: {size} bytes is more than max.message.bytes {max_message_bytes}")
        if pos + size > n:
            raise ShareError(Errors.CORRUPT_MESSAGE,
                             f"batch {index}: batchLength {length} runs {pos + size - n} bytes past the records")
        header = parse_header(view, pos)
        if batch_crc(view, pos, size) != header.crc:
            raise ShareError(Errors.CORRUPT_MESSAGE, f"batch {index}: CRC-32C mismatch (stored {header.crc:#010x})")
        _check_client_batch(header, index)
        headers.append(header)
        pos += size
    return headers


def _int64(value: int) -> int:
    """`value` wrapped to a Java long, as Kafka's broker computes the bounds and differences."""
    return (value + 2**63) % 2**64 - 2**63


def _timestamps_to_check(batch: memoryview, header: BatchHeader) -> list[tuple[int, int, int]]:
    """(batch index, offset delta, timestamp) of the records whose timestamps the broker checks: every
    record of an uncompressed batch (`record_timestamps`), else what the header tells without
    decompressing: a single record's timestamp is the batch's maxTimestamp; with more, the first record's
    is baseTimestamp (Kafka's producers give the first record delta 0) and the batch's latest is
    maxTimestamp, named by the last record (which record holds it is known only inside the records)."""
    stamps = record_timestamps(batch)
    if stamps is not None:
        return [(index, delta, timestamp) for index, (delta, timestamp) in enumerate(stamps)]
    last = header.last_offset_delta
    if last == 0 or header.attributes & TIMESTAMP_TYPE_BIT:
        return [(0, 0, header.max_timestamp)]
    return [(0, 0, header.base_timestamp), (last, last, header.max_timestamp)]


def scan_timestamp_deltas(data: bytes, start: int, end: int, record_count: int,
                          last_offset_delta: int) -> tuple[int, int] | None:
    """(smallest, largest) timestamp delta of the `record_count` records framed from `start` to exactly
    `end` of `data`; None when there are none or they do not frame so (`_record_deltas`).

    The pure twin of `sharegroup.topics._record_scan.scan_timestamp_deltas` (`_timestamp_scanner`
    picks one). Runtime: O(records), a few steps each."""
    deltas = _record_deltas(data, start, end, record_count, last_offset_delta) if record_count > 0 else None
    if not deltas:
        return None
    stamps = [timestamp_delta for _offset_delta, timestamp_delta in deltas]
    return min(stamps), max(stamps)


@functools.lru_cache(maxsize=1)
def _timestamp_scanner() -> Callable[[bytes, int, int, int, int], tuple[int, int] | None]:
    """The twin of `scan_timestamp_deltas` this process uses (`sharegroup._twins`: the Cython one unless
    SHAREGROUP_PUREPYTHON=1; its absence is an error with a clear message, never a silent fallback)."""
    return twin("sharegroup.topics._record_scan", __name__).scan_timestamp_deltas


def _timestamp_delta_range(data: bytes, header: BatchHeader) -> tuple[int, int] | None:
    """The smallest and largest timestamp delta of an uncompressed batch's records (`data`: the whole
    batch), reading only each record's first fields; None when compressed, log append time or the
    records do not frame within the batch (exactly when `record_timestamps` gives None). The fast path of `check_timestamps`: a batch whose
    extremes are in range needs no record-by-record look. Runtime: O(records), in C with the native
    build (`_timestamp_scanner`)."""
    end = header.size_bytes
    if header.compression or header.attributes & TIMESTAMP_TYPE_BIT or end > len(data) or header.record_count <= 0:
        return None
    return _timestamp_scanner()(data, HEADER_BYTES, end, header.record_count, header.last_offset_delta)


def check_timestamps(data: bytes | bytearray | memoryview, headers: Sequence[BatchHeader], *, now_ms: int,
                     before_max_ms: int, after_max_ms: int) -> None:
    """Kafka's CreateTime timestamp check on produce (LogValidator, the topic's
    `message.timestamp.before.max.ms` / `.after.max.ms`): a record timestamp more than `before_max_ms`
    behind `now_ms` or more than `after_max_ms` ahead of it refuses its batch with INVALID_TIMESTAMP and
    one record error per such record (its index in the batch; Kafka's message with the record's offset as
    the producer numbered it and the allowed range); a record without a timestamp (-1) passes. A timestamp
    exactly at a bound is accepted. Arithmetic wraps as Java longs, as the broker's does (the default
    before bound, 2^63-1, shows as a large negative range start).

    Uncompressed batches are checked record by record, as Kafka does. Kafka decompresses a compressed
    batch to check every record; this broker never decompresses, so it checks the batch header's
    timestamps (`_timestamps_to_check`): a future record always shows in maxTimestamp, but a record older
    than the first one and past the before bound goes unnoticed. Raises RecordValidationError at the first
    batch with an offending record, having changed nothing. Runtime: O(records) of uncompressed batches
    (a scan of their timestamp deltas, `_timestamp_delta_range`; the records are walked again only to
    name the offending ones)."""
    view = memoryview(data)
    low, high = _int64(now_ms - before_max_ms), _int64(now_ms + after_max_ms)
    pos = 0
    for header in headers:
        batch = view[pos:pos + header.size_bytes]
        pos += header.size_bytes
        # A request's one batch is read in place; a batch among several is copied out (the scan reads bytes).
        whole = type(data) is bytes and header.size_bytes == len(data)
        deltas = _timestamp_delta_range(data if whole else bytes(batch), header)
        if deltas is not None and (now_ms - before_max_ms <= header.base_timestamp + deltas[0]
                                   and header.base_timestamp + deltas[1] <= min(now_ms + after_max_ms, _LONG_MAX)):
            continue  # every record in range by exact arithmetic, where no Java long wraps: nothing to name
        errors = []
        stamps = _timestamps_to_check(batch, header)
        for index, offset_delta, raw in stamps:
            timestamp = _int64(raw)
            if timestamp == NO_TIMESTAMP:
                continue
            diff = _int64(now_ms - timestamp)
            if diff > before_max_ms or _int64(-diff) > after_max_ms:
                errors.append((index, f"Timestamp {timestamp} of message with offset "
                                      f"{_int64(header.base_offset + offset_delta)} is out of range. "
                                      f"The timestamp should be within [{low}, {high}]"))
        if errors:
            raise RecordValidationError(Errors.INVALID_TIMESTAMP, INVALID_TIMESTAMP_MESSAGE, errors)


def _check_client_batch(header: BatchHeader, index: int) -> None:
    """Kafka's LogValidator checks on a batch that came from a client (INVALID_RECORD)."""
    if header.last_offset_delta < 0:
        raise ShareError(Errors.INVALID_RECORD, f"batch {index}: lastOffsetDelta {header.last_offset_delta} < 0")
    if header.record_count <= 0:
        raise ShareError(Errors.INVALID_RECORD, f"batch {index}: record count {header.record_count}")
    if header.record_count != header.last_offset_delta + 1:
        raise ShareError(Errors.INVALID_RECORD,
                         f"batch {index}: {header.record_count} records but offset deltas "
                         f"0..{header.last_offset_delta}")
    if header.is_control:
        raise ShareError(Errors.INVALID_RECORD, f"batch {index}: clients may not write control batches")
    if header.has_producer_id and (header.base_sequence < 0 or header.producer_epoch < 0):
        raise ShareError(Errors.INVALID_RECORD,
                         f"batch {index}: producer {header.producer_id} with sequence {header.base_sequence}, "
                         f"epoch {header.producer_epoch}")
    if header.is_transactional and not header.has_producer_id:
        raise ShareError(Errors.INVALID_RECORD, f"batch {index}: a transactional batch needs a producer id")


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int, partition_leader_epoch: int) -> None:
    """Assign offsets to the batch at `pos`: overwrite its base offset and partition leader epoch, as a
    Kafka leader does. Neither is covered by the CRC, so the batch stays valid."""
    _BASE_OFFSET.pack_into(buf, pos, base_offset)
    _PLE.pack_into(buf, pos + 12, partition_leader_epoch)


_ATTRIBUTES = struct.Struct(">h")
_TIMESTAMP = struct.Struct(">q")
_CRC = struct.Struct(">I")
_MAX_TIMESTAMP_POS = 35  # attributes (2), lastOffsetDelta (4), baseTimestamp (8) after the attributes


def stamp_log_append_time(buf: bytearray | memoryview, pos: int, header: BatchHeader, now_ms: int) -> BatchHeader:
    """Stamp the batch at `pos` with the broker's time, as a Kafka leader does for a LogAppendTime topic:
    set the timestamp-type attribute bit and maxTimestamp = `now_ms` (base timestamp and the records'
    deltas stay; readers take maxTimestamp as every record's timestamp), then recompute the CRC, which
    covers both. Returns the batch's new header."""
    attributes = header.attributes | TIMESTAMP_TYPE_BIT
    _ATTRIBUTES.pack_into(buf, pos + _ATTRIBUTES_POS, attributes)
    _TIMESTAMP.pack_into(buf, pos + _MAX_TIMESTAMP_POS, now_ms)
    crc = batch_crc(buf, pos, header.size_bytes)
    _CRC.pack_into(buf, pos + _CRC_POS, crc)
    return header._replace(attributes=attributes, max_timestamp=now_ms, crc=crc)


# -- varints (zigzag, protobuf style, as records use them) ---------------------------------------


def _read_varint(buf, pos: int) -> tuple[int, int]:
    shift = 0
    raw = 0
    while True:
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7


def _write_varint(out: bytearray, value: int) -> None:
    raw = (value << 1) ^ (value >> 63)
    raw &= (1 << 64) - 1
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


def control_type(buf: bytes | bytearray | memoryview, pos: int) -> int | None:
    """The marker type of the control batch at `pos`: CONTROL_ABORT (0), CONTROL_COMMIT (1), another
    type, or None when its first record does not parse (its key is version int16 + type int16)."""
    try:
        p = pos + HEADER_BYTES
        _, p = _read_varint(buf, p)  # record length
        p += 1  # attributes
        _, p = _read_varint(buf, p)  # timestamp delta
        _, p = _read_varint(buf, p)  # offset delta
        key_length, p = _read_varint(buf, p)
        if key_length < 4:
            return None
        return struct.unpack_from(">h", buf, p + 2)[0]
    except (IndexError, ValueError, struct.error):
        return None


def record_timestamps(batch: bytes | bytearray | memoryview) -> list[tuple[int, int]] | None:
    """(offset delta, timestamp in ms) of every record of one whole uncompressed RecordBatch v2, in order.

    A record is `length varint | attributes int8 | timestampDelta varlong | offsetDelta varint | key,
    value, headers`; its timestamp is the batch's base timestamp plus the delta, or, with the log append
    time type (attribute bit 3), the batch's max timestamp for every record. None when the batch is
    compressed (the broker never decompresses) or its records do not parse within the batch's own length
    (a record length, varint or offset delta that lies, too few or too many records): callers fall back
    to the batch header. Runtime: O(records) over the first bytes of each record.
    """
    view = memoryview(batch)
    if len(view) < HEADER_BYTES:
        return None
    header = parse_header(view)
    end = header.size_bytes
    if header.magic != MAGIC_V2 or header.compression or end > len(view) or header.record_count < 0:
        return None
    deltas = _record_deltas(view[:end], HEADER_BYTES, end, header.record_count, header.last_offset_delta)
    if deltas is None:
        return None
    if header.attributes & TIMESTAMP_TYPE_BIT:  # log append time: every record has the max timestamp
        return [(offset_delta, header.max_timestamp) for offset_delta, _ in deltas]
    return [(offset_delta, header.base_timestamp + timestamp_delta) for offset_delta, timestamp_delta in deltas]


def _record_deltas(data, start: int, end: int, record_count: int,
                   last_offset_delta: int) -> list[tuple[int, int]] | None:
    """(offset delta, timestamp delta) of the `record_count` records framed from `start` to exactly `end`
    of `data`, reading only each record's first fields (`length varint | attributes int8 |
    timestampDelta varlong | offsetDelta varint | ...`). None when they do not frame so: a length <= 0,
    a record past `end`, fields past their record, an offset delta outside [0, last_offset_delta], a
    varint over ten bytes, bytes missing, or bytes left after the last record. The one record walk of
    ListOffsets, of the timestamp check and of its pure scan twin."""
    out: list[tuple[int, int]] = []
    pos = start
    try:
        for _ in range(record_count):
            # Each varint decoded inline when it is one byte (the common case), else by `_read_varint`.
            b = data[pos]
            length, pos = ((b >> 1) ^ -(b & 1), pos + 1) if b < 0x80 else _read_varint(data, pos)
            record_end = pos + length
            if length <= 0 or record_end > end:
                return None
            b = data[pos + 1]  # after the attributes byte
            timestamp_delta, p = ((b >> 1) ^ -(b & 1), pos + 2) if b < 0x80 else _read_varint(data, pos + 1)
            b = data[p]
            offset_delta, p = ((b >> 1) ^ -(b & 1), p + 1) if b < 0x80 else _read_varint(data, p)
            if p > record_end or not 0 <= offset_delta <= last_offset_delta:
                return None
            out.append((offset_delta, timestamp_delta))
            pos = record_end
    except (IndexError, ValueError):
        return None
    return out if pos == end else None


# -- encoding (transaction markers, tests, benchmarks) -------------------------------------------


class SimpleRecord(NamedTuple):
    """One record to encode: key, value (None = null), headers, and its timestamp (None = the batch's)."""

    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]] = ()
    timestamp_ms: int | None = None


def _write_bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        _write_varint(out, -1)
    else:
        _write_varint(out, len(value))
        out += value


def build_record_batch(records: Iterable[SimpleRecord | tuple], *, base_offset: int = 0,
                       base_timestamp_ms: int = 0, producer_id: int = -1, producer_epoch: int = -1,
                       base_sequence: int = -1, is_transactional: bool = False, is_control: bool = False,
                       partition_leader_epoch: int = 0) -> bytes:
    """Encode an uncompressed RecordBatch v2 holding `records` (SimpleRecord or (key, value) tuples),
    with a correct CRC-32C. This is what a producer sends; the broker itself only builds markers."""
    recs = [r if isinstance(r, SimpleRecord) else SimpleRecord(*r) for r in records]
    if not recs:
        raise ValueError("a record batch holds at least one record")
    body = bytearray()
    max_ts = base_timestamp_ms
    for delta, rec in enumerate(recs):
        ts = base_timestamp_ms if rec.timestamp_ms is None else rec.timestamp_ms
        max_ts = max(max_ts, ts)
        one = bytearray([0])  # attributes
        _write_varint(one, ts - base_timestamp_ms)
        _write_varint(one, delta)
        _write_bytes(one, rec.key)
        _write_bytes(one, rec.value)
        _write_varint(one, len(rec.headers))
        for hkey, hvalue in rec.headers:
            _write_bytes(one, hkey.encode())
            _write_bytes(one, hvalue)
        _write_varint(body, len(one))
        body += one
    attributes = (TRANSACTIONAL_BIT if is_transactional else 0) | (CONTROL_BIT if is_control else 0)
    length = HEADER_BYTES - LOG_OVERHEAD_BYTES + len(body)
    out = bytearray(_HEADER.pack(base_offset, length, partition_leader_epoch, MAGIC_V2, 0, attributes,
                                 len(recs) - 1, base_timestamp_ms, max_ts, producer_id, producer_epoch,
                                 base_sequence, len(recs)))
    out += body
    struct.pack_into(">I", out, _CRC_POS, batch_crc(out, 0, len(out)))
    return bytes(out)


def build_control_batch(marker_type: int, *, producer_id: int, producer_epoch: int, coordinator_epoch: int = 0,
                        timestamp_ms: int = 0, base_offset: int = 0) -> bytes:
    """A transaction marker: a transactional control batch of one record whose key is (version 0,
    `marker_type`) and value (version 0, `coordinator_epoch`)."""
    key = struct.pack(">hh", 0, marker_type)
    value = struct.pack(">hi", 0, coordinator_epoch)
    return build_record_batch([SimpleRecord(key, value)], base_offset=base_offset, base_timestamp_ms=timestamp_ms,
                              producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=-1,
                              is_transactional=True, is_control=True)
