"""RecordBatch v2 headers: the encoder against an independent decoder, the produce checks with Kafka's
codes, the base-offset rewrite that keeps the CRC valid, control-marker parsing, record timestamps."""

from __future__ import annotations

import os
import struct

import crc32c
import pytest

from sharegroup.errors import Errors, ShareError
from sharegroup.topics.record_batch import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    HEADER_BYTES,
    SimpleRecord,
    build_control_batch,
    build_record_batch,
    control_type,
    last_sequence,
    parse_header,
    record_timestamps,
    set_base_offset,
    validate_produce_batches,
)

MAX = 1_048_588


def batch(n=3, **kw) -> bytes:
    return build_record_batch([SimpleRecord(b"k%d" % i, b"value-%d" % i, [("h", b"x")]) for i in range(n)], **kw)


def refused(data, code, max_message_bytes=MAX):
    with pytest.raises(ShareError) as err:
        validate_produce_batches(data, max_message_bytes=max_message_bytes)
    assert err.value.error == code, err.value
    return err.value


def test_crc32c_check_value():
    assert crc32c.crc32c(b"123456789") == 0xE3069283


def test_header_fields_of_a_built_batch():
    data = batch(4, base_timestamp_ms=1_000, producer_id=7, producer_epoch=2, base_sequence=10)
    h = parse_header(data)
    assert (h.base_offset, h.magic, h.last_offset_delta, h.record_count) == (0, 2, 3, 4)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence) == (7, 2, 10, 13)
    assert h.size_bytes == len(data) and h.batch_length == len(data) - 12
    assert h.crc == crc32c.crc32c(data[21:])
    assert not h.is_transactional and not h.is_control and h.compression == 0


def test_kio_decodes_our_batches_byte_exactly_and_after_the_offset_rewrite():
    readers = pytest.importorskip("kio.records.readers")
    data = bytearray(build_record_batch([SimpleRecord(b"key", b"\x00\xffbin", [("trace", b"1"), ("n", None)]),
                                         SimpleRecord(None, b"v2", timestamp_ms=1_700_000_000_123)],
                                        base_timestamp_ms=1_700_000_000_000))
    set_base_offset(data, 0, 1_000, 0)
    decoded, size = readers.read_batch(memoryview(bytes(data)), 0)  # checks the CRC itself
    assert size == len(data)
    assert [r.offset for r in decoded.records] == [1_000, 1_001]
    assert [(r.key, r.value) for r in decoded.records] == [(b"key", b"\x00\xffbin"), (None, b"v2")]
    assert [(h.key, h.value) for h in decoded.records[0].headers] == [(b"trace", b"1"), (b"n", None)]
    assert decoded.max_timestamp == 1_700_000_000_123


def test_rewriting_the_base_offset_keeps_the_crc_valid():
    data = bytearray(batch())
    set_base_offset(data, 0, 123_456_789_012, 5)
    h = parse_header(data)
    assert (h.base_offset, h.partition_leader_epoch) == (123_456_789_012, 5)
    assert validate_produce_batches(data, max_message_bytes=MAX) == [h]


def test_several_batches_back_to_back():
    a, b = batch(2), batch(5, producer_id=1, producer_epoch=0, base_sequence=0)
    headers = validate_produce_batches(a + b, max_message_bytes=MAX)
    assert [h.record_count for h in headers] == [2, 5]
    assert validate_produce_batches(a + b, max_message_bytes=MAX, max_batches=2) == headers
    with pytest.raises(ShareError) as err:  # Kafka's Produce v3+: exactly one batch per partition
        validate_produce_batches(a + b, max_message_bytes=MAX, max_batches=1)
    assert err.value.error == Errors.INVALID_RECORD


def test_bad_crc_is_corrupt_message():
    data = bytearray(batch())
    data[-1] ^= 0x01
    assert "CRC" in refused(bytes(data), Errors.CORRUPT_MESSAGE).message


def test_crc_covers_attributes_onwards_only():
    data = bytearray(batch())
    data[21] ^= 0x10  # attributes: transactional bit, covered by the CRC
    refused(bytes(data), Errors.CORRUPT_MESSAGE)


@pytest.mark.parametrize("magic", [0, 1, 3])
def test_magic_other_than_2_is_invalid_record(magic):
    data = bytearray(batch())
    data[16] = magic
    refused(bytes(data), Errors.INVALID_RECORD)


@pytest.mark.parametrize("delta,padded", [(1, False), (1000, False), (-1, False), (1, True), (1000, True)])
def test_lying_batch_length_is_corrupt_message(delta, padded):
    """A length that claims more bytes than arrived, or fewer than the batch has (bytes left over), or
    more with the missing bytes padded in, so that the frame is whole but the CRC no longer covers what
    the producer signed: CORRUPT_MESSAGE every time."""
    data = bytearray(batch())
    struct.pack_into(">i", data, 8, len(data) - 12 + delta)
    padding = b"\x00" * delta if padded else b""
    refused(bytes(data) + padding, Errors.CORRUPT_MESSAGE)


def test_length_below_the_header_and_truncated_input_are_corrupt_message():
    data = bytearray(batch())
    struct.pack_into(">i", data, 8, 10)
    refused(bytes(data), Errors.CORRUPT_MESSAGE)
    refused(batch()[:-1], Errors.CORRUPT_MESSAGE)
    refused(batch()[:HEADER_BYTES - 1], Errors.CORRUPT_MESSAGE)
    refused(batch() + b"\x00" * 5, Errors.CORRUPT_MESSAGE)  # trailing bytes that are no batch


def test_no_batch_at_all_is_invalid_record():
    refused(b"", Errors.INVALID_RECORD)
    refused(None, Errors.INVALID_RECORD)  # null records in a Produce request


def test_batch_larger_than_max_message_bytes():
    data = batch(50)
    refused(data, Errors.MESSAGE_TOO_LARGE, max_message_bytes=len(data) - 1)
    assert len(validate_produce_batches(data, max_message_bytes=len(data))) == 1


def _recrc(data: bytearray) -> bytes:
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return bytes(data)


def test_client_batch_rules_are_invalid_record():
    data = bytearray(batch(3))
    struct.pack_into(">i", data, 57, 4)  # record count 4 with offset deltas 0..2
    refused(_recrc(data), Errors.INVALID_RECORD)
    refused(build_control_batch(CONTROL_COMMIT, producer_id=1, producer_epoch=0), Errors.INVALID_RECORD)
    refused(batch(producer_id=3, producer_epoch=0, base_sequence=-1), Errors.INVALID_RECORD)
    refused(batch(is_transactional=True), Errors.INVALID_RECORD)


def test_control_markers_parse():
    abort = build_control_batch(CONTROL_ABORT, producer_id=4, producer_epoch=1, coordinator_epoch=9)
    commit = build_control_batch(CONTROL_COMMIT, producer_id=4, producer_epoch=1)
    assert control_type(abort, 0) == CONTROL_ABORT and control_type(commit, 0) == CONTROL_COMMIT
    h = parse_header(abort)
    assert h.is_control and h.is_transactional and h.record_count == 1
    assert control_type(abort[:HEADER_BYTES + 2], 0) is None


def test_sequences_wrap_at_int32_max():
    assert last_sequence(10, 4) == 14
    assert last_sequence(2**31 - 2, 3) == 1
    assert last_sequence(-1, 3) == -1


def stamped(*timestamps_ms, base_timestamp_ms=5_000) -> bytes:
    return build_record_batch([SimpleRecord(b"k", b"v%d" % i, [("h", b"x")], timestamp_ms=ts)
                               for i, ts in enumerate(timestamps_ms)], base_timestamp_ms=base_timestamp_ms)


def test_record_timestamps_of_an_uncompressed_batch():
    """Each record's offset delta and its own timestamp (base plus its delta, which may be negative)."""
    assert record_timestamps(stamped(5_000, 3_000, 7_000, 7_000)) == [(0, 5_000), (1, 3_000), (2, 7_000), (3, 7_000)]
    assert record_timestamps(memoryview(stamped(9_000) + b"next batch")) == [(0, 9_000)]  # only the first batch


def test_record_timestamps_of_a_batch_kio_encoded():
    """kio's encoder, independent of ours, writes records the walk reads alike."""
    import datetime as dt
    import io

    from kio.records.schema import NewRecordBatch, Record
    from kio.records.writers import write_new_batch

    at = [dt.datetime(2026, 1, 1, 0, 0, s, tzinfo=dt.timezone.utc) for s in (10, 5, 30)]
    buf = io.BytesIO()
    records = tuple(Record(attributes=0, timestamp=t, offset=i, key=None, value=b"x" * 40 * i, headers=())
                    for i, t in enumerate(at))
    write_new_batch(buf, NewRecordBatch(producer_id=-1, producer_epoch=-1, base_sequence=-1, attributes=0,
                                        records=records))
    assert record_timestamps(buf.getvalue()) == [(i, int(t.timestamp() * 1000)) for i, t in enumerate(at)]


def _with_attributes(data: bytes, bits: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(">h", out, 21, struct.unpack_from(">h", out, 21)[0] | bits)
    return _recrc(out)


def test_record_timestamps_with_log_append_time_are_the_batch_max():
    data = _with_attributes(stamped(5_000, 3_000, 7_000), 0x08)
    assert record_timestamps(data) == [(0, 7_000), (1, 7_000), (2, 7_000)]


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_record_timestamps_of_a_compressed_batch_is_none(codec):
    assert record_timestamps(_with_attributes(stamped(5_000, 6_000), codec)) is None


def test_record_timestamps_of_malformed_records_is_none():
    good = stamped(5_000, 6_000, 7_000)
    first_record = HEADER_BYTES

    def with_count(n):
        return good[:57] + struct.pack(">i", n) + good[61:]

    def with_first_length(n):
        return good[:first_record] + bytes([n << 1]) + good[first_record + 1:]

    assert record_timestamps(with_count(4)) is None  # more records than the bytes hold
    assert record_timestamps(with_count(2)) is None  # bytes left after the last record
    assert record_timestamps(with_count(-1)) is None
    assert record_timestamps(with_first_length(0)) is None
    assert record_timestamps(with_first_length(60)) is None  # runs past the batch into nothing
    assert record_timestamps(good[:-1]) is None  # shorter than its batch length
    assert record_timestamps(good[:HEADER_BYTES - 1]) is None
    lying_delta = bytearray(good)
    lying_delta[first_record + 3] = 9 << 1  # the first record's offset delta: 9, past lastOffsetDelta 2
    assert record_timestamps(bytes(lying_delta)) is None
    overlong = bytearray(good)
    overlong[first_record + 2:first_record + 3] = b"\xff" * 12  # a timestamp varint of 12 bytes
    overlong[8:12] = struct.pack(">i", len(overlong) - 12)
    assert record_timestamps(bytes(overlong)) is None
    assert record_timestamps(good) == [(0, 5_000), (1, 6_000), (2, 7_000)]


from hypothesis import given, settings
from hypothesis import strategies as st


@st.composite
def damaged_batches(draw):
    data = bytearray(batch(draw(st.integers(1, 4)), producer_id=draw(st.sampled_from([-1, 5])), producer_epoch=0,
                           base_sequence=0) * draw(st.integers(1, 2)))
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["flip", "cut", "grow", "set"]))
        if kind == "flip" and data:
            data[draw(st.integers(0, len(data) - 1))] ^= draw(st.integers(1, 255))
        elif kind == "cut":
            del data[draw(st.integers(0, len(data))):]
        elif kind == "grow":
            data += draw(st.binary(max_size=80))
        elif kind == "set" and len(data) >= 12:
            data[8:12] = draw(st.integers(-(2**31), 2**31 - 1)).to_bytes(4, "big", signed=True)
    return bytes(data)


@settings(max_examples=300, deadline=None)
@given(damaged_batches())
def test_any_damage_is_refused_with_a_kafka_code_or_still_valid(data):
    try:
        headers = validate_produce_batches(data, max_message_bytes=MAX)
    except ShareError as exc:
        assert exc.error in (Errors.CORRUPT_MESSAGE, Errors.INVALID_RECORD, Errors.MESSAGE_TOO_LARGE)
        return
    assert sum(h.size_bytes for h in headers) == len(data)
    for h in headers:  # what passes is whole, consistent batches
        assert h.magic == 2 and h.record_count == h.last_offset_delta + 1 >= 1


@settings(max_examples=300, deadline=None)
@given(damaged_batches())
def test_record_timestamps_of_any_damaged_batch_never_raises(data):
    """Whatever the bytes, the walk answers None or records whose offsets stay inside the batch."""
    walked = record_timestamps(data)
    if walked is not None:
        h = parse_header(data)
        assert len(walked) == h.record_count and all(0 <= d <= h.last_offset_delta for d, _ts in walked)


# -- record timestamps against the broker's clock (check_timestamps) ------------------------------

_LONG_MAX = 2**63 - 1


def _java_long(value: int) -> int:
    return (value + 2**63) % 2**64 - 2**63


def _kafka_refuses(timestamp: int, now_ms: int, before_max_ms: int, after_max_ms: int) -> bool:
    """Kafka's rule for one CreateTime record, in Java long arithmetic (the model the check must match)."""
    if timestamp == -1:
        return False
    diff = _java_long(now_ms - timestamp)
    return diff > before_max_ms or _java_long(-diff) > after_max_ms


def _refused_indexes(data: bytes, now_ms: int, before_max_ms: int, after_max_ms: int) -> list[int]:
    from sharegroup.topics.record_batch import RecordValidationError, check_timestamps

    try:
        check_timestamps(data, validate_produce_batches(data, max_message_bytes=MAX), now_ms=now_ms,
                         before_max_ms=before_max_ms, after_max_ms=after_max_ms)
    except RecordValidationError as exc:
        assert (exc.error, exc.message) == (Errors.INVALID_TIMESTAMP,
                                            "One or more records have been rejected due to invalid timestamp")
        return [index for index, _message in exc.record_errors]
    return []


_NOW = 1_790_000_000_000
_stamp = st.one_of(st.integers(_NOW - 10**7, _NOW + 10**7), st.sampled_from([-1, 0, -(2**63), _LONG_MAX]),
                   st.integers(-(2**63), _LONG_MAX))
_bound = st.one_of(st.integers(0, 10**7), st.sampled_from([0, _LONG_MAX]), st.integers(0, _LONG_MAX))


@settings(max_examples=300, deadline=None)
@given(st.lists(_stamp, min_size=1, max_size=12), _bound, _bound)
def test_check_timestamps_refuses_exactly_the_records_kafka_refuses(stamps, before_max_ms, after_max_ms):
    """Any record timestamps (deltas of any size and sign from the base) and bounds: the batch is refused
    naming exactly the records Kafka's rule refuses, Java's long wrap-around included (the fast path that
    looks only at the extremes must never let one through)."""
    base = stamps[0] if stamps[0] != -1 else _NOW
    if any(not -(2**63) <= ts - base <= _LONG_MAX for ts in stamps):
        return  # a timestamp delta must be a long
    records = [SimpleRecord(b"k", b"v", timestamp_ms=ts) for ts in stamps]
    try:
        data = build_record_batch(records, base_timestamp_ms=base)
    except (struct.error, OverflowError):  # a delta beyond a varlong: not a batch a producer can send
        return
    expected = [i for i, ts in enumerate(stamps) if _kafka_refuses(_java_long(ts), _NOW, before_max_ms, after_max_ms)]
    assert _refused_indexes(data, _NOW, before_max_ms, after_max_ms) == expected


def test_check_timestamps_messages_and_java_long_bounds():
    """Kafka's record message; the default before bound makes a range start Java computes without wrapping,
    an after bound of 2^63-1 one it wraps (and then takes every future record); Long.MIN_VALUE is refused
    with no before limit, as Java's wrapped difference makes it look far ahead (unless nothing ahead is)."""
    from sharegroup.topics.record_batch import RecordValidationError, check_timestamps

    data = build_record_batch([SimpleRecord(b"k", b"a"), SimpleRecord(b"k", b"b", timestamp_ms=_NOW + 7_200_000)],
                              base_timestamp_ms=_NOW, base_offset=40)
    headers = validate_produce_batches(data, max_message_bytes=MAX)
    with pytest.raises(RecordValidationError) as caught:
        check_timestamps(data, headers, now_ms=_NOW, before_max_ms=_LONG_MAX, after_max_ms=3_600_000)
    assert caught.value.record_errors == ((1, f"Timestamp {_NOW + 7_200_000} of message with offset 41 is out of "
                                              f"range. The timestamp should be within [{_NOW - _LONG_MAX}, "
                                              f"{_NOW + 3_600_000}]"),)
    check_timestamps(data, headers, now_ms=_NOW, before_max_ms=_LONG_MAX, after_max_ms=_LONG_MAX)
    lowest = build_record_batch([SimpleRecord(b"k", b"v")], base_timestamp_ms=-(2**63))
    assert _refused_indexes(lowest, _NOW, _LONG_MAX, 3_600_000) == [0]
    assert _refused_indexes(lowest, _NOW, _LONG_MAX, _LONG_MAX) == []


# -- the timestamp-delta scan twins (scan_timestamp_deltas, pure and Cython) ------------------------


def _scan_twins():
    from sharegroup.topics import record_batch

    twins = [pytest.param(record_batch.scan_timestamp_deltas, id="pure")]
    if os.environ.get("SHAREGROUP_PUREPYTHON") != "1":
        from sharegroup.topics._record_scan import scan_timestamp_deltas as native

        twins.append(pytest.param(native, id="native"))
    return twins


@pytest.mark.parametrize("scan", _scan_twins())
def test_scan_timestamp_deltas_reads_each_records_delta(scan):
    stamps = [_NOW + 5, _NOW, _NOW + 10**9, _NOW - 70, _NOW + 3]
    data = build_record_batch([SimpleRecord(b"k", b"v" * 200, timestamp_ms=ts) for ts in stamps],
                              base_timestamp_ms=_NOW)
    header = validate_produce_batches(data, max_message_bytes=MAX)[0]
    end, count, last = header.size_bytes, header.record_count, header.last_offset_delta
    assert scan(data, HEADER_BYTES, end, count, last) == (-70, 10**9)
    assert scan(data, HEADER_BYTES, end, count - 1, last) is None  # does not end at `end`
    assert scan(data, HEADER_BYTES, end - 1, count, last) is None  # a record past `end`
    assert scan(data[:HEADER_BYTES + 1], HEADER_BYTES, end, count, last) is None  # cut short
    assert scan(data, HEADER_BYTES, end, count, last - 1) is None  # an offset delta past lastOffsetDelta
    assert scan(data, HEADER_BYTES, end, 0, last) is None
    assert scan(b"\x01" * 80 + b"\xff" * 11, 80, 91, 1, 0) is None  # a varint longer than ten bytes


@settings(max_examples=400, deadline=None)
@given(st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=8), st.binary(max_size=6),
       st.integers(0, 400), st.integers(0, 255))
def test_scan_timestamp_deltas_twins_agree_on_any_bytes(deltas, tail, flip_at, flip_to):
    """Valid batches, batches with one byte changed anywhere and trailing junk: the Cython twin answers
    what the pure one answers (the pure twin's ranges past a Java long, which the native one cannot hold,
    are out of reach of the varlongs a batch is built with here)."""
    if os.environ.get("SHAREGROUP_PUREPYTHON") == "1":
        pytest.skip("pure-Python pass: the native twin is not loaded")
    from sharegroup.topics._record_scan import scan_timestamp_deltas as native
    from sharegroup.topics.record_batch import scan_timestamp_deltas as pure

    data = bytearray(build_record_batch([SimpleRecord(b"k", b"v", timestamp_ms=_NOW + d) for d in deltas],
                                        base_timestamp_ms=_NOW))
    args = (HEADER_BYTES, len(data), len(deltas), len(deltas) - 1)
    for candidate in (bytes(data), bytes(data) + tail):
        assert native(candidate, *args) == pure(candidate, *args)
    if flip_at < len(data):
        data[flip_at] = flip_to
        assert native(bytes(data), *args) == pure(bytes(data), *args)
