"""Record values, their msgpack encoding and framing: round trips, and hostile bytes refused cleanly."""

from __future__ import annotations

import struct
import uuid

import crc32c
import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from persister import (
    RecordDecodeError,
    ShareCheckpoint,
    ShareDelta,
    StateKey,
    TornRecordError,
    decode_record,
    encode_record,
    iter_records,
)
from persister.state_records import FORMAT_VERSION, FRAME_HEADER_BYTES, MAX_FRAME_BYTES
from sharegroup.types import RecordState, StateBatch

TOPIC = uuid.UUID("5f1c2d3e-4b5a-6978-8a9b-0c1d2e3f4a5b")
KEY = StateKey("group-1", TOPIC, 7)
CHECKPOINT = ShareCheckpoint(3, 2, 5, 100, 4, 1_000, 2_000, [StateBatch(100, 109, 0, 1), StateBatch(115, 120, 2, 3)])
DELTA = ShareDelta(3, -1, -1, -1, [(130, 131, 4, 5)])


def frame(record_type: int, version: int, payload: bytes) -> bytes:
    """A frame with a valid CRC around arbitrary body bytes (to reach the payload checks)."""
    body = bytes((record_type, version)) + payload
    length = len(body).to_bytes(4, "big")
    return length + crc32c.crc32c(body, crc32c.crc32c(length)).to_bytes(4, "big") + body


def good_key():
    return [KEY.group_id, TOPIC.bytes, KEY.partition]


# -- values -------------------------------------------------------------------------------------


def test_values_are_frozen_and_hold_state_batch_tuples():
    assert CHECKPOINT.state_batches == (StateBatch(100, 109, 0, 1), StateBatch(115, 120, 2, 3))
    assert type(DELTA.state_batches[0]) is StateBatch
    with pytest.raises(AttributeError):
        CHECKPOINT.start_offset = 3  # type: ignore[misc]
    assert hash(CHECKPOINT) == hash(ShareCheckpoint(3, 2, 5, 100, 4, 1_000, 2_000, list(CHECKPOINT.state_batches)))
    assert CHECKPOINT != DELTA


# -- round trips --------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [CHECKPOINT, DELTA, None, ShareCheckpoint(0, 0, 0, -1, -1, 0, 0, [])])
def test_round_trip(value):
    buf = encode_record(KEY, value)
    key, decoded, next_offset = decode_record(buf)
    assert (key, decoded, next_offset) == (KEY, value, len(buf))
    assert type(key) is StateKey and type(key.topic_id) is uuid.UUID


def test_consecutive_frames_decode_in_sequence():
    frames = [encode_record(KEY, CHECKPOINT), encode_record(KEY._replace(partition=0), DELTA), encode_record(KEY, None)]
    buf = b"".join(frames)
    key, value, offset = decode_record(buf, len(frames[0]))
    assert (key.partition, value) == (0, DELTA)
    got = list(iter_records(buf))
    assert [v for _, v, _ in got] == [CHECKPOINT, DELTA, None]
    assert got[-1][2] == len(buf)
    assert list(iter_records(b"")) == []


def test_int_enums_encode_as_plain_ints():
    value = ShareDelta(0, 0, 0, 0, [StateBatch(0, 1, RecordState.ARCHIVED, 1)])
    _, decoded, _ = decode_record(encode_record(KEY, value))
    assert decoded == value and type(decoded.state_batches[0].delivery_state) is int


record_batches = st.lists(
    st.tuples(st.integers(0, 2**40), st.integers(0, 2**20), st.sampled_from([0, 2, 4]), st.integers(0, 2**15 - 1)).map(
        lambda t: StateBatch(t[0], t[0] + t[1], t[2], t[3])
    ),
    max_size=20,
)
int32 = st.integers(0, 2**31 - 1)
keys = st.builds(StateKey, st.text(min_size=1, max_size=40), st.uuids(), int32)
values = st.one_of(
    st.none(),
    st.builds(
        ShareCheckpoint,
        int32,
        int32,
        int32,
        st.integers(-1, 2**63 - 1),
        st.integers(-1, 2**31 - 1),
        st.integers(0, 2**50),
        st.integers(0, 2**50),
        record_batches,
    ),
    st.builds(
        ShareDelta,
        int32,
        st.integers(-1, 2**31 - 1),
        st.integers(-1, 2**63 - 1),
        st.integers(-1, 2**31 - 1),
        record_batches,
    ),
)


@settings(max_examples=300, deadline=None)
@given(keys, values)
def test_round_trip_property(key, value):
    assert decode_record(encode_record(key, value))[:2] == (key, value)


# -- encoding refuses what decoding would refuse ------------------------------------------------


@pytest.mark.parametrize(
    "key, value",
    [
        (StateKey("g", "not-a-uuid", 0), None),
        (StateKey("g", TOPIC, -1), None),
        (StateKey(b"g", TOPIC, 0), None),
        (KEY, ShareDelta(0, -2, 0, 0, [])),
        (KEY, ShareDelta(0, 0, 0, 0, [(5, 4, 0, 1)])),
        (KEY, ShareDelta(0, 0, 0, 0, [(0, 4, 0, 2**15)])),
        (KEY, ShareCheckpoint(0, 0, 0, 2**63, 0, 0, 0, [])),
        (KEY, ShareCheckpoint(True, 0, 0, 0, 0, 0, 0, [])),
        (KEY, "not a record"),
    ],
)
def test_encode_refuses_bad_keys_and_values(key, value):
    with pytest.raises((ValueError, TypeError)):
        encode_record(key, value)


# -- hostile bytes ------------------------------------------------------------------------------


def test_every_truncation_is_torn():
    buf = encode_record(KEY, CHECKPOINT)
    for cut in range(len(buf)):
        with pytest.raises(TornRecordError):
            decode_record(buf[:cut])


def test_every_single_bit_flip_is_detected():
    buf = encode_record(KEY, CHECKPOINT)
    for bit in range(len(buf) * 8):
        flipped = bytearray(buf)
        flipped[bit // 8] ^= 1 << (bit % 8)
        with pytest.raises(RecordDecodeError):
            decode_record(bytes(flipped))


def test_a_flipped_length_inside_a_longer_buffer_is_corruption_not_a_misread():
    buf = encode_record(KEY, CHECKPOINT) + encode_record(KEY, DELTA)
    flipped = bytearray(buf)
    flipped[3] ^= 0x01  # the frame now claims one byte more or less, still inside the buffer
    with pytest.raises(RecordDecodeError) as info:
        decode_record(bytes(flipped))
    assert not isinstance(info.value, TornRecordError)


@pytest.mark.parametrize("length", [MAX_FRAME_BYTES + 1, 2**32 - 1, 0, 1, 2])
def test_absurd_lengths_are_corruption_without_allocating(length):
    buf = struct.pack(">II", length, 0) + b"\x00" * 16
    with pytest.raises(RecordDecodeError) as info:
        decode_record(buf)
    assert not isinstance(info.value, TornRecordError)


def test_a_plausible_length_beyond_the_buffer_is_torn():
    with pytest.raises(TornRecordError):
        decode_record(struct.pack(">II", 1000, 0) + b"\x00" * 10)


def test_bad_offsets():
    buf = encode_record(KEY, None)
    with pytest.raises(ValueError):
        decode_record(buf, -1)
    with pytest.raises(ValueError):
        decode_record(buf, len(buf) + 1)
    with pytest.raises(TornRecordError):
        decode_record(buf, len(buf))


def packed(obj) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


@pytest.mark.parametrize(
    "body",
    [
        frame(0, FORMAT_VERSION + 1, packed([good_key(), None])),  # unknown format version
        frame(9, FORMAT_VERSION, packed([good_key(), None])),  # unknown record type
        frame(1, FORMAT_VERSION, packed([good_key(), None])),  # a delta tombstone
        frame(0, FORMAT_VERSION, b"\xc1"),  # not msgpack (0xc1 is never used)
        frame(0, FORMAT_VERSION, packed([good_key(), None]) + b"\x00"),  # trailing bytes
        frame(0, FORMAT_VERSION, packed({"key": 1})),  # a map, not [key, value]
        frame(0, FORMAT_VERSION, packed([good_key()])),  # one element
        frame(0, FORMAT_VERSION, packed([["g", b"short", 0], None])),  # topic id not 16 bytes
        frame(0, FORMAT_VERSION, packed([["g", TOPIC.bytes, -3], None])),  # negative partition
        frame(0, FORMAT_VERSION, packed([["g", TOPIC.bytes, True], None])),  # bool partition
        frame(0, FORMAT_VERSION, packed([[b"g", TOPIC.bytes, 0], None])),  # binary group id
        frame(0, FORMAT_VERSION, packed([good_key(), [0, 0, 0, 0, 0, 0, 0]])),  # 7 checkpoint fields
        frame(0, FORMAT_VERSION, packed([good_key(), [0, 0, 0, 0, 0, 0, 0, [1, 2, 3]]])),  # ragged batches
        frame(0, FORMAT_VERSION, packed([good_key(), [0, 0, 0, 0, 0, 0, 0, [5, 4, 0, 1]]])),  # first > last
        frame(0, FORMAT_VERSION, packed([good_key(), [0, 0, 0, 0, 0, 0, 0, [0, 4, 0, 1.5]]])),  # float count
        frame(1, FORMAT_VERSION, packed([good_key(), [0, 0, 0, 0, "x"]])),  # batches not an array
        frame(1, FORMAT_VERSION, packed([good_key(), [0, 0, 0, 2**40, []]])),  # count beyond int32
        frame(0, FORMAT_VERSION, b"\xdd\xff\xff\xff\xff"),  # array32 header claiming 4 billion items
        frame(0, FORMAT_VERSION, b"\xdb\xff\xff\xff\xff" + b"ab"),  # str32 header claiming 4 GiB
        frame(0, FORMAT_VERSION, b"\x91" * 100_000),  # nested arrays 100k deep
        frame(0, FORMAT_VERSION, packed([good_key(), msgpack.ExtType(1, b"x")])),  # an ext value
        frame(0, FORMAT_VERSION, b"\xa2\xff\xfe"),  # invalid utf-8 string
    ],
)
def test_valid_crc_but_bad_payload_is_refused(body):
    with pytest.raises(RecordDecodeError) as info:
        decode_record(body)
    assert not isinstance(info.value, TornRecordError)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_only_ever_raise_decode_errors(data):
    try:
        decode_record(data)
    except RecordDecodeError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=1, max_size=200))
def test_random_payloads_behind_a_valid_crc_only_ever_raise_decode_errors(payload):
    for record_type in (0, 1):
        try:
            key, _, end = decode_record(frame(record_type, FORMAT_VERSION, payload))
        except RecordDecodeError:
            continue
        assert type(key) is StateKey and end == FRAME_HEADER_BYTES + 2 + len(payload)
