"""The bulk frame codec twins (persister.frame_codec): the pure one and the Cython one
(`_native/records.pyx`, built as `persister._native_records`) against `records.decode_record`, the
definition of a valid frame, and against each other.

Both twins run in the native pass; the pure pass runs the pure twin only (tests that need the native
one skip with that reason). A guard fails the run when the native twin was required but not loaded."""

from __future__ import annotations

import enum
import os
import random
import sys
import struct
import uuid

import crc32c
import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from persister import frame_codec as frame_codec_module
from persister import frame_codec_pure
from persister.frame_codec import KIND_CHECKPOINT, KIND_DELTA, KIND_TOMBSTONE, KeyTable, frame_codec
from persister.state_records import (
    FORMAT_VERSION,
    RecordDecodeError,
    ShareCheckpoint,
    ShareDelta,
    StateKey,
    check_frame,
    decode_record,
    encode_delta_frame,
    encode_key,
    encode_record,
)
from sharegroup.types import StateBatch

PURE_ONLY = os.environ.get("SHAREGROUP_PUREPYTHON") == "1"
native_only = pytest.mark.skipif(PURE_ONLY, reason="the pure pass (SHAREGROUP_PUREPYTHON=1) runs the pure twin only")


def _twins():
    twins = [pytest.param(frame_codec_module.pure_frame_codec(), id="pure")]
    if not PURE_ONLY:
        twins.insert(0, pytest.param(frame_codec_module.native_frame_codec(), id="native"))
    return twins


@pytest.fixture(params=_twins(), scope="module")  # stateless modules: shared by hypothesis examples too
def codec(request):
    return request.param


TOPIC = uuid.UUID("5f1c2d3e-4b5a-6978-8a9b-0c1d2e3f4a5b")
KEY = StateKey("group-1", TOPIC, 7)


def frame(record_type: int, payload: bytes, version: int = FORMAT_VERSION) -> bytes:
    """A frame with a valid CRC around any payload (to reach the payload checks)."""
    body = bytes((record_type, version)) + payload
    length = len(body).to_bytes(4, "big")
    return length + crc32c.crc32c(body, crc32c.crc32c(length)).to_bytes(4, "big") + body


def packed(obj) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def expected_rows(buf: bytes, keys: dict) -> tuple[list, int]:
    """What `decode_frames` must return, from `decode_record` one frame at a time; `keys` maps each
    StateKey to the id the codec gave it (filled in by `check_rows`)."""
    rows, pos = [], 0
    while pos < len(buf):
        try:
            key, value, end = decode_record(buf, pos)
        except RecordDecodeError:
            break
        if value is None:
            rows.append((key, KIND_TOMBSTONE))
        elif isinstance(value, ShareCheckpoint):
            flat = tuple(x for b in value.state_batches for x in b)
            rows.append((key, KIND_CHECKPOINT, value.checkpoint_epoch, value.state_epoch, value.leader_epoch,
                         value.start_offset, value.delivery_complete_count, value.create_timestamp_ms,
                         value.write_timestamp_ms, flat))
        else:
            flat = tuple(x for b in value.state_batches for x in b)
            rows.append((key, KIND_DELTA, value.checkpoint_epoch, value.leader_epoch, value.start_offset,
                         value.delivery_complete_count, flat))
        pos = end
    return rows, pos


def check_rows(codec, buf: bytes) -> tuple[list, int]:
    """Decode `buf` with `codec` and assert the rows are what decode_record says, key ids included."""
    table = KeyTable()
    rows, stop = codec.decode_frames(buf, 0, len(buf), table)
    want, want_stop = expected_rows(buf, {})
    assert stop == want_stop
    assert [(table.keys[row[0]],) + tuple(row[1:]) for row in rows] == want
    for row in rows:  # plain ints all the way down, the batches a tuple
        assert type(row) is tuple and all(type(x) is int for x in row[:-1] if type(x) is not tuple)
    assert len(set(table.keys)) == len(table.keys), "one id per key"
    return rows, stop


# -- the twins -------------------------------------------------------------------------------------


def test_the_twin_in_use_is_the_one_selected():
    selected = frame_codec()
    assert selected.NATIVE is frame_codec_module.NATIVE
    if os.environ.get("SHAREGROUP_REQUIRE_NATIVE") == "1":
        assert selected.NATIVE and selected.__name__ == "persister._native_records"
    if PURE_ONLY:
        assert selected is frame_codec_pure


@native_only
def test_native_twin_shares_the_python_vocabulary():
    native = frame_codec_module.native_frame_codec()
    assert native.NATIVE is True
    assert (native.KIND_CHECKPOINT, native.KIND_DELTA, native.KIND_TOMBSTONE) == (
        KIND_CHECKPOINT, KIND_DELTA, KIND_TOMBSTONE)


@native_only
@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300), st.integers(0, 2**32 - 1))
def test_native_crc32c_equals_the_crc32c_package(data, value):
    native = frame_codec_module.native_frame_codec()
    assert native.crc32c(data) == crc32c.crc32c(data)
    assert native.crc32c(data, value) == crc32c.crc32c(data, value)


def test_a_missing_native_build_is_an_error_not_a_fallback(monkeypatch):
    monkeypatch.setitem(sys.modules, "persister._native_records", None)  # what a missing build looks like
    with pytest.raises(ImportError, match="persister._native_records is not built.*SHAREGROUP_PUREPYTHON=1"):
        frame_codec_module.native_frame_codec()


# -- valid logs ------------------------------------------------------------------------------------


def random_record(rng: random.Random):
    kind = rng.random()
    edges = [0, 1, 127, 128, 255, 256, 65535, 65536, 2**31 - 1, 2**32, 2**62]
    def num(low, high):
        choices = [e for e in edges + [-1] if low <= e <= high]
        return rng.choice(choices) if rng.random() < 0.5 else rng.randint(low, high)
    batches = []
    for _ in range(rng.choice([0, 1, 2, 5, 20])):
        first = num(0, 2**62)
        batches.append(StateBatch(first, first + num(0, 2**20), rng.choice([0, 2, 4, -128, 127]), num(0, 2**15 - 1)))
    if kind < 0.15:
        return None
    if kind < 0.45:
        return ShareCheckpoint(num(0, 2**31 - 1), num(0, 2**31 - 1), num(-1, 2**31 - 1), num(-1, 2**63 - 1),
                               num(-1, 2**31 - 1), rng.randint(-(2**63), 2**63 - 1), num(0, 2**50), batches)
    return ShareDelta(num(0, 2**31 - 1), num(-1, 2**31 - 1), num(-1, 2**63 - 1), num(-1, 2**31 - 1), batches)


def random_key(rng: random.Random) -> StateKey:
    group = rng.choice(["g", "orders-consumers", "ü-gruppe", "x" * 40, "y" * 300, ""])
    return StateKey(group, uuid.UUID(int=rng.getrandbits(128)), rng.choice([0, 1, 127, 128, 65536, 2**31 - 1]))


@pytest.mark.parametrize("seed", range(5))
def test_a_random_log_decodes_to_the_rows_of_decode_record(codec, seed):
    rng = random.Random(seed)
    keys = [random_key(rng) for _ in range(12)]
    buf = b"".join(encode_record(rng.choice(keys), random_record(rng)) for _ in range(400))
    rows, stop = check_rows(codec, buf)
    assert stop == len(buf) and len(rows) == 400
    count, stop = codec.scan_frames(buf, 0, len(buf))
    assert (count, stop) == (400, len(buf))


def test_decoding_continues_across_calls_with_one_key_table(codec):
    records = [(KEY, ShareDelta(0, 0, i, i, [(i, i, 2, 1)])) for i in range(10)]
    frames = [encode_record(k, v) for k, v in records]
    table = KeyTable()
    first, stop = codec.decode_frames(b"".join(frames[:5]), 0, sum(map(len, frames[:5])), table)
    second, _ = codec.decode_frames(b"".join(frames[5:]), 0, sum(map(len, frames[5:])), table)
    assert table.keys == [KEY] and {row[0] for row in first + second} == {0}


def test_two_stored_forms_of_one_key_get_one_id(codec):
    usual = frame(1, packed([[KEY.group_id, TOPIC.bytes, KEY.partition], [0, 0, 5, 5, []]]))
    # the same key with its partition as an int64 and its group id as a str 8: still valid msgpack
    odd_key = b"\x93\xd9" + bytes([len(KEY.group_id)]) + KEY.group_id.encode() + b"\xc4\x10" + TOPIC.bytes
    odd_key += b"\xd3" + KEY.partition.to_bytes(8, "big")
    odd = frame(1, b"\x92" + odd_key + packed([0, 0, 6, 6, []]))
    wide_topic = b"\x93\xa7" + KEY.group_id.encode() + b"\xc5\x00\x10" + TOPIC.bytes + b"\x07"
    wide = frame(1, b"\x92" + wide_topic + packed([0, 0, 7, 7, []]))
    buf = usual + odd + wide + usual
    rows, stop = check_rows(codec, buf)
    assert stop == len(buf) and [row[0] for row in rows] == [0, 0, 0, 0]


def test_ranges_and_max_count(codec):
    frames = [encode_record(KEY, ShareDelta(0, 0, i, i, [])) for i in range(6)]
    buf = b"".join(frames)
    start = len(frames[0])
    assert codec.scan_frames(buf, start, len(buf), 2) == (2, start + len(frames[1]) + len(frames[2]))
    assert codec.scan_frames(buf, start, start) == (0, start)
    assert codec.scan_frames(b"", 0, 0) == (0, 0)
    assert codec.decode_frames(b"", 0, 0, KeyTable()) == ([], 0)
    for bad in ((-1, 3), (5, 4), (0, len(buf) + 1)):
        with pytest.raises(ValueError):
            codec.scan_frames(buf, *bad)
        with pytest.raises(ValueError):
            codec.decode_frames(buf, *bad, KeyTable())
    rows, stop = codec.decode_frames(bytearray(buf), start, len(buf) - len(frames[-1]), KeyTable())
    assert len(rows) == 4 and stop == len(buf) - len(frames[-1])
    assert codec.scan_frames(memoryview(buf), 0, len(buf)) == (6, len(buf))


# -- bad bytes: the twins stop exactly where decode_record fails -----------------------------------


def good_key():
    return [KEY.group_id, TOPIC.bytes, KEY.partition]


BAD_FRAMES = [
    frame(0, packed([good_key(), None]), version=FORMAT_VERSION + 1),
    frame(9, packed([good_key(), None])),
    frame(1, packed([good_key(), None])),  # a delta tombstone
    frame(0, b"\xc1"),
    frame(0, packed([good_key(), None]) + b"\x00"),  # trailing bytes
    frame(1, packed([good_key(), [0, 0, 0, 0, []]]) + b"\x00"),
    frame(0, packed({"key": 1})),
    frame(0, packed([good_key()])),
    frame(0, packed([["g", b"short", 0], None])),
    frame(0, packed([["g", TOPIC.bytes, -3], None])),
    frame(0, packed([["g", TOPIC.bytes, 2**31], None])),
    frame(0, packed([["g", TOPIC.bytes, True], None])),
    frame(0, packed([["g", TOPIC.bytes, 1.0], None])),
    frame(0, packed([[b"g", TOPIC.bytes, 0], None])),
    frame(0, packed([["g", "s" * 16, 0], None])),  # a topic id as a string
    frame(0, packed([["g", TOPIC.bytes, 0, 1], None])),
    frame(0, packed([good_key(), [0, 0, 0, 0, 0, 0, 0]])),
    frame(1, packed([good_key(), [0, 0, 0, 0, 0, 0, 0, []]])),  # a checkpoint's fields in a delta
    frame(0, packed([good_key(), [0, 0, 0, 0, []]])),  # a delta's fields in a checkpoint
    frame(0, packed([good_key(), [0, 0, 0, 0, 0, 0, 0, [1, 2, 3]]])),
    frame(0, packed([good_key(), [0, 0, 0, 0, 0, 0, 0, [5, 4, 0, 1]]])),
    frame(0, packed([good_key(), [0, 0, 0, 0, 0, 0, 0, [0, 4, 0, 1.5]]])),
    frame(0, packed([good_key(), [0, 0, 0, 0, 0, 0, 0, [0, 4, 128, 1]]])),
    frame(0, packed([good_key(), [0, 0, 0, 0, 0, 0, 0, [0, 4, -129, 1]]])),
    frame(0, packed([good_key(), [0, 0, 0, 0, 0, 0, 0, [0, 4, 0, 2**15]]])),
    frame(0, packed([good_key(), [0, 0, 0, 0, 0, 0, 0, [-1, 4, 0, 1]]])),
    frame(0, packed([good_key(), [0, 0, 0, 0, 0, 0, 0, [2**63, 2**63, 0, 1]]])),
    frame(0, packed([good_key(), [-1, 0, 0, 0, 0, 0, 0, []]])),
    frame(0, packed([good_key(), [0, -1, 0, 0, 0, 0, 0, []]])),
    frame(0, packed([good_key(), [0, 0, -2, 0, 0, 0, 0, []]])),
    frame(0, packed([good_key(), [0, 0, 0, -2, 0, 0, 0, []]])),
    frame(0, packed([good_key(), [0, 0, 0, 0, -2, 0, 0, []]])),
    frame(0, packed([good_key(), [0, 0, 0, 0, 0, 2**63, 0, []]])),
    frame(0, packed([good_key(), [0, 0, 0, 0, 0, 0, 2**64 - 1, []]])),
    frame(0, packed([good_key(), [2**31, 0, 0, 0, 0, 0, 0, []]])),
    frame(0, packed([good_key(), [0, 0, 0, 0, 0, 0, 0, None]])),
    frame(0, packed([good_key(), [False, 0, 0, 0, 0, 0, 0, []]])),
    frame(1, packed([good_key(), [0, 0, 0, 2**40, []]])),
    frame(1, packed([good_key(), [0, 0, 0, 0, "x"]])),
    frame(1, packed([good_key(), [0, 0, 0, 0, [0, 1, 0, 1, 0]]])),
    frame(0, b"\xdd\xff\xff\xff\xff"),
    frame(0, b"\xdb\xff\xff\xff\xff" + b"ab"),
    frame(0, b"\x92\x93\xdb\xff\xff\xff\xff" + b"ab"),
    frame(0, b"\x92" + packed(good_key()) + b"\x98\x00\x00\x00\x00\x00\x00\x00\xdd\xff\xff\xff\xf0"),
    frame(0, b"\x91" * 100_000),
    frame(0, packed([good_key(), msgpack.ExtType(1, b"x")])),
    frame(0, b"\xa2\xff\xfe"),
    frame(0, b"\x92\x93\xa2\xff\xfe\xc4\x10" + TOPIC.bytes + b"\x00\xc0"),  # an invalid utf-8 group id
    frame(0, b"\x92\x93\xa2\xed\xa0\xc4\x10" + TOPIC.bytes + b"\x00\xc0"),  # a lone surrogate
    b"\x00\x00\x00\x02" + b"\x00" * 10,  # a length below the minimum
    b"\xff\xff\xff\xff" + b"\x00" * 10,  # an absurd length
]


@pytest.mark.parametrize("bad", BAD_FRAMES, ids=range(len(BAD_FRAMES)))
def test_a_bad_frame_stops_both_functions_where_decode_record_fails(codec, bad):
    good = encode_record(KEY, ShareDelta(1, 2, 3, 4, [(3, 9, 2, 1)]))
    buf = good + good + bad + good
    with pytest.raises(RecordDecodeError):
        decode_record(buf, 2 * len(good))
    rows, stop = check_rows(codec, buf)
    assert len(rows) == 2 and stop == 2 * len(good)
    try:
        check_frame(bad)
    except RecordDecodeError:  # bad framing: the scan stops there too
        assert codec.scan_frames(buf, 0, len(buf)) == (2, 2 * len(good))
    else:  # a bad payload behind valid framing: the scan checks framing only
        assert codec.scan_frames(buf, 0, len(buf)) == (4, len(buf))


def test_every_truncation_and_every_bit_flip_stops_where_decode_record_fails(codec):
    rng = random.Random(11)
    buf = b"".join(encode_record(random_key(rng), random_record(rng)) for _ in range(6))
    for cut in range(0, len(buf), 7):
        check_rows(codec, buf[:cut])
        _count, stop = codec.scan_frames(buf[:cut], 0, cut)
        assert stop == expected_rows(buf[:cut], {})[1]
    for bit in range(0, len(buf) * 8, 13):
        flipped = bytearray(buf)
        flipped[bit // 8] ^= 1 << (bit % 8)
        check_rows(codec, bytes(flipped))


msgpack_values = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.integers(-(2**64), 2**64), st.floats(allow_nan=False),
        st.text(max_size=20), st.binary(max_size=20),
    ),
    lambda children: st.lists(children, max_size=9),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from([0, 1]),
    st.one_of(
        msgpack_values,
        st.tuples(st.just("key"), msgpack_values),
        st.tuples(st.just("record"), st.lists(st.integers(-(2**63), 2**64 - 1) | st.booleans(), min_size=4, max_size=8),
                  st.lists(st.integers(-(2**63), 2**64 - 1), max_size=9)),
    ),
)
def test_random_payloads_behind_a_valid_crc_decode_exactly_as_decode_record(codec, record_type, spec):
    """Payloads from anything msgpack can hold to near-records, each framed with a valid CRC."""
    if isinstance(spec, tuple) and spec and spec[0] == "key":
        obj = [spec[1], None]
    elif isinstance(spec, tuple) and spec and spec[0] == "record":
        obj = [good_key(), list(spec[1]) + [list(spec[2])]]
    else:
        obj = spec
    try:
        payload = packed(obj)
    except (OverflowError, ValueError):
        return
    buf = frame(record_type, payload) + encode_record(KEY, None)
    check_rows(codec, buf)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_stop_both_functions_where_decode_record_fails(codec, data):
    check_rows(codec, data)
    count, stop = codec.scan_frames(data, 0, len(data))
    pos = 0
    for _ in range(count):
        pos = check_frame(data, pos)
    assert pos == stop
    if stop < len(data):
        with pytest.raises(RecordDecodeError):
            check_frame(data, stop)


# -- the write path's delta encoding ----------------------------------------------------------------


class Small(enum.IntEnum):
    ONE = 1


@pytest.mark.parametrize("seed", range(3))
def test_encode_delta_frame_is_encode_record(codec, seed):
    rng = random.Random(seed)
    for _ in range(500):
        key = random_key(rng)
        value = random_record(rng)
        if not isinstance(value, ShareDelta):
            continue
        assert codec.encode_delta_frame(encode_key(key), value) == encode_record(key, value)
        assert encode_delta_frame(encode_key(key), value, msgpack.Packer().pack) == encode_record(key, value)


@pytest.mark.parametrize(
    "value",
    [
        ShareDelta(Small.ONE, 0, 5, 5, [StateBatch(5, 6, Small.ONE, 1)]),  # int enums: encoded as plain ints
        ShareDelta(0, 0, 5, 5, [StateBatch(5, 6, 2, Small.ONE)]),
        ShareDelta(0, -2, 5, 5, []),
        ShareDelta(0, 0, 5, 5, [StateBatch(6, 5, 2, 1)]),
        ShareDelta(True, 0, 5, 5, []),
        ShareDelta(0, 0, 2**63, 5, []),
        ShareDelta(0, 0, 5, 5, [StateBatch(0, 1, 2, 2**15)]),
        ShareDelta(0, 0, 5, 5, [StateBatch(0, 1.0, 2, 1)]),
    ],
)
def test_encode_delta_frame_refuses_and_accepts_as_encode_record(codec, value):
    encoded_key = encode_key(KEY)
    try:
        expected = encode_record(KEY, value)
    except (ValueError, TypeError) as exc:
        with pytest.raises(type(exc)):
            codec.encode_delta_frame(encoded_key, value)
    else:
        assert codec.encode_delta_frame(encoded_key, value) == expected


def test_encode_key_checks_as_encode_record():
    assert encode_key(KEY) == packed([KEY.group_id, TOPIC.bytes, KEY.partition])
    with pytest.raises(TypeError):
        encode_key(StateKey("g", "not-a-uuid", 0))
    with pytest.raises(ValueError):
        encode_key(StateKey("g", TOPIC, -1))
    assert struct.calcsize(">II") == 8


def test_the_row_vocabulary_lives_in_a_leaf_module_both_twins_import():
    """KIND_* and KeyTable are defined once, in persister.frame_rows, which imports nothing of the
    package (so no import circle can pass through it); both twins and the selector use those objects."""
    import ast
    import inspect

    from persister import frame_rows

    tree = ast.parse(inspect.getsource(frame_rows))
    imports = [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert all(isinstance(node, ast.ImportFrom) and node.module == "__future__" for node in imports)
    assert frame_codec_module.KeyTable is frame_rows.KeyTable is frame_codec_pure.KeyTable
    kinds = (frame_rows.KIND_CHECKPOINT, frame_rows.KIND_DELTA, frame_rows.KIND_TOMBSTONE)
    assert kinds == (0, 1, 2)
    assert (frame_codec_pure.KIND_CHECKPOINT, frame_codec_pure.KIND_DELTA, frame_codec_pure.KIND_TOMBSTONE) == kinds
    if not PURE_ONLY:
        native = frame_codec_module.native_frame_codec()
        assert (native.KIND_CHECKPOINT, native.KIND_DELTA, native.KIND_TOMBSTONE) == kinds
